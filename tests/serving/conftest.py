"""Serving-plane fixtures: stand-in SGLang workers and the real sglang-router on loopback, and
the serving plane's host steps run as the seam runs them.

Every process a test starts is stopped in a finalizer, also when the test fails.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from components.config import RouterConfig
from components.router import router_argv
from components.seam.step import render_step
from tests.conftest import CODE, REGISTRY, ROOT, ScriptResult, docker

STANDIN = ROOT / "demo" / "gpu_standin" / "sglang_worker.py"
# The stand-in serving image as setup/serving_image.sh pushes it, and what it carries from here.
STANDIN_IMAGE = f"{REGISTRY}/benchstack/sglang-standin:0.3.2"
STANDIN_FILES = {
    ROOT / "demo/gpu_standin/sglang_worker.py": "/opt/benchstack-standin/sglang_worker.py",
    ROOT / "demo/gpu_standin/sglang_startup.json": "/opt/benchstack-standin/sglang_startup.json",
    ROOT / "demo/gpu_standin/sglang": "/usr/local/bin/sglang",
}
PYTHON = Path(sys.executable)
MODEL = "Qwen/Qwen3.8-27B"
# The seed's layout: what a healthy worker reports and the probe expects.
SEED_EXPECT = {
    "served_model_name": MODEL,
    "tp_size": 4,
    "dp_size": 2,
    "context_length": 262144,
    "max_running_requests": 5,
    "max_mamba_cache_size": 25,
    "mem_fraction_static": 0.90,
    "reasoning_parser": "qwen3",
    "tool_call_parser": "qwen3_coder",
}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def wait_listening(host: str, port: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited early ({proc.returncode}): {proc.args}")
        with socket.socket() as sock:
            sock.settimeout(0.2)
            if sock.connect_ex((host, port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {host}:{port} after {timeout}s: {proc.args}")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@dataclass
class Standin:
    host: str
    port: int
    proc: subprocess.Popen
    request_log: Path
    stderr_log: Path

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def requests(self, path: str | None = None) -> list[dict]:
        if not self.request_log.exists():
            return []
        lines = [json.loads(x) for x in self.request_log.read_text().splitlines() if x.strip()]
        return [r for r in lines if path is None or r["path"] == path]

    def stderr(self) -> str:
        """What it printed on stderr so far (its startup replay, its warnings)."""
        return self.stderr_log.read_text()

    def stop(self) -> None:
        stop(self.proc)


@dataclass
class Processes:
    tmp_path: Path
    procs: list[subprocess.Popen] = field(default_factory=list)
    # The config of the last gateway started (its metrics URL, for the serving record's tests).
    last_router: RouterConfig | None = None

    def standin(self, *args: str, host: str = "127.0.0.1", port: int | None = None) -> Standin:
        port = port or free_port(host)
        log = self.tmp_path / f"standin-{host}-{port}.jsonl"
        err = self.tmp_path / f"standin-{host}-{port}.stderr"
        with err.open("w") as stderr:
            proc = subprocess.Popen(
                [str(PYTHON), str(STANDIN), "--host", host, "--port", str(port),
                 "--request-log", str(log), *args],
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        self.procs.append(proc)
        wait_listening(host, port, proc)
        return Standin(host, port, proc, log, err)

    def router(self, worker_urls: list[str], *extra: str, implementation: str = "smg",
               **router: Any) -> str:
        """The real gateway (smg by default, or the seed's sglang-router), launched with the
        argv the Router component declares (the seed's flags, the metrics listener on a free
        loopback port), on a loopback port; returns its URL."""
        port = free_port()
        cfg = RouterConfig(port=port, implementation=implementation,  # type: ignore[arg-type]
                           metrics_port=free_port(), **router)
        self.last_router = cfg
        argv = router_argv(cfg, worker_urls)
        if argv[:2] != ["python3", "-m"]:
            raise AssertionError(f"unexpected router command {argv[:3]}")
        log = (self.tmp_path / f"router-{port}.log").open("w")
        proc = subprocess.Popen(
            [str(PYTHON), *argv[1:], *extra],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "NO_COLOR": "1"},
        )
        self.procs.append(proc)
        wait_listening("127.0.0.1", port, proc)
        return f"http://127.0.0.1:{port}"

    def close(self) -> None:
        for proc in reversed(self.procs):
            stop(proc)


@pytest.fixture(scope="session")
def standin_image(docker_engine: None) -> str:
    """The stand-in serving image from the registry the local stack pulls from, holding this
    checkout's stand-in (else `make setup` has not rebuilt it since it changed)."""
    pulled = docker("pull", "-q", STANDIN_IMAGE, check=False)
    if pulled.returncode != 0:
        pytest.fail(f"{STANDIN_IMAGE} not in the registry ({pulled.stderr.strip()}): "
                    "run `make setup`")
    for source, target in STANDIN_FILES.items():
        inside = docker("run", "--rm", "--network", "none", STANDIN_IMAGE, "cat", target,
                        check=False).stdout
        if inside != source.read_text():
            pytest.fail(f"{STANDIN_IMAGE} holds an older {source.name}: run `make setup`")
    return STANDIN_IMAGE


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    procs = Processes(tmp_path)
    try:
        yield procs
    finally:
        procs.close()


def seam_step(
    module: str, verb: str, inputs: Mapping[str, Any], secret_inputs: tuple[str, ...] = ()
) -> str:
    """The exact command the seam gives a step that runs `python3 -m hostside MODULE VERB` with
    `inputs` on a host whose code is this checkout's."""
    return render_step(module, verb, inputs, CODE, secret_inputs)


def run_step(
    module: str, inputs: Mapping[str, Any], *, secrets: Mapping[str, Any] | None = None,
    verb: str = "create", timeout: float = 600,
) -> ScriptResult:
    """One host step exactly as the seam runs it: its command under bash, its secrets as JSON
    on standard input."""
    secrets = dict(secrets or {})
    command = seam_step(module, verb, {**inputs, **secrets}, tuple(secrets))
    proc = subprocess.run(
        ["bash", "-c", command],
        input=json.dumps(secrets) if secrets else "",
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return ScriptResult(proc.returncode, proc.stdout, proc.stderr)


# Where a probe that is given a python would keep its venv (it builds none).
UNUSED_VENVS = str(Path(tempfile.gettempdir()) / "benchstack-test-no-venvs")


def run_probe(spec: dict, timeout: float = 120, **inputs: Any) -> ScriptResult:
    """The serving_probe step as the serving components declare it, with this python (it has
    httpx) unless `python` is given."""
    values = {"spec": spec, "python": str(PYTHON), "venvs_dir": UNUSED_VENVS, "pip_args": [],
              "hard_timeout_s": 600, **inputs}
    return run_step("serving_probe", values, timeout=timeout)


def chat(url: str, content: str = "Reply with exactly READY.") -> httpx.Response:
    return httpx.post(
        f"{url}/v1/chat/completions",
        json={"model": MODEL, "messages": [{"role": "user", "content": content}],
              "temperature": 0, "max_tokens": 128},
        timeout=30,
    )
