"""The audit's one report model: what the pipeline (audit/pipeline.py) computes and every format
(audit/output/render/) only renders.

Every score in it is a convention's (audit/score/conventions.py), keyed by the convention's name:
`scores[name].rows[i].raw` and `.adjusted`. The headline is `convention` (the board's unless
asked otherwise); the reference is compared in its own convention.
"""

from __future__ import annotations

from audit.score.adjudications import AdjudicationOut
from audit.score.attempts import Attempts
from audit.score.conformance import Conformance
from audit.score.conventions import ConventionResult, ConventionScore, pick
from audit.score.harbor_policy import PolicySummary
from audit.score.merge import Merge
from audit.score.quotable import Quotable
from audit.score.reference import ReferenceResult
from audit.score.rows import JobInfo, Tokens, TrialRow
from audit.score.scores import Out
from audit.score.submission import Disagreement
from audit.score.time_split import ServingOut
from contracts import harbor_profiles as hp

SCORING_RULE = (
    "Every score names its convention (leaderboard: the Terminal-Bench board's SQL, counted "
    "exception types only, each task's mean reward then the mean over tasks, +/- 1.96 x its "
    "stderr; harbor-0.21: every trial, no reward = 0; harbor-0.26: valid rewards only). raw = "
    "the convention over the trials as they are. adjusted = the same over the trials as the "
    "audit settles them: infra and cancelled trials (an outside cause proven) leave the "
    "denominator, as the board drops the exceptions it does not count; an adjudication sets "
    "its trials' reward (pass 1, fail 0) or removes its task (exclude). No trial is ever "
    "counted as passed without an adjudication: infra and cancelled trials are listed under "
    "rerun. What a job dir cannot show of the board's rule (the task checksum in the dataset "
    "version, the job flagged for the board, the model registered) is not checked."
)


class Report(Out):
    job: JobInfo  # the main job (the first given)
    jobs: list[JobInfo]  # every job of the submission, in the order given
    convention: str = hp.LEADERBOARD  # the headline's
    scores: dict[str, ConventionResult]
    unrun: int = 0  # planned trials of the jobs without a trial dir
    reference: ReferenceResult = ReferenceResult()
    # Trials the board counts and the audit takes out, or the reverse.
    disagreements: list[Disagreement] = []
    categories: dict[str, int]
    signatures: dict[str, int]
    rerun: list[str]
    rerun_args: list[str]
    tokens: Tokens
    adjudications: list[AdjudicationOut]
    scoring_rule: str = SCORING_RULE
    problems: list[str]
    trials: list[TrialRow]
    attempts: Attempts = Attempts()
    conformance: Conformance | None = None
    merge: Merge | None = None  # set when the job is audited with its reruns
    provenance: dict | None = None
    # How many trials reached the model: yes / no / unknown / no model.
    model_reached: dict[str, int] = {}
    # Can the raw score be quoted (audit/score/quotable.py)?
    quotable: Quotable | None = None
    # One line of meaning per signature seen (audit/judge/signatures.py).
    signature_meanings: dict[str, str] = {}
    # The serving plane's own record over the main job (audit/read/serving.py): the HTML
    # timeline, and the plane's failures with the reads that show them.
    serving: ServingOut | None = None
    # Harbor 0.26's error policy beside the audit's verdicts (audit/score/harbor_policy.py).
    harbor_policy: PolicySummary | None = None

    def adjusted_excluded(self) -> list[str]:
        """The tasks an adjudication excludes from the adjusted scores."""
        return sorted({r.task for r in self.trials if r.counted_as == "excluded"})

    def score(self, name: str | None = None, which: str = "raw", row: int = 0
              ) -> ConventionScore:
        """A convention's row (the headline's first by default), raw or adjusted."""
        return pick(self.scores, name or self.convention, which, row)
