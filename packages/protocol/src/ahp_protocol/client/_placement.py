"""Where a registration's stdio backends run: the one rule every harness-side reader uses.

A registration file's folder is its backends' home: each stdio backend runs there
unless it names a ``cwd`` (a relative one is taken from that folder), and a
``command`` written as a relative path (``./bin/policy``) is resolved there; a bare
name (``ahp-backend``) is looked up on the backend's ``PATH`` (the harness's, or the
registration's ``env.PATH``). A document or a model has no folder: its backends run
in the harness's working folder unless ``base_dir`` says otherwise. Never spawns
anything: it only rewrites ``cwd`` and ``command`` of the stdio transports.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ahp_protocol.wire.registration import Registration


def anchored(registration: Registration, folder: str | os.PathLike[str]) -> Registration:
    """``registration`` with its stdio backends placed in ``folder`` (the module's rule)."""
    from ahp_protocol.client.transports.stdio import is_path_command
    from ahp_protocol.wire.registration import StdioTransportConfig

    base = os.path.abspath(folder)
    hooks = []
    for hook in registration.hooks:
        spec = hook.transport
        if isinstance(spec, StdioTransportConfig):
            cwd = os.path.join(base, spec.cwd) if spec.cwd else base
            command = spec.command
            if is_path_command(command):
                command = os.path.join(base, command)
            spec = spec.model_copy(update={"cwd": os.path.normpath(cwd), "command": command})
            hook = hook.model_copy(update={"transport": spec})
        hooks.append(hook)
    return registration.model_copy(update={"hooks": hooks})


def load_anchored(
    path: str | os.PathLike[str], base_dir: str | os.PathLike[str] | None = None
) -> Registration:
    """Read and validate a registration file, its stdio backends placed in its folder (or
    ``base_dir``). ``Hooks``, ``ahp-protocol send`` and the adapters all read a file so,
    and it means the same to all of them. Raises ``WireErrors`` as ``load_registration``."""
    from ahp_protocol.wire.registration import load_registration

    return anchored(load_registration(path), base_dir or Path(path).resolve().parent)


def registration_of(
    registration: Registration | Mapping[str, Any] | str | os.PathLike[str],
    base_dir: str | os.PathLike[str] | None,
) -> Registration:
    """The validated registration ``Hooks`` runs: a file is anchored in its folder (or
    ``base_dir``); a document or a model only in ``base_dir``, when given."""
    from ahp_protocol.wire.registration import Registration, parse_registration

    if isinstance(registration, str | os.PathLike):
        return load_anchored(registration, base_dir)
    if not isinstance(registration, Registration):
        registration = parse_registration(registration)
    return anchored(registration, base_dir) if base_dir is not None else registration
