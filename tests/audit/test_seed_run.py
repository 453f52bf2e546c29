"""The seed's final run (89 trials) audited end to end: categories, scores, reruns, tokens."""

from __future__ import annotations

import json

import pytest

from audit.pipeline import build_report
from audit.read.layout import JobLayout
from audit.score.adjudications import load_adjudications, parse_adjudications
from tests.audit.audit_jobgen import SEED_EXPECTED
from tests.audit.conftest import SEED_ADJUDICATIONS, SEED_JOB_NAME

H21 = "harbor-0.21"


def _report(job, adjudications=None, reference=None):
    return build_report(JobLayout.local(job), adjudications, reference)


def test_raw_score_and_counts(seed_job):
    report = _report(seed_job)
    raw = report.score(H21)
    assert (raw.passed, raw.counted, raw.score) == (61, 89, 68.54)
    rewards = [t.reward for t in report.trials]
    assert (rewards.count(1.0), rewards.count(0.0), rewards.count(None)) == (61, 24, 4)
    exceptions = [t.exception for t in report.trials if t.exception]
    assert len(exceptions) == 16
    assert exceptions.count("AgentTimeoutError") == 13
    assert exceptions.count("VerifierTimeoutError") == 2
    assert exceptions.count("RuntimeError") == 1
    # Without adjudications the five infra trials (all reward 0) leave the adjusted
    # denominator, none is counted as passed: 61/84.
    adjusted = report.score(H21, "adjusted")
    assert (adjusted.passed, adjusted.counted, adjusted.score) == (61, 84, 72.62)
    # The board's rule: headless-terminal's RuntimeError is not counted, so 88 tasks keep one
    # trial each: 61/88 = 69.32 %, no ± (one trial per task), and no row (a task is lost).
    board = report.score("leaderboard")
    assert (board.counted, board.tasks, board.score, board.stderr) == (88, 88, 69.32, None)
    assert board.shown == "69.3% ± N/A (leaderboard)"
    assert board.valid is False  # a task lost its only trial, whatever the dataset's count
    assert "1 task(s) ran without a counted trial: headless-terminal" in board.invalid


def test_categories_of_the_seed_audit(seed_job):
    report = _report(seed_job)
    by_task = {t.task: (t.category, t.signature) for t in report.trials}
    for task, expected in SEED_EXPECTED.items():
        assert by_task[task] == expected, task
    assert report.categories == {
        "passed": 59,
        "agent_error": 12,
        "agent_timeout": 11,
        "verifier_timeout": 2,
        "infra": 5,
        "cancelled": 0,
        "insufficient_evidence": 0,
    }
    assert report.signatures["verifier_proxy_5xx"] == 2
    assert report.signatures["graded_fail"] == 11
    assert sum(report.signatures.values()) == 89 - 59
    assert report.rerun == [
        "build-pov-ray",
        "dna-assembly",
        "make-doom-for-mips",
        "prove-plus-comm",
        "tune-mjcf",
    ]
    assert report.rerun_args[:2] == ["-i", "build-pov-ray"]


def test_evidence_quotes_the_seed_tables(seed_job):
    rows = {t.task: "\n".join(t.evidence) for t in _report(seed_job).trials}
    assert (
        "502" in rows["prove-plus-comm"] and "verifier/test-stdout.txt" in rows["prove-plus-comm"]
    )
    assert "172.18.0.1 27891" in rows["make-doom-for-mips"]
    assert "CERTIFICATE_VERIFY_FAILED" in rows["dna-assembly"]
    assert "UNEXPECTED_EOF_WHILE_READING" in rows["dna-assembly"]
    assert "curl: (28)" in rows["build-pov-ray"]
    assert "test session starts" in rows["pytorch-model-recovery"]
    # What the seed's adjudication rests on: the first four tests passed before the timeout.
    assert (
        "pytest progress before the timeout: 4 passed, 0 failed, 0 errors of 5 collected"
        in rows["pytorch-model-recovery"]
    )
    assert "pytest progress" not in rows["torch-tensor-parallelism"], "pytest never started"
    assert "tmux kill-server" in rows["headless-terminal"]


def test_seed_adjudications_give_the_seed_scores(seed_job):
    report = _report(seed_job, load_adjudications(SEED_ADJUDICATIONS), 73.0)
    adj = report.score(H21, "adjusted")
    # Every infra trial is adjudicated: 61 + 3 adjudicated passes (prove-plus-comm, tune-mjcf,
    # pytorch-model-recovery) over 89 - build-pov-ray (excluded) = 64/88.
    assert (adj.passed, adj.counted, adj.score) == (64, 88, 72.73)
    assert report.adjusted_excluded() == ["build-pov-ray"]
    # Adjudications change the adjusted score only.
    raw = report.score(H21)
    assert (raw.passed, raw.counted, raw.score) == (61, 89, 68.54)
    # The reference is compared in its convention, the board's: 61/88 = 69.32 raw, and
    # adjusted 64/87 = 73.56 (build-pov-ray excluded, headless-terminal's RuntimeError out).
    board = report.score("leaderboard", "adjusted")
    assert (board.passed, board.counted, board.score) == (64, 87, 73.56)
    by_which = {c.which: c for c in report.reference.comparisons}
    assert report.reference.published.convention == "leaderboard"
    assert (by_which["raw"].difference, by_which["adjusted"].difference) == (-3.68, 0.56)
    pov = next(t for t in report.trials if t.task == "build-pov-ray")
    assert pov.counted_as == "excluded" and "Cloudflare" in pov.adjudication["reason"]
    assert pov.category == "infra", "an adjudication must not rewrite what was observed"
    summary = {a.task: (a.decision, a.raw_outcome) for a in report.adjudications}
    assert summary["pytorch-model-recovery"] == ("pass", ["no reward"])
    assert summary["prove-plus-comm"] == ("pass", ["reward 0"])


def test_build_pov_ray_counted_as_passed_gives_73_03(seed_job):
    text = SEED_ADJUDICATIONS.read_text().replace(
        "- task: build-pov-ray\n  decision: exclude", "- task: build-pov-ray\n  decision: pass"
    )
    adjudications = parse_adjudications(text, "variant.yaml")
    assert {a.task: a.decision for a in adjudications}["build-pov-ray"] == "pass"
    report = _report(seed_job, adjudications, 73.0)
    adj = report.score(H21, "adjusted")
    assert (adj.passed, adj.counted, adj.score, report.adjusted_excluded()) == (65, 89, 73.03, [])


def test_token_totals_and_wall_time_match_the_seed(seed_job):
    report = _report(seed_job)
    assert report.tokens.input == 118_199_621
    assert report.tokens.output == 8_269_356
    # 2026-08-30 23:44:31 -> 2026-08-31 07:08:03 (both UTC+8): about 7 h 23 min.
    assert report.job.wall_seconds == 7 * 3600 + 23 * 60 + 32
    assert report.job.name == SEED_JOB_NAME
    assert report.job.finished and report.problems == []


def test_json_interface_keys(seed_job, run_cli):
    res = run_cli(
        str(seed_job),
        "--format",
        "json",
        "--adjudications",
        str(SEED_ADJUDICATIONS),
        "--reference-score",
        "73.0",
    )
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["convention"] == "leaderboard"
    assert list(data["scores"])[:3] == ["leaderboard", "harbor-0.21", "harbor-0.26"]
    h21 = data["scores"]["harbor-0.21"]["rows"][0]
    assert {k: h21["raw"][k] for k in ("passed", "counted", "score")} == {
        "passed": 61,
        "counted": 89,
        "score": 68.54,
    }
    # 95% Wilson interval of 61/89.
    assert (h21["raw"]["low"], h21["raw"]["high"]) == (58.3, 77.25)
    assert {k: h21["adjusted"][k] for k in ("passed", "counted", "score", "low", "high")} == {
        "passed": 64, "counted": 88, "score": 72.73, "low": 62.62, "high": 80.93,
    }
    board = data["scores"]["leaderboard"]["rows"][0]
    assert (board["agent"], board["agent_version"], board["models"]) == (
        "terminus-2", "2.0.0", ["openai/qwen38-27b"])
    assert data["reference"]["published"]["score"] == 73.0
    assert [c["difference"] for c in data["reference"]["comparisons"]] == [-3.68, 0.56]
    assert data["scores"]["harbor-0.26"]["rows"][0]["raw"]["counted"] == 85  # 4 have no reward
    # Each trial says whether the board counts it and why.
    headless = next(t for t in data["trials"] if t["task"] == "headless-terminal")
    assert headless["leaderboard"] == {"convention": "leaderboard", "counted": False,
                                       "why": "RuntimeError is not counted"}
    assert set(data["categories"]) == {
        "passed",
        "agent_error",
        "agent_timeout",
        "verifier_timeout",
        "infra",
        "cancelled",
        "insufficient_evidence",
    }
    assert data["rerun"] == sorted(data["rerun"]) and len(data["rerun"]) == 5
    assert len(data["trials"]) == 89
    for trial in data["trials"]:
        assert {"task", "trial", "reward", "exception", "category", "signature", "evidence"} <= set(
            trial
        )
    assert data["tokens"]["input"] == 118_199_621
    assert data["job"]["wall_seconds"] == 26612


@pytest.mark.parametrize(
    "text, message",
    [
        ("- task: nope\n  decision: pass\n  reason: typo in the name\n", "matches no trial"),
        ("- task: fix-git\n  decision: maybe\n  reason: unsure\n", "decision"),
        ("- task: fix-git\n  decision: pass\n", "reason"),
        (
            "- {task: fix-git, decision: pass, reason: one}\n"
            "- {task: fix-git, decision: fail, reason: two}\n",
            "adjudicated twice",
        ),
        ("task: fix-git\n", "expected a list"),
    ],
)
def test_bad_adjudications_name_the_problem(seed_job, text, message):
    with pytest.raises(ValueError, match=message):
        _report(seed_job, parse_adjudications(text, "adj.yaml"))


def test_adjudication_by_full_task_name(seed_job):
    adjudications = parse_adjudications(
        "- task: terminal-bench/tune-mjcf\n  decision: pass\n  reason: tests never ran (502)\n",
        "adj.yaml",
    )
    adj = _report(seed_job, adjudications).score(H21, "adjusted")
    # tune-mjcf passes; the four other infra trials leave the denominator: 62/85.
    assert (adj.passed, adj.counted) == (62, 85)
