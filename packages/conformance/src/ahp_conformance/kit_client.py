"""The interop contract's client role, built on the kit's harness-side API (``Dispatcher``).

``python -m ahp_conformance.kit_client --config FILE`` (``interop/adapter.json``'s
``client`` command). The config is the contract's client config (see
:mod:`ahp_conformance.contract`). For every scenario of ``scenarioFile``:

- the scenario's ``request.params.event`` is run through a one-hook registration of the
  scenario server (stdio: ``serverCommand`` plus ``--config serverConfig`` in
  ``serverCwd``, ``persistent``; HTTP: ``endpoint``), one intercept subscription to the
  event's type, ``fail-closed``, ``timeoutMs`` 10000, content ``body``;
- the host's declaration is the scenario's ``params.capabilities`` (for the event's
  type), and the chain starts from ``params.state`` (``permission``, ``candidate``);
- the application result (``actual``) is derived from the settled ``HookResult`` by
  :func:`derive` (the draft's §5.4 settlement seen by a host with no prompt of its own:
  ``decision`` allow|deny|ask, ``executed``, ``input``, ``messages``, ``result``,
  ``flow``, ``injections``, ``continuationInstructions``, ``continuationRemaining``),
  then checked by this fixture host's own input schema (:func:`host_input_problem`: a
  ``task`` tool takes a positive integer ``task``), as the contract's last paragraph
  describes (``sdkAccepted``/``hostAccepted``/``rejectionLayer``);
- ``expected`` keys are compared deeply (JSON types: ``1`` is not ``true``); an
  ``expectError`` scenario passes only when the kit rejected the acquired response
  (malformed output, wrong id, wrong version, invalid result, unknown, malformed or
  unadvertised effect); a timeout, a failed spawn or connection, a JSON-RPC error or an
  HTTP status does not satisfy it.

The Dispatcher's grant is a function of the host's declaration, fixed for its life, so
one Dispatcher (and, over stdio, one server process) serves every scenario with the
same event type and capabilities, in file order; the report keeps the file's order.

Scenarios the kit's client does not drive are reported ``unsupported`` with the reason
(:func:`unsupported_reason`): a chain starting after an accepted flow ``stop`` (the
draft ends decision-making there, so no interceptor is called), a state with
continuation instructions or injections (a chain start carries permission and
candidate only), and, over persistent stdio, a response with another id (the draft's
stdio binding has the client discard it and keep waiting: it cannot be a rejection).

**The kit's extension** (``"registration": PATH`` in the config; ``adapter.json``
declares ``"extensions": ["registration"]``): that registration (read with
``load_anchored``, so its stdio backends run in its folder) replaces the synthesized
one; every scenario's event runs through its chain with the scenario's capabilities as
the declaration. ``actual`` is derived the same way, so a fail-closed failure reads as
``decision: deny, executed: false`` and a fail-open failure as if no backend answered.
A registration that subscribes to an event the scenario's declaration does not cover
makes that scenario ``inapplicable``. A scenario's ``uploads`` (contract form: ``[{ref,
bodyBase64, ...}]``) are the bytes of the event's attachment parts whose ``body.ref`` is
that ``ref``: each such part becomes the host's metadata part of those bytes
(:class:`~ahp_protocol.client.uploads.Attachment`), uploaded as the registration's
subscriptions' ``upload`` says before the event is sent (:func:`attachments_of`).

The report is ``{language: "python-ahp-kit", results: [{id, status, actual, error?}]}``;
``error`` is a class name or a failure class, never remote text. Exit status 1 when a
result failed, 2 for an unusable config.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from ahp_protocol.testing.serve import write_json_atomically

from ahp_conformance.contract import ContractError, read_config

LANGUAGE = "python-ahp-kit"
HOOK_ID = "org.agenthooksprotocol.interop.server"
TIMEOUT_MS = 10_000
REJECTIONS = frozenset(
    {
        "malformed_output",
        "id_mismatch",
        "unsupported_version",
        "invalid_result",
        "unknown_effect",
        "malformed_effect",
        "unadvertised_effect",
    }
)
"""Failure classes that mean "the response was acquired and then rejected" (expectError)."""
HOST_REJECTION_LAYER = "host-input-schema"


# -- what a scenario asks of the kit's client ------------------------------------------


def unsupported_reason(scenario: Mapping[str, Any], transport: str, extension: bool) -> str | None:
    """Why the kit's client does not drive ``scenario`` (``None``: it does)."""
    state = scenario["request"]["params"].get("state") or {}
    if state.get("flow", "none") == "stop":
        return (
            "the chain starts after an accepted flow stop: the draft ends decision-making "
            "there (AHP-COMP-001), so the kit's dispatcher calls no further interceptor and "
            "there is no exchange to judge"
        )
    if state.get("flow", "none") != "none" or state.get("instructions") or state.get("injections"):
        return (
            "the chain starts with flow, continuation instructions or injections: the kit's "
            "dispatcher starts a chain from a permission and a candidate only"
        )
    response_id = scenario.get("response", {}).get("id")
    if not extension and transport == "stdio" and response_id != scenario["request"].get("id"):
        return (
            "over persistent stdio the draft (stdio binding, AHP-STDIO-001) has the client "
            "discard a response with another id and keep waiting, so it can only time out, "
            "never be rejected"
        )
    return None


def host_input_problem(event: Mapping[str, Any]) -> bool:
    """This fixture host's own input schema: a ``task`` tool takes a positive integer."""
    tool = event.get("tool")
    if not isinstance(tool, Mapping) or tool.get("name") != "task":
        return False
    value = tool.get("input")
    if not isinstance(value, Mapping):
        return True
    task = value.get("task")
    if isinstance(task, bool) or not isinstance(task, int | float):
        return True
    return not (task > 0 and task == int(task))


def derive(result: Any, capabilities: Mapping[str, Any]) -> dict[str, Any]:
    """The contract's ``actual`` from a settled ``HookResult`` (draft §5.4).

    A host with no prompt of its own: ``allow`` and ``none`` both let the operation go
    on (``decision: allow``). Execution (``tool.before`` only) and delivery of a supplied
    result happen only when the decision is ``allow`` and flow is not ``stop``.
    """
    permission = result.permission
    decision = "deny" if permission == "deny" else "ask" if permission == "ask" else "allow"
    proceeds = decision == "allow" and result.flow != "stop"
    actual: dict[str, Any] = {
        "decision": decision,
        "executed": result.event_type == "tool.before" and proceeds and result.candidate is None,
        "messages": list(result.messages),
        "flow": result.flow,
    }
    if isinstance(result.event.get("tool"), Mapping):
        actual["input"] = result.tool_input
    if proceeds and result.candidate is not None:
        actual["result"] = result.candidate.value
    if result.injections:
        actual["injections"] = [dict(i) for i in result.injections]
    flow_caps = capabilities.get("flow")
    remaining = flow_caps.get("remainingContinuations") if isinstance(flow_caps, Mapping) else None
    if result.instructions or isinstance(remaining, int):
        actual["continuationInstructions"] = list(result.instructions)
    if isinstance(remaining, int):
        actual["continuationRemaining"] = remaining - (1 if result.flow == "continue" else 0)
    return actual


def matches(actual: Mapping[str, Any], expected: Mapping[str, Any]) -> bool:
    from ahp_protocol.client.chain import same_json  # deep JSON equality: true is not 1

    return all(key in actual and same_json(actual[key], v) for key, v in expected.items())


# -- one chain per declaration ------------------------------------------------------------


def synthesized_registration(config: Mapping[str, Any], event_type: str) -> dict[str, Any]:
    """The one-hook registration of the scenario server (module docstring)."""
    if config.get("transport") == "http":
        endpoint = config.get("endpoint")
        if not isinstance(endpoint, str) or not endpoint:
            raise ContractError("an http client config needs 'endpoint'")
        transport: dict[str, Any] = {"type": "http", "url": endpoint}
    else:
        command = config.get("serverCommand")
        if (
            not isinstance(command, list)
            or not command
            or not all(isinstance(a, str) for a in command)
        ):
            raise ContractError("a stdio client config needs 'serverCommand' (array of strings)")
        args = [*command[1:]]
        if config.get("serverConfig"):
            args += ["--config", str(config["serverConfig"])]
        transport = {
            "type": "stdio",
            "command": command[0],
            "args": args,
            "lifecycle": "persistent",
        }
        if config.get("serverCwd"):
            transport["cwd"] = str(Path(str(config["serverCwd"])).resolve())
    return {
        "protocolVersion": "draft",
        "hooks": [
            {
                "id": HOOK_ID,
                "transport": transport,
                "subscriptions": [
                    {
                        "events": [event_type],
                        "mode": "intercept",
                        "timeoutMs": TIMEOUT_MS,
                        "failurePolicy": "fail-closed",
                        "content": {"default": "body"},
                    }
                ],
            }
        ],
    }


@dataclass
class ScenarioResult:
    """What the kit's client came to on one scenario: its status and its report entry."""

    status: str
    actual: Any
    error: str | None = None
    extra: dict[str, Any] | None = None

    def entry(self, scenario_id: str) -> dict[str, Any]:
        out: dict[str, Any] = {"id": scenario_id, "status": self.status, "actual": self.actual}
        if self.error:
            out["error"] = self.error
        if self.extra:
            out.update(self.extra)
        return out


def judge(scenario: Mapping[str, Any], result: Any, *, extension: bool = False) -> ScenarioResult:
    """Compare one settled result with the scenario's ``expected`` / ``expectError``.

    With the synthesized registration (fail-closed) a failure that is not an expected
    rejection fails the scenario; with the registration extension the failure policy
    decides what it means, and the settled result is compared as any other."""
    capabilities = scenario["request"]["params"]["capabilities"]
    expect_error = scenario.get("expectError") is True
    failed = [d for d in result.diagnostics if d.mode == "intercept" and d.outcome == "failed"]
    if failed:
        failure = failed[-1].failure
        name = failure.value if failure is not None else "unknown"
        if expect_error and name in REJECTIONS:
            return ScenarioResult("passed", {"rejected": True})
        if expect_error or not extension:
            return ScenarioResult(
                "failed", derive(result, capabilities), f"OperationalFailure({name})"
            )
    actual = derive(result, capabilities)
    if actual["decision"] == "allow" and result.flow != "stop" and host_input_problem(result.event):
        diagnostics = {
            "sdkAccepted": True,
            "hostAccepted": False,
            "rejectionLayer": HOST_REJECTION_LAYER,
        }
        actual["executed"] = False
        actual.pop("result", None)
        host_expected = scenario.get("hostExpected")
        if expect_error and isinstance(host_expected, Mapping):
            if matches(actual, host_expected):
                return ScenarioResult("passed", actual, extra=diagnostics)
            return ScenarioResult("failed", actual, "HostExpectedMismatch", diagnostics)
        return ScenarioResult("failed", actual, "HostInputRejected", diagnostics)
    if expect_error:
        return ScenarioResult("failed", actual, "ExpectedRejection")
    if matches(actual, scenario.get("expected") or {}):
        return ScenarioResult("passed", actual)
    return ScenarioResult("failed", actual, "ExpectedOutcomeMismatch")


def attachments_of(
    scenario: Mapping[str, Any], event: Mapping[str, Any]
) -> tuple[Mapping[str, Any], list[Any]]:
    """``event`` with each attachment part that names one of ``scenario``'s ``uploads``
    replaced by the host's metadata part of its bytes, and those attachments."""
    blobs = {b.get("ref"): b for b in scenario.get("uploads") or () if isinstance(b, Mapping)}
    if not blobs:
        return event, []
    import base64

    from ahp_protocol.client.uploads import Attachment

    made: list[Attachment] = []

    def swap(value: Any) -> Any:
        if isinstance(value, Mapping):
            body = value.get("body")
            if value.get("kind") == "attachment" and isinstance(body, Mapping):
                blob = blobs.get(body.get("ref"))
                if blob is not None:
                    data = base64.b64decode(str(blob.get("bodyBase64", "")), validate=True)
                    attachment = Attachment(
                        data,
                        str(value.get("mediaType")),
                        category=value.get("category"),
                        id=str(value.get("id")),
                    )
                    made.append(attachment)
                    return attachment.part()
            return {k: swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return value

    return swap(event), made


async def run_group(
    registration: Any,
    event_type: str,
    capabilities: Mapping[str, Any],
    scenarios: Sequence[Mapping[str, Any]],
    *,
    extension: bool,
) -> dict[str, ScenarioResult]:
    """Run scenarios that share one declaration through one Dispatcher."""
    from ahp_protocol.client import Candidate, Dispatcher, RegistrationError
    from ahp_protocol.wire.errors import WireError, WireErrors
    from ahp_protocol.wire.events import parse_event

    out: dict[str, ScenarioResult] = {}
    try:
        dispatcher = Dispatcher(registration, capabilities={event_type: dict(capabilities)})
    except RegistrationError:
        kind = "inapplicable" if extension else "failed"
        return {s["id"]: ScenarioResult(kind, None, "RegistrationError") for s in scenarios}
    async with dispatcher:
        for scenario in scenarios:
            params = scenario["request"]["params"]
            state = params.get("state") or {}
            try:
                parse_event(params["event"])
            except (WireError, WireErrors):
                out[scenario["id"]] = ScenarioResult("failed", None, "InvalidEvent")
                continue
            raw_candidate = state.get("candidate")
            candidate = None
            if isinstance(raw_candidate, Mapping):
                candidate = Candidate(
                    value=raw_candidate.get("value"), provenance=raw_candidate.get("provenance")
                )
            try:
                event, attachments = attachments_of(scenario, params["event"])
                result = await dispatcher.intercept(
                    event,
                    initial_permission=state.get("permission", "none"),
                    initial_candidate=candidate,
                    attachments=attachments,
                )
            except Exception as exc:  # a bug or an unusable setup: never remote text
                out[scenario["id"]] = ScenarioResult("failed", None, type(exc).__name__)
                continue
            out[scenario["id"]] = judge(scenario, result, extension=extension)
    return out


def run(config: Mapping[str, Any]) -> dict[str, Any]:
    """Run every scenario of ``config`` and return the report (also written to reportFile)."""
    from ahp_protocol.client.hooks import load_anchored

    scenario_file = config.get("scenarioFile")
    report_file = config.get("reportFile")
    if not isinstance(scenario_file, str) or not isinstance(report_file, str):
        raise ContractError("a client config needs 'scenarioFile' and 'reportFile'")
    document = json.loads(Path(scenario_file).read_text("utf-8"))
    scenarios = [s for s in document.get("scenarios", []) if isinstance(s, dict)]
    transport = "http" if config.get("transport") == "http" else "stdio"
    extension_path = config.get("registration")
    extension = isinstance(extension_path, str) and bool(extension_path)
    outcomes: dict[str, ScenarioResult] = {}
    auth = config.get("auth") or {}
    groups: dict[str, tuple[str, Mapping[str, Any], list[Mapping[str, Any]]]] = {}
    for scenario in scenarios:
        if isinstance(auth, Mapping) and auth.get("mode", "none") != "none":
            if transport == "stdio":
                outcomes[scenario["id"]] = ScenarioResult(
                    "inapplicable", None, "AuthMode", {"reason": "stdio uses process trust"}
                )
            else:
                outcomes[scenario["id"]] = ScenarioResult(
                    "unsupported",
                    None,
                    "AuthMode",
                    {"reason": "the kit's client adapter runs auth mode 'none' only"},
                )
            continue
        reason = unsupported_reason(scenario, transport, extension)
        if reason is not None:
            outcomes[scenario["id"]] = ScenarioResult(
                "unsupported", None, "UnsupportedScenario", {"reason": reason}
            )
            continue
        params = scenario["request"]["params"]
        event_type = str(params["event"]["type"])
        key = json.dumps([event_type, params["capabilities"]], sort_keys=True)
        groups.setdefault(key, (event_type, params["capabilities"], []))[2].append(scenario)

    async def main() -> None:
        for event_type, capabilities, members in groups.values():
            if extension:
                registration: Any = load_anchored(str(extension_path))
            else:
                from ahp_protocol.wire.registration import parse_registration

                registration = parse_registration(synthesized_registration(config, event_type))
            outcomes.update(
                await run_group(
                    registration, event_type, capabilities, members, extension=extension
                )
            )

    anyio.run(main)
    report = {
        "language": LANGUAGE,
        "results": [outcomes[s["id"]].entry(s["id"]) for s in scenarios],
    }
    write_json_atomically(Path(report_file), report)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ahp_conformance.kit_client",
        description="The kit's interop client adapter (upstream interop contract, client role).",
    )
    parser.add_argument("--config", required=True, help="the contract's client config (JSON)")
    args = parser.parse_args(argv)
    try:
        config = read_config(args.config)
        report = run(config)
    except (ContractError, OSError, ValueError) as exc:
        print(f"kit_client: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    return int(any(r["status"] == "failed" for r in report["results"]))


if __name__ == "__main__":
    sys.exit(main())
