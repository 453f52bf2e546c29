"""Harbor-job fixtures: a Harbor installed once per session by our own install step, demo
datasets in tmp dirs, and a job tracker that stops every job a test launched (SIGTERM, then the
leftover compose projects), also when the test fails.

Every step runs exactly as the host seam runs it: the command `components.seam.step.render_step`
gives a step (`python3 -m hostside MODULE VERB` from the host code, its inputs one JSON object,
its secrets as JSON on standard input), under `bash -c` (`seam_step`). The status probe runs
as `probe_host` runs it (`probe`).
"""

from __future__ import annotations

import json
import os
import re
import resource
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from components.config import DatasetConfig, HarborConfig
from components.job_spec import Rendered, render_plan
from components.seam.probe import render
from components.seam.step import render_step
from contracts import jobdir
from tests.conftest import CODE, ROOT, STATE, ScriptResult, docker

DEMO_TASKS = ROOT / "demo" / "tasks"
WHEEL = STATE / "wheels" / "harbor-0.21.0-py3-none-any.whl"
WHEEL_SHA256 = "c77d779a03f1a9e8ecb3c449e17f39a9728b82238832f1fd28632eb9426c0a21"
HARBOR_PYTHON = os.environ.get(
    "BENCHSTACK_HARBOR_PYTHON", "/root/.pyenv/versions/3.13.0/bin/python3.13"
)
API_KEY = "sk-benchstack-harbor-test"
# The machine's hard limit may be below the seed's 65536: the launch refuses to start otherwise.
NOFILE = min(65536, resource.getrlimit(resource.RLIMIT_NOFILE)[1])


def seam_step(
    module: str, verb: str, inputs: dict, secret_inputs: tuple[str, ...] = (),
    timeout: float = 600, env: dict[str, str] | None = None,
) -> ScriptResult:
    """Run `python3 -m hostside MODULE VERB` the way the host seam does (render_step, `bash -c`,
    the secrets as JSON on standard input, never on the command line); `env`: the host's own
    environment (PATH, say), added to this one."""
    command = render_step(module, verb, inputs, CODE, secret_inputs)
    for key in secret_inputs:
        if inputs.get(key) and str(inputs[key]) in command:
            raise AssertionError(f"secret {key} is on the command line")
    secrets = {k: inputs[k] for k in secret_inputs if k in inputs}
    proc = subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, timeout=timeout,
        input=json.dumps(secrets) if secrets else "", env={**os.environ, **(env or {})},
    )
    return ScriptResult(proc.returncode, proc.stdout, proc.stderr)


def probe(script: str, env: dict[str, str]) -> dict:
    """A read-only probe's outputs, run as probe_host runs it on the local host: the script
    whole (its includes inlined: no host code is there yet), under bash."""
    proc = subprocess.run(["/bin/bash", "-c", render(script, env)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return ScriptResult(proc.returncode, proc.stdout, proc.stderr).outputs


def step_inputs(command: str) -> dict:
    """The inputs a step's command (render_step) gives its module, read back from it."""
    script = shlex.split(command)[2]
    for line in script.splitlines():
        if line.startswith("export BENCHSTACK_INPUTS="):
            return json.loads(shlex.split(line)[1].split("=", 1)[1])
    raise AssertionError(f"not a host step: {command[:200]}")


def called_module(command: str) -> str:
    """The host module a step's command runs (`MODULE VERB`), read back from it."""
    match = re.search(r"exec python3 -m hostside (\w+ \w+)", command)
    if match is None:
        raise AssertionError(f"not a host step: {command[:200]}")
    return match.group(1)


@pytest.fixture(scope="session")
def installed_harbor(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Harbor 0.21.0 installed by hostside/harbor_install.py from the pinned wheel (about 35 s)."""
    if not WHEEL.is_file():
        pytest.fail(f"Harbor wheel missing at {WHEEL}: run `make setup`")
    workspace = tmp_path_factory.mktemp("harbor-ws")
    started = time.monotonic()
    result = install_harbor(workspace)
    if result.returncode != 0:
        pytest.fail(f"harbor_install failed: {result.stderr[-3000:]}")
    return result.outputs | {"workspace": str(workspace), "seconds": time.monotonic() - started}


def install_harbor(workspace: Path, **changes) -> ScriptResult:
    """The install step with the pinned wheel (`changes` replace inputs)."""
    inputs = {"workspace": str(workspace), "version": "0.21.0", "wheel_sha256": WHEEL_SHA256,
              "python": HARBOR_PYTHON, "wheel_path": str(WHEEL), "extras": [], **changes}
    return seam_step("harbor_install", "create", inputs, timeout=900)


def harbor_section(agent: str | dict = "oracle", *, n_concurrent_trials: int,
                   **changes: Any) -> HarborConfig:
    """A minimal stack `harbor:` section, parsed by the stack config's model (its defaults and
    checks). `agent` is a name or the agent section; the agent's n_concurrent defaults to the
    trials', which is what Harbor does with it unset."""
    section = agent if isinstance(agent, dict) else {"name": agent}
    return HarborConfig.model_validate({
        "version": "0.21.0", "wheel_sha256": WHEEL_SHA256, "job_name_prefix": "test",
        "n_concurrent_trials": n_concurrent_trials,
        "agent": {"n_concurrent": n_concurrent_trials, **section}, **changes,
    })


def dataset_inputs(**changes) -> dict:
    """The dataset step's inputs for a local task dir (`changes` replace them)."""
    return {"dataset_path": None, "repo": None, "commit": None, "clone_dir": None,
            "tasks_subdir": "tasks", "expected_tasks": 3, "include": [], "exclude": [], **changes}


@pytest.fixture
def demo_dataset(tmp_path: Path) -> Path:
    """A copy of demo/tasks, as the dataset step prepares it (environment/ dirs created)."""
    path = tmp_path / "tasks"
    shutil.copytree(DEMO_TASKS, path)
    result = seam_step("harbor_dataset", "create", dataset_inputs(dataset_path=str(path)))
    if result.returncode != 0:
        pytest.fail(f"harbor_dataset failed: {result.stderr}")
    return path


@dataclass
class Job:
    """One planned job: rendered files on disk and the env each script needs."""

    plan: Rendered
    workspace: Path
    harbor_bin: str
    harbor: HarborConfig

    @property
    def name(self) -> str:
        return self.plan.job_name

    @property
    def jobs_dir(self) -> Path:
        return Path(jobdir.jobs_dir(str(self.workspace)))

    @property
    def log_dir(self) -> Path:
        return Path(jobdir.log_dir(str(self.workspace)))

    @property
    def dir(self) -> Path:
        return Path(jobdir.job_dir(str(self.jobs_dir), self.name))

    @property
    def log(self) -> Path:
        return Path(jobdir.job_log(str(self.log_dir), self.name))

    @property
    def pid_file(self) -> Path:
        return Path(jobdir.pid_file(str(self.log_dir), self.name))

    def pid(self) -> int:
        return int(self.pid_file.read_text())

    def base_env(self) -> dict[str, str]:
        return {"JOB_NAME": self.name, "JOBS_DIR": str(self.jobs_dir), "LOG_DIR": str(self.log_dir)}

    def same_run(self) -> dict:
        return {"harbor_bin": self.harbor_bin, "job_config": self.plan.config_path,
                "compose_path": self.plan.compose_path, "job_name": self.name,
                "jobs_dir": str(self.jobs_dir), "harbor_flags": list(self.plan.flags),
                "harbor_version": self.harbor.version}

    def preflight(self, expected: str | None = None) -> ScriptResult:
        return seam_step("harbor_preflight", "create", {
            **self.same_run(), "expected": json.loads(expected or self.plan.expected),
            "resolved_out": jobdir.resolved_config(str(self.log_dir), self.name),
        })

    def launch(self, token: str = "start", **changes) -> ScriptResult:
        return seam_step("harbor_launch", "create", {
            **self.same_run(), "log_dir": str(self.log_dir), "openai_api_key": API_KEY,
            "launch_token": token, "start_timeout_s": 180, "nofile": NOFILE,
            "resolved_sha256": "", "k8s_watch": None, "serving_record": None, **changes,
        }, secret_inputs=("openai_api_key",))

    def status(self) -> dict:
        return probe("harbor_status.sh", self.base_env())

    def stop(self, timeout_s: int = 60) -> ScriptResult:
        return seam_step("harbor_launch", "delete", {
            "job_name": self.name, "jobs_dir": str(self.jobs_dir), "log_dir": str(self.log_dir),
            "n_concurrent_trials": self.harbor.n_concurrent_trials, "stop_timeout_s": timeout_s,
        })

    def wait_finished(self, timeout: float = 240) -> dict:
        """Drive the real progress CLI until the job finishes; returns its JSON snapshot."""
        proc = subprocess.run(
            [str(ROOT / ".venv" / "bin" / "python"), "-m", "components.progress", str(self.dir),
             "--wait", "--json", "--interval", "1", "--timeout", str(timeout),
             "--pid-file", str(self.pid_file)],
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
        return [jobdir.compose_project(p.name) for p in jobdir.trial_dirs(self.dir)]

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
        harbor: HarborConfig,
        *,
        include: tuple[str, ...] = (),
        model_name: str | None = None,
        tools_dir: str | None = None,
        proxy_url: str | None = None,
        api_base: str | None = None,
        job_name: str | None = None,
        workspace: Path | None = None,
    ) -> Job:
        workspace = workspace or self.root
        spec = DatasetConfig(path=str(dataset), expected_tasks=3, include=list(include),
                             manifest_path=str(dataset))
        plan = render_plan(
            harbor, spec, model_name=model_name, workspace=str(workspace), tasks_dir=str(dataset),
            api_base=api_base, tools_dir=tools_dir, proxy_url=proxy_url, job_name=job_name,
        )
        result = seam_step("harbor_configs", "create", {
            "config_path": plan.config_path, "compose_path": plan.compose_path,
            "job_config_yaml": plan.config_yaml, "compose_yaml": plan.compose_yaml,
        })
        assert result.returncode == 0, result.stderr
        job = Job(plan, workspace, self.harbor_bin, harbor)
        self.jobs.append(job)
        return job

    def close(self) -> None:
        for job in self.jobs:
            if job.dir.exists() or job.pid_file.exists():
                job.stop(timeout_s=30)


@pytest.fixture
def jobs(installed_harbor: dict, tmp_path: Path, docker_engine: None) -> Iterator[JobFactory]:
    factory = JobFactory(installed_harbor["harbor_bin"], tmp_path / "ws")
    try:
        yield factory
    finally:
        factory.close()
