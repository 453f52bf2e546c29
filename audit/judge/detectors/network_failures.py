"""Network failures of the agent and the verifier, judged by who owns the failing endpoint.

A failure excuses a trial only when its endpoint is outside the agent's control
(audit/judge/network.py): a package index, a code host, a model hub, the HTTP proxy. The verifier's
downloads excuse a 0 only when no test reported (the tests never ran); the agent's only when
they failed repeatedly and never recovered. Each failing line quoted is a proof of cause
`network_outside`.
"""

from __future__ import annotations

import re

from audit.judge import network as N
from audit.judge.context import JobContext
from audit.judge.detectors.common import etype, tests_reported
from audit.judge.verdict import Classification, Proof, exception_line
from audit.read import layout as L
from audit.read.evidence import TrialEvidence
from audit.read.memo import by_text


def _describe(f: N.NetFailure, ctx: JobContext) -> str:
    """What failed, naming the endpoint: never a proxy unless the evidence shows one."""
    target = f" for {f.host}" if f.host else ""
    if f.via_proxy:
        at = f" at {f.proxy}" if f.proxy else ""
        kind = f.kind.replace("proxy ", "HTTP ") if f.family == "proxy" else f.kind
        return f"the proxy{at} answered {kind}{target}"
    return f"{f.kind} from {f.host}" if f.host else f"{f.kind} (the tool's default endpoint)"


def _endpoint_word(f: N.NetFailure, ctx: JobContext) -> str:
    if f.host and f.host in ctx.model_hosts:
        return "the model endpoint"
    if f.family == "proxy" or f.via_proxy:
        return "the HTTP proxy"
    return "an endpoint outside the agent's control (package index, code host, model hub)"


def verifier_network(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """The verifier's downloads failed against an outside endpoint and no test reported."""
    if ev.result is None or (ev.result.reward or 0) >= 1.0 or tests_reported(ev):
        return None
    if "AgentTimeout" in (etype(ev) or ""):
        return None  # the agent did not finish: that stands whatever the verifier met
    text = ev.text(L.VERIFIER_STDOUT) or ""
    found = N.failures_in(text, lambda n: f"{L.VERIFIER_STDOUT}:{n}")
    if not found:
        return None
    # The verifier runs in the container the agent left (TB's shared environment): a host the
    # agent configured, or name resolution and proxies it rewired, are the agent's doing.
    commands = [c.text for c in ev.source("agent_commands")]
    agent_hosts = N.hosts_written_by_agent(commands, ev.written_by_agent())
    rewired = any(_REWIRES_NETWORK.search(c) for c in commands)
    outside = [
        f
        for f in found
        if N.owner(f, agent_hosts) == "external" and not (rewired and f.family in _REWIRABLE)
    ]
    if not outside:
        return None
    return _network_verdict(ev, ctx, "verifier", outside[0], len(outside), outside)


_REWIRES_NETWORK = re.compile(
    r"(?:>>?|\btee\b(?:\s+-a)?)\s*/etc/(?:resolv\.conf|hosts)\b|"
    r"\b(?:export\s+)?(?:https?|all|no)_proxy=|"
    r"/etc/(?:pip\.conf|apt/apt\.conf(?:\.d/\S*)?|environment)\b"
)
_REWIRABLE = ("dns", "proxy", "refused", "tls")


AGENT_MIN_FAILURES = 2


# The proof standard for the agent's network failures (never switched off): a failure the
# same trial contradicts proves nothing.
# A server's answer, success or not (a 404 proves the network and the resolver work).
_ANSWER = re.compile(
    r"HTTP Error [1-4]\d\d\b|HTTP/[\d.]+ [1-4]\d\d\b|awaiting response\.\.\. [1-4]\d\d\b|"
    r"\b(?:200 OK|404 Not Found|403 Forbidden|400 Bad Request|401 Unauthorized|"
    r"301 Moved Permanently|302 Found)\b"
)


def agent_network(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """The agent's requests to outside endpoints failed repeatedly and never recovered."""
    if ev.result is None or (ev.result.reward or 0) >= 1.0:
        return None
    commands = [c.text for c in ev.source("agent_commands")]
    agent_hosts = N.hosts_written_by_agent(commands, ev.written_by_agent())
    # (failure, index of the exchange it came from; -1 for logs without one)
    failures: list[tuple[N.NetFailure, int]] = []
    # host -> indices of the exchanges in which it visibly answered
    answered: dict[str, list[int]] = {}
    exchanges = ev.exchanges()
    # The first exchange whose command rewired name resolution or a proxy (None: none did).
    rewired: int | None = None
    for index, ex in enumerate(exchanges):
        if rewired is None and ex.command and _REWIRES_NETWORK.search(ex.command.text):
            rewired = index
        out = ex.output
        if out is None:
            continue
        context = N.host_in(ex.command.text) if ex.command else None
        found = N.failures_in(out.text, out.where, context_host=context)
        failures.extend((f, index) for f in found)
        if found:
            continue
        for line in _answer_lines(out.text):
            host = N.host_in(line) or context
            if host:
                answered.setdefault(host, []).append(index)
    for c in ev.source("agent_output"):
        if c.file == L.AGENT_TRAJECTORY or "/command-" in c.file or c.label is not None:
            continue  # already read with its command
        failures.extend((f, -1) for f in N.failures_in(c.text, c.where))
    if rewired is None and any(_REWIRES_NETWORK.search(c) for c in commands):
        rewired = 0  # it rewired, when is not known: every failure may come after
    outside = [
        f
        for f, index in failures
        if N.owner(f, agent_hosts) == "external"
        and not _contradicted(f, index, answered)
        and not (rewired is not None and f.family in _REWIRABLE and (index < 0 or index >= rewired))
    ]
    if len(outside) < AGENT_MIN_FAILURES:
        return None
    return _network_verdict(ev, ctx, "agent", outside[0], len(outside), outside)


@by_text()
def _answer_lines(text: str) -> tuple[str, ...]:
    """The lines of `text` that show a server answered (one scan of the text, not one a line;
    pure: remembered)."""
    out = []
    for m in (*N.SUCCESS.finditer(text), *_ANSWER.finditer(text)):
        start = text.rfind("\n", 0, m.start()) + 1
        end = text.find("\n", m.end())
        out.append(text[start : end if end != -1 else len(text)])
    return tuple(out)


def _contradicted(f: N.NetFailure, index: int, answered: dict[str, list[int]]) -> bool:
    """The trial's own evidence says the network worked for this request's purposes."""
    if f.host and max(answered.get(f.host, [-2])) > index:
        return True  # it answered later in the trial: the failure did not last
    if f.host and index >= 0 and min(answered.get(f.host, [index + 1])) < index:
        return True  # it answered earlier in the trial: up then, an intermittent error now
    # A name that did not resolve while other names did: the name is wrong, not the network.
    return f.family == "dns" and any(h != f.host for h in answered)


def _network_verdict(
    ev, ctx, phase: str, f: N.NetFailure, count: int, all_failures: list[N.NetFailure]
) -> Classification:
    """The first failure is quoted; the explanation names every endpoint that failed."""
    named = f if f.host else next((g for g in all_failures if g.host), f)
    what = _describe(named, ctx)
    others = sorted({g.host for g in all_failures if g.host and g.host != named.host})
    if others:
        what += f"; also {', '.join(others[:3])}"
    where = _endpoint_word(named, ctx)
    if phase == "agent_setup":
        text = (
            f"The agent's own setup failed to download ({what}; {where}) before the model ran."
            " Rerun the task; pre-install the agent in the image to stop depending on it."
        )
    elif phase == "verifier":
        text = (
            f"The verifier's download failed ({what}; {where}) and no test reported a "
            "result: the tests never ran, so the 0 is not the model's. Rerun the task, or "
            "judge it from the trajectory (TB 2.x cannot re-run a verifier after cleanup)."
        )
    else:
        text = (
            f"The agent's requests failed {count} times ({what}; {where}) and did not "
            "recover: the agent worked against a broken network. Rerun the task."
        )
    fam = "proxy_5xx" if (f.family == "proxy" or (f.via_proxy and f.status)) else f.family
    fam = {
        "http_5xx": "http_5xx",
        "http_429": "http_429",
        "tls": "tls_failure",
        "dns": "dns_failure",
        "reset": "connection_reset",
        "timeout": "network_timeout",
        "refused": "connection_refused",
        "unreachable": "network_unreachable",
        "fetch": "download_failed",
    }.get(fam, fam)
    quoted = f"{f.where}: {f.line}"
    if named.host and named.host not in f.line:
        quoted += f" (endpoint: {named.host})"
    # The first failure, then up to two more that read differently (each line once): enough to
    # show the failure repeated without pasting the log.
    more: list[str] = []
    for g in all_failures[1:]:
        if len(more) == 2:
            break
        if g.line != f.line and all(g.line not in m for m in more):
            more.append(f"{g.where}: {g.line}")
    proof = [
        Proof(
            "network_outside",
            g.where,
            g.line,
            f"endpoint: {g.host}" if g.host else "the tool's own endpoint",
        )
        for g in [f, *all_failures[1:]][:3]
    ]
    return Classification(
        "infra",
        f"{phase}_{fam}",
        phase,
        text,
        exception_line(ev) + [quoted, *more],
        named.host,
        proof,
    )
