"""The stand-in serving image for real (setup/serving_image.sh, pushed by setup.sh): two
workers and a router, each a container of the image from the registry the local stack pulls
from, run with the commands the SGLangWorker and Router components declare (host network,
uid 1000:1000, the demo checkpoint mounted read-only), the real sglang-router 0.3.2 in front.
Every container is removed whatever happens."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from components.config import ModelConfig, RouterConfig, ServingConfig
from components.router import router_argv
from components.seam.host import Host
from components.sglang_worker import SGLangWorkerArgs, expected_server_info, serve_argv
from tests.conftest import ROOT, docker
from tests.serving.conftest import STANDIN_IMAGE as IMAGE
from tests.serving.conftest import free_port, run_probe

DEMO_MODEL = ROOT / "demo" / "model"
DEMO_TASKS = ROOT / "demo" / "tasks"
MODEL = "benchstack/standin-demo"
# Asked as Harbor's Terminus-2 would (litellm, the job's sampling settings).
SAMPLING = {"temperature": 0.5, "top_p": 0.75, "top_k": 20, "max_tokens": 512}
# The Router component asks for 65536 (components/router.py NOFILE); this machine's engine
# runs with a hard limit of 20000, above which runc refuses to start the container ("error
# setting rlimit type 7"), so the test uses what the local stack's Harbor gets (16384).
NOFILE = 16384


@dataclass
class Stack:
    workers: list[SGLangWorkerArgs]
    names: list[str]
    router_url: str

    def logs(self, name: str) -> tuple[list[dict], str]:
        """A container's request log (its stdout, one JSON object a line) and its stderr."""
        proc = docker("logs", name)
        return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()], proc.stderr


def wait_answering(url: str, container: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            response = httpx.get(url, timeout=2)
            if response.status_code == 200:
                return
            last = f"HTTP {response.status_code}"
        except httpx.HTTPError as exc:
            last = type(exc).__name__
        state = docker("inspect", "-f", "{{.State.Status}}", container, check=False).stdout.strip()
        if state != "running":
            logs = docker("logs", "--tail", "20", container, check=False)
            raise AssertionError(f"{container} is {state}: {logs.stdout}{logs.stderr}")
        time.sleep(0.3)
    raise AssertionError(f"{url} did not answer within {timeout}s (last: {last})")


def worker_args(port: int) -> SGLangWorkerArgs:
    # A CPU layout unlike the stand-in's defaults, so only flags that reach it can match; one
    # extra flag the stand-in does not implement (it warns and goes on, as the brief says).
    return SGLangWorkerArgs(
        host=Host(name="local", address="local"),
        serving=ServingConfig(
            image=IMAGE, gpus=None, tp_size=1, dp_size=2, context_length=32768,
            max_running_requests=4, max_mamba_cache_size=8, mem_fraction_static=0.8,
            reasoning_parser="qwen3", tool_call_parser="qwen3_coder", max_total_tokens=65536,
            extra_server_args=["--enable-metrics"],
        ),
        model=ModelConfig(name=MODEL, path=str(DEMO_MODEL), params_billion=0.001),
        bind_host="127.0.0.1", port=port, container_name="unused",
    )


@pytest.fixture(scope="module")
def stack(standin_image: str) -> Iterator[Stack]:
    tag = uuid.uuid4().hex[:8]
    names: list[str] = []
    try:
        workers = []
        for i in (1, 2):
            args = worker_args(free_port())
            name = f"benchstack-test-standin-{tag}-w{i}"
            argv = serve_argv(args)
            # Named before it runs: a container that failed to start is still removed.
            names.append(name)
            workers.append(args)
            # The container as the SGLangWorker declares it, less the GPU options.
            docker("run", "-d", "--name", name, "--network", "host", "--user", args.serving.user,
                   "-e", "HOME=/tmp", "-e", "HF_HOME=/tmp/huggingface",
                   "-v", f"{DEMO_MODEL}:{args.container_model_path}:ro", IMAGE, *argv)
        for args, name in zip(workers, names, strict=True):
            wait_answering(f"{args.url}/health", name)

        router_port = free_port()
        router = RouterConfig(port=router_port, metrics_port=free_port())
        name = f"benchstack-test-standin-{tag}-router"
        names.append(name)
        docker("run", "-d", "--name", name, "--network", "host", "--user", "1000:1000",
               "-e", "HOME=/tmp", "-e", "NO_COLOR=1", "--ulimit", f"nofile={NOFILE}:{NOFILE}",
               "-v", f"{DEMO_MODEL}:/models/model:ro", IMAGE,
               *router_argv(router, [w.url for w in workers]))
        url = f"http://127.0.0.1:{router_port}"
        wait_answering(f"{url}/v1/models", name)
        yield Stack(workers, names, url)
    finally:
        for name in names:
            docker("rm", "-f", name, check=False)


def terminus_prompt(task: str) -> str:
    instruction = (DEMO_TASKS / task / "instruction.md").read_text()
    return ("You are an AI assistant tasked with solving command-line tasks in a Linux "
            "environment. ...\n\nTask Description:\n" + instruction
            + "\n\nCurrent terminal state:\nroot@demo:/app# ")


def chat(url: str, messages: list[dict]) -> dict:
    response = httpx.post(f"{url}/v1/chat/completions", timeout=30,
                          json={"model": MODEL, "messages": messages, **SAMPLING})
    assert response.status_code == 200, response.text
    return response.json()


def test_workers_report_their_flags(stack: Stack) -> None:
    for args in stack.workers:
        info = httpx.get(f"{args.url}/get_server_info", timeout=5).json()
        expect = expected_server_info(args)
        assert {k: info[k] for k in expect} == expect
        assert info["model_path"] == "/models/model"
        assert info["port"] == args.port
        # What the Router component's probes ask for, and what the worker's own probe checks.
        probe = run_probe({"mode": "worker", "url": args.url, "expect": expect, "timeout_s": 10,
                           "interval_s": 0.2})
        assert probe.returncode == 0, probe.stderr
        # --enable-metrics: SGLang's metrics on the worker's own port, as the sampler reads them.
        metrics = httpx.get(f"{args.url}/metrics", timeout=5)
        assert metrics.status_code == 200 and "sglang:num_queue_reqs{" in metrics.text
    for name in stack.names[:2]:
        _, stderr = stack.logs(name)
        assert "ignoring flags the stand-in does not implement" not in stderr
        assert "scripted episodes: 2 from /models/model/standin-episodes.json" in stderr


def test_router_health_models_and_ready(stack: Stack) -> None:
    assert httpx.get(f"{stack.router_url}/health", timeout=5).status_code == 200
    models = httpx.get(f"{stack.router_url}/v1/models", timeout=5).json()
    assert MODEL in [m["id"] for m in models["data"]]
    reply = chat(stack.router_url, [{"role": "user", "content": "Reply with exactly READY."}])
    assert reply["choices"][0]["message"]["content"] == "READY"
    # The Router component's readiness check: every worker registered once per DP rank, and
    # "READY" answered through the router.
    urls = [w.url for w in stack.workers]
    probe = run_probe({"mode": "router", "url": stack.router_url, "model": MODEL,
                       "worker_urls": urls, "timeout_s": 30, "interval_s": 0.5,
                       "worker_timeout_s": 30, "dp_size": 2})
    assert probe.returncode == 0, probe.stderr
    assert probe.outputs["workers"] == sorted(f"{u}@{r}" for u in urls for r in range(2))
    assert probe.outputs["reply_is_ready"] is True


def test_the_gateway_in_the_container_is_held_to_its_pin(stack: Stack) -> None:
    """The router's readiness reads the gateway's version in its container: smg 1.13.0 and
    sglang-router 0.3.2 are both in the image; a pin the image does not carry fails, naming
    both versions, and a package it lacks fails naming the image."""
    urls = [w.url for w in stack.workers]
    spec = {"mode": "router", "url": stack.router_url, "model": MODEL, "worker_urls": urls,
            "timeout_s": 30, "interval_s": 0.5, "worker_timeout_s": 30,
            "container": stack.names[-1]}
    for package, version in (("smg", "1.13.0"), ("sglang-router", "0.3.2")):
        ok = run_probe({**spec, "gateway": {"package": package, "version": version}})
        assert ok.returncode == 0, ok.stderr
        assert ok.outputs["gateway"] == {"package": package, "version": version,
                                         "running": version}
    wrong = run_probe({**spec, "gateway": {"package": "smg", "version": "1.12.0"}})
    assert wrong.returncode == 1
    assert (f"container {stack.names[-1]} runs smg 1.13.0, the stack pins 1.12.0"
            in wrong.reason), wrong.reason
    absent = run_probe({**spec, "gateway": {"package": "no-such-gateway", "version": "1"}})
    assert absent.returncode == 1 and "has no no-such-gateway" in absent.reason


def test_scripted_terminus_turns_through_the_router(stack: Stack) -> None:
    wrong = [{"role": "user", "content": terminus_prompt("hello-file-wrong")}]
    first = json.loads(chat(stack.router_url, wrong)["choices"][0]["message"]["content"])
    assert first["task_complete"] is False
    # The wrong episode's first reply, as the demo model's episodes file scripts it.
    episodes = json.loads((DEMO_MODEL / "standin-episodes.json").read_text())["episodes"]
    (scripted,) = [e for e in episodes if "answers this one wrongly" in e["when"]]
    assert first["commands"] == scripted["replies"][0]["commands"]
    assert "printf 'goodbye" in first["commands"][0]["keystrokes"]
    # Turn 1 (one assistant message so far): done; turn 2 (the confirmation): the same again.
    history = wrong + [{"role": "assistant", "content": json.dumps(first)},
                       {"role": "user", "content": "New Terminal Output:\nroot@demo:/app# "}]
    for _turn in (1, 2):
        content = chat(stack.router_url, history)["choices"][0]["message"]["content"]
        done = json.loads(content)
        assert done["task_complete"] is True and done["commands"] == []
        history += [{"role": "assistant", "content": content},
                    {"role": "user", "content": "Are you sure you want to mark the task as "
                                                "complete?"}]

    right = [{"role": "user", "content": terminus_prompt("hello-file")}]
    hello = json.loads(chat(stack.router_url, right)["choices"][0]["message"]["content"])
    assert "printf 'hello\\n' > /app/hello.txt" in hello["commands"][0]["keystrokes"]

    # The workers' `docker logs`: one JSON line per request, with what was sent and where the
    # dp-aware router pinned it.
    chats = []
    for args, name in zip(stack.workers, stack.names[:2], strict=True):
        records, _ = stack.logs(name)
        assert {r["worker"] for r in records} == {f"127.0.0.1:{args.port}"}
        chats += [r for r in records if r["path"] == "/v1/chat/completions"
                  and (r.get("reply") or {}).get("source") == "episode"]
    assert sorted((r["reply"]["episode"], r["reply"]["turn"]) for r in chats) == [
        (0, 0), (0, 1), (0, 2), (1, 0)]
    for record in chats:
        assert record["status"] == 200
        assert record["model"] == MODEL
        assert record["data_parallel_rank"] in (0, 1)
        sampling = record["sampling"]
        # smg passes max_tokens on as it is (sglang-router 0.3.2 sent max_completion_tokens).
        assert sampling["max_tokens"] == SAMPLING["max_tokens"]
        assert "max_completion_tokens" not in sampling
        assert (sampling["temperature"], sampling["top_p"], sampling["top_k"]) == (0.5, 0.75, 20)
        assert record["time"].endswith("+00:00") and record["t"] > 0

