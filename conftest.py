"""Shared pytest fixtures: the golden fixtures folder and the official JSON Schemas.

The golden fixtures live outside the repository (``../shared/fixtures``); tests
read them through ``AHP_FIXTURES_DIR`` and skip, saying why, where they are absent.
The official SDK (``agenthooksprotocol``) is a test dependency only: its bundled
``schemas.json`` is the machine contract we cross-check our messages against.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent
SCHEMA_BASE = "https://agenthooksprotocol.org/schemas/draft/"


def fixtures_root() -> Path:
    """The ``ahp-draft`` fixtures folder (may not exist)."""
    configured = os.environ.get("AHP_FIXTURES_DIR")
    if configured:
        return Path(configured)
    return REPO_ROOT.parent / "shared" / "fixtures" / "ahp-draft"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    root = fixtures_root()
    if not (root / "manifest.json").is_file():
        pytest.skip(
            f"golden fixtures not found at {root} "
            "(set AHP_FIXTURES_DIR to the ahp-draft fixtures folder)"
        )
    return root


@cache
def _schemas() -> dict[str, dict[str, Any]]:
    text = resources.files("agenthooksprotocol").joinpath("schemas.json").read_text("utf-8")
    return {schema["$id"]: schema for schema in json.loads(text)}


@cache
def _validator(name: str) -> Any:
    import jsonschema
    from referencing import Registry, Resource

    schemas = _schemas()
    registry: Registry[Any] = Registry().with_resources(
        (uri, Resource.from_contents(schema)) for uri, schema in schemas.items()
    )
    schema = schemas[SCHEMA_BASE + name]
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, registry=registry, format_checker=cls.FORMAT_CHECKER)


def schema_errors(name: str, instance: Any) -> list[str]:
    """Errors of ``instance`` against one official schema, such as ``tool-before.schema.json``."""
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '$'}: {e.message}"
        for e in _validator(name).iter_errors(instance)
    ]


@pytest.fixture(scope="session")
def official_schema() -> Callable[[str, Any], list[str]]:
    """``official_schema(name, instance)`` -> list of errors (empty when valid)."""
    return schema_errors


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
