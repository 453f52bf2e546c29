"""A Docker trial's teardown is immediate: the compose override gives the trial's `main` an init.

Harbor 0.21.0's prebuilt `main` runs `sh -c "sleep infinity"`; as PID 1 it ignores SIGTERM, so
every trial's `docker compose down` waited out Docker's 10 s stop timeout before its SIGKILL
(benchmarks/bench_two_hosts.py measures trials per minute with and without the init). Here, for
real on this machine's engine: Harbor's own prebuilt compose file with the override the stack
renders (components/harbor_config.py), and without the init, the stop timed and its exit code
read.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from components.config import HarborConfig
from components.harbor_config import compose_identity, compose_override, render_compose_override
from tests.conftest import HARBOR_VENV

pytestmark = pytest.mark.real

HARBOR = HarborConfig.model_validate({
    "version": "0.21.0", "n_concurrent_trials": 1,
    "wheel_sha256": "c77d779a03f1a9e8ecb3c449e17f39a9728b82238832f1fd28632eb9426c0a21",
    "agent": {"name": "oracle", "n_concurrent": 1}})


def prebuilt_compose() -> Path:
    found = sorted(HARBOR_VENV.glob("lib/python3*/site-packages/harbor/environments/docker/"
                                    "docker-compose-prebuilt.yaml"))
    if not found:
        pytest.fail(f"Harbor's prebuilt compose file not found under {HARBOR_VENV}: run "
                    "`make setup`")
    return found[0]


def stop(tmp_path: Path, override: dict, image: str) -> tuple[float, int]:
    """`docker compose up -d` of Harbor's prebuilt main with `override`, then its timed stop
    (what `down` does before it removes): the seconds, and main's exit code."""
    files = tmp_path / "compose"
    files.mkdir(parents=True, exist_ok=True)
    shutil.copy(prebuilt_compose(), files / "base.yaml")
    (files / "override.yaml").write_text(yaml.safe_dump(override))
    project = f"benchstack-teardown-{tmp_path.name[-12:].lower().replace('_', '-')}"
    compose = ["docker", "compose", "-p", project, "-f", str(files / "base.yaml"),
               "-f", str(files / "override.yaml")]
    env = {"PREBUILT_IMAGE_NAME": image, "PATH": "/usr/local/bin:/usr/bin:/bin"}
    try:
        subprocess.run([*compose, "up", "-d"], env=env, check=True, capture_output=True,
                       timeout=120)
        start = time.monotonic()
        subprocess.run([*compose, "stop"], env=env, check=True, capture_output=True,
                       timeout=120)
        seconds = time.monotonic() - start
        main = subprocess.run([*compose, "ps", "-a", "-q", "main"], env=env, check=True,
                              capture_output=True, text=True, timeout=60).stdout.strip()
        code = subprocess.run(["docker", "inspect", "-f", "{{.State.ExitCode}}", main],
                              check=True, capture_output=True, text=True, timeout=60).stdout
        return seconds, int(code)
    finally:
        subprocess.run([*compose, "down", "-t", "0"], env=env, capture_output=True, timeout=120)


def test_the_rendered_override_gives_main_an_init_that_is_not_the_jobs():
    main = compose_override(HARBOR, tools_dir=None, proxy_url=None)["services"]["main"]
    assert main["init"] is True
    # The job's name counts the override without it: a stack upgraded in place keeps its job
    # (tests/harbor/test_harbor_config.py pins the 0.21.0 name from before the init).
    rendered = render_compose_override(HARBOR, tools_dir="/t", proxy_url=None)
    before = dict(yaml.safe_load(rendered))
    before["services"]["main"].pop("init")
    assert "init: true" in rendered
    assert compose_identity(rendered) == yaml.safe_dump(before, sort_keys=False)


def test_a_trial_stops_at_once_with_the_override_and_waits_10_s_without(
    tmp_path: Path, canary_image: str
):
    override = compose_override(HARBOR, tools_dir=None, proxy_url=None)
    with_init, with_code = stop(tmp_path / "with", override, canary_image)
    override["services"]["main"].pop("init")
    without, without_code = stop(tmp_path / "without", override, canary_image)
    # With the init, main ends on Docker's SIGTERM (143: the init passed it on), before the
    # 10 s stop timeout; without, PID 1 ignores it and Docker's SIGKILL ends it (137) once the
    # timeout is out. Exit codes, not a stopwatch, say which (a loaded machine slows both; the
    # wait is only bounded from below: Docker's SIGKILL never comes before its timeout).
    assert with_code == 143, f"main ended with {with_code} with the init ({with_init:.1f} s)"
    assert without_code == 137, f"main ended with {without_code} without the init"
    assert without > 9, f"the stop took {without:.1f} s without it (Docker's 10 s stop)"
