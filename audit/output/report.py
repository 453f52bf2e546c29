"""Build the audit report of one job: classified trials, raw and adjusted scores, reruns.

Scoring rule (stated in every report): the raw score counts trials with reward 1 over all
trials. The adjusted score is the raw score with the user's adjudications applied and nothing
else: `pass`/`fail` set a trial's outcome, `exclude` removes its task from the denominator.
Trials classified `infra` are never flipped automatically; they are listed under `rerun`.
"""

from __future__ import annotations

import gc
from concurrent.futures import ThreadPoolExecutor

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
from audit.score.adjudications import Adjudication
from audit.score.attempts import Attempts, attempts_of
from audit.score.conformance import Conformance
from audit.score.conformance import check as check_conformance
from audit.score.harbor_policy import PolicySummary, compare, read_policy, summarize
from audit.score.merge import Merge
from audit.score.quotable import Quotable
from audit.score.quotable import judge as judge_quotable
from audit.score.rows import JobInfo, ProofOut, Tokens, TrialRow
from audit.score.scores import CI_LEVEL, AdjustedScore, Score, minus_reference, pct
from audit.score.scores import Out as _Out
from audit.score.time_split import ServingOut, annotate_timeouts, serving_out, time_split
from contracts import harbor_profiles, jobdir

SCORING_RULE = (
    "raw = trials with reward 1 / all trials (Harbor 0.21's denominator: a trial without a "
    "reward counts as 0). adjusted = raw with the adjudications applied and nothing else: "
    "pass/fail set a trial's outcome, exclude removes the task from the denominator. Trials "
    "classified infra or cancelled are NOT counted as passed automatically: they are listed "
    "under rerun until a rerun or an adjudication settles them. Intervals are 95% Wilson "
    "score intervals over the trials counted."
)
# Score and its helpers live in audit/score/scores.py; importers of audit.output.report keep
# finding them.
__all__ = [
    "CI_LEVEL",
    "SCORING_RULE",
    "AdjustedScore",
    "JobInfo",
    "ProofOut",
    "Report",
    "Score",
    "Tokens",
    "TrialRow",
    "build_report",
    "pct",
]


class Reference(_Out):
    score: float | None
    difference: float | None
    inside_raw_ci: bool | None = None
    inside_adjusted_ci: bool | None = None


class Denominators(_Out):
    """The score under both conventions (contracts/harbor_profiles.py), each labelled, pass@k
    under both, and which one the job's own result.json used."""

    harbor_0_21: Score  # the leaderboard's: every trial counts; a trial without a reward is 0
    harbor_0_26: Score  # valid rewards only (Harbor 0.26's reward_valid, or its table's)
    job_reported_mean: float | None
    job_used: str | None  # "0.21", "0.26", or None when the job's result.json cannot tell
    job_used_reason: str
    # Added with the 0.26.0 profile: each convention's words, and pass@k ({"k": percent}) under
    # each (the audit's estimator, k = 1 .. the fewest attempts of any task counted).
    labels: dict[str, str] = {}
    pass_at_k_0_21: dict[str, float] = {}
    pass_at_k_0_26: dict[str, float] = {}




class AdjudicationOut(_Out):
    task: str
    decision: str
    reason: str
    trials: list[str]
    raw_outcome: list[str]








class Report(_Out):
    job: JobInfo
    raw: Score
    adjusted: AdjustedScore
    reference: Reference
    denominators: Denominators
    categories: dict[str, int]
    signatures: dict[str, int]
    rerun: list[str]
    rerun_args: list[str]
    tokens: Tokens
    adjudications: list[AdjudicationOut]
    scoring_rule: str
    problems: list[str]
    trials: list[TrialRow]
    # Added after the first release: defaults keep older readers and reports valid.
    attempts: Attempts = Attempts()
    conformance: Conformance | None = None
    merge: Merge | None = None  # set when the job is audited with its reruns
    provenance: dict | None = None
    # How many trials reached the model: yes / no / unknown / no model.
    model_reached: dict[str, int] = {}
    # Can the raw score be quoted (audit/score/quotable.py)? Set by build_report.
    quotable: Quotable | None = None
    # One line of meaning per signature seen (audit/judge/signatures.py).
    signature_meanings: dict[str, str] = {}
    # The serving plane's own record over the job (audit/read/serving.py): the HTML
    # timeline, and the plane's failures with the reads that show them.
    serving: ServingOut | None = None
    # Harbor 0.26's error policy beside the audit's verdicts: where they agree, where they
    # differ and why (audit/score/harbor_policy.py).
    harbor_policy: PolicySummary | None = None


def build_report(
    layout: L.JobLayout,
    adjudications: list[Adjudication] | None = None,
    reference_score: float | None = None,
    rules: list[CompiledRule] | None = None,
    workers: int = 1,
    dataset_tasks: int | None = None,
    official_dataset_commit: str | None = None,
    provenance: dict | None = None,
) -> Report:
    """Read, classify and score a whole job. Raises ValueError only for unusable inputs.

    `dataset_tasks` and `official_dataset_commit` are what the leaderboard conformance compares
    with; `provenance` is the run's manifest (audit/read/provenance.py), shown as it is."""
    layout.check_is_job()
    rules = rules if rules is not None else load_rules()
    problems: list[str] = []
    job_result = _read_model(layout, L.JOB_RESULT, JobResult, problems)
    job_config = _read_model(layout, L.JOB_CONFIG, JobConfig, problems)

    trial_dirs, others = layout.trial_dirs()
    for other in others:
        problems.append(f"{other}/ is not a trial dir (<task>__<id>); ignored")

    job_rewards = job_result.listed_rewards() if job_result else {}

    def load(trial_dir: str) -> TrialEvidence:
        return TrialEvidence.load(layout, trial_dir, job_rewards)

    # The rows are many small long-lived objects without reference cycles; left on, the
    # generational collector rescans all of them again and again and a 10,000-trial audit
    # takes more than 10x a 1,000-trial one.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:

        def context(evidences: list[TrialEvidence]) -> JobContext:
            finalized = sum(1 for ev in evidences if not ev.result_missing)
            present = job_result is not None or f"{L.JOB_RESULT} is missing" not in problems
            run = read_job_run(layout, job_result, present, finalized)
            return JobContext.from_trials(evidences, job_config, run, layout.read_text(L.JOB_LOG))

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

    planned = job_result.n_total_trials if job_result else None
    missing = max(0, (planned or 0) - len(rows))
    if missing:
        problems.append(
            f"{missing} of {planned} planned trials have no trial dir: the job did not finish "
            "(`harbor job resume -p <job dir>` runs them); they count as not passed"
        )
    if job_result is not None and not jobdir.ended(job_result.finished_at):
        problems.append(
            "job result.json has finished_at: null: the job was interrupted or is still running"
        )

    _apply_adjudications(rows, adjudications or [], layout.location)
    raw_passed = sum(1 for r in rows if r.reward is not None and r.reward >= PASS_REWARD)
    raw_total = len(rows) + missing
    excluded_rows = [r for r in rows if r.counted_as == "excluded"]
    adj_passed = sum(1 for r in rows if r.counted_as == "pass")
    adj_total = raw_total - len(excluded_rows)
    adjusted = AdjustedScore.of(
        adj_passed, adj_total, excluded=sorted({r.task for r in excluded_rows})
    )
    raw = Score.of(raw_passed, raw_total)
    difference = minus_reference(adjusted, reference_score)
    categories = {c: 0 for c in CATEGORIES}
    signatures: dict[str, int] = {}
    for r in rows:
        categories[r.category] += 1
        if r.signature:
            signatures[r.signature] = signatures.get(r.signature, 0) + 1
    signatures = dict(sorted(signatures.items(), key=lambda kv: (-kv[1], kv[0])))
    rerun = sorted({r.task for r in rows if r.category in ("infra", "cancelled")})
    tokens = Tokens(
        input=sum(r.tokens.input for r in rows),
        cache=sum(r.tokens.cache for r in rows),
        output=sum(r.tokens.output for r in rows),
    )
    for r in rows:
        problems.extend(r.problems)
    attempts = attempts_of(
        [(r.task, r.reward is not None and r.reward >= PASS_REWARD) for r in rows],
        n_attempts_config=job_config.n_attempts if job_config else None,
        note=f"planned trials without a trial dir: {missing}; in the raw score as not passed, "
        "not in pass@k (no task to assign them to)"
        if missing
        else "",
    )
    # What the serving plane did while each timed-out agent ran (its own record).
    record = record_for(layout, ctx)
    annotate_timeouts(rows, record)
    return Report(
        job=_job_info(layout, job_result, job_config, rows, planned),
        raw=raw,
        adjusted=adjusted,
        reference=Reference(
            score=reference_score,
            difference=difference,
            inside_raw_ci=raw.contains(reference_score),
            inside_adjusted_ci=adjusted.contains(reference_score),
        ),
        denominators=_denominators(rows, raw, job_result, attempts),
        categories=categories,
        signatures=signatures,
        rerun=rerun,
        rerun_args=[arg for task in rerun for arg in ("-i", task)],
        tokens=tokens,
        adjudications=_adjudication_summary(rows, adjudications or []),
        scoring_rule=SCORING_RULE,
        problems=problems,
        trials=rows,
        attempts=attempts,
        conformance=check_conformance(
            job_config,
            task_count=len(attempts.per_task),
            attempts_min=attempts.n_min,
            dataset_tasks=dataset_tasks,
            official_commit=official_dataset_commit,
            provenance=provenance,
        ),
        provenance=provenance,
        model_reached=_reached_counts(rows),
        quotable=judge_quotable(raw, adjusted, categories, missing),
        signature_meanings={s: meaning(s) for s in signatures},
        serving=serving_out(record),
        harbor_policy=summarize([(r.trial, r.harbor_policy) for r in rows if r.harbor_policy]),
    )


def _reached_counts(rows: list[TrialRow]) -> dict[str, int]:
    counts = {answer: 0 for answer in ("yes", "no", "unknown", "no model")}
    for r in rows:
        counts[r.model_reached] = counts.get(r.model_reached, 0) + 1
    return counts


def _counts_for_harbor(row: TrialRow) -> bool:
    """Harbor 0.26 counts the trial: its own reward_valid, or its table's verdict on it."""
    if row.harbor_policy is not None:
        return row.harbor_policy.reward_valid
    return row.reward is not None and row.reward_valid is not False


def _denominators(rows: list[TrialRow], raw: Score, job_result: JobResult | None,
                  attempts: Attempts) -> Denominators:
    valid = [r for r in rows if _counts_for_harbor(r)]
    passed_valid = sum(1 for r in valid if r.reward is not None and r.reward >= PASS_REWARD)
    v026 = Score.of(passed_valid, len(valid))
    valid_attempts = attempts_of(
        [(r.task, r.reward is not None and r.reward >= PASS_REWARD) for r in valid])
    means = job_result.reported_means() if job_result else []
    mean = means[0] if len(means) == 1 else None
    used, why = None, "the job's result.json reports no single mean to compare with"
    if job_result is not None and job_result.schema_version is not None:
        used, why = "0.26", "the job's result.json has schema_version (Harbor 0.26+)"
    elif mean is not None:
        # Harbor's own mean is over rewards, not passes; compare it with both rules' means.
        total_reward = sum(r.reward for r in rows if r.reward is not None)
        m021 = total_reward / raw.total if raw.total else None
        valid_reward = sum(r.reward for r in valid if r.reward is not None)
        m026 = valid_reward / len(valid) if valid else None
        close = [
            (v, name)
            for v, name in ((m021, "0.21"), (m026, "0.26"))
            if v is not None and abs(v - mean) < 1e-6
        ]
        if len(close) == 1 or (len(close) == 2 and m021 == m026):
            used = close[0][1]
            why = f"its reported mean {mean:.4f} matches the {used} rule"
        elif not close:
            why = f"its reported mean {mean:.4f} matches neither rule (trials missing here?)"
    return Denominators(
        harbor_0_21=raw,
        harbor_0_26=v026,
        job_reported_mean=mean,
        job_used=used,
        job_used_reason=why,
        labels={"harbor_0_21": harbor_profiles.CONVENTIONS[harbor_profiles.ALL_TRIALS],
                "harbor_0_26": harbor_profiles.CONVENTIONS[harbor_profiles.VALID_REWARDS]},
        pass_at_k_0_21=attempts.pass_at_k,
        pass_at_k_0_26=valid_attempts.pass_at_k,
    )


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
    task = (result.filter_name if result else None) or L.task_of(ev.trial_dir)
    return TrialRow(
        task=task,
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
    )


def _policy(policy: str | dict | None) -> str | None:
    if policy is None or isinstance(policy, str):
        return policy
    return ", ".join(f"{k}={v}" for k, v in sorted(policy.items()))


def _apply_adjudications(rows: list[TrialRow], adjudications: list[Adjudication], where: str):
    by_name: dict[str, list[TrialRow]] = {}
    for r in rows:
        by_name.setdefault(r.task, []).append(r)
        if r.task_name and r.task_name != r.task:
            by_name.setdefault(r.task_name, []).append(r)
    for adj in adjudications:
        targets = by_name.get(adj.task)
        if not targets:
            sample = ", ".join(sorted({r.task for r in rows})[:5])
            raise ValueError(
                f"adjudication for task {adj.task!r} matches no trial in {where} "
                f"(task names here look like: {sample}); fix the task name in the "
                "adjudications file"
            )
        for r in targets:
            r.adjudication = {"decision": adj.decision, "reason": adj.reason}
            r.counted_as = {"pass": "pass", "fail": "fail", "exclude": "excluded"}[adj.decision]


def _adjudication_summary(rows, adjudications) -> list[AdjudicationOut]:
    out = []
    for adj in adjudications:
        hit = [r for r in rows if adj.task in (r.task, r.task_name)]
        out.append(
            AdjudicationOut(
                task=adj.task,
                decision=adj.decision,
                reason=adj.reason,
                trials=[r.trial for r in hit],
                raw_outcome=[
                    "pass"
                    if r.reward is not None and r.reward >= PASS_REWARD
                    else ("no reward" if r.reward is None else f"reward {r.reward:g}")
                    for r in hit
                ],
            )
        )
    return out


def _job_info(layout, job_result, job_config, rows, planned) -> JobInfo:
    started = job_result.started_at if job_result else None
    finished = job_result.finished_at if job_result else None
    wall, source = None, None
    s, f = parse_time(started), parse_time(finished)
    if s and f and (s.tzinfo is None) == (f.tzinfo is None):
        wall, source = (f - s).total_seconds(), "job result.json started_at..finished_at"
    else:
        # Job timestamps are naive local time and finished_at is null after an interrupt, so
        # fall back to the trials' own UTC timestamps: first start to last finish.
        starts = [t for r in rows if (t := parse_time(r.started_at)) and t.tzinfo]
        ends = [t for r in rows if (t := parse_time(r.finished_at)) and t.tzinfo]
        if starts and ends:
            wall, source = (max(ends) - min(starts)).total_seconds(), "trial timestamps"
    name = (job_config.job_name if job_config else None) or layout.name
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
    )
