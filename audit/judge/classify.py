"""Classify one trial: what happened, which signature explains it, and the evidence lines.

The order is the seed's audit procedure made explicit:
1. no result.json: a trial that had already ended on an exception (exception.txt, which
   Harbor writes before result.json) is judged from it; otherwise `cancelled` when the job's own
   files show it was stopped while the trial ran (audit/judge/job_state.py), unless its log
   shows a proven outside failure already ending it (a served window shorter than the one the
   agent was told); otherwise it is judged from what it left (reward file, trial.log);
2. CancelledError / KeyboardInterrupt: cancelled (`harbor job resume` re-runs it);
3. reward 1: passed, or agent_timeout when the agent timed out and the verifier still passed it
   (the reward stands);
4. on Kubernetes, the cluster's own account of the trial's pod (audit/judge/detectors/kubernetes.py:
   a pod refused, never scheduled, without its image, evicted or deleted mid-trial), then the
   first-stage signature rules (rules.yaml: Harbor's environment and tmux errors), then the
   built-in detectors (audit/judge/detectors/: model endpoint, harness crash, container, commands
   past their cap, setup, network with endpoint ownership), then the last-stage rules (verifier
   timeouts, reward files);
5. otherwise: AgentTimeoutError is agent_timeout (its reward stands), a graded 0 is the agent's
   error, and anything else is insufficient_evidence, with the exception named.

Every verdict passes `admit()` (audit/judge/verdict.py) on its way out: one that puts the trial up
for rerun without proof of an outside cause becomes insufficient_evidence. Rules and detectors
the caller switched off (`ctx.disabled`, the generalization benchmark) are skipped.
"""

from __future__ import annotations

import re

from audit.judge import model_endpoint as ME
from audit.judge.calibrate import calibrate
from audit.judge.detectors import CLUSTER, DETECTORS, JobContext
from audit.judge.detectors.endpoint import address_not_built, failing_when_stopped
from audit.judge.detectors.serving import corroborate
from audit.judge.job_state import trial_left_mid_phase
from audit.judge.rules import CompiledRule, Match
from audit.judge.verdict import (
    CATEGORIES,
    PASS_REWARD,
    Classification,
    Proof,
    admit,
    exception_line,
    exception_quote,
    exception_where,
    excuse,
    short,
)
from audit.read import layout as L
from audit.read import readings
from audit.read.evidence import TrialEvidence
from audit.read.reached import Reached, model_reached
from contracts.jobdir import never_ran

__all__ = ["CATEGORIES", "PASS_REWARD", "Classification", "classify"]

_STOPPED = ("CancelledError", "KeyboardInterrupt")


def classify(
    ev: TrialEvidence, rules: list[CompiledRule], ctx: JobContext | None = None
) -> Classification:
    ctx = ctx or JobContext()
    # An endpoint's verdict quotes the serving plane's own record beside the trial's words.
    return calibrate(admit(corroborate(ev, ctx, _classify(ev, rules, ctx))), ev, ctx)


def _classify(ev: TrialEvidence, rules: list[CompiledRule], ctx: JobContext) -> Classification:
    if (found := _without_result(ev, ctx)) is not None:
        return found
    info = ev.result.exception_info if ev.result else None
    etype = info.exception_type if info else None
    reward = ev.result.reward if ev.result else None
    return (
        _stopped(ev, ctx, etype)
        or _passed(ev, etype, reward)
        or _explained(ev, rules, ctx, etype, reward)
        or _fallback(ev, etype, reward)
    )


def _without_result(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """A trial without a result.json: stopped with the job, or judged from what it left."""
    ended_on_its_own = ev.result_missing and ev.exception_source == L.TRIAL_EXCEPTION
    if ev.result_missing and not ended_on_its_own:
        stopped = _stopped_with_the_job(ev, ctx)
        if stopped is not None:
            # A failure already under way when the job was stopped decides, if it is proven.
            return failing_when_stopped(ev, ctx) or stopped
    if ev.result is not None:
        return None
    missing = not any("corrupt" in p for p in ev.problems)
    if not missing and ctx.job_run.finished is False:
        return excuse(
            "cancelled",
            "interrupted_writing_result",
            None,
            "The trial's result.json is damaged (cut off) and the job's own files show it was "
            "stopped: Harbor was writing the result when it was killed. `harbor job resume "
            "-p <job dir>` re-runs it.",
            list(ctx.job_run.proof),
            more=list(ev.problems),
        )
    return Classification(
        "insufficient_evidence",
        "no_result_json" if missing else "corrupt_result_json",
        None,
        "The trial dir has no readable result.json and nothing else that records how it "
        "ended: the trial was killed before Harbor finalized it (SIGKILL, host crash) or the "
        "file is damaged. `harbor job resume -p <job dir>` deletes and re-runs such trials.",
        list(ev.problems),
    )


def _stopped(ev: TrialEvidence, ctx: JobContext, etype: str | None) -> Classification | None:
    """The job was interrupted while the trial ran (Harbor's record of it, an outer runner's
    words, a coroutine closed under it in a job that never finished), or the trial was never
    meant to run (an install-only job)."""
    if etype in _STOPPED:
        said = exception_quote(ev)
        proof = [Proof("job_stopped", exception_where(ev), said, "Harbor recorded it")]
    elif (closed := _closed_under_it(ev, ctx)) is not None:
        proof = closed
    elif (stop := _stopped_by_runner(ev, etype)) is not None:
        if _install_only(ev):
            return _not_attempted(ev)
        proof = stop
    else:
        return None
    return excuse(
        "cancelled",
        "cancelled",
        None,
        "The job was interrupted (SIGTERM/SIGINT, or an outer runner stopped it) while this "
        "trial ran. `harbor job resume -p <job dir>` re-runs cancelled trials.",
        proof,
        lead=exception_line(ev),
    )


def _passed(ev: TrialEvidence, etype: str | None, reward: float | None) -> Classification | None:
    if reward is None or reward < PASS_REWARD:
        return None
    if etype == "AgentTimeoutError":
        return Classification(
            "agent_timeout",
            "agent_timeout_graded",
            "agent",
            "The agent hit its timeout, but the verifier still ran and passed the task: "
            "the reward stands.",
            exception_line(ev),
        )
    return Classification("passed", None, None, "Passed the verifier.", [])


def _explained(
    ev: TrialEvidence,
    rules: list[CompiledRule],
    ctx: JobContext,
    etype: str | None,
    reward: float | None,
) -> Classification | None:
    """The first explanation, in the order of the module's docstring: the cluster's account,
    the first-stage rules, the detectors, the last-stage rules."""
    for detector in CLUSTER:
        if (found := detector.fn(ev, ctx)) is not None:
            return found
    for rule in (r for r in rules if r.rule.stage == "first"):
        if (found := _by_rule(ev, rule, etype, reward)) is not None:
            return found
    for detector in DETECTORS:
        if (found := detector.fn(ev, ctx)) is not None:
            return found
    for rule in (r for r in rules if r.rule.stage == "last"):
        if (found := _by_rule(ev, rule, etype, reward)) is not None:
            return found
    return None


# Python's own words when a coroutine is closed under a task: GeneratorExit thrown into it
# (PEP 342, `coroutine.close()`), asyncio's RuntimeError when its loop is already torn down
# (base_events.py `_check_closed`).
_CLOSED = re.compile(r"\bEvent loop is closed\b|\bGeneratorExit\b")


def _closed_under_it(ev: TrialEvidence, ctx: JobContext) -> list[Proof] | None:
    """The trial's coroutine was closed under it in a job that never finished: the job was torn
    down while the trial ran (the proof: the exception's words and the job's own record)."""
    if not readings.on("coroutine_closed") or ctx.job_run.finished is not False:
        return None
    words = [exception_quote(ev)] + [r.text for r in ev.chain()]
    if not any(_CLOSED.search(w) for w in words):
        return None
    closed = Proof(
        "job_stopped",
        exception_where(ev),
        exception_quote(ev),
        "the trial's coroutine was closed under it, as when the job's event loop is torn down",
    )
    return [closed, *ctx.job_run.proof]


def _install_only(ev: TrialEvidence) -> bool:
    """The trial's config asked Harbor to install the agent and stop (`install_only`)."""
    if not readings.on("coroutine_closed"):
        return False
    config = ev.json(L.TRIAL_CONFIG)
    return isinstance(config, dict) and config.get("install_only") is True


def _not_attempted(ev: TrialEvidence) -> Classification:
    return Classification(
        "insufficient_evidence",
        "install_only_not_attempted",
        None,
        "The trial's config set install_only: Harbor installed the agent and stopped, as asked. "
        "Nothing was attempted or graded; do not count it.",
        [f"{L.TRIAL_CONFIG}: install_only: true"],
    )


def _stopped_with_the_job(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """No result.json, and the job's files show it was stopped while this trial ran."""
    run = ctx.job_run
    if run.finished is True:
        return None
    mid = trial_left_mid_phase(
        [f[len(ev.trial_dir) + 1 :] for f in ev.layout.files_under(ev.trial_dir)],
        ev.text(L.TRIAL_LOG),
    )
    if run.finished is None and (run.result_present or mid is None):
        return None  # the job's files say nothing either way: judged from what it left
    proof = list(run.proof)
    if mid is not None:
        proof.append(mid)
    job_says = (
        "the job never finished (job result.json finished_at is null)"
        if run.result_present and run.finished is False
        else "the job's own files show it was stopped while it ran"
        if run.finished is False
        else "the job has no result.json at all and this trial was left mid-phase"
    )
    return excuse(
        "cancelled",
        "interrupted_no_result",
        None,
        f"The trial has no result.json and {job_says}: it was killed together with the run "
        "(SIGKILL, an outer runner's timeout, a Ctrl-C, a lost machine). Harbor writes "
        "result.json for every trial that ends, by error or cancellation too. "
        "`harbor job resume -p <job dir>` deletes and re-runs such trials.",
        proof,
        more=list(ev.problems),
    )


_RUNNER_STOP = re.compile(
    r"(?i)(?:received (?:signal )?SIG(?:TERM|INT)|KeyboardInterrupt|"
    r"shutting down (?:gracefully|on signal)|cancelled by (?:the )?(?:user|runner|orchestrator))"
)


def _stopped_by_runner(ev: TrialEvidence, etype: str | None) -> list[Proof] | None:
    """An ungraded trial whose own log says an outer runner stopped it, or that never ran at
    all: no exception, no agent run, no verifier. Harbor 0.21 saves a trial that a SIGTERM
    cancels during its environment setup that way (seen in this repo's e2e run), and its
    `job resume` then skips it. Returns the proof, or None when neither holds."""
    result = ev.result
    if etype is not None or (result and result.reward is not None):
        return None
    if result and never_ran(result.model_dump()):
        return [
            Proof(
                "job_stopped",
                L.TRIAL_RESULT,
                "agent_execution: null",
                "saved with no exception, no agent run and no verifier: stopped during setup",
            )
        ]
    for chunk in ev.source("trial_log"):
        m = _RUNNER_STOP.search(chunk.text)
        if m:
            line = chunk.text.count("\n", 0, m.start()) + 1
            text = chunk.text.splitlines()[line - 1].strip()
            return [Proof("job_stopped", chunk.where(line), text, "an outer runner stopped it")]
    return None


def _by_rule(ev, rule: CompiledRule, etype, reward) -> Classification | None:
    matches = rule.match(ev, etype, reward)
    if matches is None:
        return None
    head = exception_line(ev)
    # The exception's first line is already shown once; keep the other matches.
    lines = [str(m) for m in matches if not (head and m.text in head[0])]
    if rule.rule.category == "verifier_timeout":
        lines += _pytest_progress(ev)
    proof = [
        Proof(rule.rule.proof, m.where, m.text)  # type: ignore[arg-type]
        for m in matches
        if rule.rule.proof
    ]
    return Classification(
        rule.rule.category,
        rule.rule.name,
        rule.rule.phase,
        rule.rule.explanation,
        head + lines,
        proof=proof,
    )


_COLLECTED = re.compile(r"^collected (\d+) items?", re.MULTILINE)
_RESULT = re.compile(r"::\S+ (PASSED|FAILED|ERROR)\b")


def _pytest_progress(ev: TrialEvidence) -> list[str]:
    """How far pytest got before the verifier's budget ran out (what an adjudication needs)."""
    text = ev.text(L.VERIFIER_STDOUT)
    if not text:
        return []
    results = [m.group(1) for m in _RESULT.finditer(text)]
    collected = _COLLECTED.search(text)
    if not results and not collected:
        return []
    of = f" of {collected.group(1)} collected" if collected else ""
    return [
        f"{L.VERIFIER_STDOUT}: pytest progress before the timeout: "
        f"{results.count('PASSED')} passed, {results.count('FAILED')} failed, "
        f"{results.count('ERROR')} errors{of}"
    ]


def _fallback(ev: TrialEvidence, etype: str | None, reward: float | None) -> Classification:
    if etype == "AgentTimeoutError":
        graded = (
            f"the verifier still graded it ({reward:g}) and that reward stands"
            if reward is not None
            else "no reward was recorded"
        )
        return Classification(
            "agent_timeout",
            "agent_timeout",
            "agent",
            f"The agent ran out of time; {graded}. No infra signature in the evidence.",
            exception_line(ev) + _verifier_tail(ev),
        )
    reached = model_reached(ev)
    if reached.answer == "no model" and reward is not None:
        return _no_model(ev, reward)
    if reached.answer == "no" and etype != "AgentTimeoutError":
        return never_reached(ev, reached)
    if reward is not None:
        return Classification(
            "agent_error",
            "graded_fail" if etype is None else f"graded_fail_{etype}",
            "verifier",
            f"The verifier graded the solution {reward:g} and no infra signature was found in "
            "the trial's logs, verifier output or the agent's own logs.",
            exception_line(ev) + _verifier_tail(ev),
        )
    if etype:
        return Classification(
            "insufficient_evidence",
            f"unexplained_{etype}",
            None,
            f"{etype} ended the trial without a reward and no signature rule explains it: "
            "read exception.txt and trial.log.",
            exception_line(ev),
        )
    return Classification(
        "insufficient_evidence",
        "ungraded",
        None,
        "The trial has neither a reward nor an exception: verification was disabled or its "
        "result was lost.",
        [],
    )


def _no_model(ev: TrialEvidence, reward: float) -> Classification:
    """A graded trial of an agent that asks no model: its grade judges the task, not a model."""
    if (ev.agent().name or "").lower() == "nop":
        return Classification(
            "agent_error",
            "nop_no_attempt",
            "agent",
            f"Harbor's nop agent does nothing by design, so the verifier's {reward:g} is what a "
            "nop run is for: it shows the verifier does not pass the untouched task. No model "
            "was asked anything; do not count this trial in a model's score.",
            _verifier_tail(ev),
        )
    return Classification(
        "insufficient_evidence",
        "oracle_solution_failed",
        "verifier",
        f"Harbor's oracle ran the task's reference solution and the verifier graded it "
        f"{reward:g}: the task, its image or its verifier is broken (no model was asked). Read "
        f"{L.AGENT_ORACLE_LOG} and the verifier output.",
        _oracle_tail(ev) + _verifier_tail(ev),
    )


def _oracle_tail(ev: TrialEvidence) -> list[str]:
    text = ev.text(L.AGENT_ORACLE_LOG) or ""
    lines = [(i, ln.strip()) for i, ln in enumerate(text.splitlines(), 1) if ln.strip()]
    return [f"{L.AGENT_ORACLE_LOG}:{i}: {short(ln)}" for i, ln in lines[-2:]]


def never_reached(ev: TrialEvidence, reached: Reached) -> Classification:
    """No model call of the trial was answered: whatever was graded is not the model's. An
    outside reason for it (the endpoint's words on a failed call, a model or route the endpoint
    does not know: the operator's launch configuration) is infra; otherwise insufficient."""
    failed = next((c for log in ev.agent_logs() for c in log.calls if c.error), None)
    words = reached.first_error or ""
    if failed is not None and failed.status:
        words = f"Error code: {failed.status} - {words}"
    where = failed.where if failed is not None else exception_where(ev)
    if not words:
        found = ev.origin()
        words = found.root.text if found else ""
    failure = ME.classify_words(words) if words else None
    outside = failure is not None and (
        failure.kind in ME.INFRA_KINDS
        or failure.kind == "unanswered"
        or (failure.kind == "bad_request" and failure.status == 404)
    )
    lead = exception_line(ev) + [f"model reached: {reached.line()}"]
    if failure is not None and failure.kind == "address_invalid":
        said = Proof("launch_config", where, short(reached.first_error or words))
        return address_not_built(ev, said, lead)
    if outside and failure is not None:
        what = (
            "the endpoint does not know the model or route it was asked for (404): the "
            "operator's launch configuration (base URL, model name)"
            if failure.kind == "bad_request"
            else ME.KIND_TEXT.get(failure.kind, failure.kind)
        )
        quote_why = "every model call failed" + (
            f" (HTTP {failed.status})" if failed is not None and failed.status else ""
        )
        return excuse(
            "infra",
            "model_never_reached",
            "model",
            f"No model call of this trial was answered ({what}), so nothing graded here is the "
            "model's work. Fix the endpoint or the launch configuration and rerun.",
            [Proof("endpoint_response", where, short(reached.first_error or words), quote_why)],
            lead=lead,
        )
    return Classification(
        "insufficient_evidence",
        "model_never_reached_unexplained",
        "model",
        "No model call of this trial was answered and nothing shows why: the grade cannot be "
        "the model's, nor is an outside cause proven. Read the agent's log of its first call.",
        lead + _verifier_tail(ev),
    )


def _verifier_tail(ev: TrialEvidence, n: int = 2) -> list[str]:
    text = ev.text(L.VERIFIER_STDOUT)
    if not text:
        return []
    lines = [(i, line.strip()) for i, line in enumerate(text.splitlines(), 1) if line.strip()]
    return [str(Match(f"{L.VERIFIER_STDOUT}:{i}", line[:240])) for i, line in lines[-n:]]
