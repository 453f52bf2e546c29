"""Harbor's two score conventions and Harbor 0.26's own error-policy table in the audit.

- The score and pass@k under harbor-0.21 (every trial, a missing reward as 0) and harbor-0.26
  (valid rewards only), labelled, beside the board's, with the one the job's result.json used;
  for a 0.21 job, "valid" is what 0.26's table says of its trials.
- Harbor's decision on each trial (from a 0.26 result.json, or what 0.26.0's table would have
  said of a 0.21 one) beside the audit's verdict, and where the two differ, why. Harbor's table
  never takes a trial out of the model's account on its own: that takes the proof rule.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from audit.pipeline import build_report
from audit.read.layout import JobLayout
from audit.score.harbor_policy import FROM_RESULT, FROM_TABLE
from contracts import harbor_profiles
from tests.audit.audit_jobgen import PYTEST_FAIL, TrialSpec, seed_final_run, write_job
from tests.conftest import ROOT

SEED = {s.task: s for s in seed_final_run()}


def specs() -> list[TrialSpec]:
    return [
        TrialSpec("fix-git"),
        TrialSpec("regex-log", reward=0.0, verifier_stdout=PYTEST_FAIL),
        # The seed's proxy 502 in the verifier: infra for the audit, a graded 0 for Harbor.
        SEED["prove-plus-comm"],
        # A verifier timeout: counted against the model by the audit, left out by Harbor.
        SEED["pytorch-model-recovery"],
        # The endpoint failed and the verifier still graded (0.26 grades API errors), with no
        # line that shows an outside cause.
        TrialSpec("mailman", reward=0.0, exception_type="InternalServerError",
                  traceback="Traceback (most recent call last):\n"
                            "litellm.exceptions.InternalServerError\n"),
    ]


def as_026(job: Path) -> Path:
    """Rewrite a generated job's result files as Harbor 0.26.0 writes them: schema_version,
    reward_valid and exception_info.policy, computed by 0.26.0's own rule."""
    for path in job.glob("*/result.json"):
        data = json.loads(path.read_text())
        info = data.get("exception_info")
        if info:
            policy = harbor_profiles.policy_0_26(info["exception_type"])
            info["policy"] = {"should_retry": policy.should_retry,
                              "should_grade": policy.should_grade,
                              "has_valid_reward": policy.has_valid_reward}
        data.update(schema_version=1, reward_valid=harbor_profiles.reward_valid(data))
        path.write_text(json.dumps(data))
    result = json.loads((job / "result.json").read_text())
    result["schema_version"] = 1
    (job / "result.json").write_text(json.dumps(result))
    return job


@pytest.fixture
def job_021(tmp_path: Path) -> Path:
    return write_job(tmp_path, "job-021", specs(), concurrency=5)


@pytest.fixture
def job_026(tmp_path: Path) -> Path:
    return as_026(write_job(tmp_path, "job-026", specs(), concurrency=5))


def test_a_026_job_is_scored_under_both_conventions_and_says_which_it_used(job_026):
    report = build_report(JobLayout.local(job_026))
    h21, h26 = report.score("harbor-0.21"), report.score("harbor-0.26")
    # Harbor 0.21's: every trial, a missing reward as 0. Valid rewards only: the verifier
    # timeout (no reward) and the graded API error (reward not valid) drop out.
    assert (h21.passed, h21.counted) == (1, 5)
    assert (h26.passed, h26.counted) == (1, 3)
    # The board's: the InternalServerError is not counted, the verifier timeout is (as 0): four
    # tasks of one trial each, 1/4.
    board = report.score("leaderboard")
    assert (board.passed, board.counted, board.shown) == (1, 4, "25.0% ± N/A (leaderboard)")
    assert report.job.reported_convention == "harbor-0.26"
    assert report.scores["harbor-0.21"].title == (
        "Harbor 0.21's job mean: every trial counts, a trial without a reward as 0")
    assert report.scores["harbor-0.26"].title == (
        "Harbor 0.26's job mean: only trials whose reward is valid")
    assert (h21.pass_at_k, h26.pass_at_k) == ({"1": 20.0}, {"1": 33.33})


def test_a_026_jobs_own_policy_is_read_and_each_difference_explained(job_026):
    report = build_report(JobLayout.local(job_026))
    rows = {t.task: t for t in report.trials}
    policy = {task: row.harbor_policy for task, row in rows.items()}
    assert {p.source for p in policy.values() if p} == {FROM_RESULT}
    summary = report.harbor_policy
    assert summary is not None and (summary.agree, summary.differ) == (2, 3)
    assert sorted(summary.differences) == sorted(
        rows[t].trial for t in ("prove-plus-comm", "pytorch-model-recovery", "mailman"))
    # Harbor counts the proxy's 502 as the model's 0; the audit quotes the proxy.
    assert policy["prove-plus-comm"].differs.startswith(
        "Harbor 0.26 counts its reward (a reward, no exception); the audit lists it for rerun "
        "as infra: ")
    assert "502" in policy["prove-plus-comm"].differs
    # Harbor drops the verifier timeout on its type; the audit keeps it the model's trial.
    assert policy["pytorch-model-recovery"].differs.startswith(
        "Harbor 0.26 leaves it out of its score (no reward; VerifierTimeoutError, in its table: "
        "retry no, grade yes, reward valid no); the audit counts it as verifier_timeout")
    assert policy["regex-log"].differs == policy["fix-git"].differs == ""


def test_harbors_table_never_excuses_a_trial_on_its_own(job_026):
    """The graded API error: Harbor's table says its reward is not valid (as if the trial were
    not the model's); with no quoted outside cause the audit keeps it in the model's account:
    counted, not listed for rerun."""
    report = build_report(JobLayout.local(job_026))
    mailman = next(t for t in report.trials if t.task == "mailman")
    assert mailman.harbor_policy is not None
    assert (mailman.harbor_policy.has_valid_reward, mailman.harbor_policy.reward_valid) == (
        False, False)
    assert mailman.category not in ("infra", "cancelled") and mailman.proof == []
    assert "mailman" not in report.rerun and mailman.counted_as == "fail"
    assert "an exception type is no proof of an outside cause" in mailman.harbor_policy.differs
    h21 = report.score("harbor-0.21")
    assert (h21.passed, h21.counted) == (1, 5)


def test_a_021_job_gets_what_026s_table_would_have_said(job_021):
    report = build_report(JobLayout.local(job_021))
    assert {t.harbor_policy.source for t in report.trials if t.harbor_policy} == {FROM_TABLE}
    assert report.job.reported_convention == "harbor-0.21"
    # The same trials, the same verdicts: 0.26's table applied to 0.21's results.
    h26 = report.score("harbor-0.26")
    assert (h26.passed, h26.counted) == (1, 3)
    assert report.harbor_policy is not None and report.harbor_policy.differ == 3


def test_pass_at_k_under_both_conventions(tmp_path: Path):
    """Two attempts per task; one attempt of `regex-log` ends in a graded API error (a reward
    0.26 does not count): pass@k over every attempt, and over the valid ones only."""
    trials = [TrialSpec("fix-git"), TrialSpec("fix-git", reward=0.0, verifier_stdout=PYTEST_FAIL),
              TrialSpec("regex-log"),
              TrialSpec("regex-log", reward=0.0, exception_type="InternalServerError",
                        traceback="Traceback (most recent call last):\n"
                                  "litellm.exceptions.InternalServerError\n")]
    report = build_report(JobLayout.local(write_job(tmp_path, "two", trials, concurrency=4)))
    # Every attempt: fix-git 1 of 2, regex-log 1 of 2; pass@1 = 50, pass@2 = 100.
    assert report.score("harbor-0.21").pass_at_k == {"1": 50.0, "2": 100.0}
    # Valid only: fix-git 1 of 2; regex-log 1 of 1: n_min 1, pass@1 = (1/2 + 1) / 2. The
    # board's counts the same trials here (the InternalServerError is not counted either).
    assert report.score("harbor-0.26").pass_at_k == {"1": 75.0}
    assert report.score("leaderboard").pass_at_k == {"1": 75.0}


def test_every_format_labels_both_conventions_and_shows_harbors_policy(job_026, run_cli):
    for fmt in ("table", "markdown", "html"):
        res = run_cli(str(job_026), "--format", fmt)
        assert res.returncode == 0, res.stderr
        # The terminal table wraps a long cell within its borders; HTML escapes quotes.
        text = html.unescape(res.stdout) if fmt == "html" else res.stdout
        flat = " ".join(text.replace("│", " ").split())
        assert "leaderboard, raw" in flat and "25.0% ± N/A (leaderboard)" in flat, fmt
        assert "harbor-0.21, raw" in flat and "1/5 = 20.00" in flat, fmt
        assert "(harbor-0.21)" in flat, fmt
        assert "harbor-0.26, raw" in flat and "1/3 = 33.33" in flat, fmt
        assert "pass@k, harbor-0.26" in flat and "pass@1 = 33.33" in flat, fmt
        assert "convention the job's result.json used" in flat and "harbor-0.26" in flat, fmt
        assert ("from the job's result.json (Harbor 0.26): agrees with the audit on whether 2 "
                "trials count, differs on 3") in flat, fmt
        assert "Harbor's table never overrides the proof rule" in flat, fmt
        # Each trial where they differ is marked (the trial tables) or explained (HTML).
        assert "(differs)" in flat or "Differs: Harbor 0.26 leaves it out" in flat, fmt
    data = json.loads(run_cli(str(job_026), "--format", "json").stdout)
    assert data["harbor_policy"]["differ"] == 3
    assert data["scores"]["harbor-0.26"]["rows"][0]["raw"]["pass_at_k"] == {"1": 33.33}


def test_the_rule_is_written_in_rules_md():
    text = (ROOT / "audit" / "RULES.md").read_text()
    section = text[text.index("**What is not proof**"): text.index("## 3.")]
    assert "**Harbor's own error policy**" in section
    assert "it never takes a\n  trial out of the model's account" in section
