"""``ahp-protocol validate`` (the installed command) on two rules upstream's interop found.

- AHP-DEC-001: a successful intercept result *contains* an ordered ``effects`` array
  (``[]`` for no effect); a result without it, or with ``"effects": null``, is invalid.
  The official SDK 0.10.1 schema is looser here (``effects`` optional); we follow the
  spec, and this file pins that divergence so it stays deliberate.
- Manifest limits are integers >= 0: ``limits.maxUploadBytes: null`` (or any other
  limit) is invalid, in a ``hooks/capabilities`` result and in ``session.start``, as the
  official schemas say.

Each case runs the real command on a file and reads its ``--json`` verdict.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

COMMAND = Path(sys.executable).parent / "ahp-protocol"
LIMITS = ("maxUploadBytes", "maxContinuations", "minTimeoutMs", "maxTimeoutMs")
Schema = Callable[[str, Any], list[str]]

MANIFEST: dict[str, Any] = {
    "events": [
        {"event": "tool.before", "modes": ["intercept"], "capabilities": {"effects": ["deny"]}}
    ],
    "gaps": [],
    "transports": ["stdio"],
    "authentication": [],
    "toolPaths": ["native"],
    "contentCategories": ["text"],
    "limits": {"maxUploadBytes": 0, "maxContinuations": 0, "minTimeoutMs": 1, "maxTimeoutMs": 9},
    "managedPolicy": {"scopes": ["user"], "disableable": True},
    "correlationIdentityFields": ["id"],
}


def validate(tmp_path: Path, document: Any) -> dict[str, Any]:
    """Run ``ahp-protocol validate --json`` on ``document``; its one verdict."""
    path = tmp_path / "message.json"
    path.write_text(json.dumps(document), "utf-8")
    done = subprocess.run(
        [str(COMMAND), "validate", "--json", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    (verdict,) = json.loads(done.stdout)
    assert done.returncode == (0 if verdict["valid"] else 1), done.stderr
    assert isinstance(verdict, dict)
    return verdict


def intercept_response(result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": "evt_1", "result": {"protocolVersion": "draft", **result}}


def capabilities_response(manifest: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": "discovery",
        "result": {"protocolVersion": "draft", "manifest": manifest},
    }


def session_start(manifest: dict[str, Any]) -> dict[str, Any]:
    event = {
        "id": "evt_s",
        "source": "urn:example:harness",
        "type": "session.start",
        "time": "2026-01-01T00:00:00Z",
        "harness": {"name": "h", "version": "1"},
        "session": {"id": "s"},
        "trigger": "startup",
        "permissionMode": "default",
        "manifest": manifest,
        "items": [],
    }
    return {
        "jsonrpc": "2.0",
        "method": "hooks/observe",
        "params": {"protocolVersion": "draft", "event": event},
    }


def with_limit(name: str, value: Any) -> dict[str, Any]:
    manifest = copy.deepcopy(MANIFEST)
    manifest["limits"][name] = value
    return manifest


# -- AHP-DEC-001: the effects array --------------------------------------------------------


def test_an_intercept_result_without_effects_is_invalid(
    tmp_path: Path, official_schema: Schema
) -> None:
    message = intercept_response({})
    verdict = validate(tmp_path, message)
    assert not verdict["valid"]
    (error,) = verdict["errors"]
    assert error["path"] == "result" and "effects is required" in error["reason"]
    # The SDK 0.10.1 schema accepts it: the spec, not the schema, decides here.
    assert official_schema("json-rpc-message.schema.json", message) == []


def test_null_or_non_array_effects_are_invalid(tmp_path: Path) -> None:
    for effects in (None, {}, "deny"):
        verdict = validate(tmp_path, intercept_response({"effects": effects}))
        assert not verdict["valid"], effects
        assert verdict["errors"][0]["path"] == "result.effects", effects


def test_an_empty_effects_array_is_the_valid_no_effect(tmp_path: Path) -> None:
    assert validate(tmp_path, intercept_response({"effects": []}))["valid"]


# -- manifest limits are integers ----------------------------------------------------------


def test_the_manifest_fixture_is_valid(tmp_path: Path, official_schema: Schema) -> None:
    assert validate(tmp_path, capabilities_response(MANIFEST))["valid"]
    assert validate(tmp_path, session_start(MANIFEST))["valid"]
    assert (
        official_schema("capabilities-response.schema.json", capabilities_response(MANIFEST)) == []
    )


@pytest.mark.parametrize("name", LIMITS)
def test_a_null_limit_is_invalid_in_discovery_and_session_start(
    name: str, tmp_path: Path, official_schema: Schema
) -> None:
    manifest = with_limit(name, None)
    discovery = capabilities_response(manifest)
    verdict = validate(tmp_path, discovery)
    assert not verdict["valid"]
    assert verdict["errors"][0]["path"] == f"result.manifest.limits.{name}"
    assert "not null" in verdict["errors"][0]["reason"]
    assert official_schema("capabilities-response.schema.json", discovery) != []

    started = validate(tmp_path, session_start(manifest))
    assert not started["valid"]
    assert started["errors"][0]["path"].endswith(f"manifest.limits.{name}")


def test_omitted_limits_are_valid(tmp_path: Path) -> None:
    # Absence is how a manifest says "unknown" (with a gap); other non-integers
    # (negative, string, boolean) are judged by the model: test_capabilities.py.
    manifest = copy.deepcopy(MANIFEST)
    manifest["limits"] = {}
    manifest["gaps"] = [{"path": "limits", "reason": "not measured"}]
    assert validate(tmp_path, capabilities_response(manifest))["valid"]
