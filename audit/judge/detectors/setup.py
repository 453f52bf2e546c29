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
)
from audit.read import layout as L
from audit.read.evidence import TrialEvidence

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
    r"No matching distribution found for|glibc[^\n]{0,40}too old)"
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
    """The agent's own setup (not Harbor's tmux install) timed out or failed: it never ran."""
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
    cannot = proof_at("setup_failed", setup, _CANNOT_RUN)
    if cannot is not None:
        return Classification(
            "agent_error",
            "agent_setup_cannot_run",
            "agent_setup",
            "The agent's own software cannot run in the task's image (the loader's or the "
            "installer's own words quoted): its setup failed for no outside reason. The agent "
            "as configured is part of the system under test, so this counts against it.",
            exception_line(ev) + [f"{cannot.where}: {cannot.quote}"],
        )
    tail = last_line(setup)
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
    return excuse(
        "infra",
        "agent_setup_failed",
        "agent_setup",
        "The agent's own setup (its install script, before the model ran) did not finish"
        + (f"; its last output is quoted from {L.AGENT_SETUP_STDOUT}" if tail else "")
        + ". The model was never asked anything: rerun the task after fixing the agent's "
        "installation (pre-install it in the image if it downloads at every trial).",
        [_raised_in_setup(ev)],
        lead=exception_line(ev),
        more=[f"{tail[0]}: {tail[1]}"] if tail else [],
    )
