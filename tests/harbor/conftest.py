"""Harbor-job fixtures: a Harbor installed once per session by our own install script, demo
datasets in tmp dirs, and a job tracker that stops every job a test launched (SIGTERM, then the
leftover compose projects), also when the test fails.

Every script runs exactly as the host seam runs it: the command `components.host.render_call`
gives a step (its inputs exported, then the script from the host code), under `bash -c`.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from components.harbor_config import DatasetSpec, JobSettings
from components.harbor_job import Rendered, render_plan
from components.host import render, secret_stdin
from tests.conftest import ROOT, STATE, ScriptResult, docker, seam_command

DEMO_TASKS = ROOT / "demo" / "tasks"
WHEEL = STATE / "wheels" / "harbor-0.21.0-py3-none-any.whl"
WHEEL_SHA256 = "c77d779a03f1a9e8ecb3c449e17f39a9728b82238832f1fd28632eb9426c0a21"
HARBOR_PYTHON = os.environ.get(
    "BENCHSTACK_HARBOR_PYTHON", "/root/.pyenv/versions/3.13.0/bin/python3.13"
)
API_KEY = "sk-benchstack-harbor-test"
# The machine's hard limit may be below the seed's 65536: the launch refuses to start otherwise.
NOFILE = str(min(65536, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))


def seam(
    script: str, env: dict[str, str], timeout: float = 600, secret_env: tuple[str, ...] = ()
) -> ScriptResult:
    """Run components/scripts/<script> the way the host seam does (rendered, `bash -c`,
    secrets on standard input, never on the command line)."""
    command = seam_command(script, env, secret_env)
    for key in secret_env:
        if env[key] in command:
            raise AssertionError(f"secret {key} is on the command line")
    proc = subprocess.run(
        ["bash", "-c", command],
        capture_output=True,
        text=True,
        timeout=timeout,
        input=secret_stdin(env, secret_env) if secret_env else "",
    )
    return ScriptResult(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture(scope="session")
def installed_harbor(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Harbor 0.21.0 installed by harbor_install.sh from the pinned wheel (about 35 s)."""
    if not WHEEL.is_file():
        pytest.fail(f"Harbor wheel missing at {WHEEL}: run tests/env/setup.sh")
    workspace = tmp_path_factory.mktemp("harbor-ws")
    started = time.monotonic()
    result = seam(
        "harbor_install.sh",
        {"WORKSPACE": str(workspace), "PYTHON": HARBOR_PYTHON, "WHEEL": str(WHEEL),
         "WHEEL_SHA256": WHEEL_SHA256},
        timeout=900,
    )
    if result.returncode != 0:
        pytest.fail(f"harbor_install.sh failed: {result.stderr[-3000:]}")
    return result.outputs | {"workspace": str(workspace), "seconds": time.monotonic() - started}


@pytest.fixture
def demo_dataset(tmp_path: Path) -> Path:
    """A copy of demo/tasks, as the dataset script prepares it (environment/ dirs created)."""
    path = tmp_path / "tasks"
    shutil.copytree(DEMO_TASKS, path)
    result = seam("harbor_dataset.sh", {"DATASET_PATH": str(path), "EXPECTED_TASKS": "3"})
    if result.returncode != 0:
        pytest.fail(f"harbor_dataset.sh failed: {result.stderr}")
    return path


@dataclass
class Job:
    """One planned job: rendered files on disk and the env each script needs."""

    plan: Rendered
    workspace: Path
    harbor_bin: str
    settings: JobSettings

    @property
    def name(self) -> str:
        return self.plan.job_name

    @property
    def jobs_dir(self) -> Path:
        return self.workspace / "results"

    @property
    def log_dir(self) -> Path:
        return self.workspace / "logs"

    @property
    def dir(self) -> Path:
        return self.jobs_dir / self.name

    @property
    def log(self) -> Path:
        return self.log_dir / f"{self.name}.log"

    def pid(self) -> int:
        return int((self.log_dir / f"{self.name}.pid").read_text())

    def base_env(self) -> dict[str, str]:
        return {"JOB_NAME": self.name, "JOBS_DIR": str(self.jobs_dir), "LOG_DIR": str(self.log_dir)}

    def preflight(self, expected: str | None = None) -> ScriptResult:
        return seam("harbor_preflight.sh", {
            **self.base_env(), "HARBOR_BIN": self.harbor_bin, "JOB_CONFIG": self.plan.config_path,
            "COMPOSE_PATH": self.plan.compose_path, "EXPECTED": expected or self.plan.expected,
        })

    def launch(self, token: str = "start", **env: str) -> ScriptResult:
        return seam("harbor_launch.sh", {
            **self.base_env(), "HARBOR_BIN": self.harbor_bin, "JOB_CONFIG": self.plan.config_path,
            "COMPOSE_PATH": self.plan.compose_path, "NOFILE": NOFILE, "LAUNCH_TOKEN": token,
            "START_TIMEOUT_S": "180", "OPENAI_API_KEY": API_KEY, **env,
        }, secret_env=("OPENAI_API_KEY",))

    def status(self) -> dict:
        # A probe, run as probe_host runs it: rendered with its includes inlined, not a call of
        # the shipped code (it runs at program time, before HostCode has copied anything).
        command = render("harbor_status.sh", self.base_env())
        proc = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60)
        result = ScriptResult(proc.returncode, proc.stdout, proc.stderr)
        assert result.returncode == 0, result.stderr
        return result.outputs

    def stop(self, timeout_s: int = 60) -> ScriptResult:
        return seam("harbor_stop.sh", {
            **self.base_env(), "N_CONCURRENT": str(self.settings.n_concurrent_trials),
            "STOP_TIMEOUT_S": str(timeout_s),
        })

    def wait_finished(self, timeout: float = 240) -> dict:
        """Drive the real progress CLI until the job finishes; returns its JSON snapshot."""
        proc = subprocess.run(
            [str(ROOT / ".venv" / "bin" / "python"), "-m", "components.progress", str(self.dir),
             "--wait", "--json", "--interval", "1", "--timeout", str(timeout),
             "--pid-file", str(self.log_dir / f"{self.name}.pid")],
            capture_output=True, text=True, timeout=timeout + 60, cwd=ROOT,
        )
        assert proc.returncode == 0, f"job not finished: {proc.stderr[-2000:]}\n{self.log_tail()}"
        # Harbor writes finished_at, then closes its logs and exits: wait for the exit too.
        deadline = time.monotonic() + 60
        while Path(f"/proc/{self.pid()}").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        return json.loads(proc.stdout.strip().splitlines()[-1])

    def trials(self) -> dict[str, dict]:
        """Trial result.json files by task name."""
        out = {}
        for path in self.dir.glob("*/result.json"):
            data = json.loads(path.read_text())
            out[data["task_name"]] = data | {"_dir": str(path.parent)}
        return out

    def log_tail(self) -> str:
        return self.log.read_text()[-3000:] if self.log.exists() else "(no log)"

    def projects(self) -> list[str]:
        return [f"{p.name.lower()}__env" for p in self.dir.iterdir() if p.is_dir()]

    def leftovers(self) -> list[str]:
        """Containers and networks of this job's compose projects still on the engine."""
        found = []
        for project in self.projects():
            label = f"label=com.docker.compose.project={project}"
            found += docker("ps", "-aq", "--filter", label).stdout.split()
            found += docker("network", "ls", "-q", "--filter", label).stdout.split()
        return found


@dataclass
class JobFactory:
    harbor_bin: str
    root: Path
    jobs: list[Job] = field(default_factory=list)

    def plan(
        self,
        dataset: Path,
        settings: JobSettings,
        *,
        include: tuple[str, ...] = (),
        tools_dir: str | None = None,
        proxy_url: str | None = None,
        api_base: str | None = None,
        job_name: str | None = None,
        workspace: Path | None = None,
    ) -> Job:
        workspace = workspace or self.root
        spec = DatasetSpec(path=str(dataset), expected_tasks=3, include=include)
        plan = render_plan(
            settings, spec, workspace=str(workspace), tasks_dir=str(dataset), api_base=api_base,
            tools_dir=tools_dir, proxy_url=proxy_url, job_name_prefix="test", job_name=job_name,
        )
        result = seam("harbor_configs.sh", {
            "CONFIG_PATH": plan.config_path, "COMPOSE_PATH": plan.compose_path,
            "JOB_CONFIG_YAML": plan.config_yaml, "COMPOSE_YAML": plan.compose_yaml,
        })
        assert result.returncode == 0, result.stderr
        job = Job(plan, workspace, self.harbor_bin, settings)
        self.jobs.append(job)
        return job

    def close(self) -> None:
        for job in self.jobs:
            if job.dir.exists() or (job.log_dir / f"{job.name}.pid").exists():
                job.stop(timeout_s=30)


@pytest.fixture
def jobs(installed_harbor: dict, tmp_path: Path, docker_engine: None) -> Iterator[JobFactory]:
    factory = JobFactory(installed_harbor["harbor_bin"], tmp_path / "ws")
    try:
        yield factory
    finally:
        factory.close()
