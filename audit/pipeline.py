"""The audit's run, in one place: read each job, judge each trial, score the submission, and
return the one report model (audit/score/report.py) that every format renders.

A submission is one or more job dirs of one run (`audit JOB [JOB...]`): each job is read and
judged on its own (a verdict reads its own job's context), then their trials are scored
together, as the board pools an agent version's trials across jobs.
"""

from __future__ import annotations

import gc
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from pydantic import BaseModel, ValidationError

from audit.judge.classify import CATEGORIES, PASS_REWARD, Classification, classify
from audit.judge.context import JobContext
from audit.judge.detectors.serving import record_for
from audit.judge.job_state import read_job_run
from audit.judge.rules import CompiledRule, load_rules
from audit.judge.signatures import meaning
from audit.read import layout as L
from audit.read.evidence import TrialEvidence
from audit.read.models import PHASES, JobConfig, JobResult, parse_time
from audit.read.reached import model_reached
from audit.read.timing import trial_time
from audit.score import adjudications as adj
from audit.score import submission
from audit.score.attempts import Attempts, attempts_of
from audit.score.conformance import Conformance
from audit.score.conformance import check as check_conformance
from audit.score.harbor_policy import compare, read_policy, summarize
from audit.score.quotable import judge as judge_quotable
from audit.score.reference import PublishedScore
from audit.score.reference import compare as compare_reference
from audit.score.report import Report
from audit.score.rows import JobInfo, ProofOut, Tokens, TrialRow
from audit.score.time_split import ServingOut, annotate_timeouts, serving_out, time_split
from contracts import harbor_profiles as hp
from contracts import jobdir


@dataclass
class JudgedJob:
    """One job read and judged: its trials' rows and what its own files say of it."""

    info: JobInfo
    rows: list[TrialRow]
    problems: list[str]
    config: JobConfig | None
    unrun: int
    serving: ServingOut | None


@dataclass(frozen=True)
class Inputs:
    """What the user gives beside the job dirs."""

    adjudications: Sequence[adj.Adjudication] = ()
    reference: PublishedScore | None = None
    dataset_tasks: int | None = None
    official_dataset_commit: str | None = None
    provenance: dict | None = None
    convention: str = hp.LEADERBOARD


def build_report(
    layout: L.JobLayout | Sequence[L.JobLayout],
    adjudications: Sequence[adj.Adjudication] | None = None,
    reference_score: float | PublishedScore | None = None,
    rules: list[CompiledRule] | None = None,
    workers: int = 1,
    dataset_tasks: int | None = None,
    official_dataset_commit: str | None = None,
    provenance: dict | None = None,
    convention: str = hp.LEADERBOARD,
) -> Report:
    """Read, judge and score a submission (one job dir, or several of one run). Raises
    ValueError only for unusable inputs.

    A bare number as `reference_score` was published in the board's convention.
    `dataset_tasks` and `official_dataset_commit` are what the board's row and its conformance
    compare with; `provenance` is the run's manifest (audit/read/provenance.py), shown as is."""
    layouts = [layout] if isinstance(layout, L.JobLayout) else list(layout)
    if not layouts:
        raise ValueError("no job dir to audit")
    rules = rules if rules is not None else load_rules()
    reference = (PublishedScore(score=reference_score)
                 if isinstance(reference_score, int | float) else reference_score)
    inputs = Inputs(adjudications=tuple(adjudications or ()), reference=reference,
                    dataset_tasks=dataset_tasks, official_dataset_commit=official_dataset_commit,
                    provenance=provenance, convention=convention)
    jobs = [judge_job(one, rules, workers) for one in layouts]
    return score_submission(jobs, inputs, where=layouts[0].location)


# --- read and judge one job ---------------------------------------------------------------------


def judge_job(layout: L.JobLayout, rules: list[CompiledRule], workers: int = 1) -> JudgedJob:
    layout.check_is_job()
    problems: list[str] = []
    job_result = _read_model(layout, L.JOB_RESULT, JobResult, problems)
    job_config = _read_model(layout, L.JOB_CONFIG, JobConfig, problems)
    trial_dirs, others = layout.trial_dirs()
    problems += [f"{other}/ is not a trial dir (<task>__<id>); ignored" for other in others]
    rows, ctx = _judge_trials(layout, trial_dirs, job_result, job_config, problems, rules,
                              workers)
    name = (job_config.job_name if job_config else None) or layout.name
    for r in rows:
        r.job = name
    planned = job_result.n_total_trials if job_result else None
    unrun = max(0, (planned or 0) - len(rows))
    problems += _job_problems(job_result, planned, unrun)
    record = record_for(layout, ctx)
    annotate_timeouts(rows, record)  # what the serving plane did while each timed-out agent ran
    info = _job_info(layout, job_result, name, rows, planned, unrun)
    return JudgedJob(info=info, rows=rows, problems=problems, config=job_config, unrun=unrun,
                     serving=serving_out(record))


def _judge_trials(layout, trial_dirs, job_result, job_config, problems, rules, workers):
    job_rewards = job_result.listed_rewards() if job_result else {}

    def load(trial_dir: str) -> TrialEvidence:
        return TrialEvidence.load(layout, trial_dir, job_rewards)

    def context(evidences: list[TrialEvidence]) -> JobContext:
        finalized = sum(1 for ev in evidences if not ev.result_missing)
        present = job_result is not None or f"{L.JOB_RESULT} is missing" not in problems
        run = read_job_run(layout, job_result, present, finalized)
        return JobContext.from_trials(evidences, job_config, run, layout.read_text(L.JOB_LOG))

    # The rows are many small long-lived objects without reference cycles; left on, the
    # generational collector rescans all of them again and again and a 10,000-trial audit
    # takes more than 10x a 1,000-trial one.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        if workers > 1 and len(trial_dirs) > 1:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                evidences = list(pool.map(load, trial_dirs))
                ctx = context(evidences)
                rows = list(pool.map(lambda ev: _row(ev, classify(ev, rules, ctx)), evidences))
        else:
            evidences = [load(d) for d in trial_dirs]
            ctx = context(evidences)
            rows = [_row(ev, classify(ev, rules, ctx)) for ev in evidences]
        del evidences
    finally:
        if gc_was_enabled:
            gc.enable()
    return rows, ctx


def _job_problems(job_result: JobResult | None, planned: int | None, unrun: int) -> list[str]:
    out = []
    if unrun:
        out.append(
            f"{unrun} of {planned} planned trials have no trial dir: the job did not finish "
            "(`harbor job resume -p <job dir>` runs them); harbor-0.21 counts them as 0, the "
            "board never sees them"
        )
    if job_result is not None and not jobdir.ended(job_result.finished_at):
        out.append(
            "job result.json has finished_at: null: the job was interrupted or is still running"
        )
    return out


def _read_model(layout: L.JobLayout, rel: str, model: type[BaseModel], problems: list[str]):
    raw = layout.read_text(rel)
    if raw is None:
        problems.append(f"{rel} is missing")
        return None
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        problems.append(f"{rel} is corrupt ({exc.errors()[0]['msg']})")
        return None


def _row(ev: TrialEvidence, c: Classification) -> TrialRow:
    reached = model_reached(ev)
    result = ev.result
    info = result.exception_info if result else None
    agent = result.agent_result if result else None
    return TrialRow(
        task=(result.filter_name if result else None) or L.task_of(ev.trial_dir),
        task_name=result.task_name if result else None,
        trial=ev.trial_dir,
        reward=result.reward if result else None,
        exception=info.exception_type if info else None,
        category=c.category,
        signature=c.signature,
        phase=c.phase,
        explanation=c.explanation,
        evidence=c.evidence,
        endpoint=c.endpoint,
        reward_valid=result.reward_valid if result else None,
        exception_policy=_policy(info.policy) if info else None,
        harbor_policy=compare(
            read_policy(reward=result.reward if result else None,
                        reward_valid=result.reward_valid if result else None,
                        exception=info.exception_type if info else None,
                        policy=info.policy if info else None),
            category=c.category, explanation=c.explanation,
            proof="; ".join(f"{p.cause}: {p.quote}" for p in c.proof[:1])),
        problems=list(ev.problems),
        adjudication=None,
        counted_as="pass" if result and (result.reward or 0) >= PASS_REWARD else "fail",
        started_at=result.started_at if result else None,
        finished_at=result.finished_at if result else None,
        durations=result.phase_seconds() if result else {p: None for p in PHASES},
        proof=[
            ProofOut(cause=p.cause, where=p.where, quote=p.quote, reading=p.reading)
            for p in c.proof
        ],
        evidence_families=list(c.families),
        record_alone=c.record_alone,
        model_reached=reached.answer,
        model_reached_detail=reached.line(),
        meaning=meaning(c.signature),
        time=time_split(trial_time(result, lambda: ev.json(L.AGENT_TRAJECTORY))),
        tokens=Tokens(
            input=(agent.n_input_tokens or 0) if agent else 0,
            cache=(agent.n_cache_tokens or 0) if agent else 0,
            output=(agent.n_output_tokens or 0) if agent else 0,
        ),
        **_convention_facts(result),
    )


def _convention_facts(result) -> dict:
    """What the score conventions read of a trial beyond the audit's own fields."""
    if result is None:
        return {"has_result": False}
    agent = result.agent_info
    model = agent.model_info if agent else None
    rewards = result.verifier_result.rewards if result.verifier_result else None
    return {
        "agent": agent.name if agent else None,
        "agent_version": agent.version if agent else None,
        "models": [f"{model.provider}/{model.name}"] if model and model.name else [],
        "reward_key": rewards.get("reward") if rewards else None,
        "has_result": True,
        "exception_recorded": result.exception_info is not None,
    }


def _policy(policy: str | dict | None) -> str | None:
    if policy is None or isinstance(policy, str):
        return policy
    return ", ".join(f"{k}={v}" for k, v in sorted(policy.items()))


def _job_info(layout, job_result, name, rows, planned, unrun) -> JobInfo:
    started = job_result.started_at if job_result else None
    finished = job_result.finished_at if job_result else None
    wall, source = _wall(started, finished, rows)
    means = job_result.reported_means() if job_result else []
    mean = means[0] if len(means) == 1 else None
    used, why = submission.reported_convention(
        mean, submission.score(rows, unrun=unrun),
        job_result.schema_version if job_result else None)
    return JobInfo(
        name=name,
        location=layout.location,
        started_at=started,
        finished_at=finished,
        finished=jobdir.ended(finished),
        wall_seconds=round(wall, 1) if wall is not None else None,
        wall_source=source,
        n_trials=len(rows),
        n_planned=planned,
        reported_mean=mean,
        reported_convention=used,
        reported_reason=why,
    )


def _wall(started, finished, rows) -> tuple[float | None, str | None]:
    s, f = parse_time(started), parse_time(finished)
    if s and f and (s.tzinfo is None) == (f.tzinfo is None):
        return (f - s).total_seconds(), "job result.json started_at..finished_at"
    # Job timestamps are naive local time and finished_at is null after an interrupt, so
    # fall back to the trials' own UTC timestamps: first start to last finish.
    starts = [t for r in rows if (t := parse_time(r.started_at)) and t.tzinfo]
    ends = [t for r in rows if (t := parse_time(r.finished_at)) and t.tzinfo]
    if starts and ends:
        return (max(ends) - min(starts)).total_seconds(), "trial timestamps"
    return None, None


# --- score the submission -----------------------------------------------------------------------


def score_submission(jobs: Sequence[JudgedJob], inputs: Inputs, where: str) -> Report:
    rows = [r for job in jobs for r in job.rows]
    adj.apply(rows, list(inputs.adjudications), where)
    unrun = sum(job.unrun for job in jobs)
    scores = submission.score(rows, unrun=unrun, dataset_tasks=inputs.dataset_tasks)
    submission.mark_counted(rows, inputs.convention)
    categories = _categories(rows)
    rerun = sorted({r.task for r in rows if r.category in submission.RERUN})
    attempts = attempts_of(
        [(r.task, r.reward is not None and r.reward >= PASS_REWARD) for r in rows],
        n_attempts_config=jobs[0].config.n_attempts if jobs[0].config else None,
        note=f"planned trials without a trial dir: {unrun}; not in any task's attempts"
        if unrun else "")
    return Report(
        job=jobs[0].info,
        jobs=[job.info for job in jobs],
        convention=inputs.convention,
        scores=scores,
        unrun=unrun,
        reference=compare_reference(inputs.reference, scores),
        disagreements=submission.disagreements(rows),
        categories=categories,
        signatures=_signatures(rows),
        rerun=rerun,
        rerun_args=[arg for task in rerun for arg in ("-i", task)],
        tokens=Tokens(input=sum(r.tokens.input for r in rows),
                      cache=sum(r.tokens.cache for r in rows),
                      output=sum(r.tokens.output for r in rows)),
        adjudications=adj.summary(rows, list(inputs.adjudications)),
        problems=_problems(jobs),
        trials=rows,
        attempts=attempts,
        conformance=_conformance(jobs, attempts, inputs),
        provenance=inputs.provenance,
        model_reached=_reached_counts(rows),
        quotable=judge_quotable(rows, scores, unrun=unrun, headline=inputs.convention),
        signature_meanings={s: meaning(s) for s in _signatures(rows)},
        serving=jobs[0].serving,
        harbor_policy=summarize([(r.trial, r.harbor_policy) for r in rows if r.harbor_policy]),
    )


def _conformance(jobs: Sequence[JudgedJob], attempts: Attempts, inputs: Inputs) -> Conformance:
    """The submission's tasks and attempts, and every job's own config (timeouts, dataset)."""
    checks = [check_conformance(
        job.config, task_count=len(attempts.per_task), attempts_min=attempts.n_min,
        dataset_tasks=inputs.dataset_tasks, official_commit=inputs.official_dataset_commit,
        provenance=inputs.provenance) for job in jobs]
    differences = list(dict.fromkeys(d for c in checks for d in c.differences))
    unknown = list(dict.fromkeys(u for c in checks for u in c.unknown))
    return checks[0].model_copy(update={
        "differences": differences, "unknown": unknown,
        "conforms": not differences and not unknown})


def _problems(jobs: Sequence[JudgedJob]) -> list[str]:
    several = len(jobs) > 1
    out = []
    for job in jobs:
        for p in job.problems + [p for r in job.rows for p in r.problems]:
            out.append(f"{job.info.name}: {p}" if several else p)
    return out


def _categories(rows: list[TrialRow]) -> dict[str, int]:
    categories = {c: 0 for c in CATEGORIES}
    for r in rows:
        categories[r.category] += 1
    return categories


def _signatures(rows: list[TrialRow]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in rows:
        if r.signature:
            counts[r.signature] = counts.get(r.signature, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _reached_counts(rows: list[TrialRow]) -> dict[str, int]:
    counts = {answer: 0 for answer in ("yes", "no", "unknown", "no model")}
    for r in rows:
        counts[r.model_reached] = counts.get(r.model_reached, 0) + 1
    return counts
