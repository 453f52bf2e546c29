"""Terminus-2 for real: Harbor 0.21.0's agent, the real sglang-router, and a scripted stand-in
model (demo/gpu_standin/sglang_worker.py) that solves hello-file. The task container has no
network (`container_network: none`) and the image has neither tmux nor asciinema, so the only
way the agent gets a terminal and a recording is the mounted tool bundle."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import ROOT, docker
from tests.harbor.conftest import JobFactory, harbor_section
from tests.hostplane.steps import build_tool_bundle

STANDIN = ROOT / "demo" / "gpu_standin" / "sglang_worker.py"
MODEL = "bench/stand-in"
REPLIES = [
    {"analysis": "The file is missing.", "plan": "Write it.",
     "commands": [{"keystrokes": "mkdir -p /app && printf 'hello\\n' > /app/hello.txt\n",
                   "duration": 1}], "task_complete": False},
    {"analysis": "Done.", "plan": "Nothing left.", "commands": [], "task_complete": True},
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_http(url: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{proc.args[:4]} exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"{url} did not answer within {timeout}s")


@pytest.fixture
def router_url(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The real sglang-router in front of one scripted stand-in worker, both on loopback."""
    replies = tmp_path / "replies.jsonl"
    replies.write_text("".join(json.dumps(r) + "\n" for r in REPLIES))
    requests = tmp_path / "requests.jsonl"
    worker_port, router_port = free_port(), free_port()
    procs: list[subprocess.Popen] = []
    try:
        worker = subprocess.Popen(
            [sys.executable, str(STANDIN), "--host", "127.0.0.1", "--port", str(worker_port),
             "--served-model-name", MODEL, "--replies", str(replies), "--request-log",
             str(requests)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(worker)
        wait_http(f"http://127.0.0.1:{worker_port}/health", worker, 30)
        log = (tmp_path / "router.log").open("w")
        router = subprocess.Popen(
            [sys.executable, "-m", "sglang_router.launch_router", "--host", "127.0.0.1",
             "--port", str(router_port), "--worker-urls", f"http://127.0.0.1:{worker_port}",
             "--policy", "cache_aware"],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "NO_COLOR": "1"})
        procs.append(router)
        wait_http(f"http://127.0.0.1:{router_port}/v1/models", router, 90)
        yield f"http://127.0.0.1:{router_port}", requests
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_terminus2_uses_the_mounted_bundle_in_an_offline_container(
    jobs: JobFactory, demo_dataset: Path, router_url: tuple[str, Path], canary_image: str,
    tmp_path: Path,
) -> None:
    url, requests = router_url
    for tool in ("tmux", "asciinema"):
        probe = docker("run", "--rm", canary_image, "bash", "-c", f"command -v {tool}",
                       check=False)
        assert probe.returncode != 0, f"the canary image must not have {tool}"
    tools = tmp_path / "harbor-tools-amd64"
    built = build_tool_bundle(tools, canary_image)
    assert built.returncode == 0, built.stderr[-2000:]

    settings = harbor_section(
        {"name": "terminus-2", "n_concurrent": 1, "temperature": 0.0, "max_input_tokens": 32768,
         "max_output_tokens": 1024, "record_terminal_session": True},
        n_concurrent_trials=1, container_network="none",
    )
    job = jobs.plan(demo_dataset, settings, include=("hello-file",), tools_dir=str(tools),
                    model_name=f"openai/{MODEL}", api_base=f"{url}/v1")
    preflight = job.preflight()
    assert preflight.returncode == 0, preflight.stderr
    launched = job.launch()
    assert launched.returncode == 0, launched.stderr + job.log_tail()
    snap = job.wait_finished(timeout=300)
    (trial,) = job.trials().values()
    assert trial["exception_info"] is None, trial["exception_info"]
    assert snap["rewards"] == {"1.0": 1}
    assert trial["agent_info"]["name"] == "terminus-2"
    assert trial["agent_result"]["n_input_tokens"] > 0
    agent_dir = Path(trial["_dir"]) / "agent"
    cast = agent_dir / "recording.cast"
    assert cast.is_file() and cast.stat().st_size > 0, "asciinema from the bundle recorded"
    header = json.loads(cast.read_text().splitlines()[0])
    assert header["version"] == 2
    assert (agent_dir / "terminus_2.pane").is_file()
    trajectory = json.loads((agent_dir / "trajectory.json").read_text())
    assert any("hello.txt" in json.dumps(step) for step in trajectory["steps"])
    # The model was reached through the router, and the container had no network at all.
    seen = [json.loads(line) for line in requests.read_text().splitlines() if line.strip()]
    chats = [r for r in seen if r.get("path") == "/v1/chat/completions"]
    assert len(chats) >= 2
    assert "network_mode: none" in Path(job.plan.compose_path).read_text()
    assert job.leftovers() == []
