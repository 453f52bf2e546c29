"""hostside/harbor_launch.py with a stand-in `harbor` (no engine, no Harbor): the
launch detaches it in its own session with its output in the log, records its PID and the launch
token, waits for the first trial, and leaves a running or finished job alone; the stop signals
it and waits; the status probe reads what they recorded. The real Harbor runs in
tests/harbor/test_jobs_real.py."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from contracts import jobdir
from hostside import beside, harbor_launch
from tests.conftest import ScriptResult
from tests.harbor.conftest import probe, seam_step

KEY = "sk-stand-in-secret"

# A Harbor that writes its job dir as 0.21 does: config.json, then result.json with a running
# trial, and on SIGTERM finished_at null; left alone it finishes after STAND_IN_SECONDS.
STAND_IN = r"""#!/usr/bin/env python3
import json, os, signal, sys, time
args = sys.argv[1:]
if args[:2] == ["job", "resume"]:
    job_dir = args[3]
else:
    jobs_dir, name = args[args.index("--jobs-dir") + 1], args[args.index("--job-name") + 1]
    job_dir = os.path.join(jobs_dir, name)
os.makedirs(job_dir, exist_ok=True)
print("stand-in harbor", " ".join(args), "key" if os.environ.get("OPENAI_API_KEY") else "none",
      "telemetry=" + os.environ.get("HARBOR_TELEMETRY", ""), flush=True)
with open(os.path.join(job_dir, "config.json"), "w") as f:
    json.dump({"job_name": os.path.basename(job_dir)}, f)
def write(finished):
    with open(os.path.join(job_dir, "result.json"), "w") as f:
        json.dump({"finished_at": finished, "stats": {"n_running_trials": 1}}, f)
def stop(*_):
    write(None)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
time.sleep(0.5)
write(None)
time.sleep(float(os.environ.get("STAND_IN_SECONDS", "60")))
write("2026-12-01T00:00:00")
"""


def stand_in(tmp_path: Path) -> Path:
    harbor = tmp_path / "venv" / "bin" / "harbor"
    harbor.parent.mkdir(parents=True)
    harbor.write_text(STAND_IN)
    harbor.chmod(0o755)
    return harbor


class Job:
    def __init__(self, tmp_path: Path) -> None:
        self.harbor = stand_in(tmp_path)
        self.workspace = tmp_path / "ws"
        self.jobs = jobdir.jobs_dir(str(self.workspace))
        self.logs = jobdir.log_dir(str(self.workspace))
        self.name = "stand-in-job"
        for name in ("job.yaml", "compose.yaml"):
            (tmp_path / name).write_text("x: 1\n")
        self.config, self.compose = str(tmp_path / "job.yaml"), str(tmp_path / "compose.yaml")

    def launch(self, token: str = "start", **changes) -> ScriptResult:
        return seam_step("harbor_launch", "create", {
            "harbor_bin": str(self.harbor), "job_config": self.config,
            "compose_path": self.compose, "job_name": self.name, "jobs_dir": self.jobs,
            "log_dir": self.logs, "openai_api_key": KEY, "launch_token": token,
            "start_timeout_s": 30, "nofile": 4096, "resolved_sha256": "", "k8s_watch": None,
            "serving_record": None, "harbor_flags": [], "harbor_version": "0.21.0", **changes,
        }, secret_inputs=("openai_api_key",), timeout=60)

    def stop(self) -> ScriptResult:
        return seam_step("harbor_launch", "delete", {
            "job_name": self.name, "jobs_dir": self.jobs, "log_dir": self.logs,
            "n_concurrent_trials": 1, "stop_timeout_s": 30,
        }, timeout=120)

    def status(self) -> dict:
        return probe("harbor_status.sh",
                     {"JOB_NAME": self.name, "JOBS_DIR": self.jobs, "LOG_DIR": self.logs})

    def gone(self, pid: int, timeout: float = 30) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not jobdir.runs_job(pid, self.name):
                return True
            time.sleep(0.1)
        return False


def test_launch_detach_record_then_leave_alone_stop_and_resume(tmp_path: Path) -> None:
    job = Job(tmp_path)
    assert job.status() == {"state": "absent", "token": "start", "pid": None}
    launched = job.launch()
    assert launched.returncode == 0, launched.stderr
    out = launched.outputs
    pid = out["pid"]
    try:
        log = Path(jobdir.job_log(job.logs, job.name))
        assert out == {"job_name": job.name, "job_dir": jobdir.job_dir(job.jobs, job.name),
                       "job_log": str(log), "pid_file": jobdir.pid_file(job.logs, job.name),
                       "pid": pid, "mode": "run"}
        assert jobdir.recorded_pid(Path(out["pid_file"])) == pid
        # Its own session, its output in the log (never a pipe), the raised open-files limit,
        # the key in its environment and in no argument, no step input in its environment.
        assert os.getsid(pid) == pid
        assert os.readlink(f"/proc/{pid}/fd/1") == str(log)
        limits = Path(f"/proc/{pid}/limits").read_text()
        assert any(line.startswith("Max open files") and line.split()[3] == "4096"
                   for line in limits.splitlines())
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert f"OPENAI_API_KEY={KEY}".encode() in environ and b"HARBOR_TELEMETRY=0" in environ
        assert not [v for v in environ if v.startswith((b"BENCHSTACK_", b"PYTHONPATH="))]
        assert KEY not in Path(f"/proc/{pid}/cmdline").read_text()
        assert KEY not in launched.stdout + launched.stderr
        assert "benchstack launch" in log.read_text()
        assert job.status() == {"state": "running", "token": "start", "pid": pid}

        again = job.launch()
        assert again.returncode == 0 and again.outputs["mode"] == "running"
        assert again.outputs["pid"] == pid

        stopped = job.stop()
        assert stopped.returncode == 0, stopped.stderr
        assert stopped.outputs == {"job_dir": out["job_dir"], "signalled_pid": pid,
                                   "exited": True, "killed": False, "removed_containers": 0,
                                   "removed_networks": 0}
        assert job.gone(pid)
        status = job.status()
        assert status["state"] == "interrupted" and status["token"].startswith("resume-")
        # The results stay: the job dir and the log.
        assert Path(out["job_dir"], "result.json").is_file() and log.is_file()

        resumed = job.launch(token=status["token"])
        assert resumed.returncode == 0, resumed.stderr
        assert resumed.outputs["mode"] == "resume" and resumed.outputs["pid"] != pid
        pid = resumed.outputs["pid"]
        # The launch returns once Harbor runs; its first line reaches the log a moment later.
        deadline = time.monotonic() + 20
        while f"job resume -p {out['job_dir']}" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        assert job.status() == {"state": "running", "token": status["token"], "pid": pid}
    finally:
        job.stop()
    assert job.gone(pid)
    again = job.stop()
    assert again.returncode == 0 and again.outputs["signalled_pid"] is None


def argv_of(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_text().rstrip("\0").split("\0")


def test_the_versions_flags_go_to_harbor_run_and_never_to_its_resume(tmp_path: Path) -> None:
    """0.26.0's endpoint flags are on `harbor run`'s command line (Harbor writes them into the
    job's config.json); its resume reads them back from there, so they are not repeated."""
    job = Job(tmp_path)
    flags = ["--base-url", "http://127.0.0.1:30000/v1", "--api-key-name", "OPENAI_API_KEY",
             "--api-format", "openai_chat_completions"]
    log = Path(jobdir.job_log(job.logs, job.name))
    launched = job.launch(harbor_flags=flags, harbor_version="0.26.0")
    assert launched.returncode == 0, launched.stderr
    try:
        cmdline = argv_of(launched.outputs["pid"])
        start = cmdline.index("--base-url")
        assert cmdline[start:start + len(flags)] == flags
        job.stop()
        resumed = job.launch(token=job.status()["token"], harbor_flags=flags,
                             harbor_version="0.26.0")
        assert resumed.outputs["mode"] == "resume", resumed.stderr
        argv = argv_of(resumed.outputs["pid"])
        assert argv[-4:] == ["job", "resume", "-p", jobdir.job_dir(job.jobs, job.name)]
        assert "--base-url" not in argv
    finally:
        job.stop()
    assert "benchstack launch" in log.read_text()
    unknown = job.launch(harbor_version="0.99.0")
    assert unknown.reason == ("harbor_launch: harbor_version: no Harbor profile for '0.99.0'; "
                              "known: 0.21.0, 0.26.0")


def test_a_finished_job_is_left_alone(tmp_path: Path) -> None:
    job = Job(tmp_path)
    job_dir = Path(jobdir.job_dir(job.jobs, job.name))
    job_dir.mkdir(parents=True)
    (job_dir / "config.json").write_text("{}")
    (job_dir / "result.json").write_text(json.dumps({"finished_at": "2026-12-01T00:00:00"}))
    done = job.launch(token="recorded")
    assert done.returncode == 0 and done.outputs["mode"] == "finished"
    assert done.outputs["pid"] is None
    assert job.status() == {"state": "finished", "token": "recorded", "pid": None}


def test_harbor_exiting_before_a_trial_is_one_line_naming_its_last_log_line(tmp_path) -> None:
    job = Job(tmp_path)
    job.harbor.write_text("#!/bin/sh\necho 'Error: no such dataset' >&2\nexit 3\n")
    failed = job.launch()
    assert failed.returncode == 1
    assert failed.reason.startswith("harbor_launch: Harbor exited before starting a trial (last "
                                    "log line: Error: no such dataset): see ")


def test_an_open_files_limit_above_the_hard_limit_is_refused_before_harbor_starts(
    tmp_path: Path,
) -> None:
    job = Job(tmp_path)
    if os.geteuid() == 0:
        too_many = int(Path("/proc/sys/fs/nr_open").read_text()) + 1
    else:
        import resource

        too_many = resource.getrlimit(resource.RLIMIT_NOFILE)[1] + 1
    failed = job.launch(nofile=too_many)
    assert failed.returncode == 1
    assert f"cannot raise the open-files limit to {too_many}" in failed.reason
    assert not Path(jobdir.pid_file(job.logs, job.name)).exists()


def test_the_stop_waits_a_wave_per_concurrent_trials() -> None:
    assert harbor_launch.stop_bound(0, 4, 120) == 120
    assert harbor_launch.stop_bound(25, 25, 30) == 30
    assert harbor_launch.stop_bound(26, 25, 30) == 60
    assert harbor_launch.stop_bound(100, 10, 60) == 300


def record_lines(job_dir: str) -> list[dict]:
    path = Path(job_dir, jobdir.SERVING_RECORD)
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_the_serving_sampler_starts_with_the_launch_ends_with_the_job_and_resumes(
        tmp_path: Path) -> None:
    """The serving record is kept while Harbor runs: a sampler beside it (its PID file beside
    the job dir) reads the endpoints into the job dir, is reused by a launch that finds Harbor
    running, stops with the stop, and starts again with the resume, appending."""
    job = Job(tmp_path)
    dead = "http://127.0.0.1:9/metrics"  # discard port: nothing listens, a read fails fast
    spec = {"targets": [{"source": "worker", "url": dead}], "interval_s": 1,
            "max_bytes": 1_000_000}
    launched = job.launch(serving_record=spec)
    assert launched.returncode == 0, launched.stderr
    job_dir = launched.outputs["job_dir"]
    pid_file = Path(jobdir.serving_sampler_pid(job_dir))
    try:
        sampler = jobdir.recorded_pid(pid_file)
        assert sampler and Path(f"/proc/{sampler}").exists()
        assert argv_of(sampler)[-2:] == [json.dumps(spec, sort_keys=True),
                                         str(launched.outputs["pid"])]
        assert job.launch(serving_record=spec).outputs["mode"] == "running"
        assert jobdir.recorded_pid(pid_file) == sampler, "a running job's sampler is reused"
        deadline = time.monotonic() + 20
        while len([x for x in record_lines(job_dir) if x.get("source")]) < 2:
            assert time.monotonic() < deadline, record_lines(job_dir)
            time.sleep(0.2)
        first = record_lines(job_dir)
        assert first[0]["kind"] == "start" and first[0]["targets"] == spec["targets"]
        read = first[1]
        assert (read["source"], read["url"], read["ok"]) == ("worker", dead, False)
        assert "Connection refused" in read["error"]

        stopped = job.stop()
        # Gone with Harbor: it ends by itself when Harbor does, and the stop makes sure.
        assert stopped.returncode == 0, stopped.stderr
        assert not beside.alive(sampler)
        count = len(record_lines(job_dir))
        time.sleep(1.5)
        assert len(record_lines(job_dir)) == count, "the sampler outlived the stop"

        resumed = job.launch(token=job.status()["token"], serving_record=spec)
        assert resumed.outputs["mode"] == "resume", resumed.stderr
        second = jobdir.recorded_pid(pid_file)
        assert second != sampler and argv_of(second)[-1] == str(resumed.outputs["pid"])
        deadline = time.monotonic() + 20
        while [x.get("kind") for x in record_lines(job_dir)].count("start") < 2:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert record_lines(job_dir)[:count] == first + record_lines(job_dir)[len(first):count]
    finally:
        job.stop()
