"""The scored rows of a job: one per trial (its verdict, reward and how it counts), and the job
they belong to. The report (audit/score/report.py) holds them; the merge of a job with its
reruns (audit/score/merge.py) reads them through `ScoredJob`, so neither imports the other.
"""

from __future__ import annotations

from typing import Protocol

from audit.score.conventions import ConventionResult
from audit.score.harbor_policy import HarborPolicy
from audit.score.scores import Out as _Out
from audit.score.time_split import TimeSplit


class Tokens(_Out):
    input: int = 0
    cache: int = 0
    output: int = 0


class ProofOut(_Out):
    """One quoted line that shows an outside cause (audit/judge/verdict.py Proof)."""

    cause: str
    where: str
    quote: str
    reading: str = ""


class Counted(_Out):
    """Whether a convention counts a trial, and why (its exception type, its reward)."""

    convention: str
    counted: bool
    why: str


class TrialRow(_Out):
    task: str
    task_name: str | None
    trial: str
    reward: float | None
    exception: str | None
    category: str
    signature: str | None
    phase: str | None
    explanation: str
    evidence: list[str]
    endpoint: str | None
    reward_valid: bool | None  # Harbor 0.26
    exception_policy: str | None  # Harbor 0.26: what its error-policy table decided
    problems: list[str]
    adjudication: dict[str, str] | None
    counted_as: str
    started_at: str | None
    finished_at: str | None
    durations: dict[str, float | None]
    tokens: Tokens
    # What proves an outside cause, for the verdicts listed for rerun (empty otherwise).
    proof: list[ProofOut] = []
    # Was the model reached (audit/read/reached.py): yes, no, unknown or "no model", and the
    # line it rests on (replies, failed calls, tokens, the first call's outcome).
    model_reached: str = "unknown"
    model_reached_detail: str = ""
    # The registered meaning of the signature (audit/judge/signatures.py).
    meaning: str = ""
    # Where the trial's time went: setup, waiting on the model, running commands,
    # verification (audit/score/time_split.py).
    time: TimeSplit | None = None
    # Harbor 0.26's error policy for this trial, beside the audit's verdict
    # (audit/score/harbor_policy.py): from a 0.26 result.json, or what 0.26's table would say.
    harbor_policy: HarborPolicy | None = None
    # The evidence families the trial had (audit/judge/verdict.py FAMILIES), and whether its
    # verdict rests on Harbor's record alone (audit/judge/calibrate.py).
    evidence_families: list[str] = []
    record_alone: bool = False
    # What the score conventions read beside the audit's own fields (audit/score/
    # conventions.py): the job the trial belongs to, its agent, version and models (the board's
    # row), the verifier's `reward` key alone, whether result.json exists and records an
    # exception (with or without a type).
    job: str = ""
    agent: str | None = None
    agent_version: str | None = None
    models: list[str] = []
    reward_key: float | None = None
    has_result: bool = True
    exception_recorded: bool = False
    # Whether the headline convention (the board's) counts the trial, and why.
    leaderboard: Counted | None = None


class JobInfo(_Out):
    name: str
    location: str
    started_at: str | None
    finished_at: str | None
    finished: bool
    wall_seconds: float | None
    wall_source: str | None
    n_trials: int
    n_planned: int | None
    # The mean the job's own result.json reports, and the convention it matches (why, or why
    # none does).
    reported_mean: float | None = None
    reported_convention: str | None = None
    reported_reason: str = ""


class ScoredJob(Protocol):
    """What the merge reads of a job's report."""

    @property
    def job(self) -> JobInfo: ...
    @property
    def scores(self) -> dict[str, ConventionResult]: ...
    @property
    def unrun(self) -> int: ...
    @property
    def problems(self) -> list[str]: ...
    @property
    def trials(self) -> list[TrialRow]: ...
