"""The local stack's serving plane from its real containers: the router against a worker direct.

The stand-in image (setup/serving_image.sh) runs as the local stack runs it: one worker
container with the stack's `sglang serve` flags (dp 2, host network, the demo checkpoint
mounted) and one router container with its flags (dp-aware, cache_aware), each command made by
the components' own `serve_argv` / `router_argv` from Pulumi.local.yaml. The same chat
completions are sent at the local job's concurrency (harbor.agent.n_concurrent) straight to the
worker and through the router, in alternating rounds so both paths see the same machine.
Printed: requests per second and p50/p99 latency of each path, and the router's ratios.
The stand-in answers after --latency-ms of simulated generation (a real completion takes
seconds; 50 ms is a short one).

    .venv/bin/python benchmarks/bench_serving_containers.py [--requests 300] [--latency-ms 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from components.config import load_stack_file  # noqa: E402
from components.router import router_argv  # noqa: E402
from components.sglang_worker import SGLangWorkerArgs, serve_argv  # noqa: E402

IMAGE = "127.0.0.1:5000/benchstack/sglang-standin:0.3.2"
WORKER_PORT, ROUTER_PORT = 31501, 31500


def docker(*args: str) -> str:
    proc = subprocess.run(["docker", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"bench_serving_containers: docker {args[0]}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def wait_ready(url: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"bench_serving_containers: {url} did not answer within {timeout:.0f}s")


async def round_of(client: httpx.AsyncClient, url: str, model: str, n: int,
                   concurrency: int) -> list[float]:
    body = {"model": model, "messages": [{"role": "user", "content": "Reply with exactly READY."}],
            "temperature": 0.7, "top_p": 0.9, "max_tokens": 16}
    gate = asyncio.Semaphore(concurrency)
    latencies: list[float] = []

    async def one() -> None:
        async with gate:
            start = time.perf_counter()
            response = await client.post(f"{url}/v1/chat/completions", json=body)
            response.raise_for_status()
            latencies.append(time.perf_counter() - start)

    await asyncio.gather(*(one() for _ in range(n)))
    return latencies


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(worker: str, router: str, model: str, requests: int,
                  concurrency: int) -> dict[str, dict]:
    seconds = {"worker": 0.0, "router": 0.0}
    latencies: dict[str, list[float]] = {"worker": [], "router": []}
    rounds = 10
    async with httpx.AsyncClient(timeout=60) as client:
        await round_of(client, router, model, concurrency * 2, concurrency)  # warm both paths
        for i in range(rounds):
            for path in (("worker", "router") if i % 2 == 0 else ("router", "worker")):
                url = worker if path == "worker" else router
                start = time.perf_counter()
                latencies[path] += await round_of(client, url, model, requests // rounds,
                                                  concurrency)
                seconds[path] += time.perf_counter() - start
    return {path: {"rps": len(latencies[path]) / seconds[path],
                   "p50_ms": statistics.median(latencies[path]) * 1000,
                   "p99_ms": pct(latencies[path], 0.99) * 1000, "n": len(latencies[path])}
            for path in latencies}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    opts = parser.parse_args()
    cfg = load_stack_file(ROOT / "Pulumi.local.yaml")
    assert cfg.serving and cfg.model and cfg.router
    concurrency = cfg.harbor.agent.n_concurrent
    model_dir = ROOT / cfg.model.path
    serving = cfg.serving.model_copy(
        update={"extra_server_args": ["--latency-ms", f"{opts.latency_ms:g}"]})
    args = SGLangWorkerArgs(host=None, serving=serving,  # type: ignore[arg-type]
                            model=cfg.model.model_copy(update={"path": str(model_dir)}),
                            bind_host="127.0.0.1", port=WORKER_PORT, container_name="unused")
    tag = uuid.uuid4().hex[:8]
    worker_name, router_name = f"bench-serving-worker-{tag}", f"bench-serving-router-{tag}"
    try:
        docker("run", "-d", "--name", worker_name, "--network", "host", "--user", serving.user,
               "--ulimit", f"memlock={serving.memlock}:{serving.memlock}", "--volume",
               f"{model_dir}:{args.container_model_path}:ro", IMAGE, *serve_argv(args))
        worker = f"http://127.0.0.1:{WORKER_PORT}"
        wait_ready(worker)
        router_cfg = cfg.router.model_copy(update={"port": ROUTER_PORT})
        docker("run", "-d", "--name", router_name, "--network", "host", "--user", serving.user,
               "--env", "HOME=/tmp", "--ulimit",
               f"nofile={router_cfg.nofile}:{router_cfg.nofile}", IMAGE,
               *router_argv(router_cfg, [worker]))
        router = f"http://127.0.0.1:{ROUTER_PORT}"
        wait_ready(router)
        result = asyncio.run(measure(worker, router, cfg.model.name, opts.requests, concurrency))
    finally:
        subprocess.run(["docker", "rm", "-f", worker_name, router_name], capture_output=True)
    w, r = result["worker"], result["router"]
    print(f"serving plane of the local stack, concurrency {concurrency}, "
          f"{opts.latency_ms:g} ms simulated generation, {w['n']} requests per path")
    for name, row in (("worker direct", w), ("through router", r)):
        print(f"  {name:15} {row['rps']:7.1f} req/s   p50 {row['p50_ms']:7.1f} ms   "
              f"p99 {row['p99_ms']:7.1f} ms")
    print(f"  router / worker: req/s {r['rps'] / w['rps']:.3f}x   p50 "
          f"{r['p50_ms'] / w['p50_ms']:.3f}x   p99 {r['p99_ms'] / w['p99_ms']:.3f}x")
    print(json.dumps({"concurrency": concurrency, "worker": w, "router": r}))


if __name__ == "__main__":
    main()
