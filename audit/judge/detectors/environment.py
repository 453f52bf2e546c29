"""The container died, ran out of memory or disk, or the host cannot run the task's binaries.

Each is infra only with the line that shows it: the SIGKILL (exit 137) no Harbor timeout
explains and the empty verifier after it, the OOM killer's message, ENOSPC, the emulator's
own error. A graded trial keeps its grade: the environment survived to grade it.
"""

from __future__ import annotations

import re

from audit.judge import commands as CMD
from audit.judge.context import JobContext
from audit.judge.detectors.common import etype, proof_at, tests_reported
from audit.judge.verdict import (
    Classification,
    Proof,
    exception_line,
    exception_where,
    excuse,
    short,
)
from audit.read import layout as L
from audit.read import readings
from audit.read.evidence import TrialEvidence
from audit.read.models import parse_time
from audit.read.status import status_in

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



def out_of_memory(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """The OOM killer in Harbor's logs, the exception, or the agent's screen of an ungraded
    trial. A graded trial keeps its grade: a solution that does not fit the task's memory is
    the agent's."""
    if ev.result is None or ev.result.reward is not None:
        return None
    hit = proof_at(
        "environment_event",
        ev.source("exception") + ev.source("trial_log") + ev.source("agent_output"),
        _OOM,
        "the kernel killed a process for memory",
    )
    if hit is None:
        return None
    own = _own_build(ev, ctx)
    if own is not None:
        return own
    return excuse(
        "infra",
        "out_of_memory",
        "environment",
        "The task container was killed for memory (OOM) and nothing was graded. Give the task "
        "the memory its task.toml asks for (memory_mb) or lower the trial concurrency.",
        [hit],
        lead=exception_line(ev),
    )


# A build whose parallelism has no bound (`make -j`, `-j$(nproc)` on a host's many cores, a
# two-digit -j): the usual way an agent draws the OOM killer onto its own container.
UNBOUNDED_BUILD = re.compile(
    r"(?:\bmake|\bninja|cmake\s+--build|\bcargo\s+build)\b[^\n;&|]*?"
    r"(?:-j\s*\$\(nproc\)|-j\s*`nproc`|-j(?:\s*$|\s+-)|-j\s*\d{2,}|--jobs(?!\s*=?\s*\d))",
    re.MULTILINE,
)


def _own_build(ev: TrialEvidence, ctx: JobContext, kill: str = "") -> Classification | None:
    """The agent's last command was a build with no bound on its parallelism: the memory that
    drew the kill was most likely its own, so the kill proves no outside cause."""
    commands = ev.source("agent_commands")
    last = commands[-1] if commands else None
    if last is None or not UNBOUNDED_BUILD.search(last.text):
        return None
    return Classification(
        "agent_error",
        "agent_build_memory_pressure",
        "agent",
        "The agent's process was killed (SIGKILL or the OOM killer) while its own build ran "
        "with no bound on its parallelism: the memory that drew the kill was most likely the "
        "agent's own. The kill is no proof of an outside cause.",
        exception_line(ev)
        + ([kill] if kill else [])
        + [f"{last.where(1)}: {last.text.strip()[:200]}"],
    )


def container_died(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """An agent exec was SIGKILLed without any Harbor timeout and the verifier found nothing."""
    if ev.result is None or ev.result.reward is not None:
        return None
    if "Timeout" in (etype(ev) or ""):
        return None
    killed = next((c for c in ev.source("agent_exit_code") if c.text.strip() in _KILLED_RC), None)
    if killed is None:
        return None
    if (ev.text(L.VERIFIER_STDOUT) or "").strip():
        return None
    own = _own_build(ev, ctx, f"{killed.file}: {killed.text.strip()}")
    if own is not None:
        return own
    oom = proof_at("environment_event", ev.source("agent_output") + ev.source("trial_log"), _OOM)
    return excuse(
        "infra",
        "container_killed",
        "environment",
        "An agent command was killed with SIGKILL (exit 137) although no Harbor timeout fired, "
        "and the verifier then ran in an empty environment (no output, no reward): the "
        "container was killed under the trial (OOM killer, Docker or the host). Check the "
        "host's memory and `docker events`, then rerun.",
        [
            Proof(
                "environment_event",
                killed.file,
                killed.text.strip(),
                "SIGKILL, and no Harbor timeout explains it",
            )
        ]
        + ([oom] if oom else []),
        lead=exception_line(ev),
        more=[f"{L.VERIFIER_STDOUT}: empty"],
    )


# bash's report of a child it lost to SIGKILL (`line 15:   241 Killed   uvx ... pytest ...`).
_SHELL_KILLED = re.compile(r"(?m)^\S+: line \d+: +\d+ Killed\s+\S.*$")
# Harbor's own log of a memory override (`Overriding memory for task T: 4096 MB -> 512 MB`).
_MEMORY_OVERRIDE = re.compile(r"(?P<asked>\d+) ?MB -> (?P<given>\d+) ?MB")


def verifier_out_of_memory(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """The verifier's tests were SIGKILLed before they reported, in a container the job gave
    less memory than the task asks (the operator's launch configuration, outside the system
    under test). With the memory the task asks, a kill is the solution's own doing."""
    if ev.result is None or (ev.result.reward or 0) >= 1.0 or tests_reported(ev):
        return None
    killed = proof_at(
        "environment_event",
        ev.source("verifier_output"),
        _SHELL_KILLED,
        "the verifier's tests were killed (SIGKILL)",
    )
    if killed is None:
        return None
    for chunk in ev.source("trial_log"):
        for n, line in enumerate(chunk.text.splitlines(), 1):
            m = _MEMORY_OVERRIDE.search(line)
            if m and "memory" in line.lower() and int(m["given"]) < int(m["asked"]):
                shrunk = Proof(
                    "environment_event",
                    chunk.where(n),
                    short(line),
                    f"the job gave the container {m['given']} MB of the {m['asked']} MB the task "
                    "asks",
                )
                return excuse(
                    "infra",
                    "verifier_out_of_memory",
                    "verifier",
                    "The verifier's tests were killed (SIGKILL) before any result in a container "
                    f"the job shrank to {m['given']} MB, below the {m['asked']} MB the task asks: "
                    "the launch configuration, not the solution. Give the task its memory and "
                    "rerun.",
                    [killed, shrunk],
                    lead=exception_line(ev),
                )
    return None


def disk_full(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """No space left on device where Harbor, the verifier or an ungraded agent wrote. Like a
    kill for memory, no proof while the agent's own install, download or build was running:
    the space was most likely its own."""
    sources = ev.source("exception") + ev.source("trial_log") + ev.source("verifier_output")
    if ev.result is not None and ev.result.reward is None:
        sources += ev.source("agent_output")
    hit = proof_at("environment_event", sources, _DISK, "the disk is full")
    if hit is None or (
        ev.result is not None
        and ev.result.reward is not None
        and L.VERIFIER_STDOUT in hit.where
        and tests_reported(ev)
    ):
        return None
    own = _own_work_running(ev) if readings.on("disk_full_own_work") else None
    if own is not None:
        return Classification(
            "agent_error",
            "agent_own_work_filled_disk",
            "agent",
            "The disk filled while the agent's own install, download or build was running (its "
            "command quoted): the space was most likely its own, so the full disk proves no "
            "outside cause.",
            exception_line(ev) + [f"{hit.where}: {hit.quote}", f"{own[0]}: {short(own[1])}"],
        )
    return excuse(
        "infra",
        "disk_full",
        "environment",
        "A write failed with 'No space left on device': the Docker data root or the job's "
        "disk filled up. Free space (old images, leftover volumes) and rerun.",
        [hit],
        lead=exception_line(ev),
    )


def emulation_unsupported(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """The host's CPU emulation (e.g. Rosetta under Docker Desktop) cannot run the task."""
    hit = proof_at(
        "host_platform",
        ev.source("agent_output") + ev.source("verifier_output"),
        _EMULATION,
        "the emulator does not implement what the binary needs",
    )
    if hit is None:
        return None
    return excuse(
        "infra",
        "emulation_unsupported",
        "environment",
        "The host runs the amd64 task image under CPU emulation that does not implement what "
        "the task needs (an unimplemented syscall), so the task cannot work here whatever the "
        "agent does. Run the task on an amd64 host.",
        [hit],
        lead=exception_line(ev),
    )


# How long before the run ended a command of the agent's counts as still running, when the log
# keeps no sign of its end: installs and builds of the size that fill a disk take minutes.
RUNNING_WINDOW = 600.0
_RECENT_COMMANDS = 5


def _own_work_running(ev: TrialEvidence) -> tuple[str, str] | None:
    """(where, command) of an install, download or build of the agent's own among its last
    commands (sent within RUNNING_WINDOW of the run's end, when the log keeps the times; in the
    background too)."""
    span = ev.result.agent_execution if ev.result else None
    ended = parse_time(span.finished_at if span else None)
    actions = [a for log in ev.agent_logs() for a in log.actions]
    for action in reversed(actions[-_RECENT_COMMANDS:]):
        sent = parse_time(action.started)
        if sent is not None and ended is not None and (sent.tzinfo is None) == (
            ended.tzinfo is None
        ) and (ended - sent).total_seconds() > RUNNING_WINDOW:
            continue
        if CMD.installs_or_builds(action.command):
            return action.where, CMD.first_line(action.command)
    return None


def sandbox_provider_failed(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """A sandbox provider answered an exec with a 5xx status page (HTML or JSON), raised below
    Harbor's environment layer: the sandbox failing, outside the system under test. Without a
    status its words prove nothing (its client's bare error says nothing of whose fault)."""
    if not readings.on("sandbox_provider_5xx"):
        return None
    if ev.result is None or ev.result.reward is not None:
        return None
    found = ev.origin()
    if found is None or found.layer != "environment":
        return None
    status = status_in(found.root.message)
    if status is None or status < 500:
        return None
    line = next(
        (ln.strip() for ln in found.root.message.splitlines() if status_in(ln) == status),
        found.root.text,
    )
    return excuse(
        "infra",
        "sandbox_provider_5xx",
        "environment",
        f"The sandbox provider answered Harbor's exec with a {status} (its status page quoted), "
        "raised below Harbor's environment layer: the sandbox failed under the trial, outside "
        "the model and its harness. Rerun the task.",
        [
            Proof(
                "environment_event",
                exception_where(ev),
                short(line),
                f"the sandbox provider's {status}, raised below Harbor's environment layer",
            )
        ],
        lead=exception_line(ev),
    )
