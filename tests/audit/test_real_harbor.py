"""Audit job dirs that the real Harbor 0.21.0 just wrote, on the real Docker engine.

Four demo tasks with the oracle agent: a pass, a wrong answer, an agent timeout, and a task
whose image is absent from the loopback registry (an infra failure at environment start).
Then a job interrupted with SIGTERM, whose trial must come out `cancelled`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from audit.pipeline import build_report
from audit.read.layout import JobLayout
from tests.conftest import REGISTRY, ROOT, docker

pytestmark = pytest.mark.real

DEMO_TASKS = ROOT / "demo" / "tasks"
ABSENT_IMAGE = f"{REGISTRY}/benchstack/audit-absent-image:never-pushed"


def _tasks(tmp_path: Path, with_absent: bool) -> Path:
    tasks = tmp_path / "tasks"
    shutil.copytree(DEMO_TASKS, tasks)
    if with_absent:
        shutil.copytree(tasks / "hello-file", tasks / "hello-absent-image")
        toml = tasks / "hello-absent-image" / "task.toml"
        text = toml.read_text()
        image_line = next(ln for ln in text.splitlines() if ln.startswith("docker_image"))
        toml.write_text(text.replace(image_line, f'docker_image = "{ABSENT_IMAGE}"'))
    for task in tasks.iterdir():
        # Git keeps no empty dirs, and Harbor only recognises a task with an environment/ dir.
        (task / "environment").mkdir(exist_ok=True)
    return tasks


def _env() -> dict[str, str]:
    return {**os.environ, "HARBOR_TELEMETRY": "0", "NO_PROXY": "127.0.0.1,localhost"}


def _cleanup(job_dir: Path) -> None:
    """Remove compose projects Harbor may have left for this job's trials (only those)."""
    if not job_dir.is_dir():
        return
    for trial in job_dir.iterdir():
        if trial.is_dir() and "__" in trial.name:
            project = f"{trial.name.lower()}__env"
            docker("compose", "-p", project, "down", "--remove-orphans", check=False, timeout=120)


def test_audit_of_a_real_harbor_job(tmp_path, harbor_bin, canary_image):
    tasks = _tasks(tmp_path, with_absent=True)
    jobs = tmp_path / "jobs"
    job_dir = jobs / "audit-real"
    log = tmp_path / "harbor.log"
    try:
        with log.open("wb") as fh:
            proc = subprocess.run(
                [str(harbor_bin), "run", "-p", str(tasks), "-a", "oracle", "--job-name",
                 "audit-real", "-o", str(jobs), "-n", "4", "-y"],
                stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=_env(), timeout=300, cwd=tmp_path,
            )  # fmt: skip
        assert proc.returncode == 0, log.read_text()[-3000:]
        report = build_report(JobLayout.local(job_dir))
    finally:
        _cleanup(job_dir)

    got = {t.task: (t.category, t.signature) for t in report.trials}
    assert got == {
        "hello-file": ("passed", None),
        # The oracle's own reference solution failing is no model failure (audit/RULES.md).
        "hello-file-wrong": ("insufficient_evidence", "oracle_solution_failed"),
        "hello-file-slow": ("agent_timeout", "agent_timeout"),
        "hello-absent-image": ("infra", "image_pull_failed"),
    }, json.dumps([t.model_dump() for t in report.trials], indent=1)[:4000]
    h21 = report.score("harbor-0.21")
    assert (h21.passed, h21.counted, h21.score) == (1, 4, 25.0)
    assert report.rerun == ["hello-absent-image"]
    absent = next(t for t in report.trials if t.task == "hello-absent-image")
    assert any("audit-absent-image" in line for line in absent.evidence)
    assert report.job.finished and report.job.wall_seconds and report.job.wall_seconds > 5
    slow = next(t for t in report.trials if t.task == "hello-file-slow")
    # Cut at its 5 s timeout (Harbor stamps the end once the cancelled exec has returned, late
    # on a loaded machine); run out, the oracle's 15 s sleep would show.
    assert 4.5 <= slow.durations["agent_execution"] < 12, slow.durations


def test_audit_of_a_real_interrupted_job(tmp_path, harbor_bin, canary_image):
    tasks = _tasks(tmp_path, with_absent=False)
    jobs = tmp_path / "jobs"
    job_dir = jobs / "audit-sigterm"
    log = tmp_path / "harbor.log"
    try:
        with log.open("wb") as fh:
            proc = subprocess.Popen(
                [str(harbor_bin), "run", "-p", str(tasks), "-i", "hello-file-slow", "-a",
                 "oracle", "--job-name", "audit-sigterm", "-o", str(jobs), "-n", "1", "-y"],
                stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=_env(), cwd=tmp_path, start_new_session=True,
            )  # fmt: skip
        try:
            # SIGTERM once the agent runs (its solve.sh sleeps 30 s under a 5 s timeout).
            deadline = time.monotonic() + 120
            while not list(job_dir.glob("hello-file-slow__*/agent/oracle.txt")):
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the trial never reached the agent: {log.read_text()[-2000:]}")
                time.sleep(0.2)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=120) == 130, log.read_text()[-2000:]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        report = build_report(JobLayout.local(job_dir))
    finally:
        _cleanup(job_dir)

    (trial,) = report.trials
    assert (trial.category, trial.signature) == ("cancelled", "cancelled")
    assert report.job.finished is False
    assert any("finished_at: null" in p for p in report.problems)
