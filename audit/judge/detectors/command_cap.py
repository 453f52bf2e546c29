"""A command that never returned: the agent's own wait, or a hung container?

Harbor's docker exec raises "Command timed out after N seconds" when a command outlives the
cap its caller set (reference §5.3); an agent's own harness meets its per-command cap the same
way, and Terminus-2, Claude Code, OpenHands and mini-swe-agent note it in their logs. Such a
timeout proves nothing by itself (issue #20). What decides is the command:

- Harbor's own command (a tmux call, a verifier upload) or one of the agent's that cannot take
  long (`ls`, `echo`, `cat FILE`, or one it bounded with `timeout` below the cap) that never
  returned: the container or the daemon hung. Infra, the command quoted as `environment_event`
  proof. So is an exec that never started or a container gone ("is not running", "No such
  container", "Cannot connect to the Docker daemon").
- A command of the agent's own that waits by design (audit/judge/commands.py: a blocking read, a
  foreground server, `tail -f`, an interactive program, a `sleep`, a long install or build) or
  that is simply its own program running long: the agent's failure.
- No way to tell which command it was: insufficient_evidence, never infra.

The same reading applies when the agent timeout ends a run whose last command never answered:
a trivial command then proves a hang only if the shell was free to run it (the command before
it had answered and was not one that waits).
"""

from __future__ import annotations

import re

from audit.judge import commands as C
from audit.judge.context import JobContext
from audit.judge.detectors.common import etype, exception_text, frame_lines, owner_of, proof_at
from audit.judge.detectors.environment import UNBOUNDED_BUILD
from audit.judge.verdict import Classification, Proof, exception_line, excuse, short
from audit.read import caps, readings
from audit.read import chain as CH
from audit.read.chain import layer as C_layer
from audit.read.evidence import Chunk, TrialEvidence
from audit.read.models import parse_time

_ENV_GONE = re.compile(
    r"(?i)(?:container \S+ is not running|is not running|No such container|"
    r"Cannot connect to the Docker daemon|cannot exec in a stopped (?:state|container)|"
    r"container .{0,40}is restarting|service \"?main\"? is not running|"
    r"Error response from daemon: (?:No such|Container \S+ is not running))"
)
_NAMED = re.compile(r"(?:command|cmd)[=:]\s*['\"]?([^'\"\n]+)")


def command_cap(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    if ev.result is None:
        return None
    kind = etype(ev) or ""
    graded = ev.result.reward is not None
    text = exception_text(ev)
    cap = caps.cap_in(text)
    if cap is not None and "AgentTimeout" not in kind and not graded:
        if readings.on("cap_in_model_layer") and _through_model_layer(ev):
            return _model_call_capped(ev, cap)
        return _crashed_on_cap(ev, text, cap)
    if "AgentTimeout" in kind:
        return _last_command_hung(ev)
    if not graded and readings.on("agent_cap_on_exec"):
        return _agent_cap_on_exec(ev)
    return None


def _through_model_layer(ev: TrialEvidence) -> bool:
    """The traceback of the cap runs through Harbor's model layer (harbor/llms/): the command
    that ran past it was a model call the harness made, not an exec into the sandbox."""
    agent = ev.agent()
    return any(C_layer(f.path, agent) == "model_client" for r in ev.chain() for f in r.frames)


def _model_call_capped(ev: TrialEvidence, cap: caps.CapHit) -> Classification:
    return Classification(
        "insufficient_evidence",
        "model_call_timed_out",
        "model",
        f"A model call ran past its limit ({_secs(cap.seconds)}): the traceback runs through "
        "Harbor's model layer, so the command cut was the call to the model, not an exec into "
        "the sandbox. A call that produced nothing is the endpoint's, one cut while the model "
        "generated under the agent's own limit is the model's; nothing here shows which.",
        exception_line(ev),
    )


def _agent_cap_on_exec(ev: TrialEvidence) -> Classification | None:
    """The agent's own code set a limit on an exec into the sandbox and it ran out (the chain: a
    timeout raised under the agent's own frame, the exec's coroutine in Harbor's environment
    layer). Whose exec it was decides, as the command does under any cap (RULES.md §4.1)."""
    found = _capped_exec(ev)
    if found is None:
        return None
    timeout, exec_block = found
    agent = ev.agent()
    frames = exec_block.frames
    first_env = next(i for i, f in enumerate(frames) if C_layer(f.path, agent) == "environment")
    callers = [f for f in frames[:first_env] if C_layer(f.path, agent) in ("agent", "harbor")]
    where = ev.exception_source or "result.json exception_info"
    quote = short(str(frames[first_env]))
    if callers and C_layer(callers[-1].path, agent) == "harbor":
        # Harbor's own terminal driver (a tmux call) made the exec: one of Harbor's own.
        return _harbors_exec_capped(ev, callers[-1], where, quote)
    caller = callers[-1].func if callers else _awaiting(ev, _site(timeout, agent))
    return Classification(
        "agent_error",
        "agent_command_over_cap",
        "agent",
        f"The agent's own code (in {caller}) ran an exec into the sandbox under a limit it set "
        "itself, and the exec ran past it: the agent harness's own command, carrying out the "
        "model's tool call or its own housekeeping. Nothing shows the sandbox failed (no "
        "trivial command left waiting, no container gone): waiting on it was the agent's.",
        exception_line(ev) + [f"{where}: {quote}"],
    )


def _capped_exec(ev: TrialEvidence) -> tuple[CH.Raised, CH.Raised] | None:
    """(the timeout the agent's own code raised, the block whose frames run the exec)."""
    agent = ev.agent()
    chain = ev.chain()
    for i, raised in enumerate(chain):
        if raised.name != "TimeoutError":
            continue
        owners = [C_layer(f.path, agent) for f in raised.frames]
        named = [o for o in owners if o not in ("library", "stdlib")]
        if not named or named[-1] != "agent":
            continue  # the limit was not the agent's own
        for block in (*chain[:i], raised):
            if any(C_layer(f.path, agent) == "environment" for f in block.frames):
                return raised, block
    return None


def _awaiting(ev: TrialEvidence, site: str) -> str:
    """The agent's frame that awaited the capped exec, from the chain's last block (the frame
    above the one that enforced the limit)."""
    agent = ev.agent()
    chain = ev.chain()
    own = [f.func for f in chain[-1].frames if C_layer(f.path, agent) == "agent"] if chain else []
    before = [func for func in own if func != site]
    return before[-1] if before else site


def _site(raised: CH.Raised, agent: CH.Agent) -> str:
    own = [f for f in raised.frames if C_layer(f.path, agent) == "agent"]
    return own[-1].func if own else "?"


def _harbors_exec_capped(ev: TrialEvidence, caller, where: str, quote: str):
    """Harbor's own exec (its tmux driver) did not return within the agent's limit: the sandbox
    hung, unless the agent's own unbounded build was pressing on its memory then."""
    build = _unbounded_build_running(ev)
    if build is not None:
        return Classification(
            "insufficient_evidence",
            "unproven_container_exec_hung",
            "environment",
            f"Harbor's own exec (in {caller.func}) did not return within the agent's limit, but "
            "the agent's own build with no bound on its parallelism was running then (quoted): "
            "a sandbox stalled on its own and one exhausted by the agent's build end the same "
            "way.",
            exception_line(ev) + [f"{where}: {quote}", f"{build[0]}: {short(build[1])}"],
        )
    return _hung(
        ev,
        [Proof("environment_event", where, quote,
               f"Harbor's own exec (in {caller.func}) did not return within the agent's limit "
               "(a TimeoutError under the agent's own frame)")],
        f"a command Harbor ran itself (in {caller.func})",
        caps.CapHit(None, quote, None),
    )


def _unbounded_build_running(ev: TrialEvidence) -> tuple[str, str] | None:
    """An unbounded parallel build among the agent's recent commands (background ones too)."""
    actions = [a for log in ev.agent_logs() for a in log.actions][-_RECENT:]
    for action in reversed(actions):
        if UNBOUNDED_BUILD.search(action.command):
            return action.where, C.first_line(action.command)
    return None


_RECENT = 10


def _crashed_on_cap(ev: TrialEvidence, text: str, cap: caps.CapHit) -> Classification:
    head = exception_line(ev)
    gone = proof_at(
        "environment_event",
        ev.source("exception") + ev.source("trial_log"),
        _ENV_GONE,
        "the container or the daemon was gone",
    )
    if gone is not None:
        return _hung(ev, [gone], "the container or the Docker daemon was gone", cap)
    caller = _exec_caller(ev, text)
    if (
        caller is not None
        and owner_of(ev, caller[0]) == "harbor"
        and "/agents/installed/" not in caller[0]
    ):
        return _hung(
            ev,
            [
                Proof(
                    "environment_event",
                    ev.exception_source or "result.json exception_info",
                    short(caller[2] or cap.quote),
                    f"Harbor's own exec (in {caller[1]}) did not return within "
                    f"{_secs(cap.seconds)}: no command of the agent's",
                )
            ],
            f"a command Harbor ran itself (in {caller[1]})",
            cap,
        )
    agent = (ev.result.agent_info.name if ev.result and ev.result.agent_info else None) or ""
    if caller is None and agent.startswith("terminus"):
        # Terminus-2 drives the container only through tmux calls Harbor makes, which return
        # at once (its keystrokes run in the pane, reference §5.3): the exec that hung was
        # Harbor's, whatever the agent had typed.
        return _hung(
            ev,
            [
                Proof(
                    "environment_event",
                    ev.exception_source or "result.json exception_info",
                    short(cap.quote),
                    "an exec of Harbor's own for terminus-2 (tmux) did not return",
                )
            ],
            "a tmux call Harbor made for terminus-2",
            cap,
        )
    installed = _installed_run(ev, caller)
    own = None if installed else _harness_own_exec(ev, caller, cap)
    if own is not None:
        return own
    where, command = installed or _which_command(ev, text, cap)
    if command is None:
        return Classification(
            "insufficient_evidence",
            "command_cap_unknown_command",
            "agent",
            f"A command ran past the per-command cap ({_secs(cap.seconds)}) and the run ended "
            "there, but no log of the agent's says which command it was: neither a hung "
            "container nor the agent's own wait can be shown.",
            head,
        )
    verdict = C.kind_of(command, cap.seconds)
    if verdict.kind in ("trivial", "bounded"):
        return _hung(
            ev,
            [
                Proof(
                    "environment_event",
                    where,
                    short(C.first_line(command)),
                    f"this command {C.KIND_TEXT[verdict.kind]}, yet it did not return within "
                    f"{_secs(cap.seconds)}",
                )
            ],
            f"the agent's command `{short(verdict.segment)}`, which cannot take long,",
            cap,
        )
    return _agents_wait(ev, where, command, verdict, cap.seconds, head)


def _hung(ev, proof: list[Proof], what: str, cap: caps.CapHit) -> Classification:
    return excuse(
        "infra",
        "container_exec_hung",
        "environment",
        f"{what[0].upper() + what[1:]} did not return within {_secs(cap.seconds)}: the "
        "container or the Docker daemon hung. Rerun the task; if it repeats, check "
        "`docker info` and the daemon's load.",
        proof,
        lead=exception_line(ev),
    )


def _agents_wait(ev, where, command, verdict: C.CommandKind, seconds, head) -> Classification:
    return Classification(
        "agent_error",
        "agent_command_over_cap",
        "agent",
        f"The agent's own command `{short(verdict.segment)}` {C.KIND_TEXT[verdict.kind]}; it "
        f"ran past the harness's per-command cap ({_secs(seconds)}) and the run ended there. "
        "Nothing shows the environment failed: waiting on it was the agent's choice.",
        head + [f"{where}: {short(C.first_line(command))}"],
    )


# A bound a harness sets on an exec of its own (a check, a listing), not on the model's commands:
# such an exec that does not return within it shows a container that no longer answers.
OWN_EXEC_MAX_CAP = 60.0


def _harness_own_exec(
    ev: TrialEvidence, caller: tuple[str, str, str] | None, cap: caps.CapHit
) -> Classification | None:
    """The exec that ran past its cap was the harness's own, not a command the model sent:
    every command of the model's in the agent's log was answered, and the harness bounded
    this exec itself at OWN_EXEC_MAX_CAP or less (the call site is quoted)."""
    if caller is None or cap.seconds is None or cap.seconds > OWN_EXEC_MAX_CAP:
        return None
    actions = [a for log in ev.agent_logs() for a in log.actions]
    if not actions or any(a.output is None for a in actions):
        return None
    where = ev.exception_source or "result.json exception_info"
    return _hung(
        ev,
        [
            Proof(
                "environment_event",
                where,
                short(caller[2] or cap.quote),
                f"an exec the harness bounded itself at {_secs(cap.seconds)} (in {caller[1]}) "
                "did not return; every command the model sent had been answered",
            )
        ],
        f"an exec of the agent harness's own (bounded at {_secs(cap.seconds)}, in {caller[1]})",
        cap,
    )


def _secs(seconds: float | None) -> str:
    return f"{seconds:g} s" if seconds is not None else "its cap"


def _exec_caller(ev: TrialEvidence, text: str) -> tuple[str, str, str] | None:
    """The frame that called Harbor's environment exec (who ran the command)."""
    frames = [f for f in frame_lines(text) if owner_of(ev, f[0]) is not None]
    agent = ev.agent()
    for i, (path, _, _) in enumerate(frames):
        # The first environment frame a caller entered (a chained block may start inside it).
        if i > 0 and C_layer(path, agent) == "environment":
            if C_layer(frames[i - 1][0], agent) != "environment":
                return frames[i - 1]
    return None


_COMMAND_DIR = re.compile(r"^command-(\d+)/command\.txt$")


def _installed_run(
    ev: TrialEvidence, caller: tuple[str, str, str] | None
) -> tuple[str, str] | None:
    """An installed agent (Claude Code, OpenHands, mini-swe-agent...) runs inside the container
    as commands Harbor execs and records in agent/command-N/; the one that outran the cap is the
    last without a return code: the agent's own CLI run, not a tool call inside it."""
    numbered = sorted(
        (int(m.group(1)), f) for f in ev.agent_files() if (m := _COMMAND_DIR.match(f))
    )
    if not numbered and not (caller and "/agents/installed/" in caller[0]):
        return None
    for n, rel in reversed(numbered):
        if f"command-{n}/return-code.txt" not in ev.agent_files():
            text = ev.text(f"agent/{rel}") or ""
            return f"agent/{rel}", text
    return None


def _which_command(ev: TrialEvidence, text: str, cap: caps.CapHit) -> tuple[str, str | None]:
    where = ev.exception_source or "result.json exception_info"
    if cap.command:
        return where, cap.command
    named = _NAMED.search(text)
    if named:
        return where, named.group(1)
    for log in ev.agent_logs():
        actions = log.actions
        if actions:
            waiting = [a for a in actions if a.output is None]
            if not waiting and log.source == "api-dumps":
                return where, None  # every command the model sent was answered: not one of them
            waiting = waiting or actions
            return waiting[-1].where, waiting[-1].command
    last = _last_unanswered(ev)
    return (last[0].where(1), last[0].text) if last else (where, None)


# --- the agent timeout ended a run whose last command never answered -----------------------
# How long the last command must have waited before the agent timeout for a trivial one to show
# a hang: a command sent a moment before the timeout is merely cut off by it.
HUNG_WAIT_SECONDS = 60.0


def _last_command_hung(ev: TrialEvidence) -> Classification | None:
    found = _last_unanswered(ev)
    if found is None or not _waited(ev, found[0]):
        return None
    last, before = found
    lines = [ln for ln in last.text.strip().splitlines() if ln.strip()]
    if not lines or C.kind_of(lines[-1]).kind != "trivial":
        return None
    if before is not None:
        previous = C.kind_of(before.text)
        if previous.kind in C.NEVER_ENDS or not _answered(ev, before):
            return None  # typed behind a command still running: it queued, it did not hang
        if _in_a_terminal(ev) and not _returned_to_prompt(ev, before):
            # In a terminal pane every keystroke queues behind what still runs: only a prompt
            # after the previous command's output shows the shell was free.
            return None
    return excuse(
        "infra",
        "container_exec_hung",
        "agent",
        "The agent's last command was trivial and never returned before the agent timeout, "
        "and the command before it had finished: the container's exec hung, not the agent's "
        "work.",
        [
            Proof(
                "environment_event",
                last.where(1),
                short(lines[-1]),
                "cannot take long, never returned",
            )
        ],
        lead=exception_line(ev),
    )


def _waited(ev: TrialEvidence, last: Chunk) -> bool:
    """The log shows when the last command was sent, and the run ended HUNG_WAIT_SECONDS or
    more after it (without the time nothing shows it waited at all)."""
    span = ev.result.agent_execution if ev.result else None
    ended = parse_time(span.finished_at if span else None)
    text = last.text.strip()
    for log in ev.agent_logs():
        for action in reversed(log.actions):
            if action.command.strip() != text:
                continue
            sent = parse_time(action.started)
            if sent is None or ended is None or (sent.tzinfo is None) != (ended.tzinfo is None):
                return False
            return (ended - sent).total_seconds() >= HUNG_WAIT_SECONDS
    return False


_PROMPT = re.compile(r"^(?:\(\S+\)\s*)?(?:\S+@\S+:\S*?|[\w~/.-]*?)\s?[#$]$")


def _in_a_terminal(ev: TrialEvidence) -> bool:
    """The agent types into one terminal (Terminus-2's tmux pane), not one exec a command."""
    agent = (ev.result.agent_info.name if ev.result and ev.result.agent_info else None) or ""
    return agent.startswith("terminus") or any(
        "Terminal Output" in c.text[:200] or "Terminal Screen" in c.text[:200]
        for c in ev.source("agent_output")[:3]
    )


def _returned_to_prompt(ev: TrialEvidence, command: Chunk) -> bool:
    """The output after `command` ends on a shell prompt: the command had finished."""
    for ex in ev.exchanges():
        if ex.command is command and ex.output:
            lines = [ln.rstrip() for ln in ex.output.text.splitlines() if ln.strip()]
            return bool(lines) and bool(_PROMPT.match(lines[-1]))
    return False


def _answered(ev: TrialEvidence, command: Chunk) -> bool:
    typed = [ln.strip() for ln in command.text.splitlines() if ln.strip()]

    def has_answer(text: str) -> bool:
        # Terminal agents see their own command echoed back: that is no answer. A new prompt
        # after it, or any other line, is.
        return any(
            ln.strip()
            and ln.strip() != "New Terminal Output:"
            and not any(ln.rstrip().endswith(t) for t in typed)
            for ln in text.splitlines()
        )

    return any(
        ex.command is command
        and ex.output
        and has_answer(ex.output.text)
        and not caps.cap_in(ex.output.text)
        for ex in ev.exchanges()
    )


def _last_unanswered(ev: TrialEvidence) -> tuple[Chunk, Chunk | None] | None:
    """(the agent's last command, the one before it) if the last got no answer back."""
    commands = ev.source("agent_commands")
    if not commands:
        return None
    last = commands[-1]
    if _answered(ev, last):
        return None
    return last, commands[-2] if len(commands) > 1 else None
