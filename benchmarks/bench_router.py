"""Latency the real SGLang router adds, at the agents' concurrency (20).

Two stand-in workers (demo/gpu_standin/sglang_worker.py, dp_size 2 each: the seed's 4 replicas)
on 127.0.0.1 and 127.0.0.2, the real `sglang-router` (PyPI) in front of them with the seed's
flags (dp-aware, cache_aware, balance 1 / 1.2). The same chat completions are sent at
concurrency 20 directly to the workers (round robin) and, at the same time, 20 through the
router: side by side, both paths see the same load on a shared, noisy machine. Reported: the
median latency of each, their ratio (goal: within 5%, i.e. <= 1.05), the absolute median
added, and p90s.

The stand-ins answer after --latency-ms of simulated generation: a real completion takes
seconds, so the default 100 ms is already a pessimistic (short) request. With --latency-ms 0
the ratio measures pure proxy overhead against a ~1 ms server, which no proxy can keep within
5%; the absolute added milliseconds are the number to read there.

    .venv/bin/python benchmarks/bench_router.py [--requests 400] [--latency-ms 100] [--strict]

Prints a summary, then one JSON line. Exit 1 on any failed request (or, with --strict, when
the ratio misses the goal).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from components.config import RouterConfig  # noqa: E402
from components.router import router_argv  # noqa: E402

STANDIN = ROOT / "demo" / "gpu_standin" / "sglang_worker.py"
MODEL = "Qwen/Qwen3.8-27B"
CONCURRENCY = 20
GOAL = 1.05


def free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def wait_health(url: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"bench_router: {proc.args[:3]} exited with {proc.returncode}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"bench_router: {url}/health did not answer within {timeout}s")


def body(i: int) -> dict:
    # Distinct prompts, like distinct agent sessions: cache-aware routing sees no shared prefix.
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"session {uuid.uuid4().hex} turn {i}: "
                      "Reply with exactly READY."}],
        "temperature": 0,
        "max_tokens": 128,
    }


def make_client(concurrency: int) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    return httpx.AsyncClient(
        transport=httpx.AsyncHTTPTransport(retries=0, limits=limits),
        timeout=httpx.Timeout(60.0, connect=5.0),
        trust_env=False,
    )


async def run_round(
    client: httpx.AsyncClient, targets: list[str], n: int, concurrency: int
) -> list[float]:
    """`n` completions at `concurrency`, spread over `targets`; returns latencies (ms)."""
    latencies: list[float] = []
    failures: list[str] = []
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(n):
        queue.put_nowait(i)

    async def worker() -> None:
        while True:
            try:
                i = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            url = targets[i % len(targets)]
            start = time.perf_counter()
            try:
                response = await client.post(f"{url}/v1/chat/completions", json=body(i))
                ok = response.status_code == 200 and response.json()["choices"]
            except (httpx.HTTPError, ValueError, KeyError) as exc:
                failures.append(f"{url}: {type(exc).__name__}: {exc}")
                continue
            elapsed = (time.perf_counter() - start) * 1000
            if not ok:
                failures.append(f"{url}: HTTP {response.status_code}")
                continue
            latencies.append(elapsed)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    if failures:
        raise SystemExit(f"bench_router: {len(failures)} request(s) failed, first: {failures[0]}")
    return latencies


async def measure(
    workers: list[str], router: str, requests: int, rounds: int, concurrency: int
) -> tuple[list[float], list[float]]:
    """Both paths at once, each at `concurrency`, in several rounds.

    Run side by side, direct and routed requests see the same machine load at the same
    moment (CI boxes are shared and noisy), so the ratio compares like with like; each path
    still has its own `concurrency` requests in flight.
    """
    direct: list[float] = []
    routed: list[float] = []
    per_round = requests // rounds
    # Pool room for `concurrency` connections per origin: a shared pool full of idle
    # connections to one worker would close them to open new ones to the other, and that
    # churn (connect + a new server thread) would be charged to the direct path.
    async with (
        make_client(concurrency * len(workers)) as to_workers,
        make_client(concurrency) as to_router,
    ):
        # Warm-up: connection pools, the router's worker registration, the stand-ins' threads.
        await asyncio.gather(
            run_round(to_workers, workers, concurrency * 2, concurrency),
            run_round(to_router, [router], concurrency * 2, concurrency),
        )
        for _ in range(rounds):
            got_direct, got_routed = await asyncio.gather(
                run_round(to_workers, workers, per_round, concurrency),
                run_round(to_router, [router], per_round, concurrency),
            )
            direct.extend(got_direct)
            routed.extend(got_routed)
    return direct, routed


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description="latency added by the real sglang-router")
    parser.add_argument("--requests", type=int, default=400, help="per mode, in total")
    parser.add_argument("--rounds", type=int, default=8, help="side-by-side rounds")
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--concurrency", type=int, default=CONCURRENCY)
    parser.add_argument("--strict", action="store_true", help="exit 1 if the goal is missed")
    args = parser.parse_args()
    if args.requests < args.rounds or args.requests > 10000:
        parser.error("--requests must be between --rounds and 10000")

    procs: list[subprocess.Popen] = []
    try:
        workers = []
        for host in ("127.0.0.1", "127.0.0.2"):
            port = free_port(host)
            procs.append(subprocess.Popen(
                [sys.executable, str(STANDIN), "--host", host, "--port", str(port),
                 "--latency-ms", str(args.latency_ms)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            workers.append(f"http://{host}:{port}")
            wait_health(workers[-1], procs[-1])
        router_port = free_port("127.0.0.1")
        # The seed's router: what this benchmark has measured since it was written.
        argv = router_argv(RouterConfig(port=router_port, implementation="sglang-router",
                                        metrics_port=free_port("127.0.0.1")), workers)
        procs.append(subprocess.Popen(
            [sys.executable, *argv[1:], "--log-level", "warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, "NO_COLOR": "1"}))
        router = f"http://127.0.0.1:{router_port}"
        wait_health(router, procs[-1])

        direct, routed = asyncio.run(
            measure(workers, router, args.requests, args.rounds, args.concurrency)
        )
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()

    med_direct = statistics.median(direct)
    med_routed = statistics.median(routed)
    ratio = med_routed / med_direct
    result = {
        "concurrency": args.concurrency,
        "requests_per_mode": len(direct),
        "standin_latency_ms": args.latency_ms,
        "median_direct_ms": round(med_direct, 2),
        "median_router_ms": round(med_routed, 2),
        "added_median_ms": round(med_routed - med_direct, 2),
        "p90_direct_ms": round(p(direct, 0.9), 2),
        "p90_router_ms": round(p(routed, 0.9), 2),
        "ratio_of_medians": round(ratio, 4),
        "goal": GOAL,
        "goal_met": ratio <= GOAL,
    }
    print(f"router overhead at concurrency {args.concurrency}, stand-in latency "
          f"{args.latency_ms:g} ms, {len(direct)} requests per mode:", file=sys.stderr)
    print(f"  direct  median {med_direct:8.2f} ms   p90 {p(direct, 0.9):8.2f} ms", file=sys.stderr)
    print(f"  router  median {med_routed:8.2f} ms   p90 {p(routed, 0.9):8.2f} ms", file=sys.stderr)
    print(f"  ratio of medians {ratio:.4f} (goal <= {GOAL}): "
          f"{'met' if ratio <= GOAL else 'MISSED'}; added {med_routed - med_direct:.2f} ms",
          file=sys.stderr)
    print(json.dumps(result))
    return 1 if args.strict and ratio > GOAL else 0


if __name__ == "__main__":
    sys.exit(main())
