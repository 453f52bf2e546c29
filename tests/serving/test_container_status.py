"""The serving container status probe (components/serving.py) as the seam runs it at program
time: scripts/container_status.sh with hostside/container_status.py inlined, under
bash. Against a stand-in `docker` (the fast loop) and the real engine."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.seam.probe import render
from components.seam.ssh import parse_outputs
from components.serving import RUN_TOKEN_LABEL
from tests.conftest import docker


def probe(container: str, path: str | None = None) -> dict:
    text = render("container_status.sh", {"CONTAINER": container, "LABEL": RUN_TOKEN_LABEL})
    env = {**os.environ, "PATH": path} if path else None
    proc = subprocess.run(["bash", "-c", text], capture_output=True, text=True, timeout=60,
                          env=env, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    return parse_outputs(proc.stdout)


def restarted(token: str) -> str:
    return f"restart-{hashlib.sha256(token.encode()).hexdigest()[:12]}"


def fake_docker(tmp_path: Path, answer: object | None) -> str:
    """A `docker` that answers `inspect` with `answer` as JSON (a string: as it is; None: no
    such container)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "docker"
    if answer is None:
        script.write_text("#!/bin/sh\necho 'Error: No such container: x' >&2\nexit 1\n")
    else:
        text = answer if isinstance(answer, str) else json.dumps(answer)
        (tmp_path / "inspect.json").write_text(text)
        script.write_text(f"#!/bin/sh\ncat {tmp_path / 'inspect.json'}\n")
    script.chmod(0o755)
    return f"{bin_dir}:{os.environ['PATH']}"


def inspected(running: bool, labels: dict | None) -> list[dict]:
    return [{"State": {"Running": running, "Status": "running" if running else "exited"},
             "Config": {"Labels": labels}}]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [(None, {"state": "absent", "token": "start"}),
     (inspected(True, {RUN_TOKEN_LABEL: "restart-0123456789ab"}),
      {"state": "running", "token": "restart-0123456789ab"}),
     (inspected(True, None), {"state": "running", "token": "start"}),
     (inspected(False, {RUN_TOKEN_LABEL: "start"}),
      {"state": "stopped", "token": restarted("start")}),
     (inspected(False, {}), {"state": "stopped", "token": restarted("")}),
     ("not json", {"state": "absent", "token": "start"})],
)
def test_the_token_from_what_the_engine_says(tmp_path: Path, answer, expected) -> None:
    assert probe("benchstack-sglang-x", fake_docker(tmp_path, answer)) == expected


def test_a_stop_after_a_restart_gives_yet_another_token(tmp_path: Path) -> None:
    first = restarted("start")
    again = probe("w", fake_docker(tmp_path, inspected(False, {RUN_TOKEN_LABEL: first})))
    assert again["token"] == restarted(first) != first


def test_the_probe_needs_no_code_on_the_host() -> None:
    """It runs at every preview, before HostCode copied anything: the module is inlined."""
    text = render("container_status.sh", {"CONTAINER": "c", "LABEL": RUN_TOKEN_LABEL})
    assert "BENCHSTACK_CODE" not in text and "def status(" in text
    assert "# benchstack:include" not in text


@pytest.fixture
def container(canary_image: str) -> Iterator[str]:
    name = f"benchstack-test-status-{uuid.uuid4().hex[:10]}"
    try:
        yield name
    finally:
        docker("rm", "-f", name, check=False)


def test_running_then_stopped_on_the_real_engine(canary_image: str, container: str) -> None:
    assert probe(container) == {"state": "absent", "token": "start"}
    docker("run", "-d", "--name", container, "--label", f"{RUN_TOKEN_LABEL}=start",
           canary_image, "sleep", "600")
    assert probe(container) == {"state": "running", "token": "start"}
    docker("stop", "--time", "0", container)
    assert probe(container) == {"state": "stopped", "token": restarted("start")}
