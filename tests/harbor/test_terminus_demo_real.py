"""The demo's scripted model for real: Harbor 0.21.0's Terminus-2 on the three demo tasks, through
the real sglang-router, answered by the stand-in worker from the demo checkpoint's episodes
(demo/model/standin-episodes.json), as the local stack serves them. hello-file passes,
hello-file-wrong is a model failure (reward 0, no exception), hello-file-slow times out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.harbor.conftest import JobFactory, harbor_section
from tests.harbor.test_terminus_real import free_port, wait_http
from tests.hostplane.steps import build_tool_bundle

STANDIN = ROOT / "demo" / "gpu_standin" / "sglang_worker.py"
DEMO_MODEL = ROOT / "demo" / "model"
MODEL = "benchstack/standin-demo"


@pytest.fixture
def demo_router(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The real router in front of one stand-in worker serving the demo checkpoint."""
    requests = tmp_path / "requests.jsonl"
    worker_port, router_port = free_port(), free_port()
    procs: list[subprocess.Popen] = []
    try:
        worker = subprocess.Popen(
            [sys.executable, str(STANDIN), "--host", "127.0.0.1", "--port", str(worker_port),
             "--served-model-name", MODEL, "--model-path", str(DEMO_MODEL), "--tp-size", "1",
             "--dp-size", "2", "--request-log", str(requests)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(worker)
        wait_http(f"http://127.0.0.1:{worker_port}/health", worker, 30)
        log = (tmp_path / "router.log").open("w")
        router = subprocess.Popen(
            [sys.executable, "-m", "sglang_router.launch_router", "--host", "127.0.0.1",
             "--port", str(router_port), "--worker-urls", f"http://127.0.0.1:{worker_port}",
             "--dp-aware", "--policy", "cache_aware"],
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


def test_terminus2_on_the_demo_tasks_with_the_scripted_model(
    jobs: JobFactory, demo_dataset: Path, demo_router: tuple[str, Path], canary_image: str,
    tmp_path: Path,
) -> None:
    url, requests = demo_router
    tools = tmp_path / "harbor-tools-amd64"
    built = build_tool_bundle(tools, canary_image)
    assert built.returncode == 0, built.stderr[-2000:]
    settings = harbor_section(
        {"name": "terminus-2", "n_concurrent": 3, "temperature": 0.0, "max_input_tokens": 32768,
         "max_output_tokens": 1024, "record_terminal_session": False},
        n_concurrent_trials=3, container_network="none",
    )
    job = jobs.plan(demo_dataset, settings, tools_dir=str(tools), model_name=f"openai/{MODEL}",
                    api_base=f"{url}/v1")
    launched = job.launch()
    assert launched.returncode == 0, launched.stderr + job.log_tail()
    job.wait_finished(timeout=300)
    trials = job.trials()

    def outcome(task: str) -> tuple[object, str | None]:
        trial = trials[task]
        rewards = (trial.get("verifier_result") or {}).get("rewards") or {}
        exception = (trial.get("exception_info") or {}).get("exception_type")
        return rewards.get("reward"), exception

    got = {task: outcome(task) for task in sorted(trials)}
    # hello-file-slow: the agent is cancelled at 5 s and the verifier has read /app/hello.txt by
    # about 5.9 s after the agent started; the scripted `sleep 12` (sent at about 0.5 s) writes
    # it at about 12.5 s: a margin of about 6 s (half a second with a 6 s sleep, measured here).
    assert got == {"hello-file": (1, None), "hello-file-slow": (0, "AgentTimeoutError"),
                   "hello-file-wrong": (0, None)}, got
    # Each conversation was answered by its own episode, turn by turn (the wrong task by the
    # marked episode, the others by the default), and completed with the confirmation.
    seen = [json.loads(line) for line in requests.read_text().splitlines() if line.strip()]
    turns = sorted((r["reply"]["episode"], r["reply"]["turn"]) for r in seen
                   if r["path"] == "/v1/chat/completions")
    assert turns == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 0), (1, 1), (1, 2)], turns
