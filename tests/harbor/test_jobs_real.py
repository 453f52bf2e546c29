"""Real Harbor 0.21.0 jobs on the local Docker engine with the demo tasks: the configs,
preflight, launch, stop and resume steps, exactly as the component runs them.

The oracle job goes through the rendered compose override with a real tool bundle
(hostside/tool_bundle.py) and the proxy variables; the stop tests interrupt a running
job with SIGTERM (through the stop, the launch's delete) and with SIGKILL, and check what is left.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.conftest import CANARY_IMAGE, docker
from tests.harbor.conftest import API_KEY, NOFILE, JobFactory, harbor_section
from tests.hostplane.steps import build_tool_bundle

PROXY_URL = "http://host.docker.internal:27891"


@pytest.fixture(scope="module")
def tool_bundle(tmp_path_factory: pytest.TempPathFactory, canary_image: str) -> str:
    """A real tool bundle, built and checked in the canary by the host plane's script."""
    tools = tmp_path_factory.mktemp("tools") / "harbor-tools-amd64"
    result = build_tool_bundle(tools, canary_image)
    assert result.returncode == 0, result.stderr[-2000:]
    return str(tools)


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def test_oracle_job_through_the_override(jobs: JobFactory, demo_dataset: Path,
                                         tool_bundle: str, canary_image: str) -> None:
    settings = harbor_section(n_concurrent_trials=3, agent_timeout_multiplier=1.0)
    job = jobs.plan(demo_dataset, settings, tools_dir=tool_bundle, proxy_url=PROXY_URL)
    preflight = job.preflight()
    assert preflight.returncode == 0, preflight.stderr
    resolved = json.loads(Path(preflight.outputs["resolved_config"]).read_text())
    assert resolved["environment"]["extra_docker_compose"] == [job.plan.compose_path]

    launched = job.launch()
    assert launched.returncode == 0, launched.stderr + job.log_tail()
    out = launched.outputs
    assert out["mode"] == "run" and out["job_dir"] == str(job.dir)
    assert out["pid"] == job.pid()
    # Detached in its own session, with the raised open-files limit, output to the log file.
    pid = out["pid"]
    if Path(f"/proc/{pid}").exists():
        assert os.getsid(pid) == pid
        limits = Path(f"/proc/{pid}/limits").read_text()
        assert any(line.startswith("Max open files") and line.split()[3] == str(NOFILE)
                   for line in limits.splitlines())
        assert os.readlink(f"/proc/{pid}/fd/1") == str(job.log)
        # The key reached Harbor's environment (from the seam's stdin), not its arguments.
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert f"OPENAI_API_KEY={API_KEY}".encode() in environ
        assert API_KEY not in Path(f"/proc/{pid}/cmdline").read_text()
    assert API_KEY not in launched.stdout + launched.stderr + job.log.read_text()
    assert job.status()["state"] in ("running", "finished")

    snap = job.wait_finished()
    assert snap["finished"] and snap["total"] == 3 and snap["done"] == 3
    assert snap["rewards"] == {"0.0": 2, "1.0": 1}
    assert snap["errors"] == {"AgentTimeoutError": 1}

    result = json.loads((job.dir / "result.json").read_text())
    assert result["finished_at"] and result["n_total_trials"] == 3
    assert result["stats"]["n_completed_trials"] == 3 and result["stats"]["n_errored_trials"] == 1
    trials = job.trials()
    passed, wrong = trials["hello-file"], trials["hello-file-wrong"]
    slow = trials["hello-file-slow"]
    assert passed["verifier_result"] == {"rewards": {"reward": 1.0}}
    assert passed["exception_info"] is None
    assert passed["config"]["environment"]["extra_docker_compose"] == [job.plan.compose_path]
    assert wrong["verifier_result"] == {"rewards": {"reward": 0.0}}
    assert wrong["exception_info"] is None
    assert slow["exception_info"]["exception_type"] == "AgentTimeoutError"
    assert slow["verifier_result"] == {"rewards": {"reward": 0.0}}
    # What the override gave the container, as the reference solution saw it.
    seen = (Path(passed["_dir"]) / "agent" / "oracle.txt").read_text()
    assert f"proxy={PROXY_URL}" in seen
    assert "tmux=/usr/local/bin/tmux" in seen and "bin" in seen.split("tools=")[1]
    assert job.leftovers() == []

    # A second launch (what a second `pulumi up` would do) leaves a finished job alone.
    status = job.status()
    assert status == {"state": "finished", "token": "start", "pid": pid}
    again = job.launch()
    assert again.returncode == 0 and again.outputs["mode"] == "finished"
    assert json.loads((job.dir / "result.json").read_text())["id"] == result["id"]


def test_sigterm_stops_cleanly_then_resume_finishes(jobs: JobFactory, demo_dataset: Path,
                                                   canary_image: str) -> None:
    # hello-file-slow sleeps 15 s; with a 20x agent timeout it passes when left to finish.
    settings = harbor_section(n_concurrent_trials=1, agent_timeout_multiplier=20.0)
    job = jobs.plan(demo_dataset, settings, include=("hello-file-slow",))
    assert job.preflight().returncode == 0
    launched = job.launch()
    assert launched.returncode == 0, launched.stderr
    pid = launched.outputs["pid"]
    wait_for(lambda: any(job.dir.glob("*/agent/oracle.txt")), 60, "the agent to start")
    assert len(job.leftovers()) == 2, "one container and one network while the trial runs"

    stopped = job.stop(timeout_s=60)
    assert stopped.returncode == 0, stopped.stderr
    out = stopped.outputs
    # Exited on the SIGTERM within the stop's bound (60 s here, or a wave of teardowns per
    # running trial), not killed past it: the step's own account, not a stopwatch around it.
    assert out["signalled_pid"] == pid and out["exited"] is True and out["killed"] is False
    assert not Path(f"/proc/{pid}/cmdline").exists() or job.name not in Path(
        f"/proc/{pid}/cmdline").read_text()
    assert job.leftovers() == [], "Harbor's own shutdown removes the trial's container and network"
    (trial,) = job.trials().values()
    assert trial["exception_info"]["exception_type"] == "CancelledError"
    assert json.loads((job.dir / "result.json").read_text())["finished_at"] is None
    assert "waiting" in stopped.stderr or "exited" in stopped.stderr

    # The probe sees an interrupted job and hands out a new launch token: one resume.
    status = job.status()
    assert status["state"] == "interrupted" and status["token"].startswith("resume-")
    assert job.status()["token"] == status["token"], "the probe is stable until something changes"
    resumed = job.launch(token=status["token"])
    assert resumed.returncode == 0, resumed.stderr + job.log_tail()
    assert resumed.outputs["mode"] == "resume" and resumed.outputs["pid"] != pid
    running = job.status()
    assert running["state"] == "running" and running["token"] == status["token"]

    snap = job.wait_finished()
    assert snap["finished"] and snap["rewards"] == {"1.0": 1} and snap["errors"] == {}
    (trial,) = job.trials().values()
    assert trial["verifier_result"] == {"rewards": {"reward": 1.0}}
    assert job.status() == {"state": "finished", "token": status["token"],
                            "pid": resumed.outputs["pid"]}
    assert job.leftovers() == []


def test_trial_cancelled_during_setup_is_run_again_on_resume(
        jobs: JobFactory, demo_dataset: Path, canary_image: str) -> None:
    """A SIGTERM while a trial is still in its environment setup makes Harbor 0.21 write that
    trial's result.json with no exception, no agent run and no verifier result (seen in this
    repo's e2e run), and `harbor job resume` then counts it as done: a silent 0. The launch
    sets such a trial aside (kept, beside the job) so the resume runs it."""
    settings = harbor_section(n_concurrent_trials=1)
    job = jobs.plan(demo_dataset, settings, include=("hello-file",))
    assert job.preflight().returncode == 0
    assert job.launch().returncode == 0
    job.wait_finished()
    (trial_dir,) = [d for d in job.dir.iterdir() if (d / "result.json").is_file()]
    # What Harbor left for the trial cancelled in setup: the same keys, its phases empty.
    result = json.loads((trial_dir / "result.json").read_text())
    for key in ("agent_result", "verifier_result", "exception_info", "agent_setup",
                "agent_execution", "verifier"):
        result[key] = None
    (trial_dir / "result.json").write_text(json.dumps(result))
    job_result = json.loads((job.dir / "result.json").read_text())
    job_result["finished_at"] = None
    (job.dir / "result.json").write_text(json.dumps(job_result))

    status = job.status()
    assert status["state"] == "interrupted"
    resumed = job.launch(token=status["token"])
    assert resumed.returncode == 0 and resumed.outputs["mode"] == "resume", resumed.stderr
    assert f"set aside trial {trial_dir.name}" in resumed.stderr
    job.wait_finished()
    (trial,) = job.trials().values()
    assert trial["verifier_result"] == {"rewards": {"reward": 1.0}}
    aside_dir = job.dir.parent / ".benchstack-interrupted" / job.name
    aside = list(aside_dir.glob(f"{trial_dir.name}.*"))
    assert len(aside) == 1 and (aside[0] / "result.json").is_file(), "the evidence is kept"


def test_sigkill_leftovers_are_removed_then_resume(jobs: JobFactory, demo_dataset: Path,
                                                          canary_image: str) -> None:
    settings = harbor_section(n_concurrent_trials=1, agent_timeout_multiplier=20.0)
    job = jobs.plan(demo_dataset, settings, include=("hello-file-slow",))
    assert job.preflight().returncode == 0
    launched = job.launch()
    assert launched.returncode == 0, launched.stderr
    wait_for(lambda: any(job.dir.glob("*/agent/oracle.txt")), 60, "the agent to start")
    os.kill(launched.outputs["pid"], signal.SIGKILL)
    wait_for(lambda: job.status()["state"] == "interrupted", 10, "the probe to see the kill")
    left = job.leftovers()
    assert len(left) == 2, "SIGKILL leaves the trial's container and network behind"

    # Another job's containers must survive our cleanup.
    other = docker("run", "-d", "--label", "com.docker.compose.project=not-this-job__env",
                   CANARY_IMAGE, "sleep", "300").stdout.strip()
    try:
        stopped = job.stop(timeout_s=30)
        assert stopped.returncode == 0, stopped.stderr
        out = stopped.outputs
        assert out["signalled_pid"] is None
        assert out["removed_containers"] == 1 and out["removed_networks"] == 1
        assert job.leftovers() == []
        assert docker("inspect", other, check=False).returncode == 0
    finally:
        docker("rm", "-f", other, check=False)
    # Results are never deleted: the half-written trial dir and the log are still there.
    assert any(job.dir.iterdir()) and job.log.exists()

    # What the next `pulumi up` does (the launch is replaced: stop above, then launch with the
    # probe's new token): Harbor resumes, drops the half-written trial and runs it again.
    status = job.status()
    assert status["state"] == "interrupted"
    resumed = job.launch(token=status["token"])
    assert resumed.returncode == 0 and resumed.outputs["mode"] == "resume", resumed.stderr
    snap = job.wait_finished()
    assert snap["rewards"] == {"1.0": 1} and snap["total"] == 1
    assert job.leftovers() == []
