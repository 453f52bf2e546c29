"""A job killed from outside: `cancelled` when the job's own files show it was still running.

Issue #20: a runner's `timeout`, a Ctrl-C, a lost machine leave trials without result.json, and
sometimes no job result.json at all. Harbor writes a trial's result.json whenever it ends, by
error or cancel too (reference §1.4, §3.2), so a trial left mid-phase was stopped with the job.
"""

from __future__ import annotations

import json

from audit.pipeline import build_report
from audit.read.layout import JobLayout
from tests.audit.agent_formats import bare, cc_assistant, claude_code_stream
from tests.audit.audit_jobgen import PYTEST_PASS, TrialSpec, write_job


def _job(tmp_path, keep_job_result: bool):
    specs = [
        TrialSpec("cancel-async-tasks", verifier_stdout=PYTEST_PASS),
        TrialSpec("fix-git", reward=None, write_result=False, verifier_stdout=None),
    ]
    job = write_job(tmp_path, "job", specs, concurrency=2, finished_local=None)
    if not keep_job_result:
        (job / "result.json").unlink()
    (stopped,) = [p for p in job.iterdir() if p.name.startswith("fix-git")]
    (stopped / "trial.log").write_text("Starting environment\nRunning agent\n")
    return job, stopped


def _row(job, task="fix-git"):
    return next(t for t in build_report(JobLayout.local(job)).trials if t.task == task)


def test_no_trial_and_no_job_result_json_with_a_trial_mid_phase_is_cancelled(tmp_path):
    job, _ = _job(tmp_path, keep_job_result=False)
    row = _row(job)
    assert (row.category, row.signature) == ("cancelled", "interrupted_no_result"), row.evidence
    (proof,) = row.proof
    assert (proof.cause, proof.where, proof.quote) == (
        "job_stopped",
        "trial.log:2",
        "Running agent",
    )
    assert "no result.json at all" in row.explanation
    report = build_report(JobLayout.local(job))
    assert "fix-git" in report.rerun


def test_lock_json_planning_more_trials_than_were_finalized(tmp_path):
    job, stopped = _job(tmp_path, keep_job_result=False)
    (stopped / "trial.log").unlink()
    for rel in ("agent", "verifier", "artifacts"):
        for f in sorted((stopped / rel).rglob("*"), reverse=True):
            f.unlink() if f.is_file() else f.rmdir()
    (job / "lock.json").write_text(json.dumps({"schema_version": 3, "trials": [{}, {}, {}]}))
    row = _row(job)
    assert row.category == "cancelled"
    assert ("../lock.json", "trials: 3 planned") in {(p.where, p.quote) for p in row.proof}


def test_a_stop_line_in_job_log(tmp_path):
    job, _ = _job(tmp_path, keep_job_result=False)
    (job / "job.log").write_text("Starting job job\nReceived SIGTERM, shutting down gracefully\n")
    row = _row(job)
    assert row.category == "cancelled"
    assert any(p.where == "../job.log:2" for p in row.proof)


def test_finished_at_null_is_the_jobs_own_word(tmp_path):
    job, _ = _job(tmp_path, keep_job_result=True)
    row = _row(job)
    assert row.category == "cancelled"
    assert ("../result.json", "finished_at: null") in {(p.where, p.quote) for p in row.proof}


def test_an_installed_agent_stopped_mid_stream(tmp_path):
    job, stopped = _job(tmp_path, keep_job_result=False)
    (stopped / "trial.log").unlink()
    bare(stopped, "claude-code")
    claude_code_stream(stopped, [cc_assistant("m1", "Looking.", ("t1", "ls"))])
    row = _row(job)
    assert row.category == "cancelled"
    assert row.proof[0].where == "trial dir listing"
    assert "agent/claude-code.txt" in row.proof[0].quote


def test_a_trial_dir_with_nothing_in_it_and_no_job_files_is_insufficient(tmp_path):
    job, stopped = _job(tmp_path, keep_job_result=False)
    for f in sorted(stopped.rglob("*"), reverse=True):
        f.unlink() if f.is_file() else f.rmdir()
    row = _row(job)
    assert row.category == "insufficient_evidence"


def test_a_finished_job_is_never_cancelled_for_a_missing_result(tmp_path):
    specs = [
        TrialSpec("cancel-async-tasks", verifier_stdout=PYTEST_PASS),
        TrialSpec("fix-git", reward=None, write_result=False, verifier_stdout=None),
    ]
    job = write_job(tmp_path, "job", specs, concurrency=2)
    for reward in job.glob("fix-git__*/verifier/reward.txt"):
        reward.unlink()
    row = _row(job)
    assert (row.category, row.signature) == ("insufficient_evidence", "no_result_json")
