"""Check group ``http.*`` and ``auth.*`` (HTTP only): media types, methods, bearer tokens.

A POST with Content-Type text/plain is refused (4xx) or answered as JSON, never with a
server error or silence; GET on the intercept URL is refused; with
``--bearer-token-env``, a request without the token or with a wrong one gets 401
(AHP-AUTH-001; without it that check is ``n/a``). Status codes and media types of every
ordinary answer are judged by :class:`.links.HttpLink` as it reads them.
"""

from __future__ import annotations

from ahp_conformance.backend.links import HTTP_OK_MEDIA, HttpLink
from ahp_conformance.backend.probes import frame
from ahp_conformance.backend.run import Run
from ahp_conformance.report import Evidence


def http_rules(run: Run, link: HttpLink, token_given: bool) -> None:
    """The HTTP-only checks over ``link`` (the run's own link)."""
    run.progress("HTTP media types, methods, status codes, authentication")
    peer = link.peer
    _rid, probe = run.msgs.probe("content-type")
    outcome = link.post(frame(probe), content_type="text/plain")
    status = outcome.http.status if outcome.http else None
    # The draft makes application/json the harness's duty; a backend may refuse another
    # media type (415) or read the body anyway, but must answer sanely either way.
    title = (
        "a POST with Content-Type text/plain is refused (4xx) or answered as JSON, "
        "never with a server error or silence"
    )
    media = outcome.http.headers.get("content-type", "") if outcome.http else ""
    answered = (
        status == 200
        and bool(HTTP_OK_MEDIA.match(media))
        and any(r.get("id") == _rid for r in outcome.responses)
    )
    if status is not None and (400 <= status < 500 or answered):
        run.judge.check(
            "http.content-type",
            title,
            ["AHP-HTTP-001"],
            "pass",
            f"HTTP {status}" + ("" if not answered else " (the body was read as JSON)"),
        )
    else:
        run.judge.check(
            "http.content-type",
            title,
            ["AHP-HTTP-001"],
            "fail",
            outcome.failure or f"HTTP {status}",
            outcome.evidence,
        )
    reply = peer.send(b"", run.judge.timeout_s, method="GET", content_type=None)
    title = "GET on the intercept URL is refused (405; there is no GET in AHP)"
    evidence = Evidence.of(f"GET {peer.url}", f"HTTP {reply.status} {reply.body[:200]!r}")
    if reply.status is not None and 400 <= reply.status < 500:
        run.judge.check("http.get", title, ["AHP-HTTP-001"], "pass", f"HTTP {reply.status}")
    else:
        run.judge.check(
            "http.get",
            title,
            ["AHP-HTTP-001"],
            "fail",
            reply.error or f"HTTP {reply.status}",
            evidence,
        )
    if not token_given:
        run.judge.check(
            "auth.bearer",
            "requests without the bearer token get 401",
            ["AHP-AUTH-001"],
            "n/a",
            "no --bearer-token-env given: the backend was judged without authentication",
        )
        return
    for cid, header, what in (
        ("auth.missing", None, "without an Authorization header"),
        ("auth.wrong", "Bearer not-the-token-ahp-conformance", "with a wrong bearer token"),
    ):
        _rid, probe = run.msgs.probe(cid)
        outcome = link.post(frame(probe), authorization=header)
        status = outcome.http.status if outcome.http else None
        title = f"a request {what} gets 401"
        if status == 401 and not (outcome.responses and "result" in outcome.responses[0]):
            run.judge.check(cid, title, ["AHP-AUTH-001"], "pass")
        else:
            run.judge.check(
                cid,
                title,
                ["AHP-AUTH-001"],
                "fail",
                outcome.failure or f"HTTP {status}",
                outcome.evidence,
            )
