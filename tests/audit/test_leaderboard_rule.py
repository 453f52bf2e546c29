"""The Terminal-Bench board's accuracy, clause by clause of its SQL (`get_agent_scores_v4`,
harbor-framework/terminal-bench-docs supabase/migrations/20260528030135_include_nonzero_agent_
exit_code_leaderboard.sql; audit/score/conventions.py cites it): one generated job per clause,
audited end to end, each number worked out by hand here.

The board's page shows `(accuracy*100).toFixed(1)%` and `± (stderr*100*1.96).toFixed(1)`, with
stderr = sqrt(sum over tasks of p(1-p)/(n-1)) / tasks, and `± N/A` when a task has one counted
trial.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from audit.output.render import render
from audit.pipeline import build_report
from audit.read.layout import JobLayout
from audit.score import conventions as conv
from audit.score.conventions import to_fixed
from audit.score.report import Report
from contracts import harbor_profiles as hp
from tests.audit.audit_jobgen import PYTEST_FAIL, PYTEST_PASS, TrialSpec, apt_502, write_job

BOARD = "leaderboard"
BEFORE = "leaderboard-before-2026-05-28"
COUNTED = ["AgentTimeoutError", "VerifierTimeoutError", "PermissionError",
           "RewardFileNotFoundError", "NonZeroAgentExitCodeError"]
NOT_COUNTED = ["RuntimeError", "EnvironmentStartTimeoutError", "ContextLengthExceededError",
               "ApiError", "CancelledError"]


def passed(task: str, **kw) -> TrialSpec:
    return TrialSpec(task, reward=1.0, verifier_stdout=PYTEST_PASS, **kw)


def failed(task: str, **kw) -> TrialSpec:
    return TrialSpec(task, reward=0.0, verifier_stdout=PYTEST_FAIL, **kw)


def audit(tmp_path: Path, specs: list[TrialSpec], name: str = "job", **kw) -> Report:
    job = write_job(tmp_path, name, specs, concurrency=len(specs))
    return build_report(JobLayout.local(job), **kw)


def pm(stderr: float) -> str:
    return to_fixed(stderr * 100 * 1.96, 1)


def test_clause_1_only_the_listed_exception_types_count(tmp_path):
    """Each counted type: a pass and a 0 with that exception, p = 1/2. Each other type, and an
    exception_info without a type: a pass, a fail, and a trial with that exception that the
    verifier still graded 1. Counted, it would make p = 2/3; the board leaves it out: p = 1/2.
    Every task: p = 1/2, n = 2, so p(1-p)/(n-1) = 1/4; 11 tasks: stderr = sqrt(11/4) / 11."""
    specs = []
    for kind in COUNTED:
        specs += [passed(f"c-{kind}"), TrialSpec(f"c-{kind}", reward=0.0, exception_type=kind)]
    for kind in NOT_COUNTED:
        specs += [passed(f"n-{kind}"), failed(f"n-{kind}"),
                  TrialSpec(f"n-{kind}", reward=1.0, exception_type=kind)]
    specs += [passed("untyped"), failed("untyped"),
              TrialSpec("untyped", reward=1.0, untyped_exception=True)]
    report = audit(tmp_path, specs)
    board = report.score(BOARD)
    stderr = math.sqrt(11 / 4) / 11
    assert (board.score, board.counted, board.tasks) == (50.0, 5 * 2 + 6 * 2, 11)
    assert board.stderr == pytest.approx(stderr)
    assert board.shown == f"50.0% ± {pm(stderr)} (leaderboard)" == "50.0% ± 29.5 (leaderboard)"
    why = {t.trial: t.leaderboard.why for t in report.trials if t.leaderboard and t.exception}
    for kind in COUNTED:
        assert f"{kind} is counted" in why.values()
    for kind in NOT_COUNTED:
        assert f"{kind} is not counted" in why.values()
    untyped = next(t for t in report.trials if t.task == "untyped" and t.exception_recorded)
    assert untyped.leaderboard is not None and not untyped.leaderboard.counted
    assert untyped.leaderboard.why == "exception_info without an exception_type"
    assert report.scores[BOARD].left_out == {
        **{f"{kind} is not counted": 1 for kind in NOT_COUNTED},
        "exception_info without an exception_type": 1,
    }
    # Harbor 0.21 counts all 28 trials: 5 passes + 6 x 2 passes = 17.
    assert (report.score("harbor-0.21").passed, report.score("harbor-0.21").counted) == (17, 28)


def test_clause_2_a_counted_trial_without_the_reward_key_is_0(tmp_path):
    """x: a pass and an agent timeout with no reward (COALESCE: 0), p = 1/2. y: a pass and a
    trial whose verifier wrote only {"accuracy": 1} (the uploader stores rewards.get("reward",
    0) = 0), p = 1/2. Accuracy 1/2, stderr sqrt(1/4 + 1/4) / 2. Harbor 0.21 reads the single
    key as the reward: 3 of 4."""
    report = audit(tmp_path, [
        passed("x"), TrialSpec("x", reward=None, exception_type="AgentTimeoutError"),
        passed("y"), TrialSpec("y", reward=1.0, rewards={"accuracy": 1.0},
                               verifier_stdout=PYTEST_PASS),
    ])
    board = report.score(BOARD)
    assert board.per_task == {"x": conv.TaskMean(counted=2, mean=0.5),
                              "y": conv.TaskMean(counted=2, mean=0.5)}
    assert board.shown == f"50.0% ± {pm(math.sqrt(0.5) / 2)} (leaderboard)"
    assert board.shown == "50.0% ± 69.3 (leaderboard)"
    assert report.score("harbor-0.21").shown.startswith("3/4 = 75.00")


def test_a_trial_without_a_model_counts_but_its_row_needs_the_import_to_name_one(tmp_path):
    """The board keeps only trials with a registered model; the uploader takes it from
    agent_info.model_info, the importer can name it instead. A job dir without one: the trials
    count (a: 1, 0; b: 1: 75%), and whether the row exists cannot be told."""
    report = audit(tmp_path, [passed("a", model=None), failed("a", model=None),
                              passed("b", model=None)], dataset_tasks=2)
    (row,) = report.scores[BOARD].rows
    assert (row.models, row.raw.shown, row.raw.valid) == ([], "75.0% ± N/A (leaderboard)", None)
    assert row.raw.invalid == ["result.json names no model (agent_info.model_info): the board "
                               "shows the row only if its import names one"]
    assert row.label() == "terminus-2 2.0.0 / no model in result.json"


def test_clause_3_per_task_means_then_the_mean_over_tasks(tmp_path):
    """Uneven attempts: a has 1, 1, 1, 0 (p = 3/4, p(1-p)/3 = 1/16), b has 0, 0 (p = 0). The
    board weighs each task the same: (3/4 + 0) / 2 = 37.5%, not 3 of 6 trials; stderr =
    sqrt(1/16) / 2 = 1/8."""
    report = audit(tmp_path, [passed("a"), passed("a"), passed("a"), failed("a"),
                              failed("b"), failed("b")])
    board = report.score(BOARD)
    assert (board.score, board.stderr, board.plus_minus) == (37.5, 0.125, 24.5)
    assert board.shown == "37.5% ± 24.5 (leaderboard)"
    assert (board.low, board.high) == (13.0, 62.0)
    assert report.score("harbor-0.21").score == 50.0  # over trials: 3 of 6


def test_clause_4_one_counted_trial_in_a_task_leaves_no_interval(tmp_path):
    """a: 1, 0 (p = 1/2); b: one pass and a RuntimeError the board leaves out, so one counted
    trial: stderr is null, the page shows ± N/A. Accuracy (1/2 + 1) / 2 = 75%."""
    report = audit(tmp_path, [passed("a"), failed("a"), passed("b"),
                              TrialSpec("b", reward=None, exception_type="RuntimeError")])
    board = report.score(BOARD)
    assert (board.score, board.stderr, board.plus_minus, board.low) == (75.0, None, None, None)
    assert board.shown == "75.0% ± N/A (leaderboard)"
    assert "a task has a single counted trial" in board.interval


def test_clause_5_a_row_needs_every_task_and_more_than_1_percent(tmp_path):
    """Three tasks of the dataset's 4 ran; c's only trial is a RuntimeError, so 2 tasks have a
    counted trial: no row. Then 100 tasks with one pass: exactly 1%, not above it: no row; two
    passes: 2%, a row."""
    report = audit(tmp_path, [passed("a"), failed("b"),
                              TrialSpec("c", reward=None, exception_type="RuntimeError")],
                   dataset_tasks=4)
    board = report.score(BOARD)
    assert board.valid is False
    assert board.invalid == ["1 task(s) ran without a counted trial: c",
                             "2 of the dataset's 4 tasks have a counted trial"]
    unknown = audit(tmp_path / "u", [passed("a"), failed("b")]).score(BOARD)
    assert unknown.valid is None and "the dataset's task count is unknown" in unknown.invalid[0]

    one = audit(tmp_path / "one", [passed("t000")] + [failed(f"t{i:03}") for i in range(1, 100)],
                dataset_tasks=100).score(BOARD)
    assert (one.score, one.valid, one.invalid) == (1.0, False, ["score 1.0 is not above 1%"])
    two = audit(tmp_path / "two", [passed("t000"), passed("t001")]
                + [failed(f"t{i:03}") for i in range(2, 100)], dataset_tasks=100).score(BOARD)
    assert (two.score, two.valid, two.invalid) == (2.0, True, [])


def test_clause_6_rows_per_agent_version_pooled_across_the_jobs_of_a_folder(tmp_path, run_cli):
    """A folder of three jobs: two of version 2.0.0 (x: 1, 1; y: 0, 1 pooled: p = 1, 1/2),
    one of 2.1.0 (x: 0, 0; y: 0, 1: p = 0, 1/2). Two rows: 75% and 25%, each stderr
    sqrt(0 + 1/4) / 2 = 1/4."""
    folder = tmp_path / "run"
    write_job(folder, "a-job", [passed("x"), failed("y")])
    write_job(folder, "b-job", [passed("x"), passed("y")], seed=8)
    v21 = {"agent_version": "2.1.0"}
    write_job(folder, "c-job", [failed("x", **v21), failed("y", **v21), failed("x", **v21),
                                passed("y", **v21)], seed=9)
    res = run_cli(str(folder), "--format", "json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert [j["name"] for j in data["jobs"]] == ["a-job", "b-job", "c-job"]
    rows = {r["agent_version"]: r["raw"] for r in data["scores"][BOARD]["rows"]}
    assert set(rows) == {"2.0.0", "2.1.0"}
    assert (rows["2.0.0"]["shown"], rows["2.1.0"]["shown"]) == (
        "75.0% ± 49.0 (leaderboard)", "25.0% ± 49.0 (leaderboard)")
    assert rows["2.0.0"]["per_task"]["x"] == {"counted": 2, "mean": 1.0}
    # Harbor's job mean has no rows: every trial of the submission, 4 of 8.
    (h21,) = data["scores"]["harbor-0.21"]["rows"]
    assert (h21["raw"]["passed"], h21["raw"]["counted"]) == (4, 8)
    # The same jobs given one by one are the same submission.
    jobs = [str(folder / n) for n in ("a-job", "b-job", "c-job")]
    assert json.loads(run_cli(*jobs, "--format", "json").stdout)["scores"] == data["scores"]
    table = run_cli(str(folder)).stdout
    assert "leaderboard, raw (terminus-2 2.0.0 / openai/qwen38-27b)" in " ".join(table.split())


def test_the_variant_before_2026_05_28_does_not_count_a_nonzero_exit(tmp_path, run_cli):
    """a: a pass and a NonZeroAgentExitCodeError graded 0; b: 1, 0. Now: p = 1/2, 1/2, 50% ±
    1.96 x sqrt(1/2)/2. Before: a keeps one counted trial (p = 1): 75%, ± N/A."""
    specs = [passed("a"), TrialSpec("a", reward=0.0, exception_type="NonZeroAgentExitCodeError"),
             passed("b"), failed("b")]
    report = audit(tmp_path, specs)
    assert report.score(BOARD).shown == "50.0% ± 69.3 (leaderboard)"
    assert report.score(BEFORE).shown == f"75.0% ± N/A ({BEFORE})"
    job = tmp_path / "job"
    data = json.loads(run_cli(str(job), "--convention", BEFORE, "--format", "json").stdout)
    assert data["convention"] == BEFORE
    assert {t["leaderboard"]["convention"] for t in data["trials"]} == {BEFORE}
    md = run_cli(str(job), "--convention", BEFORE, "--format", "markdown").stdout
    assert md.splitlines()[4].endswith(f"| 75.0% ± N/A ({BEFORE}) |")
    # Not asked for, the variant is in the JSON only.
    assert BEFORE not in run_cli(str(job), "--format", "markdown").stdout


def test_the_page_rounds_as_javascript_does():
    # toFixed rounds the exact binary value, a tie up: 12.25 is exact in binary.
    assert (to_fixed(12.25, 1), f"{12.25:.1f}") == ("12.3", "12.2")
    assert to_fixed(0.05, 1) == "0.1"  # 0.05 is a little above 0.05 in binary
    assert to_fixed(69.296, 1) == "69.3"


def test_adjusted_in_the_boards_convention_and_where_board_and_audit_disagree(tmp_path):
    """a: a pass and a verifier that met a proxy 502 (graded 0, no exception: the board counts
    it, the audit lists it for rerun); b: 1, 0. Raw: p = 1/2, 1/2, 50%. Adjusted: a's 502 out,
    p = 1, 1/2: 75%, ± N/A (a keeps one trial). With an adjudication failing b: b = 0, 0."""
    proxy = TrialSpec("a", reward=0.0, verifier_stdout="+ apt-get update\n" + apt_502("curl"))
    specs = [passed("a"), proxy, passed("b"), failed("b")]
    report = audit(tmp_path, specs)
    assert report.score(BOARD).shown == "50.0% ± 69.3 (leaderboard)"
    assert report.score(BOARD, "adjusted").shown == "75.0% ± N/A (leaderboard)"
    assert report.scores[BOARD].left_out_adjusted == {"the audit lists it for rerun (infra)": 1}
    (d,) = report.disagreements
    assert (d.task, d.category, d.board) == ("a", "infra", "counts it: no exception")
    assert d.audit == "lists it for rerun: an outside cause is proven"


def test_the_reference_names_the_tasks_behind_the_difference(tmp_path, run_cli):
    """Ours: a 1, b 0, c 1/2 (1, 0), d 1/2 (1, 0) -> 50%, stderr sqrt(1/4 + 1/4)/4. Published
    70% with a, b, c, d = 1, 0.8, 0.6, 0.4: b costs (0 - 0.8)/4 = -20 points of the -20, c
    -2.5, d +2.5. b alone accounts for more than half: it is named first. 70 lies inside our
    50 ± 1.96 x 17.68 = 34.6; our 50 lies outside its ± 3.1."""
    job = write_job(tmp_path, "job", [passed("a"), passed("a"), failed("b"), failed("b"),
                                      passed("c"), failed("c"), passed("d"), failed("d")],
                    concurrency=8)
    tasks = tmp_path / "tasks.json"
    tasks.write_text(json.dumps({"a": 1.0, "b": 0.8, "c": 0.6, "d": 0.4}))
    res = run_cli(str(job), "--reference-score", "70", "--reference-plus-minus", "3.1",
                  "--reference-tasks", str(tasks), "--format", "json")
    assert res.returncode == 0, res.stderr
    raw = json.loads(res.stdout)["reference"]["comparisons"][0]
    assert (raw["which"], raw["ours"], raw["difference"]) == ("raw", 50.0, -20.0)
    assert raw["ours_plus_minus"] == 34.65
    assert (raw["reference_inside_ours"], raw["ours_inside_reference"]) == (True, False)
    assert raw["tasks"] == [{"task": "b", "ours": 0.0, "published": 0.8, "points": -20.0}]
    assert raw["tasks_note"].startswith("1 tasks account for -20.00 of the -20.00 points")
    bad = tasks.with_name("bad.yaml")
    bad.write_text("a: 2\n")
    res = run_cli(str(job), "--reference-score", "70", "--reference-tasks", str(bad))
    assert res.returncode == 2 and "task 'a': 2 is not a p̂ between 0 and 1" in res.reason


def test_a_third_harbor_profile_is_its_profile_and_one_registry_entry(tmp_path, monkeypatch):
    """A profile names its convention; registering the convention is all the audit needs to
    compute and print it beside the others."""
    # The registration lives in a copy of the registry for this test only.
    monkeypatch.setattr(conv, "_REGISTRY", dict(conv._REGISTRY))
    profile = hp.HarborProfile(**{**hp.PROFILES["0.26.0"].__dict__, "version": "0.27.0",
                                  "score_convention": "harbor-0.27"})
    conv.register(conv.Convention(
        name=profile.score_convention, title="Harbor 0.27's job mean: passes over every graded "
        "trial", counts=lambda t: (t.reward is not None, "graded" if t.reward is not None
                                   else "not graded"),
        reward=conv.reward_or_zero, per_task=False, by_agent=False))
    report = audit(tmp_path, [passed("a"), failed("b"), TrialSpec("c", reward=None)])
    assert report.score("harbor-0.27").shown.startswith("1/2 = 50.00")
    assert "harbor-0.27, raw" in render(report, "markdown")
    with pytest.raises(ValueError, match="'harbor-0.27' is registered already"):
        conv.register(conv.get("harbor-0.27"))


def test_every_profiles_convention_is_registered():
    assert {p.score_convention for p in hp.PROFILES.values()} <= set(conv.names())
    assert set(hp.CONVENTIONS) == set(conv.names())
