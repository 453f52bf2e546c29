"""Score conventions: one registry, and the only place a score is computed.

A convention says which trials count and why, what a missing reward is, how the counted trials
aggregate (over trials, or per task and then over tasks), its interval, how trials group into
rows, and when a row is valid. Every number the project prints is computed by `score_rows` and
carries the name of the convention it was computed in (contracts/harbor_profiles.py names
them; a Harbor profile names its own there).

`leaderboard`: the Terminal-Bench board's accuracy, as its SQL computes it (`get_agent_scores_v4`
in harbor-framework/terminal-bench-docs, supabase/migrations/20260528030135_include_nonzero_agent_
exit_code_leaderboard.sql; its page, app/(home)/leaderboard/components/columns.tsx), clause by
clause:
  1. a trial counts when its exception_info is null or its exception_type is one of
     BOARD_COUNTED; an exception_info without a type does not (`NULL IN (...)` is not true). A
     trial without result.json was never uploaded: not on the board. A trial whose result.json
     names no model (agent_info.model_info) is counted, but its row exists only if the import
     names the model (`p_hats` keeps only trials with a registered model; the importer can
     override it): such a row's validity is "cannot tell";
  2. a counted trial's reward is COALESCE(reward, 0), where the uploader stored the verifier's
     `reward` key, 0 when the rewards name none (terminal-bench-experiments scripts/run_job.py:
     `rewards.get("reward", 0)`, None without rewards);
  3. per task, p̂ = the mean reward of its counted trials; accuracy = the mean of p̂ over tasks;
  4. stderr = sqrt(Σ p̂(1−p̂)/(n−1)) / n_tasks, null as soon as one task has a single counted
     trial; the page shows `(accuracy*100).toFixed(1)%` and `± (stderr*100*1.96).toFixed(1)`;
  5. a row exists when accuracy > 1% and every task of the dataset has a counted trial;
  6. a row is one agent name, agent version and set of models: it pools their counted trials
     across jobs.
What a job dir cannot show stays outside (the task checksum belonging to the dataset version,
the job's include_on_leaderboard flag, the model's registration); every report says so.
`leaderboard-before-2026-05-28` is the same rule before that migration (no
NonZeroAgentExitCodeError).

`harbor-0.21`: Harbor 0.21.0's job mean: every trial counts, a trial without a reward as 0
(contracts/harbor_profiles.py cites the wheel); planned trials that never ran count as 0 here, so
an unfinished job's number is the lowest it can end at. `harbor-0.26`: Harbor 0.26.0's: only
trials whose reward is valid (its result.json's reward_valid, else its error-policy table).

The adjusted score of every convention is the same rule over the trials as the audit settles
them (TrialFacts.settled and .dropped): a trial the audit lists for rerun (infra, cancelled: an
outside cause proven) leaves the denominator, as the board drops the exceptions it does not
count; an adjudication sets its trial's reward (pass 1, fail 0; it then counts whatever its
exception) or removes its task (exclude).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

from audit.score.attempts import pass_at_k
from audit.score.scores import Out
from audit.score.stats import wilson
from contracts import harbor_profiles as hp

CI_LEVEL = 0.95
Z_95 = 1.96  # the board's page multiplies its stderr by 1.96, not by the exact 1.95996...
PASS_REWARD = 1.0

# The exception types the board counts (clause 1), newest version first.
BOARD_COUNTED = ("AgentTimeoutError", "VerifierTimeoutError", "PermissionError",
                 "RewardFileNotFoundError", "NonZeroAgentExitCodeError")
BOARD_COUNTED_BEFORE_2026_05_28 = BOARD_COUNTED[:-1]


@dataclass(frozen=True)
class TrialFacts:
    """What a convention reads of one trial."""

    task: str
    trial: str
    reward: float | None = None  # the audit's reading: the `reward` key, or a single-key reward
    reward_key: float | None = None  # the `reward` key alone (what the board's uploader stores)
    has_result: bool = True
    exception_recorded: bool = False  # an exception_info, with or without a type
    exception: str | None = None
    reward_valid: bool = False  # Harbor 0.26's verdict: its result.json's, else its table's
    agent: str | None = None
    agent_version: str | None = None
    models: tuple[str, ...] = ()  # "provider/name", sorted
    # Set only for the adjusted score: an adjudication's reward (counted whatever the rule
    # says), or why the audit takes the trial out.
    settled: float | None = None
    dropped: str = ""


Rule = Callable[[TrialFacts], tuple[bool, str]]


def every_trial(t: TrialFacts) -> tuple[bool, str]:
    if not t.has_result:
        return True, "no result.json: counts as 0"
    return True, "every trial counts" if t.reward is not None else "no reward: counts as 0"


def valid_reward(t: TrialFacts) -> tuple[bool, str]:
    if t.reward is None:
        return False, "no reward"
    if t.reward_valid:
        return True, "its reward is valid"
    return False, f"reward not valid ({t.exception or 'no exception'})"


def exception_types(counted: Sequence[str]) -> Rule:
    """The board's clause 1 with `counted` as its list."""
    listed = frozenset(counted)

    def rule(t: TrialFacts) -> tuple[bool, str]:
        if not t.has_result:
            return False, "no result.json: never uploaded"
        if not t.exception_recorded:
            return True, "no exception"
        if t.exception is None:
            return False, "exception_info without an exception_type"
        if t.exception in listed:
            return True, f"{t.exception} is counted"
        return False, f"{t.exception} is not counted"

    return rule


def reward_key_or_zero(t: TrialFacts) -> float:
    return t.reward_key if t.reward_key is not None else 0.0


def reward_or_zero(t: TrialFacts) -> float:
    return t.reward if t.reward is not None else 0.0


@dataclass(frozen=True)
class Convention:
    name: str
    title: str  # one line, beside every number computed in it
    counts: Rule
    reward: Callable[[TrialFacts], float]
    per_task: bool  # p̂ per task then the mean over tasks (its stderr); else over trials (Wilson)
    by_agent: bool  # a row per agent name, version and models; else one row for every trial
    unrun_as_zero: bool = False  # planned trials without a trial dir count as 0
    needs_every_task: bool = False
    above: float | None = None  # a row needs a score strictly above this (percent)
    source: str = ""
    # Another convention's earlier version: computed in every report, printed only when asked
    # for (the headline).
    variant_of: str | None = None


_REGISTRY: dict[str, Convention] = {}


def register(convention: Convention) -> Convention:
    if convention.name in _REGISTRY:
        raise ValueError(f"score convention {convention.name!r} is registered already")
    _REGISTRY[convention.name] = convention
    return convention


def get(name: str) -> Convention:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown score convention {name!r}; known: "
                         f"{', '.join(_REGISTRY)}") from None


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


_SQL = ("harbor-framework/terminal-bench-docs supabase/migrations/"
        "20260528030135_include_nonzero_agent_exit_code_leaderboard.sql")
register(Convention(
    name=hp.LEADERBOARD,
    title="the Terminal-Bench board's accuracy: counted exception types only, the mean over "
          "tasks of each task's mean reward, ± 1.96 x its stderr",
    counts=exception_types(BOARD_COUNTED), reward=reward_key_or_zero, per_task=True,
    by_agent=True, needs_every_task=True, above=1.0, source=f"get_agent_scores_v4, {_SQL}"))
register(Convention(
    name=hp.LEADERBOARD_BEFORE_2026_05_28,
    title="the board's accuracy before 2026-05-28 (NonZeroAgentExitCodeError not counted)",
    counts=exception_types(BOARD_COUNTED_BEFORE_2026_05_28), reward=reward_key_or_zero,
    per_task=True, by_agent=True, needs_every_task=True, above=1.0,
    source="get_agent_scores_v4 before 2026-05-28, harbor-framework/terminal-bench-docs "
           "supabase/migrations/20251223215709_remote_schema.sql", variant_of=hp.LEADERBOARD))
register(Convention(
    name=hp.HARBOR_0_21,
    title="Harbor 0.21's job mean: every trial counts, a trial without a reward as 0",
    counts=every_trial, reward=reward_or_zero, per_task=False, by_agent=False,
    unrun_as_zero=True, source="harbor 0.21.0 harbor/job.py, harbor/metrics/base.py"))
register(Convention(
    name=hp.HARBOR_0_26,
    title="Harbor 0.26's job mean: only trials whose reward is valid",
    counts=valid_reward, reward=reward_or_zero, per_task=False, by_agent=False,
    source="harbor 0.26.0 harbor/job.py, harbor/models/trial/error_policy.py"))

# The conventions every report shows, in this order after its headline.
SHOWN = (hp.LEADERBOARD, hp.HARBOR_0_21, hp.HARBOR_0_26)


def printed(headline: str) -> list[str]:
    """The conventions a report prints: its headline, then SHOWN, then every other registered
    one that is no earlier version of another."""
    rest = [n for n in names() if _REGISTRY[n].variant_of is None]
    return list(dict.fromkeys([headline, *SHOWN, *rest]))


# --- what a score is --------------------------------------------------------------------------


class TaskMean(Out):
    counted: int
    mean: float  # p̂, 0..1


class ConventionScore(Out):
    """One row's number in one convention."""

    convention: str
    score: float | None  # percent, rounded to 2 decimals
    fraction: float | None = None  # the same unrounded, 0..1
    low: float | None = None  # the interval, percent
    high: float | None = None
    plus_minus: float | None = None  # half the interval, points
    stderr: float | None = None  # per-task conventions: the board's stderr, a fraction
    interval: str = ""  # how the interval was computed
    counted: int = 0
    passed: int = 0  # counted trials with reward 1
    tasks: int = 0  # tasks with a counted trial
    per_task: dict[str, TaskMean] = {}
    # {"k": percent} for k = 1 .. the fewest counted trials of any task (Chen et al.'s unbiased
    # estimator over each task's counted trials, reward 1 a pass, then the mean over tasks).
    pass_at_k: dict[str, float] = {}
    # None: cannot tell (an input is missing: say which in `invalid`).
    valid: bool | None = True
    invalid: list[str] = []
    shown: str = ""  # the number as printed, convention included

    def contains(self, value: float | None) -> bool | None:
        if value is None or self.low is None or self.high is None:
            return None
        return self.low <= value <= self.high


class ScoreRow(Out):
    """A row of a convention: an agent version with its models (the board's rows), or every
    trial (Harbor's job mean)."""

    agent: str | None = None
    agent_version: str | None = None
    models: list[str] = []
    raw: ConventionScore
    adjusted: ConventionScore

    def label(self) -> str:
        if self.agent is None and not self.models:
            return "every trial"
        models = ", ".join(self.models) or "no model in result.json"
        return f"{self.agent} {self.agent_version or '?'} / {models}"


class ConventionResult(Out):
    convention: str
    title: str
    source: str
    # When a row counts under the convention ("" when it has no such rule: Harbor's job mean).
    row_rule: str = ""
    rows: list[ScoreRow]
    # Why trials are not counted, and how many (raw, then adjusted).
    left_out: dict[str, int] = {}
    left_out_adjusted: dict[str, int] = {}


def pick(scores: dict[str, ConventionResult], name: str, which: str = "raw",
         row: int = 0) -> ConventionScore:
    """`scores[name]`'s row `row`, raw or adjusted (KeyError / IndexError when absent)."""
    return getattr(scores[name].rows[row], which)


# --- computing it -------------------------------------------------------------------------------


def counts(convention: Convention, t: TrialFacts) -> tuple[bool, str]:
    """Whether `t` counts in `convention`, and why (the audit's settlement first)."""
    if t.dropped:
        return False, t.dropped
    if t.settled is not None:
        return True, "adjudicated"
    return convention.counts(t)


def _reward(convention: Convention, t: TrialFacts) -> float:
    return t.settled if t.settled is not None else convention.reward(t)


Key = tuple[str | None, str | None, tuple[str, ...]]


def _key(convention: Convention, t: TrialFacts) -> Key:
    return (t.agent, t.agent_version, t.models) if convention.by_agent else (None, None, ())


@dataclass
class _Group:
    rewards: dict[str, list[float]] = field(default_factory=dict)  # task -> counted rewards

    def add(self, task: str, reward: float) -> None:
        self.rewards.setdefault(task, []).append(reward)

    def pass_at_k(self) -> dict[str, float]:
        if not self.rewards:
            return {}
        tasks = [(len(rs), sum(1 for r in rs if r >= PASS_REWARD)) for rs in self.rewards.values()]
        n_min = min(n for n, _ in tasks)
        return {str(k): round(float(100 * sum(pass_at_k(n, c, k) for n, c in tasks) / len(tasks)),
                              2) for k in range(1, n_min + 1)}


def _groups(convention: Convention, trials: Sequence[TrialFacts],
            left_out: dict[str, int]) -> dict[Key, _Group]:
    groups: dict[Key, _Group] = {}
    for t in trials:
        counted, why = counts(convention, t)
        if counted:
            groups.setdefault(_key(convention, t), _Group()).add(t.task, _reward(convention, t))
        else:
            left_out[why] = left_out.get(why, 0) + 1
    return groups


def to_fixed(value: float, digits: int) -> str:
    """JavaScript's Number.prototype.toFixed: the exact binary value, a tie rounded up."""
    exact = Decimal(value).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    return f"{exact:.{digits}f}"


def _per_task(convention: Convention, group: _Group) -> ConventionScore:
    p_hats = {task: Fraction(sum(map(Fraction, rs))) / len(rs)
              for task, rs in sorted(group.rewards.items())}
    accuracy = sum(p_hats.values(), Fraction(0)) / len(p_hats)
    single = any(len(rs) == 1 for rs in group.rewards.values())
    stderr = None if single else math.sqrt(float(sum(
        (p * (1 - p) / (len(group.rewards[t]) - 1) for t, p in p_hats.items()), Fraction(0)
    ))) / len(p_hats)
    pm = Z_95 * stderr * 100 if stderr is not None else None
    percent = float(accuracy) * 100
    shown = (f"{to_fixed(percent, 1)}% ± "
             f"{to_fixed(stderr * 100 * Z_95, 1) if stderr is not None else 'N/A'}")
    return ConventionScore(
        convention=convention.name, score=round(percent, 2), fraction=float(accuracy),
        stderr=stderr,
        plus_minus=round(pm, 2) if pm is not None else None,
        low=round(percent - pm, 2) if pm is not None else None,
        high=round(percent + pm, 2) if pm is not None else None,
        interval="± 1.96 x stderr, stderr = sqrt(sum of p(1-p)/(n-1)) / tasks"
        + ("; none: a task has a single counted trial" if single else ""),
        counted=sum(len(rs) for rs in group.rewards.values()),
        passed=sum(1 for rs in group.rewards.values() for r in rs if r >= PASS_REWARD),
        tasks=len(p_hats),
        per_task={t: TaskMean(counted=len(group.rewards[t]), mean=round(float(p), 6))
                  for t, p in p_hats.items()},
        pass_at_k=group.pass_at_k(),
        shown=f"{shown} ({convention.name})")


def _over_trials(convention: Convention, group: _Group, unrun: int) -> ConventionScore:
    rewards = [r for rs in group.rewards.values() for r in rs] + [0.0] * unrun
    passed = sum(1 for r in rewards if r >= PASS_REWARD)
    total = len(rewards)
    fraction = sum(rewards) / total if total else None
    mean = fraction * 100 if fraction is not None else None
    binary = all(r in (0.0, 1.0) for r in rewards)
    ci = wilson(passed, total, CI_LEVEL) if binary else None
    low, high = (round(100 * ci[0], 2), round(100 * ci[1], 2)) if ci else (None, None)
    value = "n/a" if mean is None else f"{mean:.2f}"
    span = f", 95% CI {low:.2f} - {high:.2f}" if low is not None and high is not None else ""
    return ConventionScore(
        convention=convention.name, score=round(mean, 2) if mean is not None else None,
        fraction=fraction, low=low, high=high, pass_at_k=group.pass_at_k(),
        plus_minus=round((high - low) / 2, 2) if low is not None and high is not None else None,
        interval="95% Wilson score interval over the counted trials" if binary
        else "none: rewards other than 0 and 1",
        counted=total, passed=passed, tasks=len(group.rewards),
        shown=f"{passed}/{total} = {value}{span} ({convention.name})")


def _validity(convention: Convention, s: ConventionScore, tasks_run: set[str],
              dataset_tasks: int | None, model_named: bool = True) -> ConventionScore:
    invalid: list[str] = []
    unknown = 0
    if convention.by_agent and not model_named:
        unknown += 1
        invalid.append("result.json names no model (agent_info.model_info): the board shows "
                       "the row only if its import names one")
    if convention.above is not None and (s.score is None or s.score <= convention.above):
        invalid.append(f"score {s.score} is not above {convention.above:g}%")
    if convention.needs_every_task:
        lost = sorted(tasks_run - set(s.per_task))
        if lost:
            invalid.append(f"{len(lost)} task(s) ran without a counted trial: {', '.join(lost)}")
        if dataset_tasks is None:
            unknown += 1
            invalid.append(f"{s.tasks} tasks have a counted trial; the dataset's task count is "
                           "unknown (--dataset-tasks N)")
        elif s.tasks != dataset_tasks:
            invalid.append(f"{s.tasks} of the dataset's {dataset_tasks} tasks have a counted "
                           "trial")
    definite = len(invalid) - unknown
    valid = False if definite else (None if unknown else True)
    return s.model_copy(update={"valid": valid, "invalid": invalid})


def _score(convention: Convention, group: _Group | None, unrun: int, tasks_run: set[str],
           dataset_tasks: int | None, key: Key) -> ConventionScore:
    group = group or _Group()
    if convention.per_task and group.rewards:
        s = _per_task(convention, group)
    elif convention.per_task:
        s = ConventionScore(convention=convention.name, score=None,
                            shown=f"no counted trial ({convention.name})")
    else:
        s = _over_trials(convention, group, unrun if convention.unrun_as_zero else 0)
    return _validity(convention, s, tasks_run, dataset_tasks, model_named=bool(key[2]))


def _row_rule(convention: Convention) -> str:
    parts = []
    if convention.needs_every_task:
        parts.append("every task of the dataset with a counted trial")
    if convention.above is not None:
        parts.append(f"a score above {convention.above:g}%")
    rows = "a row per agent name, version and models" if convention.by_agent else ""
    need = f"needs {' and '.join(parts)}" if parts else ""
    return "; ".join(x for x in (rows, need) if x)


def score_rows(convention: Convention, raw: Sequence[TrialFacts],
               adjusted: Sequence[TrialFacts], *, unrun: int = 0,
               dataset_tasks: int | None = None) -> ConventionResult:
    """`convention` over the trials as they are (`raw`) and as the audit settles them
    (`adjusted`: the same trials with `settled` and `dropped` set). `unrun`: planned trials
    without a trial dir. `dataset_tasks`: how many tasks the dataset has, when known."""
    left_raw: dict[str, int] = {}
    left_adjusted: dict[str, int] = {}
    raw_groups = _groups(convention, raw, left_raw)
    adjusted_groups = _groups(convention, adjusted, left_adjusted)
    keys = list(dict.fromkeys([*raw_groups, *adjusted_groups])) or [(None, None, ())]
    tasks_run = {t.task for t in raw}
    rows = [
        ScoreRow(
            agent=key[0], agent_version=key[1], models=list(key[2]),
            raw=_score(convention, raw_groups.get(key), unrun, tasks_run, dataset_tasks, key),
            adjusted=_score(convention, adjusted_groups.get(key), unrun, tasks_run,
                            dataset_tasks, key),
        )
        for key in keys
    ] if raw or adjusted or unrun else []
    return ConventionResult(convention=convention.name, title=convention.title,
                            source=convention.source, row_rule=_row_rule(convention), rows=rows,
                            left_out=dict(sorted(left_raw.items())),
                            left_out_adjusted=dict(sorted(left_adjusted.items())))


def score_all(raw: Sequence[TrialFacts], adjusted: Sequence[TrialFacts], *, unrun: int = 0,
              dataset_tasks: int | None = None,
              shown: Sequence[str] = SHOWN) -> dict[str, ConventionResult]:
    """Every convention in `shown` plus every other registered one, `shown`'s order first."""
    order = list(dict.fromkeys([*shown, *names()]))
    return {name: score_rows(get(name), raw, adjusted, unrun=unrun,
                             dataset_tasks=dataset_tasks) for name in order}
