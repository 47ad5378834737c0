"""OAuth, judged on a harness (AHP-AUTH-001, with AHP-FAIL-001 where a policy decides).

Only for an adapter with the kit's ``registration`` extension, judged over HTTP hooks
(``--transport http`` or ``both``); otherwise each check is ``unsupported``. The judge
starts a real authorization server (:mod:`ahp_protocol.testing.oauth_server`, HTTPS on
loopback with a CA it makes, :func:`~ahp_protocol.testing.oauth_server.make_pki`) and an
OAuth-protected backend (:mod:`ahp_conformance.harness.oauth_backend`, which records
every HTTP request it gets: with or without ``Authorization``, and the status it
answered). Each run writes a registration of that backend whose hook carries the draft's
``oauth`` preset
(``client_credentials``, ``clientSecretRef: "env:AHPC_OAUTH_SECRET_<n>"``, one variable
per run), and gives the client adapter, in its environment (the judge's own, which it
inherits), those variables and ``AHP_CA_BUNDLE`` (the judge's CA: a harness that trusts
another way must be told about it, or its runs fail on TLS). The runs go ``jobs`` at a
time. What each run must show:

==========================  =================================================================
run                         what must hold
==========================  =================================================================
``oauth.preset``            allowed; the backend got the event with a token it accepted and
                            no request without one; the token request named the backend's
                            URL as its RFC 8707 ``resource``
``oauth.bad-secret.*``      the authorization server refuses the client: denied under
                            ``fail-closed``, allowed under ``fail-open``; either way the
                            backend got no request at all (never unauthenticated delivery)
``oauth.untrusted-issuer``  the issuer's metadata names another issuer: denied
                            (``fail-closed``), the backend got nothing
``oauth.other-identity``    the token is refused and the backend's metadata names another
                            authorization server: denied, and exactly one request reached
                            the backend (never a retry with another identity or none)
==========================  =================================================================
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ahp_conformance import contract, scenarios
from ahp_conformance.harness import client_env, progress
from ahp_conformance.harness.contract_runs import first_mismatch
from ahp_conformance.harness.registration_runs import (
    ALLOWED,
    DENIED,
    LONG_DEADLINE_MS,
    own_scenario,
)
from ahp_conformance.report import Check, Evidence

__all__ = ["OAUTH_NEEDS_HTTP", "oauth_checks", "unsupported_oauth_checks"]

OAUTH_NEEDS_HTTP = "OAuth is an HTTP binding: its runs need HTTP hooks (--transport http or both)"

HOOK_ID = "org.ahp.fake.oauth"
CLIENT_ID = "ahpc-harness"
SCOPE = "ahp.hooks"
SECRET_ENV = "AHPC_OAUTH_SECRET_{}"
RUNS: tuple[tuple[str, str, str, str, Mapping[str, Any], tuple[str, ...]], ...] = (
    # id, issuer tenant, secret, policy, expected, requirements
    ("oauth.preset", "good", "right", "fail-closed", ALLOWED, ("AHP-AUTH-001",)),
    ("oauth.bad-secret.fail-closed", "good", "wrong", "fail-closed", DENIED,
     ("AHP-AUTH-001", "AHP-FAIL-001")),
    ("oauth.bad-secret.fail-open", "good", "wrong", "fail-open", ALLOWED,
     ("AHP-AUTH-001", "AHP-FAIL-001")),
    ("oauth.untrusted-issuer", "liar", "right", "fail-closed", DENIED, ("AHP-AUTH-001",)),
    ("oauth.other-identity", "otheraud", "right", "fail-closed", DENIED, ("AHP-AUTH-001",)),
)  # fmt: skip
TITLES = {
    "oauth.preset": "an oauth preset (client_credentials) gets a token for the backend's URL "
    "and the event reaches the backend with it",
    "oauth.bad-secret.fail-closed": "a client the authorization server refuses: denied "
    "(fail-closed), and nothing is sent to the backend",
    "oauth.bad-secret.fail-open": "a client the authorization server refuses: allowed "
    "(fail-open), and nothing is sent to the backend, above all not without a token",
    "oauth.untrusted-issuer": "an issuer whose metadata names another issuer is not trusted: "
    "denied, nothing sent",
    "oauth.other-identity": "a refused token whose backend names another authorization "
    "server: denied after one request, never retried with another identity or none",
}


def unsupported_oauth_checks(reason: str) -> list[Check]:
    return [Check(cid, TITLES[cid], reqs, "unsupported", reason) for cid, *_, reqs in RUNS]


def _wait_for(path: Path, process: subprocess.Popen[bytes], needle: str | None) -> str:
    deadline = time.monotonic() + contract.READY_TIMEOUT_S
    while True:
        if path.is_file():
            text = path.read_text("utf-8", "replace")
            if needle is None and text:
                return text
            if needle is not None and needle in text:
                return text
        if process.poll() is not None or time.monotonic() > deadline:
            raise contract.ContractError(
                f"an OAuth helper process did not start (exit status {process.returncode})"
            )
        time.sleep(0.02)  # polling the file the process writes when ready: the signal


@contextlib.contextmanager
def _servers(folder: Path) -> Iterator[dict[str, str]]:
    from ahp_protocol.testing.oauth_server import make_pki

    pki = make_pki(folder)
    config = folder / "as.json"
    secret = "right-" + os.urandom(8).hex()
    clients = {CLIENT_ID: {"secret": secret, "scopes": [SCOPE]}}
    config.write_text(json.dumps({"cert": pki["server"], "key": pki["server"], "clients": clients}))
    env = {**os.environ, "AHP_CA_BUNDLE": pki["ca"]}
    processes: list[subprocess.Popen[bytes]] = []
    try:
        with (folder / "as.out").open("wb") as out:
            auth = subprocess.Popen(
                [sys.executable, "-P", "-m", "ahp_protocol.testing.oauth_server", str(config)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
            )  # fmt: skip
        processes.append(auth)
        line = _wait_for(folder / "as.out", auth, "listening on ")
        issuer_base = line.split("listening on ", 1)[1].split()[0]
        yield {
            "base": issuer_base,
            "ca": pki["ca"],
            "secret": secret,
            "folder": str(folder),
        }
    finally:
        for process in processes:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _backend(folder: Path, name: str, issuer: str, ca: str) -> tuple[subprocess.Popen[bytes], str]:
    ready = folder / f"{name}.ready.json"
    with (folder / f"{name}.backend.log").open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-P", "-m", "ahp_conformance.harness.oauth_backend",
             "--issuer", issuer, "--record", str(folder / f"{name}.requests.jsonl"),
             "--ready-file", str(ready), "--scope", SCOPE],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            env={**os.environ, "AHP_CA_BUNDLE": ca},
        )  # fmt: skip
    text = _wait_for(ready, process, None)
    return process, str(json.loads(text)["endpoint"])


def _records(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def _as_log(base: str, ca: str) -> list[dict[str, Any]]:
    import httpx
    from ahp_protocol.client.transports.http import tls_verify

    with httpx.Client(verify=tls_verify(ca), timeout=10.0, trust_env=False) as http:
        return list(http.get(f"{base}/log").json())


def _one_run(
    adapter: contract.Adapter,
    servers: Mapping[str, str],
    index: int,
    spec: tuple[str, str, str, str, Mapping[str, Any], tuple[str, ...]],
    watchdog_s: float,
) -> Check:
    cid, tenant, _secret, policy, expected, requirements = spec
    title = TITLES[cid]
    folder = Path(servers["folder"]) / f"run-{index}"
    folder.mkdir()
    good = f"{servers['base']}/good"
    backend, url = _backend(folder, "backend", good, servers["ca"])
    try:
        before = len(_as_log(servers["base"], servers["ca"]))
        scenario = own_scenario(f"oauth-{index}", expected)
        registration = {
            "protocolVersion": "draft",
            "hooks": [
                {
                    "id": HOOK_ID,
                    "transport": {"type": "http", "url": url},
                    "authentication": {
                        "type": "oauth",
                        "resource": url,
                        "issuer": f"{servers['base']}/{tenant}",
                        "clientId": CLIENT_ID,
                        "flow": "client_credentials",
                        "scopes": [SCOPE],
                        "clientSecretRef": f"env:{SECRET_ENV.format(index)}",
                    },
                    "subscriptions": [
                        {
                            "events": ["tool.before"],
                            "mode": "intercept",
                            "timeoutMs": LONG_DEADLINE_MS,
                            "failurePolicy": policy,
                            "content": {"default": "body"},
                        }
                    ],
                }
            ],
        }
        (folder / "registration.json").write_text(json.dumps(registration, indent=1), "utf-8")
        config = {
            "transport": "stdio",
            contract.REGISTRATION_EXTENSION: str(folder / "registration.json"),
            "scenarioFile": str(scenarios.write([scenario], folder / "scenarios.json")),
            "reportFile": str(folder / "report.json"),
            "auth": {"mode": "none"},
        }
        run = contract.run_client(adapter, config, folder, watchdog_s=watchdog_s)
        token_requests = [
            e
            for e in _as_log(servers["base"], servers["ca"])[before:]
            if "grant_type" in e and e.get("resource") == url
        ]
    finally:
        backend.terminate()
        try:
            backend.wait(timeout=5)
        except subprocess.TimeoutExpired:
            backend.kill()
            backend.wait()
    seen = _records(folder / "backend.requests.jsonl")
    posts = [r for r in seen if r.get("method") == "POST"]

    def fail(detail: str, received: Any = None) -> Check:
        return Check(cid, title, requirements, "fail", detail, Evidence.of(None, received), "http")

    if run.timed_out or run.report is None:
        return fail(run.error or "no report", run.log[-600:])
    entry = next((r for r in run.report["results"] if r.get("id") == scenario.id), None)
    if entry is None:
        return fail("the report has no result for the scenario", run.log[-600:])
    if entry.get("status") in ("unsupported", "inapplicable"):
        reason = str(entry.get("reason") or entry.get("error") or "no reason given")
        verdict: Any = "unsupported" if entry["status"] == "unsupported" else "n/a"
        return Check(cid, title, requirements, verdict, f"the adapter: {reason}", None, "http")
    mismatch = first_mismatch(entry.get("actual"), expected)
    if mismatch:
        return fail(mismatch, {k: entry[k] for k in ("status", "actual", "error") if k in entry})
    if any(not r.get("authorization") for r in posts):
        return fail("a request reached the backend without a token", posts)
    if cid == "oauth.preset":
        if not any(r.get("status") == 200 for r in posts):
            return fail("no request with an accepted token reached the backend", posts)
        if not any(e.get("resource") == url for e in token_requests):
            return fail(f"no token request named {url} as its resource", token_requests)
    elif cid == "oauth.other-identity":
        if len(posts) != 1:
            return fail(f"{len(posts)} requests reached the backend, expected exactly 1", posts)
    elif posts:
        return fail(f"{len(posts)} requests reached the backend, expected none", posts)
    return Check(cid, title, requirements, "pass", binding="http")


def oauth_checks(
    adapter: contract.Adapter, workdir: Path, watchdog_s: float, jobs: int = 2
) -> list[Check]:
    """The OAuth runs, ``jobs`` at a time, against one authorization server."""
    from concurrent.futures import ThreadPoolExecutor

    progress(f"OAuth runs: {len(RUNS)} registrations against a real authorization server")
    folder = workdir / "oauth"
    folder.mkdir()
    try:
        with _servers(folder) as servers:
            secrets = {
                SECRET_ENV.format(index): (
                    servers["secret"] if spec[2] == "right" else "wrong-" + os.urandom(4).hex()
                )
                for index, spec in enumerate(RUNS)
            }
            with (
                client_env({**secrets, "AHP_CA_BUNDLE": servers["ca"]}),
                ThreadPoolExecutor(max_workers=max(1, jobs)) as pool,
            ):
                return list(
                    pool.map(
                        lambda item: _one_run(adapter, servers, item[0], item[1], watchdog_s),
                        enumerate(RUNS),
                    )
                )
    except (contract.ContractError, OSError, ImportError) as exc:
        detail = f"the OAuth runs could not start: {exc}"
        return [Check(cid, TITLES[cid], reqs, "fail", detail) for cid, *_, reqs in RUNS]
