"""The tolerant reader: damaged, missing and oversized files are reported, never fatal."""

from __future__ import annotations

import json

import pytest

from audit.pipeline import build_report
from audit.read.layout import MAX_READ, JobLayout, NotAJobError
from tests.audit.audit_jobgen import PYTEST_FAIL, PYTEST_PASS, TrialSpec, apt_502, write_job


def _job(tmp_path, specs):
    return write_job(tmp_path, "job", specs, concurrency=len(specs))


def _trial_dirs(job):
    return sorted(p for p in job.iterdir() if p.is_dir())


def test_trial_without_result_json_is_judged_from_its_reward_file(tmp_path):
    # Harbor had written the reward (and the job listed it) but no result.json: the reward is
    # still the trial's outcome. (This used to be insufficient_evidence.)
    job = _job(
        tmp_path,
        [
            TrialSpec("fix-git", verifier_stdout=PYTEST_PASS),
            TrialSpec("regex-log", write_result=False),
        ],
    )
    report = build_report(JobLayout.local(job))
    row = next(t for t in report.trials if t.task == "regex-log")
    assert (row.category, row.reward) == ("passed", 1.0)
    assert any("result.json is missing; judged from verifier/reward.txt" in p for p in row.problems)


def test_trial_without_result_json_or_anything_else_is_insufficient_evidence(tmp_path):
    job = _job(
        tmp_path,
        [
            TrialSpec("fix-git", verifier_stdout=PYTEST_PASS),
            TrialSpec("regex-log", reward=None, write_result=False),
        ],
    )
    for reward_file in job.glob("regex-log__*/verifier/reward.txt"):
        reward_file.unlink()
    report = build_report(JobLayout.local(job))
    row = next(t for t in report.trials if t.task == "regex-log")
    assert (row.category, row.signature) == ("insufficient_evidence", "no_result_json")
    assert "result.json is missing" in row.evidence[0]
    assert "harbor job resume" in row.explanation
    assert any("result.json is missing" in p for p in report.problems)
    # It still counts in the denominator: an unfinished trial did not pass.
    assert (report.score("harbor-0.21").passed, report.score("harbor-0.21").counted) == (1, 2)


def test_corrupt_result_json_is_reported(tmp_path):
    job = _job(tmp_path, [TrialSpec("fix-git", corrupt_result=True)])
    report = build_report(JobLayout.local(job))
    (row,) = report.trials
    assert (row.category, row.signature) == ("insufficient_evidence", "corrupt_result_json")
    assert "corrupt" in row.problems[0]


def test_wrong_field_types_are_reported_not_raised(tmp_path):
    job = _job(tmp_path, [TrialSpec("fix-git")])
    (trial,) = _trial_dirs(job)
    data = json.loads((trial / "result.json").read_text())
    data["verifier_result"] = {"rewards": "one"}
    (trial / "result.json").write_text(json.dumps(data))
    (row,) = build_report(JobLayout.local(job)).trials
    assert row.category == "insufficient_evidence"
    assert "verifier_result.rewards" in row.problems[0]


def test_corrupt_trajectory_falls_back_to_the_recording(tmp_path):
    spec = TrialSpec(
        "build-pov-ray",
        reward=0.0,
        commands=["curl -m 30 -O https://web.archive.example/p.tgz\n"] * 2,
        observations=["curl: (28) Operation timed out after 30001 milliseconds\n"] * 2,
        verifier_stdout=PYTEST_FAIL,
    )
    job = _job(tmp_path, [spec])
    (trial,) = _trial_dirs(job)
    (trial / "agent" / "trajectory.json").write_text('{"steps": [{"source": "agent", "tool_')
    cast = trial / "agent" / "recording.cast"
    cast.write_text(cast.read_text() + '[12.5, "o", "torn li')  # a container killed mid-write
    report = build_report(JobLayout.local(job))
    (row,) = report.trials
    # Named by the failure family, not the tool (was agent_curl_timeout).
    assert row.signature == "agent_network_timeout"
    assert all("agent/recording.cast" in line for line in row.evidence)
    assert any("trajectory.json is corrupt" in p for p in row.problems)
    assert any("recording.cast: 1 unreadable lines" in p for p in row.problems)


def test_binary_garbage_in_logs_does_not_crash(tmp_path):
    job = _job(tmp_path, [TrialSpec("fix-git", reward=0.0, verifier_stdout="x")])
    (trial,) = _trial_dirs(job)
    (trial / "verifier" / "test-stdout.txt").write_bytes(bytes(range(256)) * 64)
    (trial / "trial.log").write_bytes(b"\xff\xfe\x00garbage")
    (row,) = build_report(JobLayout.local(job)).trials
    assert row.category == "agent_error"


def test_oversized_log_is_read_head_and_tail(tmp_path):
    noise = "Unpacking libfoo (1.0) ...\n" * (MAX_READ // 25)
    spec = TrialSpec("fix-git", reward=0.0, verifier_stdout=noise + apt_502("python3-pytest"))
    job = _job(tmp_path, [spec])
    (row,) = build_report(JobLayout.local(job)).trials
    assert row.signature == "verifier_proxy_5xx", "evidence at the end of a huge log is found"


def test_missing_job_files_and_stray_dirs_are_reported(tmp_path):
    job = _job(tmp_path, [TrialSpec("fix-git", verifier_stdout=PYTEST_PASS)])
    (job / "result.json").unlink()
    (job / "config.json").write_text("{not json")
    (job / "notes").mkdir()
    report = build_report(JobLayout.local(job))
    assert report.score("harbor-0.21").score == 100.0
    assert "result.json is missing" in report.problems
    assert any(p.startswith("config.json is corrupt") for p in report.problems)
    assert any(p.startswith("notes/ is not a trial dir") for p in report.problems)


def test_planned_trials_without_dirs_count_as_not_passed(tmp_path):
    job = _job(tmp_path, [TrialSpec("fix-git", verifier_stdout=PYTEST_PASS)])
    data = json.loads((job / "result.json").read_text())
    data["n_total_trials"] = 4
    data["finished_at"] = None
    (job / "result.json").write_text(json.dumps(data))
    report = build_report(JobLayout.local(job))
    h21 = report.score("harbor-0.21")  # the three never run count as 0
    assert (h21.passed, h21.counted, h21.score) == (1, 4, 25.0)
    assert report.job.finished is False
    assert any("3 of 4 planned trials" in p for p in report.problems)


def test_not_a_job_dir(tmp_path):
    (tmp_path / "jobs" / "a").mkdir(parents=True)
    with pytest.raises(NotAJobError, match="not a Harbor job dir"):
        build_report(JobLayout.local(tmp_path / "jobs"))
    with pytest.raises(NotAJobError, match="does not exist"):
        JobLayout.local(tmp_path / "missing")


def test_a_trial_dir_is_not_taken_for_a_job(tmp_path):
    job = _job(tmp_path, [TrialSpec("fix-git", verifier_stdout=PYTEST_PASS)])
    (trial,) = _trial_dirs(job)
    with pytest.raises(NotAJobError, match="is a trial dir, not a job dir: pass its parent"):
        build_report(JobLayout.local(trial))
