"""Verdicts calibrated to the evidence a trial actually holds (issue #34).

Every verdict names the evidence families its trial had (audit/judge/verdict.py FAMILIES):
Harbor's record (result.json, trial.log), the exception chain, the agent's own log, the
verifier's output, the serving plane's record, the job's other trials. A trial that kept only
what Harbor records of every trial (no log of the agent's own, no serving record: a leaderboard
submission's result.json, an agent whose logs were not kept) gets an owner only where that
record decides it: a reward the verifier gave to a run that ended on its own, the agent's
timeout, an exception whose type or own words name the cause (what the rules and detectors
read). Where the record only says the run ended, not why, the verdict is insufficient:
- an exception that cut the agent's run before a graded 0 with no logged cause (an exit code,
  NonZeroAgentExitCodeError's "Command failed (exit 1)"): `undecided_<type>`;
- a kill (exit 137/143) that no timeout explains, the OOM killer or a full disk (the agent's own
  build or install, which draws them too, cannot be ruled out without its log), and a setup
  that timed out, with nothing logged: `unproven_<signature>`.
"""

from __future__ import annotations

from dataclasses import replace

from audit.judge.context import JobContext
from audit.judge.detectors.serving import record_of
from audit.judge.verdict import Classification
from audit.read import layout as L
from audit.read import readings
from audit.read.evidence import TrialEvidence

# Verdicts that rest on a kill, a full disk or a setup timeout alone: with nothing logged of
# what the agent ran (its own build, install or download draws the same kill and fills the same
# disk, RULES.md §2), no owner.
_UNLOGGED = (
    "container_killed", "out_of_memory", "disk_full", "tool_install_timeout", "agent_setup_hung"
)
# What Harbor writes under agent/ that is no log of the agent's: the bare exit code.
_NOT_THE_AGENTS = ("exit-code.txt",)
# A log the agent kept in result.json (a custom agent's metadata) counts; Harbor's capture of a
# non-zero exit's output is Harbor's record, not the agent's log.
_HARBORS = ("exit-output",)


def families_of(ev: TrialEvidence, ctx: JobContext) -> tuple[str, ...]:
    """The evidence families the trial holds, in FAMILIES' order."""
    had = {
        "harbor_record": ev.result is not None or bool(ev.text(L.TRIAL_LOG)),
        "exception_chain": bool(ev.chain()),
        "agent_log": any(f not in _NOT_THE_AGENTS for f in ev.agent_files())
        or any(log.source not in _HARBORS for log in ev.agent_logs()),
        "verifier_output": bool((ev.text(L.VERIFIER_STDOUT) or "").strip()),
        "serving_record": record_of(ev, ctx).present,
        "job_trials": len(ctx.evidences) > 1,
    }
    return tuple(name for name, present in had.items() if present)


def calibrate(c: Classification, ev: TrialEvidence, ctx: JobContext) -> Classification:
    """The verdict with its families, and insufficient where Harbor's record alone does not
    decide it."""
    c = replace(c, families=families_of(ev, ctx))
    if not readings.on("record_decides") or not c.record_alone or not c.signature:
        return c
    if c.signature.startswith("graded_fail_"):
        kind = c.signature.removeprefix("graded_fail_")
        return replace(
            c,
            category="insufficient_evidence",
            signature=f"undecided_{kind}",
            explanation=f"{kind} cut the agent's run before the verifier graded it, and only "
            "Harbor's record was kept: it says the run ended, not why (no log of the agent's "
            "own, no cause in the exception's words). Neither the model nor anything outside "
            f"it is shown to own the failure. {c.explanation}",
        )
    if c.signature in _UNLOGGED:
        return replace(
            c,
            category="insufficient_evidence",
            signature=f"unproven_{c.signature}",
            explanation="Only Harbor's record was kept, and it shows a kill, a full disk or a "
            f"timeout, not its cause: nothing logged says whose it was. {c.explanation}",
            proof=[],
        )
    return c
