"""Check group ``discovery``: ``hooks/capabilities`` and ``hooks/configuration``.

Each must be answered with its result (``protocolVersion`` 'draft' and a ``manifest``
object; ``configuration.subscriptions``) or -32601 (method not found). What the answers
declare the backend intercepts is kept in ``Run.events``: -32002 for one of those events
later is no answer (:meth:`.run.Run.judge_answer`). Over persistent stdio the
capabilities answer judged is the one to the warm-up request of the first process
(:class:`.links.StdioLink`); ``--per-event`` skips ``hooks/configuration``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ahp_protocol.wire.catalogue import expand, is_valid_selector

from ahp_conformance.backend.answers import error_code
from ahp_conformance.backend.judge import RoundTrip
from ahp_conformance.backend.links import StdioLink
from ahp_conformance.backend.probes import frame
from ahp_conformance.backend.run import Run


def discovery(run: Run) -> None:
    """``discovery.capabilities`` and (not ``--per-event``) ``discovery.configuration``."""
    run.progress("discovery (hooks/capabilities, hooks/configuration)")
    if isinstance(run.link, StdioLink):
        outcome = run.link.first_discovery()
    else:
        rid, message = run.msgs.discovery("hooks/capabilities", "discovery")
        outcome = run.link.request(frame(message), rid)
    _judge_discovery(
        run,
        "discovery.capabilities",
        "hooks/capabilities is answered with a manifest or -32601 (method not found)",
        outcome,
        "a result without protocolVersion 'draft' and a manifest object",
        lambda result: _read_manifest(run, result),
    )
    if run.per_event:
        return
    rid, message = run.msgs.discovery("hooks/configuration", "configuration")
    _judge_discovery(
        run,
        "discovery.configuration",
        "hooks/configuration is answered with subscriptions or -32601",
        run.link.request(frame(message), rid),
        "a result without protocolVersion 'draft' and configuration.subscriptions",
        lambda result: _read_subscriptions(run, result),
    )


def _judge_discovery(
    run: Run,
    cid: str,
    title: str,
    outcome: RoundTrip,
    malformed: str,
    read: Callable[[dict[str, Any]], bool],
) -> None:
    """A discovery answer: a result ``read`` accepts (it notes the declared events), or
    -32601; ``malformed`` says what a result it refuses lacks."""
    reply = outcome.reply
    if reply is None:
        run.judge.check(
            cid, title, ["AHP-RPC-001"], "fail", outcome.failure or "no answer", outcome.evidence
        )
        return
    if "error" in reply:
        ok = error_code(reply) == -32601
        run.judge.check(
            cid,
            title,
            ["AHP-RPC-001"],
            "pass" if ok else "fail",
            "" if ok else f"error {error_code(reply)}",
            outcome.evidence,
        )
        return
    result = reply["result"] if isinstance(reply.get("result"), dict) else {}
    if result.get("protocolVersion") != "draft" or not read(result):
        run.judge.check(
            cid, title, ["AHP-RPC-001", "AHP-VER-001"], "fail", malformed, outcome.evidence
        )
        return
    run.judge.check(cid, title, ["AHP-RPC-001"], "pass")


def _read_manifest(run: Run, result: dict[str, Any]) -> bool:
    """Whether ``result`` holds a manifest object; notes the events it intercepts, observes."""
    manifest = result.get("manifest")
    if not isinstance(manifest, dict):
        return False
    for entry in manifest.get("events") or []:
        if isinstance(entry, dict) and "intercept" in (entry.get("modes") or []):
            run.events.add(str(entry.get("event")))
        if isinstance(entry, dict) and "observe" in (entry.get("modes") or []):
            run.observes.add(str(entry.get("event")))
    return True


def _read_subscriptions(run: Run, result: dict[str, Any]) -> bool:
    """Whether ``result`` holds ``configuration.subscriptions``; notes what they intercept
    and what they observe."""
    config = result.get("configuration")
    subs = config.get("subscriptions") if isinstance(config, dict) else None
    if not isinstance(subs, list):
        return False
    for sub in subs:
        mode = sub.get("mode") if isinstance(sub, dict) else None
        if mode in ("intercept", "observe"):
            noted = run.events if mode == "intercept" else run.observes
            for selector in sub.get("events") or []:
                if isinstance(selector, str) and is_valid_selector(selector):
                    noted.update(expand(selector, mode))
    return True
