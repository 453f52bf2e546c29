"""Attempts per task, pass@k (checked against a hand computation) and the leaderboard
conformance line, on generated jobs and on the real gemma jobs."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from audit.output.render import render
from audit.pipeline import build_report
from audit.read.layout import JobLayout
from audit.score.attempts import pass_at_k
from audit.score.conformance import line
from tests.audit.audit_jobgen import PYTEST_FAIL, PYTEST_PASS, TrialSpec, write_job
from tests.audit.test_merge import GEMMA_MAIN, GEMMA_RERUN

# Four tasks, five attempts each, with 0, 2, 3 and 5 passes.
PASSES = {"t-none": 0, "t-two": 2, "t-three": 3, "t-all": 5}
N = 5


def _config(job: Path, **changes) -> None:
    path = job / "config.json"
    config = json.loads(path.read_text())
    config.update(changes)
    path.write_text(json.dumps(config, indent=4))


@pytest.fixture
def five_attempts(tmp_path) -> Path:
    specs = [
        TrialSpec(task, reward=1.0, verifier_stdout=PYTEST_PASS)
        if i < c
        else TrialSpec(task, reward=0.0, verifier_stdout=PYTEST_FAIL)
        for task, c in PASSES.items()
        for i in range(N)
    ]
    job = write_job(tmp_path, "five-attempts", specs, concurrency=20)
    _config(job, n_attempts=N)  # the generator writes agent_timeout_multiplier 6.0
    return job


# pass@k per task = 1 - C(n-c, k) / C(n, k), n = 5, C(5, k) = 5, 10, 10, 5, 1; the job's
# pass@k is the mean over the four tasks (c = 0, 2, 3, 5):
HAND = {
    # c/n: (0 + 2/5 + 3/5 + 1) / 4
    "1": (Fraction(0) + Fraction(2, 5) + Fraction(3, 5) + 1) / 4,  # = 1/2
    # c=0: 1 - 10/10 = 0; c=2: 1 - C(3,2)/10 = 7/10; c=3: 1 - C(2,2)/10 = 9/10; c=5: 1
    "2": (Fraction(0) + Fraction(7, 10) + Fraction(9, 10) + 1) / 4,  # = 13/20
    # c=2: 1 - C(3,3)/10 = 9/10; c=3: C(2,3) = 0, so 1
    "3": (Fraction(0) + Fraction(9, 10) + 1 + 1) / 4,  # = 29/40
    # c=2: C(3,4) = 0, so 1, as for c=3 and c=5
    "4": Fraction(3, 4),
    "5": Fraction(3, 4),
}


def test_hand_fractions():
    assert HAND == {
        "1": Fraction(1, 2),
        "2": Fraction(13, 20),
        "3": Fraction(29, 40),
        "4": Fraction(3, 4),
        "5": Fraction(3, 4),
    }
    assert pass_at_k(5, 2, 2) == Fraction(7, 10)
    assert pass_at_k(5, 0, 5) == 0 and pass_at_k(5, 5, 1) == 1
    with pytest.raises(ValueError):
        pass_at_k(5, 2, 6)


def test_pass_at_k_of_a_five_attempt_job(five_attempts):
    report = build_report(JobLayout.local(five_attempts))
    a = report.attempts
    assert {t: (x.attempts, x.passed) for t, x in a.per_task.items()} == {
        t: (N, c) for t, c in PASSES.items()
    }
    assert (a.n_min, a.n_max, a.n_attempts_config) == (5, 5, 5)
    for name in ("leaderboard", "harbor-0.21", "harbor-0.26"):  # no exception: all agree
        at_k = report.score(name).pass_at_k
        assert at_k == {k: round(float(100 * v), 2) for k, v in HAND.items()}, name
        assert at_k == {"1": 50.0, "2": 65.0, "3": 72.5, "4": 75.0, "5": 75.0}, name
    # pass@1 is the raw score when every task has the same number of attempts.
    assert report.score("harbor-0.21").score == 50.0
    # The board's: p = 0, 2/5, 3/5, 1, their mean 0.5; its stderr sqrt(0 + (2/5)(3/5)/4 +
    # (3/5)(2/5)/4 + 0) / 4 = sqrt(0.12) / 4 = 0.0866, shown as ± 1.96 x 8.66 = 17.0.
    board = report.score("leaderboard")
    assert board.stderr == pytest.approx(0.12 ** 0.5 / 4)
    assert board.shown == "50.0% ± 17.0 (leaderboard)"


def test_conformance_lists_exactly_the_differences(five_attempts):
    c = build_report(JobLayout.local(five_attempts), dataset_tasks=4).conformance
    assert c is not None
    assert c.differences == ["agent_timeout_multiplier 6.0 (leaderboard: 1.0)"]
    assert c.conforms is False
    # The dataset is a local path: which commit it was is up to the provenance manifest.
    assert len(c.unknown) == 1 and "pass --official-dataset-commit SHA" in c.unknown[0]

    prov = {"schema": "benchstack.provenance/1", "dataset": {"commit": "0123abcd" * 5}}
    c = build_report(
        JobLayout.local(five_attempts),
        dataset_tasks=4,
        official_dataset_commit="0123abcd0123",  # a short SHA of the same commit
        provenance=prov,
    ).conformance
    assert c is not None
    assert (c.differences, c.unknown) == (["agent_timeout_multiplier 6.0 (leaderboard: 1.0)"], [])
    assert line(c) == "differs: agent_timeout_multiplier 6.0 (leaderboard: 1.0)"

    _config(five_attempts, agent_timeout_multiplier=None, timeout_multiplier=1.0)
    c = build_report(
        JobLayout.local(five_attempts),
        dataset_tasks=4,
        official_dataset_commit="0123abcd0123",
        provenance=prov,
    ).conformance
    assert c is not None and c.conforms and line(c) == "conforms"


def test_conformance_of_a_one_attempt_filtered_job(tmp_path):
    specs = [TrialSpec("t-a", verifier_stdout=PYTEST_PASS)]
    job = write_job(tmp_path, "one", specs, concurrency=1)
    _config(job, datasets=[{"path": "/data/tb21-tasks", "task_names": ["t-a"]}])
    c = build_report(JobLayout.local(job), dataset_tasks=89).conformance
    assert c is not None and c.differences == [
        "task filter: 1 of the dataset's 89 tasks",
        "1 attempt per task (leaderboard: at least 5)",
        "agent_timeout_multiplier 6.0 (leaderboard: 1.0)",
    ]


def test_every_format_shows_pass_at_k_and_conformance(five_attempts, run_cli):
    args = [str(five_attempts), "--dataset-tasks", "4"]
    data = json.loads(run_cli(*args, "--format", "json").stdout)
    assert data["scores"]["harbor-0.21"]["rows"][0]["raw"]["pass_at_k"]["5"] == 75.0
    assert data["attempts"]["per_task"]["t-two"] == {"attempts": 5, "passed": 2}
    assert data["conformance"]["differences"] == ["agent_timeout_multiplier 6.0 (leaderboard: 1.0)"]
    for fmt in ("table", "markdown", "html"):
        res = run_cli(*args, "--format", fmt)
        assert res.returncode == 0, res.stderr
        flat = " ".join(res.stdout.split())
        assert "pass@k, leaderboard" in flat and "pass@k, harbor-0.21" in flat, fmt
        assert "pass@1 = 50.00, pass@2 = 65.00, pass@3 = 72.50" in flat, fmt
        assert "pass@5 = 75.00" in flat, fmt
        assert "agent_timeout_multiplier 6.0 (leaderboard: 1.0)" in flat, fmt


@pytest.mark.parametrize("bad", ["0", "many"])
def test_dataset_tasks_must_be_a_positive_number(five_attempts, run_cli, bad):
    res = run_cli(str(five_attempts), "--dataset-tasks", bad)
    assert res.returncode == 2 and "--dataset-tasks" in res.stderr


def test_gemma_conformance_and_attempts():
    main = build_report(
        JobLayout.local(GEMMA_MAIN), dataset_tasks=89, official_dataset_commit="deadbeef"
    )
    assert main.conformance is not None
    assert main.conformance.differences == [
        "ran 88 of the dataset's 89 tasks",
        "1 attempt per task (leaderboard: at least 5)",
        "agent_timeout_multiplier 3.0 (leaderboard: 1.0)",
        "dataset commit sha256:c6fc2e2382c1dbae99b2d5ecd2f4f4a60c3c01e0d84642d69b4afd92e99d078b "
        "(leaderboard: deadbeef)",
    ]
    # 16 passes over the 88 tasks that have a trial; the 89th planned trial has no dir.
    assert main.score("harbor-0.21").pass_at_k == {"1": 18.18}
    assert "planned trials without a trial dir: 1" in main.attempts.note
    rerun = build_report(JobLayout.local(GEMMA_RERUN), dataset_tasks=89)
    assert rerun.conformance is not None
    assert rerun.conformance.differences[0] == "task filter: 41 of the dataset's 89 tasks"
    assert "1 attempt per task (leaderboard: at least 5)" in render(main, "markdown")
