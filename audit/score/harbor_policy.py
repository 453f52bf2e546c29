"""Harbor 0.26's own error-policy table, read as evidence beside the audit's verdict.

Harbor 0.26.0 classifies each trial's exception itself (its table, copied verbatim in
contracts/harbor_profiles.py from `harbor/models/trial/error_policy.py`): retry it or not,
grade it or not, and whether its reward is valid; its score then leaves out every trial whose
reward is not valid. A 0.26 job's trials carry that decision (`exception_info.policy`,
`reward_valid`); for a 0.21 job this says what 0.26's table would have said of the same
exception. Each trial shows it beside the audit's own verdict, and where the two differ on
whether the trial counts, why:

- Harbor leaves out a trial the audit counts: its table decides on the exception's type alone
  (a verifier timeout, an API error, no reward at all), and the audit counts a trial against the
  model unless a line of its files shows an outside cause (audit/RULES.md, the proof rule).
  Harbor's table never excuses a trial on its own.
- Harbor counts a trial the audit lists for rerun: a type its table does not know (a bare
  RuntimeError: a compose failure, "Command timed out after N seconds", an ack pod failure) is
  retried, graded and trusted there; the audit quotes the outside cause it found.
"""

from __future__ import annotations

from audit.score.scores import Out
from contracts import harbor_profiles

# The audit's verdicts that take a trial out of the model's account (listed for rerun).
NOT_COUNTED = ("infra", "cancelled")
FROM_RESULT = "the job's result.json (Harbor 0.26)"
FROM_TABLE = "Harbor 0.26.0's table (what it would have said)"


class HarborPolicy(Out):
    """What Harbor 0.26 decides of one trial, and whether that differs from the audit."""

    source: str
    exception: str | None = None
    # Harbor's policy for the exception; None when the trial has none.
    should_retry: bool | None = None
    should_grade: bool | None = None
    has_valid_reward: bool | None = None
    # The exception type is in Harbor's table (an unknown one is retried, graded and trusted).
    known: bool | None = None
    # The verifier left a reward (Harbor's score needs one, whatever the policy).
    has_reward: bool = False
    # Harbor's score counts this trial: it has a reward and no exception makes it invalid.
    reward_valid: bool
    # Empty when Harbor and the audit agree on whether the trial counts; else why not.
    differs: str = ""


class PolicySummary(Out):
    source: str
    agree: int
    differ: int
    # trial -> why the audit's verdict differs from Harbor's.
    differences: dict[str, str] = {}
    rule: str = (
        "Harbor's table decides by exception type alone and is shown as evidence; the audit's "
        "verdict stands on the proof rule (audit/RULES.md): a trial is not the model's only "
        "where a quoted line shows an outside cause"
    )


def _flag(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def read_policy(*, reward: float | None, reward_valid: bool | None, exception: str | None,
                policy: object) -> HarborPolicy:
    """Harbor's decision on a trial: as its result.json states it (0.26), else as 0.26.0's
    table decides for its exception type."""
    stated = isinstance(policy, dict) and {"should_retry", "should_grade",
                                           "has_valid_reward"} <= policy.keys()
    known = exception in harbor_profiles.ERROR_POLICY_0_26 if exception else None
    if stated:
        assert isinstance(policy, dict)
        retry, grade, valid = (_flag(policy[k]) for k in (
            "should_retry", "should_grade", "has_valid_reward"))
    elif exception:
        table = harbor_profiles.policy_0_26(exception)
        retry, grade, valid = table.should_retry, table.should_grade, table.has_valid_reward
    else:
        retry = grade = valid = None
    counted = (reward_valid if isinstance(reward_valid, bool)
               else reward is not None and valid is not False)
    source = FROM_RESULT if stated or isinstance(reward_valid, bool) else FROM_TABLE
    return HarborPolicy(source=source, exception=exception, should_retry=retry,
                        should_grade=grade, has_valid_reward=valid, known=known,
                        has_reward=reward is not None, reward_valid=counted)


def _decision(p: HarborPolicy) -> str:
    reward = "a reward" if p.has_reward else "no reward"
    if not p.exception:
        return f"{reward}, no exception"
    yes = {True: "yes", False: "no", None: "?"}
    table = "in its table" if p.known else "not in its table, so"
    return (f"{reward}; {p.exception}, {table}: retry {yes[p.should_retry]}, grade "
            f"{yes[p.should_grade]}, reward valid {yes[p.has_valid_reward]}")


def compare(p: HarborPolicy, *, category: str, explanation: str, proof: str) -> HarborPolicy:
    """`p` with `differs` set where Harbor and the audit disagree on whether the trial counts."""
    audit_counts = category not in NOT_COUNTED
    if p.reward_valid and not audit_counts:
        why = (f"Harbor 0.26 counts its reward ({_decision(p)}); the audit lists it for rerun "
               f"as {category}: {proof or explanation}")
    elif not p.reward_valid and audit_counts:
        because = ("no line of its files shows an outside cause, and Harbor's table is no "
                   "such line" if category == "insufficient_evidence"
                   else f"{explanation.rstrip('.')}; an exception type is no proof of an "
                   "outside cause")
        why = (f"Harbor 0.26 leaves it out of its score ({_decision(p)}); the audit counts it "
               f"as {category}: {because}")
    else:
        why = ""
    return p.model_copy(update={"differs": why})


def summarize(trials: list[tuple[str, HarborPolicy]]) -> PolicySummary:
    sources = {p.source for _, p in trials}
    differences = {trial: p.differs for trial, p in trials if p.differs}
    return PolicySummary(
        source=sources.pop() if len(sources) == 1 else "mixed" if sources else "no trials",
        agree=len(trials) - len(differences),
        differ=len(differences),
        differences=differences,
    )
