"""Failures before the model was asked anything: the agent's setup, the environment's start.

Whatever happened there, the model did not fail: the proof is the exception raised in the
setup phase (`setup_failed`), with the setup's own last output or failed download quoted.
Harbor's tmux install for Terminus-2 is told apart from an installed agent's own install
script, because only the first is fixed by the tool bundle.
"""

from __future__ import annotations

import re

from audit.judge import network as N
from audit.judge.context import JobContext
from audit.judge.detectors.common import etype, exception_text, last_line, proof_at
from audit.judge.detectors.network_failures import _network_verdict
from audit.judge.verdict import (
    Classification,
    Proof,
    exception_line,
    exception_quote,
    exception_where,
    excuse,
    short,
)
from audit.read import chain as C
from audit.read import layout as L
from audit.read import readings
from audit.read.evidence import Chunk, TrialEvidence

HANG_FACTOR = 10.0
HANG_MIN_SECONDS = 300.0
_SETUP_FAILED = ("AgentSetupTimeoutError", "AgentSetupError", "AgentInstallError")



# The loader's, the kernel's and the installers' own words for software that cannot run on this
# system at all (not a download that failed: those are network failures, read first).
_CANNOT_RUN = re.compile(
    r"(?i)(?:version [`']GLIBC(?:XX)?_[\d.]+' not found|exec format error|"
    r"cannot execute binary file|error while loading shared libraries|"
    r"Unsupported (?:platform|architecture|engine)|EBADENGINE|requires a different Python|"
    r"requires Python [<>=]|is not supported on this (?:platform|system)|"
    r"No matching distribution found for|glibc[^\n]{0,40}too old|"
    r"cannot open shared object file)"
)


def _raised_in_setup(ev: TrialEvidence) -> Proof:
    return Proof(
        "setup_failed",
        exception_where(ev),
        exception_quote(ev),
        "raised in setup, before the model was asked anything",
    )


def setup_hung(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """A setup phase ran far beyond the job's median and was stopped by its timeout."""
    if ev.result is None or ev.result.reward is not None:
        return None
    kind = etype(ev) or ""
    if kind not in ("AgentSetupTimeoutError", "EnvironmentStartTimeoutError"):
        return None
    phase = "agent_setup" if kind.startswith("AgentSetup") else "environment_setup"
    seconds = ev.result.phase_seconds().get(phase)
    median = ctx.phase_medians.get(phase)
    if not (seconds and median and seconds >= HANG_MIN_SECONDS and seconds > HANG_FACTOR * median):
        return None
    tail = last_line(ev.source("agent_setup_output"))
    what = (
        "the agent's own setup (its install script)"
        if tail
        else "the container start"
        if phase == "environment_setup"
        else "agent setup"
    )
    return excuse(
        "infra",
        f"{phase}_hung",
        "agent_setup" if phase == "agent_setup" else "environment",
        f"{what[0].upper() + what[1:]} ran far beyond what it takes for the other trials of "
        "this job and was stopped by its timeout: it hung rather than worked. The model never "
        "ran; rerun the task.",
        [_raised_in_setup(ev)],
        lead=exception_line(ev),
        more=[
            f"{L.TRIAL_RESULT}: {phase} took {seconds:.0f} s, {seconds / median:.0f}x this "
            f"job's median of {median:.0f} s"
        ]
        + ([f"{tail[0]}: {tail[1]}"] if tail else []),
    )


def agent_setup_failed(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """The agent's own setup (not Harbor's tmux install) timed out or failed: it never ran.

    Infra only with an outside cause shown: a download refused (its host named), or an exec into
    the sandbox that never returned before Harbor's own timeout. The agent's own software that
    cannot run in the task's image (the loader's words, wherever recorded) is the agent's. With
    neither, insufficient: a failed install says nothing of whose fault it was."""
    if ev.result is None or ev.result.reward is not None:
        return None
    kind = etype(ev) or ""
    text = exception_text(ev)
    if (
        kind not in _SETUP_FAILED
        and "in _setup_agent" not in text
        and "setup timed out" not in text
    ):
        return None
    setup = ev.source("agent_setup_output")
    failures = [f for c in setup for f in N.failures_in(c.text, c.where)]
    outside = [f for f in failures if N.owner(f, set()) == "external"]
    if outside:
        return _network_verdict(ev, ctx, "agent_setup", outside[0], len(outside), outside)
    general = readings.on("cannot_run_anywhere")
    cannot = proof_at("setup_failed", setup + (ev.source("exception") if general else []),
                      _CANNOT_RUN) or (_own_tool_missing(ev) if general else None)
    if cannot is not None:
        return _cannot_run(ev, cannot)
    agent = (ev.result.agent_info.name if ev.result.agent_info else None) or ""
    if not setup and agent.startswith("terminus"):
        # Terminus-2's setup is Harbor installing tmux and asciinema in the task container.
        return excuse(
            "infra",
            "tool_install_timeout",
            "agent_setup",
            "Harbor's setup of terminus-2 (installing tmux/asciinema in the task container) did "
            "not finish, so the agent never ran. Mount the read-only tool bundle into every "
            "task container (ToolBundle + --extra-docker-compose) instead of installing per "
            "trial.",
            [_raised_in_setup(ev)],
            lead=exception_line(ev),
        )
    return _setup_failed(ev, setup, [_exec_never_returned(ev)] if general else None)


def _cannot_run(ev: TrialEvidence, cannot: Proof) -> Classification:
    return Classification(
        "agent_error",
        "agent_setup_cannot_run",
        "agent_setup",
        "The agent's own software cannot run in the task's image (the loader's or the "
        "installer's own words quoted): its setup failed for no outside reason. The agent "
        "as configured is part of the system under test, so this counts against it.",
        exception_line(ev) + [f"{cannot.where}: {cannot.quote}"],
    )


def _setup_failed(
    ev: TrialEvidence, setup: list[Chunk], shown: list[Proof | None] | None
) -> Classification:
    """The agent's setup failed: infra with the outside cause `shown` (None: the setup failing is
    proof enough, as before issue #34), else unproven (insufficient, audit/judge/verdict.py)."""
    tail = last_line(setup)
    proof = [_raised_in_setup(ev)] if shown is None else [p for p in shown if p is not None]
    return excuse(
        "infra",
        "agent_setup_failed",
        "agent_setup",
        "The agent's own setup (its install script, before the model ran) did not finish"
        + (f"; its last output is quoted from {L.AGENT_SETUP_STDOUT}" if tail else "")
        + ". The model was never asked anything: rerun the task after fixing the agent's "
        "installation (pre-install it in the image if it downloads at every trial).",
        proof,
        lead=exception_line(ev),
        more=[f"{tail[0]}: {tail[1]}"] if tail else [],
    )


def _exec_never_returned(ev: TrialEvidence) -> Proof | None:
    """Harbor's own exec into the sandbox ran out its timeout during the setup (the chain shows a
    timeout raised in Harbor's environment layer): an exec that never returned."""
    agent = ev.agent()
    for raised in ev.chain():
        if "timeout" not in raised.name.lower():
            continue
        inside = [f for f in raised.frames if C.layer(f.path, agent) == "environment"]
        if inside:
            site = inside[-1]
            return Proof(
                "environment_event",
                exception_where(ev),
                short(str(site)),
                f"{raised.name} here: Harbor's exec into the sandbox did not return before its "
                "timeout",
            )
    return None


# `<tool>: command not found` (bash), `<tool>: not found` (sh), of a tool the failed command runs.
_NOT_FOUND = re.compile(r"(?m)(?:^|: )(?P<tool>[\w.+-]+): (?:command )?not found\s*$")
_FAILED_COMMAND = re.compile(r"Command failed \(exit \d+\): (?P<cmd>[^\n]*)")


def _own_tool_missing(ev: TrialEvidence) -> Proof | None:
    """The shell says a tool of the agent's own setup command does not exist in the image."""
    for chunk in ev.source("exception"):
        command = _FAILED_COMMAND.search(chunk.text)
        if command is None:
            continue
        for m in _NOT_FOUND.finditer(chunk.text):
            if re.search(rf"(?<![\w/.-]){re.escape(m['tool'])}\b", command["cmd"]):
                line = chunk.text.count("\n", 0, m.start()) + 1
                return Proof("setup_failed", chunk.where(line), short(m.group(0).strip(": ")))
    return None
