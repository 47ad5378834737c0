"""``ahp-conformance fake-backend``: a scripted AHP backend that misbehaves on purpose.

Three uses, one process (``python -m ahp_conformance.fake_backend`` runs it too):

1. **Fault modes** (``--fault MODE``), what a harness must survive. Every *valid*
   ``hooks/intercept`` request (one the kit's server kit would answer: valid envelope,
   version, event, capabilities, state, ``id == params.event.id``) is answered as
   :data:`FAULTS` says; everything else is answered the way a well-behaved backend
   answers it (the kit's server kit decides: -32700, -32600, -32601, -32602, -32001,
   -32002), so only the named fault is wrong. ``hooks/capabilities`` (a valid discovery
   request) is answered with a valid manifest in every mode (:func:`manifest`), so
   discovery is never the fault. Notifications are never answered, except in
   ``reply-to-notifications``. Without ``--fault`` every intercept gets a valid answer
   with no effect; ``--fault deny`` answers a valid deny to every ``tool.before`` whose
   request advertises ``deny`` (no effect otherwise).
2. **Scenario replay** (``--scenarios FILE``, the contract's scenario form): a request
   whose ``id`` and ``params.event.id`` name a scenario is answered with that scenario's
   ``response`` VERBATIM, malformed ones included; any other request gets -32602.
3. **The interop contract's server role** (``--config FILE``: ``{transport, readinessFile,
   scenarioFile, auth}``): scenario replay plus the control endpoint
   (:class:`~ahp_conformance.contract.ControlPlane`: ``/health``, ``/receipts``,
   ``/release``, ``/shutdown``), barriers (a scenario's ``barrier`` is waited on before
   its answer), and the readiness file. So ``[sys.executable, "-P", "-m",
   "ahp_conformance.fake_backend"]`` is a drop-in server adapter command. ``auth.mode``
   ``none`` and ``bearer`` (``auth.token``) are served over HTTP; stdio is process trust.

Fault modes, the process form (stdio, ``--http``, ``--ready-file``, ``--record``) and
what each fault does over each transport are the kit's one scripted backend,
:mod:`ahp_protocol.testing` (``python -m ahp_protocol.testing`` serves the same faults
without the conformance extras). This module adds scenario replay and the contract's
server role. A barrier waits at most :data:`~ahp_conformance.contract.BARRIER_TIMEOUT_S`;
the contract role exits on ``POST /shutdown``.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ahp_protocol.testing import serve as process
from ahp_protocol.testing.faults import (  # re-exported: the shared table and its bytes
    CRASH_STATUS,
    FAULTS,
    GARBAGE,
    MAX_FRAME_BYTES,
    NOISE,
    UNKNOWN_EFFECT,
    Answer,
    Misbehaving,
    decoded,
    is_notification,
    line,
    rpc_error,
)
from ahp_protocol.testing.serve import Recorder, http_server, read_entries, read_record

from ahp_conformance.contract import ContractError, ControlPlane, read_config, write_readiness

__all__ = [
    "CRASH_STATUS",
    "FAULTS",
    "GARBAGE",
    "MAX_FRAME_BYTES",
    "NOISE",
    "UNKNOWN_EFFECT",
    "Fake",
    "read_entries",
    "read_record",
]


class Fake(Misbehaving):
    """The shared scripted backend, plus scenario replay and the control plane's record."""

    def __init__(
        self,
        fault: str | None = None,
        *,
        delay_ms: int = 3000,
        scenarios: Mapping[str, Mapping[str, Any]] | None = None,
        plane: ControlPlane | None = None,
    ) -> None:
        super().__init__(fault, delay_ms=delay_ms)
        self.scenarios = scenarios
        self.plane = plane

    def answer(self, raw: bytes) -> Answer:
        message = decoded(raw)
        if discovery := self.discovery(message):
            return discovery
        if self.plane is not None and isinstance(message, dict):
            self.plane.record(message)
        elif self.plane is not None:
            self.plane.record({"undecodable": raw[:2000].decode("utf-8", "replace")})
        if self.scenarios is not None:
            return self._replay(message, is_notification(message))
        return super().answer(raw)

    def _replay(self, message: Any, is_notification: bool) -> Answer:
        if is_notification:
            return Answer(notification=True)
        rid = message.get("id") if isinstance(message, dict) else None
        params = message.get("params") if isinstance(message, dict) else None
        event = params.get("event") if isinstance(params, dict) else None
        event_id = event.get("id") if isinstance(event, dict) else None
        assert self.scenarios is not None
        scenario = self.scenarios.get(rid) if isinstance(rid, str) else None
        if scenario is None or event_id != rid:
            why = "no scenario has this id" if scenario is None else "id != params.event.id"
            return Answer([line(rpc_error(rid, -32602, f"invalid params: {why}"))])
        barrier = scenario.get("barrier")
        if isinstance(barrier, str) and self.plane is not None:
            self.plane.wait(barrier)
        return Answer([line(scenario["response"])])


# -- the contract's server role -------------------------------------------------------


def load_scenario_responses(path: str | Path) -> dict[str, dict[str, Any]]:
    """Scenario id -> the scenario object (its ``response`` is answered verbatim)."""
    try:
        data = json.loads(Path(path).read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise ContractError(f"scenario file {path}: {exc}") from None
    items = data.get("scenarios") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ContractError(f"scenario file {path}: expected {{version, scenarios: [...]}}")
    out: dict[str, dict[str, Any]] = {}
    for index, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            raise ContractError(f"scenario file {path}: scenarios[{index}] needs a string id")
        if "response" not in item:
            raise ContractError(f"scenario file {path}: scenarios[{index}] has no response")
        out[item["id"]] = item
    return out


def serve_contract(config_path: str, fault: str | None, record: Recorder) -> int:
    """The contract's server role: scenario replay, control endpoint, readiness file."""
    config = read_config(config_path)
    transport = config.get("transport")
    if transport not in ("stdio", "http"):
        raise ContractError(f"--config {config_path}: $.transport must be 'stdio' or 'http'")
    for key in ("readinessFile", "scenarioFile"):
        if not isinstance(config.get(key), str):
            raise ContractError(f"--config {config_path}: $.{key} must be a path")
    auth = config.get("auth") or {"mode": "none"}
    mode = auth.get("mode", "none") if isinstance(auth, dict) else None
    bearer: str | None = None
    if transport == "http" and mode == "bearer" and isinstance(auth.get("token"), str):
        bearer = auth["token"]
    elif transport == "http" and mode != "none":
        raise ContractError(
            f"--config {config_path}: auth mode {mode!r} is not supported by the fake backend "
            "(none, bearer)"
        )
    plane = ControlPlane()
    fake = Fake(fault, scenarios=load_scenario_responses(config["scenarioFile"]), plane=plane)
    control = plane.start()
    endpoint = None
    server = None
    if transport == "http":
        server = http_server(fake, record, ("127.0.0.1", 0), bearer)
        endpoint = f"http://127.0.0.1:{server.server_address[1]}/intercept"
        threading.Thread(target=server.serve_forever, daemon=True).start()
    else:

        def stdio() -> None:
            process.serve_stdio(fake, record)
            plane.stop()  # stdin EOF: the client is gone

        threading.Thread(target=stdio, daemon=True).start()
    write_readiness(Path(config["readinessFile"]), endpoint, control)
    plane.stopping.wait()
    if server is None:
        # The stdio reader is blocked on stdin, holding its buffer's lock: a normal
        # interpreter exit would abort on it. Every answer is already flushed.
        os._exit(0)
    server.shutdown()
    plane.close()
    return 0


# -- the command line -----------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    process.add_arguments(parser)
    parser.add_argument(
        "--scenarios",
        metavar="FILE",
        help="answer each scenario's request with its response, verbatim",
    )
    parser.add_argument(
        "--config", metavar="FILE", help="the interop contract's server role (a server config file)"
    )


def run(args: argparse.Namespace) -> int:
    if args.fault and (args.config or args.scenarios):
        raise ContractError(
            "--fault misbehaves on every intercept; --scenarios and --config answer each "
            "scenario's own response (malformed ones included): give one or the other"
        )
    if args.config:
        return serve_contract(args.config, args.fault, Recorder(args.record))
    scenarios = load_scenario_responses(args.scenarios) if args.scenarios else None
    fake = Fake(args.fault, delay_ms=args.delay_ms, scenarios=scenarios)
    try:
        return process.serve(fake, args)
    except ValueError as exc:  # a --http address that is not loopback
        raise ContractError(str(exc)) from None


if __name__ == "__main__":  # the same command as ``ahp-conformance fake-backend``
    import sys

    from ahp_conformance.cli import main

    sys.exit(main(["fake-backend", *sys.argv[1:]]))
