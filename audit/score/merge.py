"""One score across a main job and its reruns, by a stated rule (MERGE_RULE).

Each job is audited on its own (audit/pipeline.py); this module only lines up each task's
attempts and decides which one counts. A rerun exists to replace what the infrastructure
broke, so it may only supersede infra and cancelled attempts: letting it replace a graded
failure would turn a rerun into a second chance for the model and inflate the score.

With several main attempts per task (Harbor's n_attempts), each main attempt is a slot; the
rerun attempts of a task fill, in order, the slots still open (latest attempt infra or
cancelled), at most one slot each. A rerun attempt that finds no open slot is shown as unused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from audit.read import layout as L
from audit.score import submission
from audit.score.adjudications import COUNTED_AS
from audit.score.attempts import Attempts, attempts_of
from audit.score.conventions import ConventionResult, ConventionScore, pick
from audit.score.reference import PublishedScore, ReferenceResult, compare
from audit.score.rows import ScoredJob, TrialRow
from audit.score.scores import Out
from contracts import harbor_profiles as hp

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
    "merged outcome as to a single job. The merged scores are every convention over each "
    "slot's counted attempt (its last attempt when none is counted), raw and adjusted."
)
SUPERSEDED = ("infra", "cancelled")
PASS_REWARD = 1.0


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
    raw: ConventionScore | None  # the job alone, in the headline convention


class Merge(Out):
    rule: str = MERGE_RULE
    jobs: list[MergedJob]
    tasks: list[MergedTask]
    # Every convention over the merged slots, raw and adjusted (keyed by the convention's name).
    scores: dict[str, ConventionResult]
    reference: ReferenceResult = ReferenceResult()
    rerun: list[str]  # tasks still infra/cancelled after the merge
    rerun_args: list[str]
    attempts: Attempts
    superseded: int  # main attempts a rerun replaced
    problems: list[str]

    def score(self, name: str = hp.LEADERBOARD, which: str = "raw", row: int = 0
              ) -> ConventionScore:
        return pick(self.scores, name, which, row)


@dataclass
class _Attempt:
    out: MergedAttempt
    row: TrialRow


def _key(row: TrialRow) -> tuple[str, str]:
    return (row.started_at or "\uffff", row.trial)


def _attempt(job: str, row: TrialRow) -> _Attempt:
    return _Attempt(MergedAttempt(
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
    ), row)


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


@dataclass
class _Chains:
    """Each task's attempts in merge order, and its slots: one chain of attempts per main
    attempt, the first not superseded counting."""

    attempts: dict[str, list[_Attempt]]
    slots: dict[str, list[list[_Attempt]]]
    superseded: int = 0

    @classmethod
    def of_main(cls, main: ScoredJob) -> _Chains:
        chains = cls({}, {})
        for row in sorted(main.trials, key=_key):
            a = _attempt(main.job.name, row)
            chains.attempts.setdefault(row.task, []).append(a)
            chains.slots.setdefault(row.task, []).append([a])
            a.out.slot = len(chains.slots[row.task])
        return chains

    def add_rerun(self, rerun: ScoredJob, resolve, problems: list[str]) -> None:
        name = rerun.job.name
        problems.extend(f"rerun job {name}: {p}" for p in rerun.problems)
        for row in sorted(rerun.trials, key=_key):
            task = resolve(row)
            if task is None:
                problems.append(
                    f"rerun job {name} ran task {row.task} that the main job does not have; ignored"
                )
                continue
            a = _attempt(name, row)
            self.attempts[task].append(a)
            open_slot = next((s for s in self.slots[task] if s[-1].out.category in SUPERSEDED),
                             None)
            if open_slot is None:
                continue  # every slot already settled: shown as unused
            a.out.slot = open_slot[0].out.slot
            open_slot.append(a)
            self.superseded += 1


def _one(values: set[str]) -> str:
    return values.pop() if len(values) == 1 else "mixed"


def _settle(task: str, attempts: list[_Attempt], chains: list[list[_Attempt]],
            decision: dict[str, str] | None) -> tuple[MergedTask, list[TrialRow]]:
    """The task's merged outcome, and each slot's row as it counts (with the adjudication)."""
    out_slots, rows = [], []
    for chain in chains:
        counted = next((a for a in chain if a.out.category not in SUPERSEDED), None)
        for a in chain:
            a.out.status = "counted" if a is counted else "superseded"
        shown = counted or chain[-1]
        rows.append(shown.row.model_copy(update={"adjudication": decision}))
        passed = counted is not None and (counted.out.reward or 0) >= PASS_REWARD
        out_slots.append(MergedSlot(
            slot=chain[0].out.slot or 0, job=shown.out.job, trial=shown.out.trial,
            category=shown.out.category,
            counted_as=COUNTED_AS[decision["decision"]] if decision
            else ("pass" if passed else "fail")))
    passed_slots = sum(1 for r in rows if r.category not in SUPERSEDED
                       and (r.reward or 0) >= PASS_REWARD)
    return MergedTask(
        task=task, attempts=[a.out for a in attempts], slots=out_slots,
        outcome=_one({s.category for s in out_slots}),
        counted_as=_one({s.counted_as for s in out_slots}),
        passed=passed_slots, total=len(out_slots)), rows


def merge_reports(main: ScoredJob, reruns: Sequence[ScoredJob],
                  reference: PublishedScore | None = None, *,
                  headline: str = hp.LEADERBOARD, dataset_tasks: int | None = None) -> Merge:
    """Merge `main` with `reruns` (each audited on its own, in the order they ran)."""
    problems: list[str] = []
    chains = _Chains.of_main(main)
    resolve = _task_resolver(main)
    for rerun in reruns:
        chains.add_rerun(rerun, resolve, problems)
    decisions = {r.task: r.adjudication for r in main.trials if r.adjudication}
    tasks, slot_rows = [], []
    for task in sorted(chains.attempts):
        merged, rows = _settle(task, chains.attempts[task], chains.slots[task],
                               decisions.get(task))
        tasks.append(merged)
        slot_rows += rows
    # Planned main trials that never got a trial dir have no task to merge: they stay as in
    # the main job's own scores.
    scores = submission.score(slot_rows, unrun=main.unrun, dataset_tasks=dataset_tasks)
    still = sorted({t.task for t in tasks if any(s.category in SUPERSEDED for s in t.slots)})
    note = (f"planned main trials without a trial dir: {main.unrun}; not in any task's "
            "attempts" if main.unrun else "")
    return Merge(
        jobs=[_job(main, "main", headline)] + [_job(r, "rerun", headline) for r in reruns],
        tasks=tasks,
        scores=scores,
        reference=compare(reference, scores),
        rerun=still,
        rerun_args=[arg for task in still for arg in ("-i", task)],
        attempts=attempts_of([(r.task, (r.reward or 0) >= PASS_REWARD
                               and r.category not in SUPERSEDED) for r in slot_rows], note=note),
        superseded=chains.superseded,
        problems=problems,
    )


def _job(report: ScoredJob, role: str, headline: str) -> MergedJob:
    result = report.scores.get(headline)
    return MergedJob(
        role=role,
        name=report.job.name,
        location=report.job.location,
        n_trials=report.job.n_trials,
        raw=result.rows[0].raw if result and result.rows else None,
    )
