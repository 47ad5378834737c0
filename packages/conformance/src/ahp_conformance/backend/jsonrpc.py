"""Check groups ``rpc.*``, ``version.*``, ``event.*``, ``params.*``, ``notify.*``, ``oversize.*``.

- :func:`jsonrpc`: framing errors: -32700 for a frame that is not JSON or not UTF-8
  (id null), -32600 for a batch, a non-object, a ``jsonrpc`` other than "2.0", a bad
  id, ``hooks/observe`` with an id; -32601 for an unknown method; string and integer ids
  echoed as sent.
- :func:`versions_and_params`: -32001 with ``data.supported`` for an unsupported
  ``protocolVersion``, a missing one rejected; -32002 for unknown, removed and
  observe-only events; -32602 for invalid params and a request id other than
  ``event.id``.
- :func:`notifications`: no answer to any notification, valid or not.
- :func:`oversize`: a frame above 4 MiB is refused or survived (no crash, no hang).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ahp_conformance.backend.links import HttpLink
from ahp_conformance.backend.probes import GRANTS, OVERSIZE_BYTES, frame
from ahp_conformance.backend.run import Run


def jsonrpc(run: Run) -> None:
    """Framing and envelope errors: -32700, -32600, -32601, ids echoed."""
    run.progress("JSON-RPC framing and errors (-32700, -32600, -32601, -32602)")
    m = run.msgs
    run.expect_error(
        "rpc.parse-error",
        "a frame that is not JSON gets -32700 (id null)",
        ["AHP-RPC-001"],
        b'{"jsonrpc": "2.0", "id": "x", "method": \n',
        None,
        [-32700],
    )
    run.expect_error(
        "rpc.invalid-utf8",
        "a frame that is not UTF-8 gets -32700 (id null)",
        ["AHP-RPC-001"],
        b'{"jsonrpc":"2.0","id":"\xff\xfe","method":"hooks/intercept"}\n',
        None,
        [-32700],
    )
    run.expect_error(
        "rpc.batch",
        "a batch gets -32600 (batches are forbidden)",
        ["AHP-RPC-001"],
        frame([m.probe("batch")[1]]),
        None,
        [-32600],
    )
    run.expect_error(
        "rpc.not-object",
        "a JSON value that is not an object gets -32600",
        ["AHP-RPC-001"],
        b'"hooks/intercept"\n',
        None,
        [-32600],
    )
    rid = m.new_id("jsonrpc-version")
    run.expect_error(
        "rpc.jsonrpc-version",
        'jsonrpc other than "2.0" gets -32600',
        ["AHP-RPC-001"],
        frame({"jsonrpc": "1.0", "id": rid, "method": "hooks/intercept", "params": {}}),
        rid,
        [-32600],
    )
    run.expect_error(
        "rpc.bad-id",
        "a request id that is neither a string nor an integer gets -32600",
        ["AHP-RPC-001"],
        frame({"jsonrpc": "2.0", "id": True, "method": "hooks/intercept", "params": {}}),
        None,
        [-32600],
    )
    rid = m.new_id("unknown-method")
    run.expect_error(
        "rpc.method-not-found",
        "an unknown method gets -32601 with the string id echoed",
        ["AHP-RPC-001"],
        frame({"jsonrpc": "2.0", "id": rid, "method": "hooks/nope", "params": {}}),
        rid,
        [-32601],
    )
    run.expect_error(
        "rpc.id-integer",
        "an integer id is echoed as the same integer",
        ["AHP-RPC-001"],
        frame({"jsonrpc": "2.0", "id": 7001, "method": "hooks/nope", "params": {}}),
        7001,
        [-32601],
    )
    eid = m.new_id("observe-with-id")
    run.expect_error(
        "rpc.observe-with-id",
        "hooks/observe sent with an id is an invalid request",
        ["AHP-RPC-002"],
        frame({**m.observe(m.event(eid)), "id": eid}),
        eid,
        [-32600, -32602],
    )


def versions_and_params(run: Run) -> None:
    """-32001 (versions), -32002 (events), -32602 (params, id mismatch)."""
    run.progress("versions, unsupported events, invalid params")
    m = run.msgs

    def supported(reply: dict[str, Any]) -> str | None:
        data = reply["error"].get("data")
        listed = data.get("supported") if isinstance(data, dict) else None
        if not isinstance(listed, list) or "draft" not in listed:
            return f"error.data.supported must list 'draft'; got data {data!r}"
        return None

    eid = m.new_id("version")
    message = m.intercept(m.event(eid), GRANTS["deny"])
    message["params"]["protocolVersion"] = "1999-01-01"
    run.expect_error(
        "version.unsupported",
        "an unsupported protocolVersion gets -32001 with data.supported",
        ["AHP-VER-001"],
        frame(message),
        eid,
        [-32001],
        check=supported,
    )
    eid = m.new_id("no-version")
    message = m.intercept(m.event(eid), GRANTS["deny"])
    del message["params"]["protocolVersion"]
    run.expect_error(
        "version.missing",
        "a request without protocolVersion is rejected",
        ["AHP-VER-001"],
        frame(message),
        eid,
        [-32602, -32001, -32600],
    )
    for cid, etype, extra, title, req in (
        (
            "event.unknown-type",
            "org.example.unknown",
            {},
            "an unknown event type",
            "AHP-CORE-003",
        ),
        (
            "event.removed-type",
            "tool.error",
            {},
            "a removed event type (tool.error)",
            "AHP-CORE-003",
        ),
        (
            "event.observe-only",
            "tool.permission.resolved",
            {"decision": "allow", "decidedBy": "user"},
            "an observe-only event at hooks/intercept",
            "AHP-RPC-002",
        ),
    ):
        eid = m.new_id(cid)
        event = m.event(eid)
        event["type"] = etype
        event.update(extra)
        run.expect_error(
            cid,
            f"{title} gets -32002 (unsupported event)",
            [req],
            frame(m.intercept(event, GRANTS["deny"])),
            eid,
            [-32002],
        )
    cases: list[tuple[str, str, Callable[[dict[str, Any]], None]]] = [
        (
            "params.not-object",
            "params that are not an object",
            lambda msg: msg.update({"params": []}),
        ),
        ("params.no-event", "params without an event", lambda msg: msg["params"].pop("event")),
        (
            "params.no-capabilities",
            "an intercept without capabilities",
            lambda msg: msg["params"].pop("capabilities"),
        ),
        (
            "params.effects-not-array",
            "capabilities.effects that is not an array",
            lambda msg: msg["params"].update({"capabilities": {"effects": "deny"}}),
        ),
        (
            "params.no-tool",
            "a tool.before event without tool",
            lambda msg: msg["params"]["event"].pop("tool"),
        ),
        (
            "params.bad-time",
            "an event time that is not RFC 3339",
            lambda msg: msg["params"]["event"].update({"time": "yesterday"}),
        ),
    ]
    # A backend that does not intercept tool.before may say so (-32002) before it
    # looks at the rest of the params; one that does must find them invalid.
    typed = [-32602] if run.supports_tool_before else [-32602, -32002]
    for cid, title, change in cases:
        eid = m.new_id(cid)
        message = m.intercept(m.event(eid), GRANTS["deny"])
        change(message)
        inner = message["params"].get("event") if isinstance(message["params"], dict) else None
        run.expect_error(
            cid,
            f"{title} gets -32602 (invalid params)",
            ["AHP-RPC-001", "AHP-CORE-003"],
            frame(message),
            eid,
            typed if isinstance(inner, dict) else [-32602],
        )
    eid = m.new_id("id-mismatch")
    rid = m.new_id("other")
    run.expect_error(
        "params.id-mismatch",
        "a request id different from params.event.id gets -32602",
        ["AHP-RPC-001"],
        frame(m.intercept(m.event(eid), GRANTS["deny"], rid=rid)),
        rid,
        typed,
    )


def notifications(run: Run) -> None:
    """Notifications, valid or not, get nothing back."""
    run.progress("notifications are never answered")
    m = run.msgs
    event = m.event(m.new_id("observe"))
    cases: list[tuple[str, str, list[str], dict[str, Any] | bytes]] = [
        ("notify.observe", "a valid hooks/observe", ["AHP-RPC-002"], m.observe(event)),
    ]
    bad = m.observe(m.event(m.new_id("observe-bad")))
    del bad["params"]["event"]["source"]
    cases.append(("notify.observe-invalid", "an invalid hooks/observe", ["AHP-RPC-002"], bad))
    wrong = m.observe(m.event(m.new_id("observe-version")))
    wrong["params"]["protocolVersion"] = "1999-01-01"
    cases.append(
        (
            "notify.observe-version",
            "a hooks/observe with an unsupported protocolVersion",
            ["AHP-RPC-002", "AHP-VER-001"],
            wrong,
        )
    )
    cases.append(
        (
            "notify.observe-params",
            "a hooks/observe whose params are not an object",
            ["AHP-RPC-002"],
            {"jsonrpc": "2.0", "method": "hooks/observe", "params": []},
        )
    )
    cases.append(
        (
            "notify.unknown-method",
            "a notification of an unknown method",
            ["AHP-RPC-002"],
            {"jsonrpc": "2.0", "method": "hooks/nope", "params": {}},
        )
    )
    intercept = m.intercept(m.event(m.new_id("intercept-no-id")), GRANTS["deny"])
    del intercept["id"]
    cases.append(
        (
            "notify.intercept-without-id",
            "a hooks/intercept without an id (a notification)",
            ["AHP-RPC-002"],
            intercept,
        )
    )
    for cid, title, requirements, message in cases:
        data = message if isinstance(message, bytes) else frame(message)
        run.expect_silence(cid, f"{title} gets no response", requirements, data)


def oversize(run: Run) -> None:
    """A frame above 4 MiB is refused or survived; over HTTP the backend answers after it."""
    run.progress("an oversize frame")
    requirement = "AHP-HTTP-001" if isinstance(run.link, HttpLink) else "AHP-STDIO-001"
    eid = run.msgs.new_id("oversize")
    event = run.msgs.event(eid, tool_input={"command": "echo " + "x" * OVERSIZE_BYTES})
    data = frame(run.msgs.intercept(event, GRANTS["deny"]))
    outcome = run.link.collect(data)
    title = "a frame larger than 4 MiB is rejected or survived (no crash, no hang)"
    if outcome.failure:
        run.judge.check(
            "oversize.survived", title, [requirement], "fail", outcome.failure, outcome.evidence
        )
        return
    if isinstance(run.link, HttpLink):
        # the backend must still answer afterwards
        rid, probe = run.msgs.probe("after-oversize")
        after = run.link.request(frame(probe), rid)
        if after.reply is None:
            run.judge.check(
                "oversize.survived",
                title,
                [requirement],
                "fail",
                f"after the oversize body: {after.failure}",
                after.evidence,
            )
            return
    run.judge.check("oversize.survived", title, [requirement], "pass")
