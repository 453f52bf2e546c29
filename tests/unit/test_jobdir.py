"""components/jobdir.py, the one reader of Harbor's job directory: states, the status probe's
token, trials that never ran, and the file as it runs on the host (stdlib only)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from components import jobdir
from tests.conftest import ROOT


def write(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value) if not isinstance(value, str) else value)


def test_states_and_tokens(tmp_path) -> None:
    jobs, logs = tmp_path / "results", tmp_path / "logs"
    assert jobdir.status(jobs, logs, "j") == {"state": "absent", "token": "start", "pid": None}
    write(jobs / "j" / "config.json", {})
    write(logs / "j.launch-token", "start\n")
    write(logs / "j.pid", "999999999\n")
    # Not alive, not finished: interrupted, with a token new for this dead PID.
    digest = hashlib.sha256(b"start|999999999").hexdigest()[:12]
    assert jobdir.status(jobs, logs, "j") == {
        "state": "interrupted", "token": f"resume-{digest}", "pid": 999999999}
    write(jobs / "j" / "result.json", {"finished_at": "2026-12-01T00:00:00"})
    assert jobdir.status(jobs, logs, "j")["state"] == "finished"
    # Alive means a process whose command line names the job (a recycled PID is not it).
    proc = tmp_path / "proc"
    write(proc / "999999999" / "cmdline", "harbor\0run\0--job-name\0j\0")
    assert jobdir.status(jobs, logs, "j", proc=proc) == {
        "state": "running", "token": "start", "pid": 999999999}
    write(proc / "999999999" / "cmdline", "bash\0")
    assert jobdir.status(jobs, logs, "j", proc=proc)["state"] == "finished"


def test_never_ran_is_the_shape_of_a_trial_cancelled_in_setup(tmp_path) -> None:
    ran = {"trial_name": "a", "exception_info": None, "verifier_result": None,
           "agent_execution": {"started_at": "x"}, "verifier": None}
    never = dict(ran, agent_execution=None)
    cancelled = dict(never, exception_info={"exception_type": "CancelledError"})
    assert not jobdir.never_ran(ran) and jobdir.never_ran(never)
    assert not jobdir.never_ran(cancelled), "a recorded cancellation is Harbor's own to resume"
    for name, result in (("a__1", ran), ("b__2", never), ("c__3", cancelled)):
        write(tmp_path / name / "result.json", result | {"trial_name": name})
    write(tmp_path / "d__4" / "result.json", "{half-writ")
    assert [d.name for d, _ in jobdir.trial_results(tmp_path)] == ["a__1", "b__2", "c__3"]
    out = subprocess.run([sys.executable, "-I", "-S", str(ROOT / "components" / "jobdir.py"),
                          "never-ran", str(tmp_path)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["b__2"]


def test_reruns_are_the_job_dirs_named_after_the_job_oldest_first(tmp_path) -> None:
    import os

    jobs = tmp_path / "results"
    for name, mtime in (("j-rerun-bbbb", 200), ("j-rerun-aaaa", 300), ("j-rerun-cccc", 100)):
        write(jobs / name / "config.json", {})
        os.utime(jobs / name / "config.json", (mtime, mtime))
    (jobs / "j-rerun-dddd").mkdir()  # Harbor never started it: no config.json
    write(jobs / "j" / "config.json", {})
    write(jobs / "jj-rerun-eeee" / "config.json", {})  # another job's rerun
    expected = [str(jobs / n) for n in ("j-rerun-cccc", "j-rerun-bbbb", "j-rerun-aaaa")]
    assert jobdir.reruns(jobs, "j") == expected
    proc = subprocess.run([sys.executable, str(ROOT / "components" / "jobdir.py"), "reruns",
                           str(jobs), "j"], capture_output=True, text=True, check=True)
    assert json.loads(proc.stdout) == {"job_dirs": expected}
    assert jobdir.reruns(tmp_path / "missing", "j") == []
