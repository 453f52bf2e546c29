"""contracts/jobdir.py, the one owner of Harbor's job layout: states, the status
probe's token, trials that never ran, the file as the probes run it (stdlib only), and the rule
that no other file spells the layout or decides "finished" or "running"."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from contracts import jobdir
from tests.conftest import ROOT

JOBDIR = ROOT / "contracts" / "jobdir.py"


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
    assert [d.name for d, r in jobdir.trial_results(tmp_path) if jobdir.never_ran(r)] == ["b__2"]
    assert [d.name for d in jobdir.trial_dirs(tmp_path)] == ["a__1", "b__2", "c__3", "d__4"]
    assert jobdir.compose_project("Hello-File__AbC") == "hello-file__abc__env"


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
    # As the probes run it: the file alone, isolated from the project (-I -S).
    proc = subprocess.run([sys.executable, "-I", "-S", "-", "reruns", str(jobs), "j"],
                          input=JOBDIR.read_text(), capture_output=True, text=True, check=True)
    assert json.loads(proc.stdout) == {"job_dirs": expected}
    assert jobdir.reruns(tmp_path / "missing", "j") == []


def test_the_probe_entry_says_unknown_without_a_job_name(tmp_path) -> None:
    def probe(*args: str) -> dict:
        proc = subprocess.run([sys.executable, "-I", "-S", "-", *args], input=JOBDIR.read_text(),
                              capture_output=True, text=True, check=True, cwd=tmp_path)
        return json.loads(proc.stdout)

    assert probe("status", str(tmp_path), str(tmp_path), "") == jobdir.UNKNOWN_STATUS
    assert probe("status", str(tmp_path), str(tmp_path), "j")["state"] == "absent"
    (tmp_path / "x-rerun-1").mkdir()
    (tmp_path / "x-rerun-1" / "config.json").write_text("{}")
    assert probe("reruns", "", "x") == {"job_dirs": []}


def test_layout_paths_and_states(tmp_path) -> None:
    assert jobdir.jobs_dir("/ws/") == "/ws/results" and jobdir.log_dir("/ws") == "/ws/logs"
    assert jobdir.job_dir("/ws/results", "j") == "/ws/results/j"
    assert (jobdir.job_log("/l", "j"), jobdir.pid_file("/l", "j")) == ("/l/j.log", "/l/j.pid")
    assert jobdir.resolved_config("/l", "j") == "/l/j.resolved-config.json"
    assert jobdir.provenance_file("/l", "j") == "/l/j.provenance.json"
    assert not jobdir.finished(None) and not jobdir.finished({"finished_at": None})
    assert jobdir.finished({"finished_at": "2026-12-01T00:00:00"})
    assert jobdir.running_trials({"stats": {"n_running_trials": 3}}) == 3
    assert jobdir.running_trials({"stats": {"n_running_trials": True}}) == 0
    assert jobdir.running_trials(None) == 0
    # A trial has started since the launch: a result.json written since, with a trial counted.
    write(tmp_path / "result.json", {"finished_at": None, "stats": {"n_running_trials": 0}})
    assert not jobdir.started_since(tmp_path, 0)
    write(tmp_path / "result.json", {"finished_at": None, "stats": {"n_completed_trials": 1}})
    assert jobdir.started_since(tmp_path, 0)
    assert not jobdir.started_since(tmp_path, (tmp_path / "result.json").stat().st_mtime + 5)
    assert jobdir.recorded_pid(tmp_path / "none.pid") is None
    write(tmp_path / "x.pid", "12 \n")
    assert jobdir.recorded_pid(tmp_path / "x.pid") == 12
    write(tmp_path / "x.pid", "\u0661\n")  # a digit to str.isdigit(), no PID
    assert jobdir.recorded_pid(tmp_path / "x.pid") is None


# --- the one owner ----------------------------------------------------------------------------

PRODUCT = [*(path for package in ("components", "hostside", "contracts", "audit")
             for path in sorted((ROOT / package).rglob("*.py"))),
           *sorted((ROOT / "hostside" / "probes").rglob("*.sh")), ROOT / "__main__.py"]
# What spells Harbor's job layout or decides a job's state: jobdir.py's alone.
LAYOUT = {
    "the jobs dir (results/)": re.compile(r"""/results\b|/\s*["']results["']"""),
    # (not the audit's own package of log readers, audit/read/logs/)
    "the logs dir (logs/)": re.compile(r"""(?<!audit/read)/logs\b|/\s*["']logs["']"""),
    "a job's PID file or log": re.compile(r"""\}\.(pid|log)["']"""),
    "a job's launch token, resolved config or provenance": re.compile(
        r"\.launch-token|\.resolved-config|\.provenance\.json"),
    "finished (finished_at set)": re.compile(
        r"""finished_at\)?\s*(is\s+(not\s+)?None|==|!=)|get\(\s*["']finished_at["']"""
        r"""|"finished_at": \*"""),
    "a trial's compose project": re.compile(r"""__env["']"""),
    "the trials set aside": re.compile(r"benchstack-interrupted"),
}


# Whether a process is Harbor running a job: a file that reads a process's command line and
# speaks of a job decides it (the proxy bridge's and the engine's own PID checks are theirs).
PID_CHECK = re.compile(r"cmdline")
JOB = re.compile(r"job_name|JOB_NAME")


def others() -> list[Path]:
    return [path for path in PRODUCT if path != JOBDIR]


@pytest.mark.parametrize("what", sorted(LAYOUT))
def test_no_other_file_spells_the_job_layout_or_decides_a_state(what: str) -> None:
    found = []
    for path in others():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if LAYOUT[what].search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == [], f"{what} is jobdir.py's to decide; ask it instead:\n" + "\n".join(found)


def test_no_other_file_decides_whether_harbor_runs_a_job() -> None:
    found = [str(path.relative_to(ROOT)) for path in others()
             if PID_CHECK.search(text := path.read_text()) and JOB.search(text)]
    assert found == [], f"the PID check is jobdir.py's (jobdir.harbor_pid): {found}"


def test_the_rule_catches_what_it_is_for() -> None:
    """The patterns find the spellings this layout had before it had one owner."""
    before = {
        "the jobs dir (results/)": 'jobs_dir = f"{workspace}/results"',
        "the logs dir (logs/)": 'LOG_DIR=${LOG_DIR:-$(dirname "$JOBS_DIR")/logs}',
        "a job's PID file or log": 'self.pid_file = job_name.apply(lambda n: f"{log_dir}/{n}.pid")',
        "a job's launch token, resolved config or provenance":
            'token_file="$LOG_DIR/$JOB_NAME.launch-token"',
        "finished (finished_at set)": "return self.finished_at is not None",
        "a trial's compose project": 'return [f"{p.name.lower()}__env" for p in dirs]',
        "the trials set aside": 'local aside="$JOBS_DIR/.benchstack-interrupted/$JOB_NAME"',
    }
    for what, line in before.items():
        assert LAYOUT[what].search(line), what
    assert not LAYOUT["finished (finished_at set)"].search("finished_at=job.get(FINISHED_AT),")
    assert not LAYOUT["finished (finished_at set)"].search("# finished_at is null after a stop")
    progress_before = ('def harbor_alive(pid_file, job_name):\n'
                       '    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()\n'
                       '    return job_name in cmdline\n')
    assert PID_CHECK.search(progress_before) and JOB.search(progress_before)
