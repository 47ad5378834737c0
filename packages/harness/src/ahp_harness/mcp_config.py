"""``--mcp-config FILE``: the MCP servers of a session, and what the wire may say about them.

Owns the configuration format (the ``mcpServers`` JSON shape Claude Code, Cursor and
Gemini CLI share), checked in full at load time (:func:`load_mcp_config`; a problem is a
:class:`McpConfigError` naming the file, the JSON path and the reason), the names the
model calls MCP tools by (:func:`tool_name`, ``mcp__<server>__<tool>``, from
:mod:`ahp_harness.mcp_names`) and the
``tool.mcp.connection`` identity of a server with every credential stripped
(:func:`connection`). Standard library only: the ``mcp`` SDK is imported by
:mod:`ahp_harness.mcp_tools`, and only when a configuration is given.

The file::

    {"mcpServers": {
        "files": {"command": "python", "args": ["server.py"], "env": {"K": "${K}"},
                  "cwd": "tools", "timeout": 30000},
        "web":   {"type": "http", "url": "http://127.0.0.1:8000/mcp",
                  "headers": {"Authorization": "Bearer ${WEB_TOKEN}"}}
    }}

A server with ``command`` is stdio (``type`` absent or ``"stdio"``); one with ``url``
(or Gemini's ``httpUrl``) is streamable HTTP (``type`` absent or ``"http"``;
``"streamable-http"`` is the same). ``"sse"`` is refused (not supported). ``timeout``
(milliseconds) bounds each tool call (default :data:`DEFAULT_CALL_TIMEOUT_MS`). ``${VAR}``
and ``${VAR:-default}`` in any string are replaced from the harness's environment at load
time (an unset variable without a default is an error). A server id is
``[A-Za-z0-9][A-Za-z0-9_-]*`` (at most 64 characters, no ``__``). Unknown keys are errors.

**What is stripped** (:func:`connection`): the wire carries only ``transport`` and either
``url`` or ``command``/``args``/``cwd``. ``env`` and ``headers`` are never sent. A URL
loses its userinfo, its query and its fragment. An argument that came from a ``${VAR}``
is shown as written (``${VAR}``, never the value); the value after a flag whose name
looks secret (``--api-key X``, ``--token=X``, ``-p``/``--password``, ...), an argument
that looks like a credential (a known token prefix, a long opaque string, ``NAME=VALUE``
with a secret-looking name, userinfo in a URL) and any argument holding a configured
``env`` or ``headers`` value are replaced by ``[removed]``. Every removal is named in the
connection's ``gaps`` (``url.userinfo``, ``url.query``, ``args[2]``, ...), so a backend
knows the identity is partial.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from ahp_harness.mcp_names import TOOL_PREFIX, split_tool_name, tool_name, valid_mcp_tool_name

__all__ = [
    "DEFAULT_CALL_TIMEOUT_MS",
    "MAX_CONFIG_BYTES",
    "REMOVED",
    "TOOL_PREFIX",
    "McpConfigError",
    "McpServerConfig",
    "connection",
    "load_mcp_config",
    "parse_mcp_config",
    "split_tool_name",
    "tool_name",
    "valid_mcp_tool_name",
]

DEFAULT_CALL_TIMEOUT_MS: Final = 60_000
"""How long one MCP tool call may take unless the server's ``timeout`` says otherwise."""
MAX_CONFIG_BYTES: Final = 1024 * 1024
REMOVED: Final = "[removed]"
"""What stands in the identity for a value that may be a credential."""

_SERVER_ID = r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}\Z"
_VAR = r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}"
_SERVER_KEYS: Final = (
    "type",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "httpUrl",
    "headers",
    "timeout",
)
_SECRET_NAME = (
    r"(?i)TOKEN|SECRET|PASS|PWD|CREDENTIAL|KEY|PRIVATE|AUTH|COOKIE|SESSION|BEARER|SIG|JWT"
)
_SECRET_SHORT_FLAGS: Final = frozenset({"-p", "-k", "-t", "-a"})
_TOKEN_PREFIX = (
    r"(sk-|sk_|pk_|rk_|ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|glpat-|xox[abprs]-|AKIA|ASIA|"
    r"AIza|ya29\.|eyJ|Bearer\s|Basic\s|npm_|hf_|shpat_|dop_v1_)"
)
_OPAQUE = r"[A-Za-z0-9_\-+/=.~]{24,}\Z"


class McpConfigError(ValueError):
    """The MCP configuration is unusable: ``str()`` is ``FILE: PATH: reason``."""

    def __init__(self, file: str, path: str, reason: str) -> None:
        super().__init__(f"{file}: {path}: {reason}" if path else f"{file}: {reason}")
        self.file = file
        self.path = path
        self.reason = reason


@dataclass(frozen=True)
class McpServerConfig:
    """One configured server. ``raw_args`` are the arguments as written (before ``${}``)."""

    id: str
    transport: Literal["stdio", "http"]
    command: str | None = None
    args: tuple[str, ...] = ()
    raw_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_ms: int = DEFAULT_CALL_TIMEOUT_MS

    def __post_init__(self) -> None:
        if len(self.raw_args) != len(self.args):
            object.__setattr__(self, "raw_args", tuple(self.args))

    def __repr__(self) -> str:  # never the env, headers or expanded values
        where = self.url_identity() if self.transport == "http" else self.command
        return f"<mcp server {self.id} ({self.transport}) {where}>"

    def url_identity(self) -> str:
        return _url_identity(self.url or "")[0]


# -- loading ----------------------------------------------------------------------------


def load_mcp_config(
    path: str | Path, environ: Mapping[str, str] | None = None
) -> list[McpServerConfig]:
    """Read and check ``path`` (see the module docstring); :class:`McpConfigError` if bad.

    ``cwd`` values are relative to the file's folder; ``environ`` (default: the process
    environment) fills ``${VAR}``.
    """
    name = str(path)
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise McpConfigError(
            name, "", f"cannot read the file ({exc.strerror or 'error'})"
        ) from None
    if len(data) > MAX_CONFIG_BYTES:
        raise McpConfigError(name, "", f"larger than {MAX_CONFIG_BYTES} bytes")
    try:
        document = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise McpConfigError(name, "", "not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise McpConfigError(
            name, "", f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    base = Path(path).resolve().parent
    return parse_mcp_config(document, file=name, base=base, environ=environ)


def parse_mcp_config(
    document: Any,
    *,
    file: str = "<mcp config>",
    base: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[McpServerConfig]:
    """The servers of an already parsed document (see :func:`load_mcp_config`)."""
    env = os.environ if environ is None else environ

    def error(path: str, reason: str) -> McpConfigError:
        return McpConfigError(file, path, reason)

    if not isinstance(document, dict):
        raise error("$", 'must be an object with "mcpServers"')
    extra = sorted(set(document) - {"mcpServers"})
    if extra:
        raise error(f"$.{extra[0]}", "unknown key (allowed: mcpServers)")
    servers = document.get("mcpServers")
    if not isinstance(servers, dict):
        raise error("$.mcpServers", "required: an object of servers by id")
    out: list[McpServerConfig] = []
    for server_id, entry in servers.items():
        where = f"$.mcpServers.{server_id}"
        if not re.match(_SERVER_ID, server_id) or "__" in server_id:
            raise error(
                where,
                "a server id is letters, digits, '_' and '-' (at most 64, starting with a "
                "letter or digit, no '__')",
            )
        out.append(_server(server_id, entry, where, error, env, base))
    return out


def _expand(value: str, path: str, error: Any, env: Mapping[str, str]) -> str:
    def one(found: re.Match[str]) -> str:
        name, default = found.group(1), found.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        raise error(path, f"${{{name}}}: the environment variable is not set (and no :-default)")

    return re.sub(_VAR, one, value)


def _string(
    entry: Mapping[str, Any], key: str, where: str, error: Any, env: Mapping[str, str]
) -> str:
    value = entry[key]
    if not isinstance(value, str) or not value:
        raise error(f"{where}.{key}", "must be a non-empty string")
    if "\x00" in value:
        raise error(f"{where}.{key}", "must not contain NUL characters")
    return _expand(value, f"{where}.{key}", error, env)


def _string_map(
    entry: Mapping[str, Any], key: str, where: str, error: Any, env: Mapping[str, str]
) -> dict[str, str]:
    value = entry.get(key, {})
    if not isinstance(value, dict):
        raise error(f"{where}.{key}", "must be an object of strings")
    out: dict[str, str] = {}
    for name, item in value.items():
        if not name or not isinstance(item, str) or "\x00" in item or "\x00" in name:
            # never the value: it may be a credential
            raise error(f"{where}.{key}.{name}", "must be a string (no NUL characters)")
        out[name] = _expand(item, f"{where}.{key}.{name}", error, env)
    return out


def _server(
    server_id: str,
    entry: Any,
    where: str,
    error: Any,
    env: Mapping[str, str],
    base: Path | None,
) -> McpServerConfig:
    if not isinstance(entry, dict):
        raise error(where, 'must be an object with "command" (stdio) or "url" (http)')
    for key in entry:
        if key not in _SERVER_KEYS:
            raise error(f"{where}.{key}", f"unknown key (allowed: {', '.join(_SERVER_KEYS)})")
    kind = entry.get("type")
    if kind is not None and kind not in ("stdio", "http", "streamable-http", "streamableHttp"):
        if kind == "sse":
            raise error(
                f"{where}.type", 'the SSE transport is not supported (use "http": streamable HTTP)'
            )
        raise error(f"{where}.type", 'must be "stdio" or "http"')
    if "url" in entry and "httpUrl" in entry:
        raise error(f"{where}.httpUrl", 'give "url" or "httpUrl", not both')
    url_key = "url" if "url" in entry else "httpUrl" if "httpUrl" in entry else None
    if "command" in entry and url_key:
        raise error(where, 'give "command" (stdio) or "url" (http), not both')
    timeout = entry.get("timeout", DEFAULT_CALL_TIMEOUT_MS)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= 3_600_000:
        raise error(f"{where}.timeout", "must be an integer number of milliseconds, 1 to 3600000")
    if url_key is not None:
        if kind == "stdio":
            raise error(f"{where}.type", '"stdio" needs "command", not "url"')
        for key in ("args", "env", "cwd"):
            if key in entry:
                raise error(f"{where}.{key}", "is for stdio servers (this one has a url)")
        url = _string(entry, url_key, where, error, env)
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises for a bad port
        except ValueError:
            raise error(f"{where}.{url_key}", "not a valid URL") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise error(f"{where}.{url_key}", "must be an http or https URL with a host")
        headers = _string_map(entry, "headers", where, error, env)
        if (parts.username is not None or parts.password is not None) and any(
            name.lower() == "authorization" for name in headers
        ):
            raise error(
                f"{where}.headers.Authorization",
                f"{url_key} has credentials too; give one of them (the URL's would win)",
            )
        return McpServerConfig(
            id=server_id, transport="http", url=url, headers=headers, timeout_ms=timeout
        )
    if "command" not in entry:
        raise error(where, 'needs "command" (stdio) or "url" (http)')
    if kind not in (None, "stdio"):
        raise error(f"{where}.type", f'"{kind}" needs "url", not "command"')
    if "headers" in entry:
        raise error(f"{where}.headers", "is for http servers (this one has a command)")
    command = _string(entry, "command", where, error, env)
    raw_args = entry.get("args", [])
    if not isinstance(raw_args, list):
        raise error(f"{where}.args", "must be a list of strings")
    args: list[str] = []
    for i, arg in enumerate(raw_args):
        if not isinstance(arg, str) or "\x00" in arg:
            raise error(f"{where}.args[{i}]", "must be a string (no NUL characters)")
        args.append(_expand(arg, f"{where}.args[{i}]", error, env))
    cwd = None
    if "cwd" in entry:
        cwd_text = _string(entry, "cwd", where, error, env)
        cwd_path = Path(cwd_text)
        if not cwd_path.is_absolute() and base is not None:
            cwd_path = base / cwd_path
        if not cwd_path.is_dir():
            raise error(f"{where}.cwd", "not a directory")
        cwd = str(cwd_path)
    return McpServerConfig(
        id=server_id,
        transport="stdio",
        command=command,
        args=tuple(args),
        raw_args=tuple(raw_args),
        env=_string_map(entry, "env", where, error, env),
        cwd=cwd,
        timeout_ms=timeout,
    )


# -- the identity on the wire -----------------------------------------------------------


def _url_identity(url: str) -> tuple[str, list[dict[str, str]]]:
    """The URL without userinfo, query and fragment, and a gap for each removal."""
    from urllib.parse import urlsplit, urlunsplit

    gaps: list[dict[str, str]] = []
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "", [{"path": "url", "reason": "not disclosed: not a valid URL"}]
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        gaps.append({"path": "url.userinfo", "reason": "removed: may carry credentials"})
    if parts.query:
        gaps.append({"path": "url.query", "reason": "removed: may carry credentials"})
    if parts.fragment:
        gaps.append({"path": "url.fragment", "reason": "removed: may carry credentials"})
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", "")), gaps


def _secret_flag(arg: str) -> bool:
    if arg in _SECRET_SHORT_FLAGS:
        return True
    return arg.startswith("--") and re.search(_SECRET_NAME, arg[2:]) is not None


def _looks_credential(arg: str, known: list[str]) -> bool:
    if any(value in arg for value in known):
        return True
    if re.match(_TOKEN_PREFIX, arg.lstrip("'\"")):
        return True
    name, eq, _value = arg.partition("=")
    if eq and re.search(_SECRET_NAME, name.lstrip("-")) is not None:
        return True
    if "://" in arg:
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(arg)
            if parts.username is not None or parts.password is not None or parts.query:
                return True
        except ValueError:
            return True
    return (
        re.match(_OPAQUE, arg) is not None
        and "/" not in arg
        and any(c.isdigit() for c in arg)
        and any(c.isalpha() for c in arg)
    )


def connection(server: McpServerConfig, default_cwd: str | None = None) -> dict[str, Any]:
    """``tool.mcp.connection`` for ``server``: every credential stripped, gaps naming it.

    ``default_cwd`` is where a stdio server without ``cwd`` runs (the harness's choice).
    """
    gaps: list[dict[str, str]] = []
    if server.transport == "http":
        url, gaps = _url_identity(server.url or "")
        out: dict[str, Any] = {"transport": "http"}
        if url:
            out["url"] = url
        if gaps:
            out["gaps"] = gaps
        return out
    known = [v for v in (*server.env.values(), *server.headers.values()) if len(v) >= 4]
    out = {"transport": "stdio"}
    command = server.command or ""
    if _looks_credential(command, known) or "://" in command:
        gaps.append({"path": "command", "reason": "removed: may carry a credential"})
    else:
        out["command"] = command
    args: list[str] = []
    after_flag = False
    for i, (arg, raw) in enumerate(zip(server.args, server.raw_args, strict=True)):
        follows_flag, after_flag = after_flag, False
        if raw != arg and re.search(_VAR, raw):
            args.append(raw)  # the variable's name, never its value
            continue
        name, eq, _ = arg.partition("=")
        if eq and name.startswith("-") and _secret_flag(name):  # --token=X
            args.append(f"{name}={REMOVED}")
        elif follows_flag or _looks_credential(arg, known):  # --token X, or X itself
            args.append(REMOVED)
        else:
            after_flag = _secret_flag(arg)
            args.append(arg)
            continue
        gaps.append({"path": f"args[{i}]", "reason": "removed: may be a credential"})
    out["args"] = args
    cwd = server.cwd or default_cwd
    if cwd is not None:
        out["cwd"] = cwd
    else:
        gaps.append({"path": "cwd", "reason": "not disclosed"})
    if gaps:
        out["gaps"] = gaps
    return out
