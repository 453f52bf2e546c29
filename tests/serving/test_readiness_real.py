"""Readiness probes for real: the serving_probe step as the host seam runs it, against stand-in
SGLang workers and the real sglang-router (PyPI 0.3.2) on loopback, and against the stand-in
serving image's container replaying a published SGLang startup on the real Docker engine."""

from __future__ import annotations

import re
import shlex
import time
import uuid
from pathlib import Path

import httpx
import pytest

from components.config import ModelConfig, ServingConfig
from components.seam.host import Host
from components.sglang_worker import (
    SGLangWorkerArgs,
    expected_server_info,
    readiness_spec,
    serve_argv,
)
from tests.conftest import docker
from tests.serving import sglang_logs
from tests.serving.conftest import (
    MODEL,
    PYTHON,
    SEED_EXPECT,
    Processes,
    chat,
    free_port,
    run_probe,
)

pytestmark = pytest.mark.real


def worker_spec(url: str, timeout_s: float = 20, **expect: object) -> dict:
    return {"mode": "worker", "url": url, "expect": {**SEED_EXPECT, **expect},
            "timeout_s": timeout_s, "interval_s": 0.2}


def test_worker_ready_after_loading_reports_configured_fields(processes: Processes) -> None:
    # "Loading" for the probe's first five checks, however late it starts (not for a time).
    worker = processes.standin("--healthy-after-checks", "5")
    result = run_probe(worker_spec(worker.url))
    assert result.returncode == 0, result.stderr
    out = result.outputs
    assert out["url"] == worker.url
    # It really waited through the 503s of "loading": its interval (0.2 s) after each of five.
    assert out["waited_s"] >= 1.0
    health = [r["status"] for r in worker.requests() if r["path"] == "/health"]
    assert health == [503] * 5 + [200], health
    assert out["server_info"]["tp_size"] == 4
    assert out["server_info"]["dp_size"] == 2
    assert out["server_info"]["mem_fraction_static"] == 0.9
    assert "503" in result.stderr  # progress names the last status while waiting
    # The probe asked the worker itself, /health until ready, then the server info.
    paths = [r["path"] for r in worker.requests()]
    assert "/health" in paths and "/get_server_info" in paths


def test_worker_reporting_tp_size_2_fails_naming_every_mismatch(processes: Processes) -> None:
    worker = processes.standin("--tp-size", "2", "--max-mamba-cache-size", "12")
    result = run_probe(worker_spec(worker.url))
    assert result.returncode == 1
    assert worker.url in result.reason
    assert "tp_size is 2, want 4" in result.reason
    assert "max_mamba_cache_size is 12, want 25" in result.reason
    # Fields that match are not blamed.
    assert "dp_size" not in result.reason
    assert result.stdout.strip() == ""


def test_mem_fraction_written_090_matches_09(processes: Processes) -> None:
    worker = processes.standin("--mem-fraction-static", "0.9")
    result = run_probe(worker_spec(worker.url, mem_fraction_static=0.90))
    assert result.returncode == 0, result.stderr


def test_worker_never_healthy_fails_within_the_bound(processes: Processes) -> None:
    worker = processes.standin("--never-healthy")
    result = run_probe(worker_spec(worker.url, timeout_s=3))
    assert result.returncode == 1
    # It stopped checking at its bound: at most one check per interval (0.2 s) in its 3 s, and
    # fewer on a slow machine (a count, not a stopwatch).
    checks = len(worker.requests("/health"))
    assert 1 <= checks <= 3 / 0.2 + 1, checks
    assert f"{worker.url}/health not healthy after 3s" in result.reason
    assert "last: HTTP 503" in result.reason
    assert "waiting for worker" in result.stderr  # progress while it waited


def test_component_argv_and_expectations_round_trip(processes: Processes) -> None:
    """The worker's `sglang serve` argv, served by the stand-in (which takes the same flags),
    satisfies the probe spec the component declares; a layout unlike the stand-in's defaults,
    so only flags that really reach the server make it pass."""
    port = free_port()
    args = SGLangWorkerArgs(
        host=Host(name="local", address="local"),
        serving=ServingConfig(
            image="unused", port=port, tp_size=2, dp_size=4, context_length=131072,
            max_running_requests=7, max_mamba_cache_size=30, mem_fraction_static=0.85,
            reasoning_parser="deepseek-r1", tool_call_parser="kimi_k2", max_total_tokens=400000,
        ),
        model=ModelConfig(name="org/other-model", path="/data/m/Q", params_billion=8),
        bind_host="127.0.0.1", port=port, container_name="unused",
    )
    argv = serve_argv(args)
    assert argv[:2] == ["sglang", "serve"]
    worker = processes.standin(*argv[2:], port=port)
    spec = {"mode": "worker", "url": f"http://127.0.0.1:{port}",
            "expect": expected_server_info(args), "timeout_s": 10, "interval_s": 0.2}
    result = run_probe(spec)
    assert result.returncode == 0, result.stderr
    assert result.outputs["server_info"]["max_total_tokens"] == 400000
    assert worker.url == spec["url"]


def test_worker_container_that_exits_fails_at_once(canary_image: str) -> None:
    """SGLang dying minutes into loading (OOM, bad flag) must not cost the whole health
    timeout: the probe watches the container and reports its exit and last log lines."""
    name = f"benchstack-test-probe-{uuid.uuid4().hex[:10]}"
    url = f"http://127.0.0.1:{free_port()}"
    try:
        docker("run", "-d", "--name", name, canary_image, "bash", "-c",
               "echo 'loading weights' ; echo 'torch.OutOfMemoryError: CUDA out of memory' >&2;"
               " exit 3")
        # At once, not at its health timeout: past run_probe's own 120 s bound it fails (a
        # 600 s health timeout: a probe that waited it out could not pass on any machine).
        result = run_probe({**worker_spec(url, timeout_s=600), "container": name})
    finally:
        docker("rm", "-f", name, check=False)
    assert result.returncode == 1
    assert f"container {name} exited (exit code 3)" in result.reason
    assert "CUDA out of memory" in result.reason


def test_a_worker_dying_in_cuda_graph_capture_fails_naming_the_phase_and_line(
        canary_image: str) -> None:
    """SGLang's own lines (tests/serving/sglang_logs.py) from a real container's log, read with
    docker's timestamps: the phase it died in, its time there, and the line that says why,
    while the container still runs (SGLang's HTTP server can outlive its scheduler)."""
    name = f"benchstack-test-phases-{uuid.uuid4().hex[:10]}"
    url = f"http://127.0.0.1:{free_port()}"
    lines = [sglang_logs.STARTUP[4], sglang_logs.STARTUP[7], *sglang_logs.OOM_IN_CAPTURE]
    script = "; ".join([f"echo {shlex.quote(lines[0])} >&2", "sleep 2",
                        *(f"echo {shlex.quote(line)} >&2" for line in lines[1:4]), "sleep 3",
                        *(f"echo {shlex.quote(line)} >&2" for line in lines[4:]),
                        "sleep 300"])
    try:
        docker("run", "-d", "--name", name, canary_image, "bash", "-c", script)
        # Once the fatal line is logged, not at its health timeout (600 s; run_probe's own
        # bound is 120 s), while the container still runs.
        result = run_probe({**worker_spec(url, timeout_s=600), "container": name})
    finally:
        docker("rm", "-f", name, check=False)
    assert result.returncode == 1
    assert re.search(rf"container {name} failed while capturing CUDA graphs \(\d+s in it\): "
                     r"Exception: Capture cuda graph failed: CUDA out of memory", result.reason), \
        result.reason
    # The phases went by in the probe's progress.
    assert f"{name}: loading weights" in result.stderr
    assert f"{name}: capturing CUDA graphs" in result.stderr


# The replay's pace in these tests: the published 293 s startup in about 5 s.
SPEED = 60
# The published phases (demo/gpu_standin/PROVENANCE.md) and their seconds on an H100.
PUBLISHED = [("initialising torch distributed", 14.8), ("loading weights", 100.34),
             ("allocating the KV cache", 0.41), ("capturing CUDA graphs", 5.69),
             ("starting the server", 0.0), ("capturing CUDA graphs", 55.92),
             ("starting the server", 2.39), ("warming up", 7.29)]


def standin_worker(image: str, *flags: str) -> SGLangWorkerArgs:
    """The stand-in image's container as the SGLangWorker declares it (its `sglang serve`
    argv, host network, uid 1000), less the GPU options; the seed's 27B layout."""
    port = free_port()
    args = SGLangWorkerArgs(
        host=Host(name="local", address="local"),
        serving=ServingConfig(
            image=image, gpus=None, port=port, tp_size=4, dp_size=2, context_length=262144,
            max_running_requests=5, max_mamba_cache_size=25, mem_fraction_static=0.9,
            reasoning_parser="qwen3", tool_call_parser="qwen3_coder",
            extra_server_args=["--startup-speed", str(SPEED), *flags]),
        model=ModelConfig(name=MODEL, path="/models/Qwen3.8-27B", params_billion=27),
        bind_host="127.0.0.1", port=port,
        container_name=f"benchstack-test-replay-{uuid.uuid4().hex[:10]}",
    )
    docker("run", "-d", "--name", args.container_name, "--network", "host", "--user",
           args.serving.user, "-e", "HOME=/tmp", image, *serve_argv(args))
    return args


def test_the_wait_names_each_phase_of_a_replayed_startup_and_its_time(
        standin_image: str) -> None:
    """The worker's readiness probe as the component declares it (its spec: the derived
    bound, a 5 s interval, the container watched) against the stand-in replaying SGLang's
    startup of Qwen3-32B on an H100 at 60x: each phase named in the wait's progress as it
    comes, its time there read from the container's log, the durations in the result."""
    args = standin_worker(standin_image)
    name = args.container_name
    try:
        spec = readiness_spec(args)
        assert spec["timeout_s"] == 1140 and spec["container"] == name
        result = run_probe(spec)
        logs = docker("logs", name, check=False)
    finally:
        docker("rm", "-f", name, check=False)
    assert result.returncode == 0, result.stderr
    entered = re.findall(rf"\[readiness\] {name}: (.+) \((.+) took ([\d.]+)s\)", result.stderr)
    assert [phase for phase, _, _ in entered] == [p for p, _ in PUBLISHED] + ["ready"]
    assert [left for _, left, _ in entered] == ["starting"] + [p for p, _ in PUBLISHED]
    phases = result.outputs["phases"]
    assert [p["phase"] for p in phases] == ["starting", *(p for p, _ in PUBLISHED), "ready"]
    # Within half a second: the log's stamps are dockerd's reading of each line, which lags the
    # stand-in's writing unevenly on a loaded machine (the weights' phase still stands out).
    for (phase, seconds), got in zip(PUBLISHED, phases[1:], strict=False):
        assert got["seconds"] == pytest.approx(seconds / SPEED, abs=0.5), (phase, phases)
    # SGLang's own lines, stamped by the stand-in as SGLang's logger does, on its stderr.
    assert re.search(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] Load weight end\. elapsed=100\.34 s, "
                     r"type=Qwen3ForCausalLM", logs.stderr, re.MULTILINE), logs.stderr[-2000:]


@pytest.mark.parametrize(("failure", "phase", "line"), [
    ("oom-in-capture", "capturing CUDA graphs",
     "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 448.00 MiB."),
    ("nccl-at-init", "initialising torch distributed",
     "RuntimeError: NCCL error: unhandled system error"),
])
def test_a_replayed_failure_fails_the_wait_at_once_naming_the_phase_and_the_line(
        standin_image: str, failure: str, phase: str, line: str) -> None:
    """SGLang dying in a phase (its scheduler's traceback, its launcher's sigquit, the
    process gone): the wait fails within seconds of it, not at its 1140 s bound, naming the
    phase and the exception's line, not the scheduler's `Traceback` header."""
    args = standin_worker(standin_image, "--startup-failure", failure)
    name = args.container_name
    try:
        start = time.monotonic()
        result = run_probe(readiness_spec(args))
        took = time.monotonic() - start
        logs = docker("logs", name, check=False)
    finally:
        docker("rm", "-f", name, check=False)
    assert result.returncode == 1
    # The replayed startup fails after 2 to 4 s and the interval is 5 s; the bound is far below
    # the 1140 s a wait that missed the failure would take, and loose for a loaded machine.
    assert took < 120, took
    assert re.search(rf"container {name} failed while {phase} \(\d+s in it\): "
                     rf"{re.escape(line)}", result.reason), result.reason
    assert "Scheduler hit an exception" in logs.stderr  # the header was there, and not named
    assert "Traceback" not in result.reason.split(f"failed while {phase}")[1].split("(container")[0]


def test_nothing_listening_names_the_connection_error() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = run_probe(worker_spec(url, timeout_s=1.5))
    assert result.returncode == 1
    assert "not healthy after 1.5s" in result.reason
    assert "ConnectError" in result.reason


@pytest.mark.parametrize("implementation", ["smg", "sglang-router"])
def test_router_healthy_path_through_the_real_router(processes: Processes,
                                                     implementation: str) -> None:
    """Both gateways, each as the Router component starts it: health, the model list, every
    DP rank of every worker registered, and a real completion through it."""
    a = processes.standin(host="127.0.0.1")
    b = processes.standin(host="127.0.0.2")
    router = processes.router([a.url, b.url], implementation=implementation)
    spec = {"mode": "router", "url": router, "model": MODEL, "worker_urls": [a.url, b.url],
            "timeout_s": 60, "interval_s": 0.5, "worker_timeout_s": 30, "dp_size": 2}
    result = run_probe(spec)
    assert result.returncode == 0, result.stderr
    out = result.outputs
    assert out["router_url"] == router
    assert MODEL in out["models"]
    assert out["reply"] == "READY" and out["reply_is_ready"] is True
    # dp-aware: the router asked each worker's server info and made one entry per DP rank.
    assert out["workers"] == sorted(f"{w.url}@{r}" for w in (a, b) for r in range(2))
    completions = a.requests("/v1/chat/completions") + b.requests("/v1/chat/completions")
    assert len(completions) == 1
    body = completions[0]["body"]
    assert body["messages"] == [{"role": "user", "content": "Reply with exactly READY."}]
    assert body["data_parallel_rank"] in (0, 1)


def test_router_without_the_expected_dp_ranks_fails_naming_the_worker(
    processes: Processes,
) -> None:
    a = processes.standin("--dp-size", "2", host="127.0.0.1")
    b = processes.standin("--dp-size", "1", host="127.0.0.2")  # a worker launched with dp 1
    router = processes.router([a.url, b.url])
    result = run_probe({"mode": "router", "url": router, "model": MODEL,
                        "worker_urls": [a.url, b.url], "timeout_s": 5, "interval_s": 0.5,
                        "worker_timeout_s": 30, "dp_size": 2})
    assert result.returncode == 1
    # smg registers a dp-1 worker under its plain URL (sglang-router 0.3.2 as `url@0`).
    assert f"{b.url} registered for DP rank(s) [''], want 0..1" in result.reason
    assert f"{a.url} registered" not in result.reason


def test_router_lists_a_different_model_fails_naming_both(processes: Processes) -> None:
    a = processes.standin("--served-model-name", "other/model")
    router = processes.router([a.url])
    spec = {"mode": "router", "url": router, "model": MODEL, "worker_urls": [a.url],
            "timeout_s": 20, "interval_s": 0.5, "worker_timeout_s": 30}
    result = run_probe(spec)
    assert result.returncode == 1
    assert "other/model" in result.reason and MODEL in result.reason


def test_one_worker_down_behind_the_router(processes: Processes) -> None:
    a = processes.standin(host="127.0.0.1")
    b = processes.standin(host="127.0.0.2")
    router = processes.router([a.url, b.url])
    ready = run_probe({"mode": "router", "url": router, "model": MODEL,
                       "worker_urls": [a.url, b.url], "timeout_s": 60, "interval_s": 0.5,
                       "worker_timeout_s": 30})
    assert ready.returncode == 0, ready.stderr
    b.stop()

    # What the router says: /health still 200 and the dead worker still listed healthy (its
    # health check runs every 60 s). Requests it sends to b fail with a 500 naming b's URL
    # (after its own retries) until b's circuit breaker opens; from then on a answers them all.
    assert httpx.get(f"{router}/health", timeout=10).status_code == 200
    listed = httpx.get(f"{router}/workers", timeout=10).json()["workers"]
    assert {w["url"] for w in listed if w["is_healthy"]} >= {f"{b.url}@0", f"{b.url}@1"}
    statuses = []
    for i in range(30):
        response = chat(router, f"Reply {i} with exactly READY.")
        statuses.append(response.status_code)
        if response.status_code != 200:
            assert response.status_code == 500
            assert b.url in response.json()["error"]["message"]
        if statuses[-3:] == [200, 200, 200]:
            break
    assert statuses[-3:] == [200, 200, 200], statuses
    assert len(a.requests("/v1/chat/completions")) >= 3

    # What the readiness says: the dead worker by URL, from the router's host.
    result = run_probe({"mode": "router", "url": router, "model": MODEL,
                        "worker_urls": [a.url, b.url], "timeout_s": 60,
                        "worker_timeout_s": 2, "interval_s": 0.2})
    assert result.returncode == 1
    assert "1 of 2 worker(s) unreachable" in result.reason
    assert f"{b.url}/health" in result.reason
    assert a.url + "/health" not in result.reason


def test_router_started_with_a_worker_down_reports_it_unregistered(processes: Processes) -> None:
    a = processes.standin(host="127.0.0.1")
    dead = f"http://127.0.0.2:{free_port('127.0.0.2')}"
    router = processes.router([a.url, dead])
    result = run_probe({"mode": "router", "url": router, "model": MODEL,
                        "worker_urls": [a.url, dead], "timeout_s": 4,
                        "worker_timeout_s": 1, "interval_s": 0.2})
    assert result.returncode == 1
    assert dead in result.reason


def test_probe_venv_failure_leaves_nothing_behind(tmp_path: Path) -> None:
    venvs = tmp_path / "venvs"
    # --no-index: pip may not look anywhere, so the install fails without any network.
    result = run_probe(worker_spec("http://127.0.0.1:1"), python=None, venvs_dir=str(venvs),
                       pip_args=["--no-index"])
    assert result.returncode == 1
    assert result.reason.startswith("serving_probe: pip could not install httpx==0.28.1")
    # Not even the staging directory of the half-built venv.
    assert list(venvs.iterdir()) == []


def test_a_probe_venv_already_built_is_reused(processes: Processes, tmp_path: Path) -> None:
    """Without serving.probe_python the probe runs with the pinned venv's python; one already
    there (a python that imports httpx: this one, by a wrapper) is used as it is."""
    worker = processes.standin()
    venv = tmp_path / "workspace" / ".benchstack" / "probe-httpx-0.28.1"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text(f'#!/bin/sh\nexec {PYTHON} "$@"\n')
    (venv / "bin" / "python").chmod(0o755)
    result = run_probe(worker_spec(worker.url), python=None, venvs_dir=str(venv.parent))
    assert result.returncode == 0, result.stderr
    assert "building" not in result.stderr
    assert result.outputs["server_info"]["tp_size"] == 4


def test_hard_timeout_backstop(processes: Processes) -> None:
    worker = processes.standin("--never-healthy")
    # The 2 s backstop, not the 600 s health timeout (past run_probe's own 120 s it fails).
    result = run_probe(worker_spec(worker.url, timeout_s=600), hard_timeout_s=2)
    assert result.returncode == 1
    assert "probe still running after its hard timeout of 2s: killed" in result.reason


def test_bad_probe_python_is_named() -> None:
    result = run_probe(worker_spec("http://127.0.0.1:1"), python="/bin/false")
    assert result.returncode == 1
    assert "serving.probe_python /bin/false cannot import httpx" in result.reason
