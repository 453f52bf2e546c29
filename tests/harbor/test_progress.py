"""The progress CLI on the real sample job dirs of Harbor 0.21.0 (driven as a CLI, read as JSON)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from components.progress import RECORD_GRACE_S
from contracts import jobdir
from tests.conftest import ROOT, SAMPLE_JOBS, until_stdin_closes


def progress(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "components.progress", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def snap(job_dir: Path) -> dict:
    proc = progress(str(job_dir), "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_finished_job_with_pass_fail_and_timeout() -> None:
    out = snap(SAMPLE_JOBS / "oracle-dataset")
    assert out["finished"] is True and out["total"] == 3 and out["done"] == 3
    assert out["rewards"] == {"0.0": 2, "1.0": 1}
    assert out["errors"] == {"AgentTimeoutError": 1} and out["errored"] == 1
    scores = out["scores"]
    assert list(scores) == ["leaderboard", "harbor-0.21", "harbor-0.26"]
    assert scores["harbor-0.21"] == {"score": 33.33, "counted": 3,
                                     "shown": "1/3 = 33.33, 95% CI 6.15 - 79.23 (harbor-0.21)"}
    # An agent timeout is still graded: its 0 is a valid reward under both of Harbor's.
    assert (scores["harbor-0.26"]["score"], scores["harbor-0.26"]["counted"]) == (33.33, 3)
    # The board's: the agent timeout is counted (as 0); three tasks of one trial each.
    assert scores["leaderboard"] == {"score": 33.33, "counted": 3,
                                     "shown": "33.3% ± N/A (leaderboard)"}
    assert out["eta_s"] == 0.0 and 0 < out["elapsed_s"] < 120


def test_the_mean_under_both_conventions(tmp_path: Path) -> None:
    """A graded trial whose reward 0.26.0's table calls invalid (the verifier ran after the
    endpoint failed: InternalServerError) counts as 0 in Harbor 0.21's mean and not at all in
    0.26's; a 0.26.0 result's own `reward_valid` is taken as it says."""
    job = tmp_path / "job"
    shutil.copytree(SAMPLE_JOBS / "oracle-dataset", job)
    wrong = next(job.glob("hello-file-wrong__*")) / "result.json"
    result = json.loads(wrong.read_text())
    result["exception_info"] = {"exception_type": "InternalServerError",
                                "exception_message": "Connection error.",
                                "exception_traceback": "", "occurred_at": result["started_at"]}
    wrong.write_text(json.dumps(result))
    out = snap(job)
    assert out["scores"]["harbor-0.21"]["score"] == 33.33  # 1/3
    assert out["scores"]["harbor-0.26"]["score"] == 50.0  # 1/2
    wrong.write_text(json.dumps({**result, "exception_info": None, "reward_valid": False}))
    assert snap(job)["scores"]["harbor-0.26"]["score"] == 50.0


def test_attempts_and_ungraded_trials() -> None:
    out = snap(SAMPLE_JOBS / "oracle-attempts")
    assert out["total"] == 4 and out["done"] == 4 and sum(out["rewards"].values()) == 4
    timeout = snap(SAMPLE_JOBS / "oracle-verifier-timeout")
    assert timeout["rewards"] == {"none": 1} and timeout["errors"] == {"VerifierTimeoutError": 1}
    scores = timeout["scores"]
    assert scores["harbor-0.21"]["score"] == 0.0, "Harbor 0.21.0's mean counts it as 0"
    assert scores["harbor-0.26"]["score"] is None, "no valid reward yet"


def test_interrupted_job_counts_cancelled_trials_as_not_done(tmp_path: Path) -> None:
    out = snap(SAMPLE_JOBS / "sigint-demo")
    assert out["finished"] is False and out["done"] == 0 and out["cancelled"] == 1
    assert out["total"] == 1 and out["eta_s"] is None
    # --wait on a job that never finishes gives up at --timeout with exit 2.
    proc = progress(str(SAMPLE_JOBS / "sigint-demo"), "--wait", "--json", "--interval", "0.2",
                    "--timeout", "1")
    assert proc.returncode == 2 and json.loads(proc.stdout)["finished"] is False


def test_running_job_estimates_the_remaining_time(tmp_path: Path) -> None:
    job = tmp_path / "job"
    shutil.copytree(SAMPLE_JOBS / "oracle-dataset", job)
    result = json.loads((job / "result.json").read_text())
    result["finished_at"] = None
    result["stats"] |= {"n_running_trials": 1, "n_pending_trials": 1}
    (job / "result.json").write_text(json.dumps(result))
    for trial in list(job.glob("hello-file-slow__*")) + list(job.glob("hello-file-wrong__*")):
        (trial / "result.json").unlink()
    # A half-written trial file (Harbor rewriting it) is skipped, not fatal.
    next(job.glob("hello-file-wrong__*")).joinpath("result.json").write_text('{"trial_na')
    out = snap(job)
    assert out["finished"] is False and out["done"] == 1 and out["total"] == 3
    assert out["running"] == 1 and out["pending"] == 1
    assert out["eta_s"] is not None and out["eta_s"] > 0


def test_not_a_job_dir(tmp_path: Path) -> None:
    proc = progress(str(tmp_path), "--json")
    assert proc.returncode == 1 and "not a job dir" in proc.stderr
    once = progress(str(SAMPLE_JOBS / "oracle-dataset"), "--once")
    assert once.returncode == 0 and once.stdout.strip()


def test_wait_stops_when_harbor_is_gone(tmp_path: Path) -> None:
    pid_file = tmp_path / "job.pid"
    pid_file.write_text("999999999\n")  # no such process
    proc = progress(str(SAMPLE_JOBS / "sigint-demo"), "--wait", "--json", "--interval", "0.2",
                    "--timeout", "30", "--pid-file", str(pid_file))
    assert proc.returncode == 3 and "interrupted" in proc.stderr
    assert json.loads(proc.stdout)["finished"] is False


def test_wait_returns_once_the_serving_record_is_final(tmp_path: Path) -> None:
    """A finished job's sampler takes a last read after Harbor exits: `--wait` returns after it
    ends, so the audit run next reads the whole record. The sampler here ends when the test
    closes its standard input, not on a clock, so a slow machine changes nothing."""
    job = tmp_path / "oracle-dataset"
    shutil.copytree(SAMPLE_JOBS / "oracle-dataset", job)
    pid_file = Path(jobdir.serving_sampler_pid(str(job)))
    sampler = until_stdin_closes(str(job))  # its command line names the job, as a sampler's
    pid_file.write_text(f"{sampler.pid}\n")
    waiting = subprocess.Popen(
        [sys.executable, "-m", "components.progress", str(job), "--wait", "--json",
         "--interval", "0.2", "--timeout", "30"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # While the sampler runs, --wait does not return (on a slower machine, all the more).
        with pytest.raises(subprocess.TimeoutExpired):
            waiting.wait(timeout=3)
    finally:
        sampler.stdin.close()
    out, err = waiting.communicate(timeout=RECORD_GRACE_S)
    assert waiting.returncode == 0, err
    assert sampler.poll() is not None, "returned while the sampler still ran"
    assert json.loads(out)["finished"] is True
    # A PID file whose process is another program's (alive, its command line not naming the
    # job) is no sampler: no wait, where a sampler would be waited for up to RECORD_GRACE_S.
    other = until_stdin_closes()
    pid_file.write_text(f"{other.pid}\n")
    try:
        proc = progress(str(job), "--wait", "--json", "--interval", "0.2",
                        timeout=RECORD_GRACE_S / 2)
        assert other.poll() is None
    finally:
        other.stdin.close()
        other.wait(timeout=10)
    assert proc.returncode == 0, proc.stderr

