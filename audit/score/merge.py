"""One score across a main job and its reruns, by a stated rule (MERGE_RULE).

Each job is audited on its own (audit/output/report.py); this module only lines up each task's
attempts and decides which one counts. A rerun exists to replace what the infrastructure
broke, so it may only supersede infra and cancelled attempts: letting it replace a graded
failure would turn a rerun into a second chance for the model and inflate the score.

With several main attempts per task (Harbor's n_attempts), each main attempt is a slot; the
rerun attempts of a task fill, in order, the slots still open (latest attempt infra or
cancelled), at most one slot each. A rerun attempt that finds no open slot is shown as unused.
"""

from __future__ import annotations

from collections.abc import Sequence

from audit.judge.classify import PASS_REWARD
from audit.read import layout as L
from audit.score.attempts import Attempts, attempts_of
from audit.score.rows import ScoredJob, TrialRow
from audit.score.scores import AdjustedScore, Out, Score, minus_reference

MERGE_RULE = (
    "A task's attempts are the main job's trials (by start time), then each rerun job's, in "
    "the order given. A task's merged outcome is its first attempt that was neither "
    "infra nor cancelled; a rerun never overrides a graded model failure (agent_error), an "
    "agent timeout or verifier timeout, an insufficient_evidence attempt or a pass: only infra "
    "and cancelled attempts are superseded. When every attempt is infra or cancelled the task "
    "counts as not passed and stays listed for rerun. With several main attempts per task "
    "each is a slot, and a rerun attempt replaces at most one superseded slot of its task, in "
    "order; a rerun attempt with nothing left to supersede is shown as unused. A rerun's "
    "trials of a task the main job does not have are ignored. Adjudications apply to the "
    "merged outcome as to a single job."
)
SUPERSEDED = ("infra", "cancelled")


class MergedAttempt(Out):
    job: str
    trial: str
    category: str
    reward: float | None
    signature: str | None
    explanation: str
    evidence: list[str]
    started_at: str | None
    slot: int | None  # the main attempt (1-based) it is or stands in for; None when unused
    status: str  # "counted", "superseded" (infra/cancelled, replaced or last) or "unused"


class MergedSlot(Out):
    slot: int
    job: str
    trial: str
    category: str
    counted_as: str  # pass, fail or excluded, as in a single job's trials


class MergedTask(Out):
    task: str
    attempts: list[MergedAttempt]
    slots: list[MergedSlot]
    # The slots' category and counted_as when they agree (always, with one slot), else "mixed".
    outcome: str
    counted_as: str
    passed: int
    total: int


class MergedJob(Out):
    role: str  # "main" or "rerun"
    name: str
    location: str
    n_trials: int
    raw: Score


class MergedReference(Out):
    score: float | None
    difference: float | None  # merged adjusted - reference
    inside_adjusted_ci: bool | None


class Merge(Out):
    rule: str = MERGE_RULE
    jobs: list[MergedJob]
    tasks: list[MergedTask]
    original_raw: Score  # the main job alone (the report's top-level raw and adjusted)
    original_adjusted: AdjustedScore
    raw: Score
    adjusted: AdjustedScore
    reference: MergedReference
    rerun: list[str]  # tasks still infra/cancelled after the merge
    rerun_args: list[str]
    attempts: Attempts
    superseded: int  # main attempts a rerun replaced
    problems: list[str]


def _key(row: TrialRow) -> tuple[str, str]:
    return (row.started_at or "\uffff", row.trial)


def _attempt(job: str, row: TrialRow) -> MergedAttempt:
    return MergedAttempt(
        job=job,
        trial=row.trial,
        category=row.category,
        reward=row.reward,
        signature=row.signature,
        explanation=row.explanation,
        evidence=row.evidence,
        started_at=row.started_at,
        slot=None,
        status="unused",
    )


def _task_resolver(main: ScoredJob):
    """Map a rerun trial to the main job's task key: by task, by task name, or (for a trial
    without result.json, which only has its dir name) by the trial dir's task prefix."""
    tasks = {r.task for r in main.trials}
    by_name = {r.task_name: r.task for r in main.trials if r.task_name}
    by_prefix: dict[str, set[str]] = {}
    for r in main.trials:
        by_prefix.setdefault(L.task_of(r.trial), set()).add(r.task)

    def resolve(row: TrialRow) -> str | None:
        if row.task in tasks:
            return row.task
        if row.task_name and row.task_name in by_name:
            return by_name[row.task_name]
        found = by_prefix.get(L.task_of(row.trial), set())
        return next(iter(found)) if len(found) == 1 else None

    return resolve


def merge_reports(
    main: ScoredJob, reruns: Sequence[ScoredJob], reference_score: float | None = None
) -> Merge:
    """Merge `main` with `reruns` (each audited on its own, in the order they ran)."""
    problems: list[str] = []
    resolve = _task_resolver(main)
    attempts: dict[str, list[MergedAttempt]] = {}
    slots: dict[str, list[list[MergedAttempt]]] = {}
    for row in sorted(main.trials, key=_key):
        a = _attempt(main.job.name, row)
        attempts.setdefault(row.task, []).append(a)
        slots.setdefault(row.task, []).append([a])
        a.slot = len(slots[row.task])

    superseded = 0
    for rerun in reruns:
        name = rerun.job.name
        for p in rerun.problems:
            problems.append(f"rerun job {name}: {p}")
        for row in sorted(rerun.trials, key=_key):
            task = resolve(row)
            if task is None:
                problems.append(
                    f"rerun job {name} ran task {row.task} that the main job does not have; ignored"
                )
                continue
            a = _attempt(name, row)
            attempts[task].append(a)
            open_slot = next((s for s in slots[task] if s[-1].category in SUPERSEDED), None)
            if open_slot is None:
                continue  # every slot already settled: shown as unused
            a.slot = open_slot[0].slot
            open_slot.append(a)
            superseded += 1

    adjudication = {r.task: r.adjudication["decision"] for r in main.trials if r.adjudication}
    tasks: list[MergedTask] = []
    outcomes: list[tuple[str, bool]] = []
    for task in sorted(attempts):
        out_slots = []
        n_passed = 0
        for chain in slots[task]:
            counted = next((a for a in chain if a.category not in SUPERSEDED), None)
            for a in chain:
                a.status = "counted" if a is counted else "superseded"
            shown = counted or chain[-1]
            passed = counted is not None and (counted.reward or 0) >= PASS_REWARD
            outcomes.append((task, passed))
            n_passed += passed
            decision = adjudication.get(task)
            counted_as = (
                {"pass": "pass", "fail": "fail", "exclude": "excluded"}[decision]
                if decision
                else ("pass" if passed else "fail")
            )
            out_slots.append(
                MergedSlot(
                    slot=chain[0].slot or 0,
                    job=shown.job,
                    trial=shown.trial,
                    category=shown.category,
                    counted_as=counted_as,
                )
            )
        cats = {s.category for s in out_slots}
        counts = {s.counted_as for s in out_slots}
        tasks.append(
            MergedTask(
                task=task,
                attempts=attempts[task],
                slots=out_slots,
                outcome=cats.pop() if len(cats) == 1 else "mixed",
                counted_as=counts.pop() if len(counts) == 1 else "mixed",
                passed=n_passed,
                total=len(out_slots),
            )
        )

    # Planned main trials that never got a trial dir have no task to merge: they stay not
    # passed, as in the main job's own raw score.
    missing = max(0, main.raw.total - len(main.trials))
    all_slots = [s for t in tasks for s in t.slots]
    raw = Score.of(sum(1 for _, p in outcomes if p), len(all_slots) + missing)
    excluded = [s for s in all_slots if s.counted_as == "excluded"]
    adjusted = AdjustedScore.of(
        sum(1 for s in all_slots if s.counted_as == "pass"),
        raw.total - len(excluded),
        excluded=sorted({t.task for t in tasks for s in t.slots if s.counted_as == "excluded"}),
    )
    difference = minus_reference(adjusted, reference_score)
    still = sorted({t.task for t in tasks if any(s.category in SUPERSEDED for s in t.slots)})
    note = (
        f"planned main trials without a trial dir: {missing}; in the merged score as not "
        "passed, not in pass@k (no task to assign them to)"
        if missing
        else ""
    )
    return Merge(
        jobs=[_job(main, "main")] + [_job(r, "rerun") for r in reruns],
        tasks=tasks,
        original_raw=main.raw,
        original_adjusted=main.adjusted,
        raw=raw,
        adjusted=adjusted,
        reference=MergedReference(
            score=reference_score,
            difference=difference,
            inside_adjusted_ci=adjusted.contains(reference_score),
        ),
        rerun=still,
        rerun_args=[arg for task in still for arg in ("-i", task)],
        attempts=attempts_of(outcomes, note=note),
        superseded=superseded,
        problems=problems,
    )


def _job(report: ScoredJob, role: str) -> MergedJob:
    return MergedJob(
        role=role,
        name=report.job.name,
        location=report.job.location,
        n_trials=report.job.n_trials,
        raw=report.raw,
    )
