"""Built-in detectors: failure families that need more than a pattern to be judged.

Each detector reads one trial's evidence (plus a little of the job around it: phase medians,
whether a proxy or model endpoint was configured) and returns a Classification or None. They
run after the rules.yaml rules of the first stage (Harbor's own environment and tmux errors)
and before the second stage (verifier timeouts, missing reward files). The order is the order
of DETECTORS: the first that explains the trial wins.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from audit import layout as L
from audit import model_endpoint as ME
from audit import network as N
from audit.evidence import Chunk, TrialEvidence
from audit.verdict import Classification, exception_line, short


@dataclass
class JobContext:
    """What the whole job says that one trial's verdict depends on."""

    phase_medians: dict[str, float] = field(default_factory=dict)
    proxy_configured: bool = False
    model_hosts: set[str] = field(default_factory=set)
    max_input_tokens: int | None = None
    job_interrupted: bool = False

    @classmethod
    def from_trials(
        cls, evidences: list[TrialEvidence], config_text: str | None, interrupted: bool = False
    ) -> JobContext:
        phases: dict[str, list[float]] = {}
        for ev in evidences:
            if ev.result is None:
                continue
            for phase, seconds in ev.result.phase_seconds().items():
                if seconds is not None and seconds > 0:
                    phases.setdefault(phase, []).append(seconds)
        medians = {p: statistics.median(v) for p, v in phases.items() if len(v) >= 5}
        text = config_text or ""
        proxy = bool(re.search(r'(?i)"(?:https?|all)_proxy"\s*:\s*"[^"]+"', text))
        hosts = {
            h
            for m in re.finditer(r'"api_base"\s*:\s*"([^"]+)"', text)
            if (h := N.host_in(m.group(1)))
        }
        m = re.search(r'"max_input_tokens"\s*:\s*(\d+)', text)
        return cls(medians, proxy, hosts, int(m.group(1)) if m else None, interrupted)


Detector = Callable[[TrialEvidence, JobContext], Classification | None]


def _exception_text(ev: TrialEvidence) -> str:
    return "\n".join(c.text for c in ev.source("exception"))


def _etype(ev: TrialEvidence) -> str | None:
    info = ev.result.exception_info if ev.result else None
    return info.exception_type if info else None


# --- model endpoint --------------------------------------------------------------------------
def model_endpoint(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """A model-client exception ended the trial before it was graded."""
    if ev.result is None or ev.result.reward is not None:
        return None
    if (_etype(ev) or "") in _HARBOR_TIMEOUTS:
        return None  # Harbor's own budget ran out: a model call in flight is not the cause
    text = _exception_text(ev)
    if not _raised_in_client(text):
        return None
    info = ev.result.exception_info
    message = f"{info.exception_type}: {info.exception_message or ''}" if info else ""
    tail = text.strip().splitlines()[-1] if text.strip() else ""
    failure = ME.classify(f"{message}\n{tail}", text)
    if failure is None:
        return None
    head = exception_line(ev)
    host = ", ".join(sorted(ctx.model_hosts)) or None
    where = f" ({host})" if host else ""
    if failure.kind == "context_overflow":
        limit, served = ctx.max_input_tokens, failure.served_context
        if limit and served and limit > served:
            return Classification(
                "infra",
                "model_context_misconfigured",
                "model",
                f"The job told the agent the model takes {limit} input tokens but the server"
                f"{where} serves {served}: the agent could not know to summarize in time. Set "
                "model_info.max_input_tokens to the server's context length and rerun.",
                head,
                host,
            )
        return Classification(
            "agent_error",
            "model_context_overflow",
            "model",
            "The agent let its prompt grow past the model's served context window (e.g. by "
            "feeding unbounded tool output back to the model) and the server rejected the "
            "request. Managing its context is the agent's job: this counts as its failure.",
            head,
            host,
        )
    if failure.kind == "unparseable_output":
        return Classification(
            "agent_error",
            "model_output_unparseable",
            "model",
            "The server could not parse what the model generated (malformed tool-call or "
            "channel markup) and returned an error for it: the content is the model's, not an "
            "outage of the endpoint.",
            head,
            host,
        )
    if failure.kind == "bad_request":
        return Classification(
            "agent_error",
            "agent_request_rejected",
            "model",
            f"The model endpoint{where} rejected the request the agent's harness built "
            f"({failure.status or 400}): a bug or a bad setting in the agent, not an outage.",
            head,
            host,
        )
    return Classification(
        "infra",
        f"model_endpoint_{failure.kind}",
        "model",
        f"{ME.KIND_TEXT[failure.kind].capitalize()}{where}; the trial ended before the model "
        "could finish and nothing was graded. Check the endpoint's logs at that time and rerun.",
        head,
        host,
    )


_HARBOR_TIMEOUTS = {
    "AgentTimeoutError",
    "VerifierTimeoutError",
    "AgentSetupTimeoutError",
    "EnvironmentStartTimeoutError",
}
_FRAME = re.compile(r'File "(?P<path>[^"]+)", line \d+, in (?P<func>\S+)')
_CLIENT_LIBS = re.compile(
    r"/(?:openai|litellm|anthropic|httpx|httpcore|aiohttp|requests|urllib3|"
    r"tenacity|google/genai)/"
)
_STDLIB = re.compile(r"/lib/python3\.\d+/(?!site-packages/)")
_HARBOR = re.compile(r"/harbor/(?:trial|environments|agents|verifier|orchestrators|llms|utils)/")


def _frames(text: str) -> list[str]:
    return [m.group("path") for m in _FRAME.finditer(text)]


def _innermost_owner(text: str) -> str | None:
    """Who raised: `client` (a model/HTTP client library), `harbor`, `agent` code, or None."""
    for path in reversed(_frames(text)):
        if _STDLIB.search(path):
            continue
        if _CLIENT_LIBS.search(path):
            return "client"
        if _HARBOR.search(path):
            return "harbor"
        return "agent"
    return None


def _raised_in_client(text: str) -> bool:
    owner = _innermost_owner(text)
    # Terminus-2's litellm errors come with a traceback through the client; an exception
    # without frames is judged by its name and message alone.
    return owner in ("client", None) or (owner == "harbor" and ME.from_client(text))


def agent_harness_crash(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """The agent's own code raised (not Harbor, not the model client): it crashed."""
    if ev.result is None or ev.result.reward is not None:
        return None
    etype = _etype(ev)
    if not etype or etype.endswith(("TimeoutError", "CancelledError")):
        return None
    text = _exception_text(ev)
    if _innermost_owner(text) != "agent":
        return None
    frame = next((p for p in reversed(_frames(text)) if not _STDLIB.search(p)), "")
    line = next((ln for ln in text.splitlines() if frame and frame in ln), "")
    evidence = exception_line(ev) + (
        [f"{ev.exception_source or L.TRIAL_EXCEPTION}: raised in {short(line)}"] if line else []
    )
    return Classification(
        "agent_error",
        "agent_harness_crash",
        "agent",
        f"The agent's own code raised {etype} (innermost frame in the agent, not in Harbor or "
        "the model client), so the run stopped before verification. A harness bug counts "
        "against the agent; fix the harness and rerun if you are measuring the model alone.",
        evidence,
    )


# --- the model's reply cut off by the serving side -------------------------------------------
def _tokens(step: dict, key: str) -> int | None:
    value = (step.get("metrics") or {}).get(key)
    return value if isinstance(value, int) else None


def model_reply_cut_off(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """The run ended on a model reply that carried no usage and no tool call."""
    if ev.result is None or _etype(ev) is not None:
        return None
    steps = ev.llm_steps()
    if not steps:
        return None
    last = steps[-1]
    prompt, completion = _tokens(last, "prompt_tokens"), _tokens(last, "completion_tokens")
    if prompt != 0 or not completion or last.get("tool_calls"):
        return None
    earlier = steps[:-1]
    if earlier and not any((_tokens(s, "prompt_tokens") or 0) > 0 for s in earlier):
        return None  # this endpoint never reports usage: a zero says nothing
    text = short((last.get("message") or "").replace("\n", " ")) or "(empty content)"
    return Classification(
        "infra",
        "model_reply_cut_off",
        "model",
        "The agent's last model call came back without a usage block (0 prompt tokens for a "
        "non-empty prompt) and without the tool call its text announced, and the run ended "
        "there: the serving side cut the response off. The agent never got to act on it; "
        "rerun the task.",
        exception_line(ev)
        + [
            f"{L.AGENT_TRAJECTORY} step {last.get('step_id')}: prompt_tokens "
            f"0, completion_tokens {completion}, no tool call: {text}"
        ],
    )


# --- the container died, ran out of memory or disk, or cannot run the task's binaries ------
_KILLED_RC = {"137"}
_OOM = re.compile(
    r"(?i)(?:out of memory: killed process|oom-?kill|OOMKilled|"
    r"memory cgroup out of memory|Cannot allocate memory)"
)
_DISK = re.compile(
    r"(?i)(?:no space left on device|ENOSPC|disk quota exceeded|"
    r"not enough free space|write error: No space)"
)
_EMULATION = re.compile(r"(?i)(?:rosetta error|Unimplemented syscall number)")


def _first(chunks: list[Chunk], pattern: re.Pattern[str]) -> str | None:
    for c in chunks:
        m = pattern.search(c.text)
        if m:
            line_no = c.text.count("\n", 0, m.start()) + 1
            start = c.text.rfind("\n", 0, m.start()) + 1
            end = c.text.find("\n", m.start())
            return f"{c.where(line_no)}: {short(c.text[start : end if end != -1 else None])}"
    return None


def container_died(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """An agent exec was SIGKILLed without any Harbor timeout and the verifier found nothing."""
    if ev.result is None or ev.result.reward is not None:
        return None
    etype = _etype(ev) or ""
    if "Timeout" in etype:
        return None
    killed = next((c for c in ev.source("agent_exit_code") if c.text.strip() in _KILLED_RC), None)
    if killed is None:
        return None
    verifier = (ev.text(L.VERIFIER_STDOUT) or "").strip()
    if verifier:
        return None
    oom = _first(ev.source("agent_output") + ev.source("trial_log"), _OOM)
    return Classification(
        "infra",
        "container_killed",
        "environment",
        "An agent command was killed with SIGKILL (exit 137) although no Harbor timeout fired, "
        "and the verifier then ran in an empty environment (no output, no reward): the "
        "container was killed under the trial (OOM killer, Docker or the host). Check the "
        "host's memory and `docker events`, then rerun.",
        exception_line(ev)
        + [f"{killed.file}: {killed.text.strip()}", f"{L.VERIFIER_STDOUT}: empty"]
        + ([oom] if oom else []),
    )


def out_of_memory(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """The OOM killer in Harbor's logs, the exception, or the agent's screen of an ungraded trial.

    A graded trial keeps its grade: the environment survived, and a solution that does not
    fit the task's memory is the agent's.
    """
    if ev.result is None or ev.result.reward is not None:
        return None
    hit = _first(ev.source("exception") + ev.source("trial_log") + ev.source("agent_output"), _OOM)
    if hit is None:
        return None
    return Classification(
        "infra",
        "out_of_memory",
        "environment",
        "The task container was killed for memory (OOM) and nothing was graded. Give the task "
        "the memory its task.toml asks for (memory_mb) or lower the trial concurrency.",
        exception_line(ev) + [hit],
    )


def disk_full(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """No space left on device where Harbor, the verifier or an ungraded agent wrote."""
    sources = ev.source("exception") + ev.source("trial_log") + ev.source("verifier_output")
    if ev.result is not None and ev.result.reward is None:
        sources += ev.source("agent_output")
    hit = _first(sources, _DISK)
    if hit is None or (
        ev.result is not None
        and ev.result.reward is not None
        and L.VERIFIER_STDOUT in hit
        and _tests_reported(ev)
    ):
        return None
    return Classification(
        "infra",
        "disk_full",
        "environment",
        "A write failed with 'No space left on device': the Docker data root or the job's "
        "disk filled up. Free space (old images, leftover volumes) and rerun.",
        exception_line(ev) + [hit],
    )


def emulation_unsupported(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """The host's CPU emulation (e.g. Rosetta under Docker Desktop) cannot run the task."""
    hit = _first(ev.source("agent_output") + ev.source("verifier_output"), _EMULATION)
    if hit is None:
        return None
    return Classification(
        "infra",
        "emulation_unsupported",
        "environment",
        "The host runs the amd64 task image under CPU emulation that does not implement what "
        "the task needs (an unimplemented syscall), so the task cannot work here whatever the "
        "agent does. Run the task on an amd64 host.",
        exception_line(ev) + [hit],
    )


# --- execs that hang -------------------------------------------------------------------------
_EXEC_TIMEOUT = re.compile(r"Command timed out after (\d+(?:\.\d+)?) seconds")
_TRIVIAL = re.compile(
    r"^\s*(?:ls|cat|echo|pwd|true|whoami|id|date|mkdir|cd|test|head|tail|wc|stat|which|"
    r"chmod|chown|touch|uname|env|printenv|clear|tmux (?:has-session|capture-pane))\b[^&|;]*$"
)
HANG_FACTOR = 10.0
HANG_MIN_SECONDS = 300.0


def exec_hang(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """A trivial container exec never returned, or a phase ran far beyond the job's median."""
    if ev.result is None:
        return None
    etype = _etype(ev) or ""
    graded = ev.result.reward is not None
    text = _exception_text(ev)
    m = _EXEC_TIMEOUT.search(text)
    if m and "AgentTimeout" not in etype and not graded:
        cmd = re.search(r"(?:command|cmd)[=:]\s*['\"]?([^'\"\n]+)", text)
        shown = f" (`{short(cmd.group(1))}`)" if cmd else ""
        return Classification(
            "infra",
            "container_exec_hung",
            "environment",
            f"A command Harbor ran in the container{shown} did not return within "
            f"{m.group(1)} s: the container or the Docker daemon hung. Rerun the task; if it "
            "repeats, check `docker info` and the daemon's load.",
            exception_line(ev),
        )
    if etype in ("AgentSetupTimeoutError", "EnvironmentStartTimeoutError") and not graded:
        phase = "agent_setup" if etype.startswith("AgentSetup") else "environment_setup"
        seconds = ev.result.phase_seconds().get(phase)
        median = ctx.phase_medians.get(phase)
        if seconds and median and seconds >= HANG_MIN_SECONDS and seconds > HANG_FACTOR * median:
            setup_tail = _last_line(ev.source("agent_setup_output"))
            evidence = (
                exception_line(ev)
                + [
                    f"{L.TRIAL_RESULT}: {phase} took {seconds:.0f} s, {seconds / median:.0f}x this "
                    f"job's median of {median:.0f} s"
                ]
                + ([setup_tail] if setup_tail else [])
            )
            what = (
                "the agent's own setup (its install script)"
                if setup_tail
                else "the container start"
                if phase == "environment_setup"
                else "agent setup"
            )
            return Classification(
                "infra",
                f"{phase}_hung",
                "agent_setup" if phase == "agent_setup" else "environment",
                f"{what.capitalize()} ran far beyond what it takes for the other trials of "
                "this job and was stopped by its timeout: it hung rather than worked. The "
                "model never ran; rerun the task.",
                evidence,
            )
    if "AgentTimeout" in etype:
        last = _last_command(ev)
        if last and _TRIVIAL.match(last[1].strip().splitlines()[-1] if last[1].strip() else ""):
            return Classification(
                "infra",
                "container_exec_hung",
                "agent",
                "The agent's last command was trivial and never returned before the agent "
                "timeout: the container's exec hung, not the agent's work.",
                exception_line(ev) + [f"{last[0]}: {short(last[1])} (no output, never returned)"],
            )
    return None


def _last_line(chunks: list[Chunk]) -> str | None:
    for c in reversed(chunks):
        lines = [(i, ln) for i, ln in enumerate(c.text.splitlines(), 1) if ln.strip()]
        if lines:
            i, ln = lines[-1]
            return f"{c.where(i)}: {short(ln)}"
    return None


def _last_command(ev: TrialEvidence) -> tuple[str, str] | None:
    """(where, command) of the agent's last command if it got no output back."""
    exchanges = ev.exchanges()
    commands = ev.source("agent_commands")
    if not commands:
        return None
    last = commands[-1]
    typed = [ln.strip() for ln in last.text.splitlines() if ln.strip()]

    def has_answer(text: str) -> bool:
        # Terminal agents see their own command echoed back: that is no answer. A new prompt
        # after it, or any other line, is.
        rest = [
            ln
            for ln in text.splitlines()
            if ln.strip()
            and ln.strip() != "New Terminal Output:"
            and not any(ln.rstrip().endswith(t) for t in typed)
        ]
        return bool(rest)

    if any(ex.command is last and ex.output and has_answer(ex.output.text) for ex in exchanges):
        return None
    return last.where(1), last.text


# --- network failures, with ownership --------------------------------------------------------
_TESTS_REPORTED = re.compile(
    r"(?m)^=+ .*\b\d+ (?:passed|failed|error|errors)\b.* in [\d.]+s|^\d+ (?:passed|failed)\b"
)


def _tests_reported(ev: TrialEvidence) -> bool:
    return bool(_TESTS_REPORTED.search(ev.text(L.VERIFIER_STDOUT) or ""))


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
    if ev.result is None or (ev.result.reward or 0) >= 1.0 or _tests_reported(ev):
        return None
    if "AgentTimeout" in (_etype(ev) or ""):
        return None  # the agent did not finish: that stands whatever the verifier met
    text = ev.text(L.VERIFIER_STDOUT) or ""
    found = N.failures_in(text, lambda n: f"{L.VERIFIER_STDOUT}:{n}")
    outside = [f for f in found if not N.is_loopback(f.host)]
    if not outside:
        return None
    return _network_verdict(ev, ctx, "verifier", outside[0], len(outside), outside)


AGENT_MIN_FAILURES = 2


def agent_network(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """The agent's requests to outside endpoints failed repeatedly and never recovered."""
    if ev.result is None or (ev.result.reward or 0) >= 1.0:
        return None
    agent_hosts = N.hosts_written_by_agent(
        [c.text for c in ev.source("agent_commands")], ev.written_by_agent()
    )
    # (failure, index of the exchange it came from; -1 for logs without one)
    failures: list[tuple[N.NetFailure, int]] = []
    # host -> index of the last exchange in which a request to it visibly succeeded
    seen_hosts_ok: dict[str, int] = {}
    exchanges = ev.exchanges()
    for index, ex in enumerate(exchanges):
        out = ex.output
        if out is None:
            continue
        context = N.host_in(ex.command.text) if ex.command else None
        found = N.failures_in(out.text, out.where, context_host=context)
        failures.extend((f, index) for f in found)
        if not found and N.SUCCESS.search(out.text):
            for h in {N.host_in(line) for line in out.text.splitlines() if N.SUCCESS.match(line)}:
                if h:
                    seen_hosts_ok[h] = index
    for c in ev.source("agent_output"):
        if c.file == L.AGENT_TRAJECTORY or "/command-" in c.file:
            continue  # already read with its command
        failures.extend((f, -1) for f in N.failures_in(c.text, c.where))
    outside = [
        f
        for f, index in failures
        if N.owner(f, agent_hosts) == "external"
        # The same endpoint answered later in this trial: the failure did not last.
        and not (f.host and seen_hosts_ok.get(f.host, -2) > index)
    ]
    if len(outside) < AGENT_MIN_FAILURES:
        return None
    return _network_verdict(ev, ctx, "agent", outside[0], len(outside), outside)


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
    return Classification(
        "infra", f"{phase}_{fam}", phase, text, exception_line(ev) + [quoted, *more], named.host
    )


_SETUP_FAILED = ("AgentSetupTimeoutError", "AgentSetupError", "AgentInstallError")


def agent_setup_failed(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """The agent's own setup (not Harbor's tmux install) timed out or failed: it never ran."""
    if ev.result is None or ev.result.reward is not None:
        return None
    etype = _etype(ev) or ""
    text = _exception_text(ev)
    if (
        etype not in _SETUP_FAILED
        and "in _setup_agent" not in text
        and "setup timed out" not in text
    ):
        return None
    setup = ev.source("agent_setup_output")
    failures = [f for c in setup for f in N.failures_in(c.text, c.where)]
    outside = [f for f in failures if N.owner(f, set()) == "external"]
    if outside:
        return _network_verdict(ev, ctx, "agent_setup", outside[0], len(outside), outside)
    tail = _last_line(setup)
    agent = (ev.result.agent_info.name if ev.result.agent_info else None) or ""
    if not setup and agent.startswith("terminus"):
        # Terminus-2's setup is Harbor installing tmux and asciinema in the task container.
        return Classification(
            "infra",
            "tool_install_timeout",
            "agent_setup",
            "Harbor's setup of terminus-2 (installing tmux/asciinema in the task container) did "
            "not finish, so the agent never ran. Mount the read-only tool bundle into every "
            "task container (ToolBundle + --extra-docker-compose) instead of installing per "
            "trial.",
            exception_line(ev),
        )
    return Classification(
        "infra",
        "agent_setup_failed",
        "agent_setup",
        "The agent's own setup (its install script, before the model ran) did not finish"
        + (f"; its last output is quoted from {L.AGENT_SETUP_STDOUT}" if tail else "")
        + ". The model was never asked anything: rerun the task after fixing the agent's "
        "installation (pre-install it in the image if it downloads at every trial).",
        exception_line(ev) + ([tail] if tail else []),
    )


DETECTORS: list[Detector] = [
    model_endpoint,
    agent_harness_crash,
    out_of_memory,
    container_died,
    disk_full,
    emulation_unsupported,
    exec_hang,
    agent_setup_failed,
    model_reply_cut_off,
    verifier_network,
    agent_network,
]
