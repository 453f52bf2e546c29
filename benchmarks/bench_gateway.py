"""The gateway: smg 1.13.0 against the seed's sglang-router 0.3.2, and smg's worker overload
protection on an agent workload.

1. smg vs sglang-router at the job's concurrency (20, the a100 stack's agents): two stand-in
   workers (dp 2 each: the seed's 4 replicas, 100 ms of simulated generation), both gateways in
   front of them with the Router component's own argv, the same chat completions sent through
   both at once (side by side, so both see the same machine load). Reported: each median and p90
   and the ratio of medians smg / sglang-router (goal: <= 1.05).

2. Overload protection for agent workloads: `--agents` conversations at once (20), each
   `--turns` turns of a Terminus-2-like agent (a 3,000-token first prompt; each turn adds the
   model's reply and a 1,500-token terminal output, so the shared prefix grows), against
   stand-ins that behave as a loaded GPU server (5 running requests a rank, a queue beyond, a
   prefix cache per rank with a KV pool of `--kv-tokens`, prefill of uncached tokens at 20,000
   tokens/s, decode at 60 tokens/s, 64 tokens a reply: demo/gpu_standin/sglang_worker.py "Serving").
   Four configurations: smg's protection on (its default: >= 8 waiting or >= 80% KV leaves a
   worker out) and off, in the stack's layout (2 workers, dp-aware) and in a layout smg can read
   loads in (4 workers of dp 1, not dp-aware). Reported per configuration: the agents' wall
   time, the median turn, the share of prompt tokens served from the prefix cache, and smg's own
   count of overload fallbacks.

    .venv/bin/python benchmarks/bench_gateway.py [--requests 400] [--agents 20] [--turns 8]

Prints a summary, then one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_router import (  # noqa: E402
    free_port,
    make_client,
    p,
    run_round,
    wait_health,
)
from components.config import RouterConfig  # noqa: E402
from components.router import router_argv  # noqa: E402

STANDIN = ROOT / "demo" / "gpu_standin" / "sglang_worker.py"
MODEL = "Qwen/Qwen3.8-27B"
GOAL = 1.05
FIRST_PROMPT_WORDS = 3000
OUTPUT_WORDS = 1500
REPLY_TOKENS = 64


class Plane:
    """Stand-in workers and gateways started for one measurement, stopped after it."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def worker(self, host: str, *flags: str) -> str:
        port = free_port(host)
        self.procs.append(subprocess.Popen(
            [sys.executable, str(STANDIN), "--host", host, "--port", str(port), *flags],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        url = f"http://{host}:{port}"
        wait_health(url, self.procs[-1])
        return url

    def gateway(self, workers: list[str], **router: object) -> tuple[str, str]:
        """(its URL, its metrics URL)."""
        cfg = RouterConfig(port=free_port("127.0.0.1"), metrics_port=free_port("127.0.0.1"),
                           **router)  # type: ignore[arg-type]
        argv = router_argv(cfg, workers)
        self.procs.append(subprocess.Popen(
            [sys.executable, *argv[1:], "--log-level", "warn"], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, env={**os.environ, "NO_COLOR": "1"}))
        url = f"http://127.0.0.1:{cfg.port}"
        wait_health(url, self.procs[-1])
        return url, cfg.metrics_url

    def close(self) -> None:
        for proc in reversed(self.procs):
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


async def side_by_side(a: str, b: str, requests: int, rounds: int,
                       concurrency: int) -> tuple[list[float], list[float]]:
    got_a: list[float] = []
    got_b: list[float] = []
    async with make_client(concurrency) as ca, make_client(concurrency) as cb:
        await asyncio.gather(run_round(ca, [a], concurrency * 2, concurrency),
                             run_round(cb, [b], concurrency * 2, concurrency))
        for _ in range(rounds):
            ra, rb = await asyncio.gather(
                run_round(ca, [a], requests // rounds, concurrency),
                run_round(cb, [b], requests // rounds, concurrency))
            got_a += ra
            got_b += rb
    return got_a, got_b


def gateways(requests: int, rounds: int, concurrency: int) -> dict:
    plane = Plane()
    try:
        workers = [plane.worker(h, "--latency-ms", "100") for h in ("127.0.0.1", "127.0.0.2")]
        smg, _ = plane.gateway(workers, implementation="smg")
        old, _ = plane.gateway(workers, implementation="sglang-router")
        via_smg, via_old = asyncio.run(side_by_side(smg, old, requests, rounds, concurrency))
    finally:
        plane.close()
    ratio = statistics.median(via_smg) / statistics.median(via_old)
    return {"concurrency": concurrency, "requests_each": len(via_smg),
            "median_smg_ms": round(statistics.median(via_smg), 2),
            "median_sglang_router_ms": round(statistics.median(via_old), 2),
            "p90_smg_ms": round(p(via_smg, 0.9), 2),
            "p90_sglang_router_ms": round(p(via_old, 0.9), 2),
            "ratio_of_medians": round(ratio, 4), "goal": GOAL, "goal_met": ratio <= GOAL}


def words(n: int, seed: str) -> str:
    return " ".join(f"{seed}{i % 97}" for i in range(n))


async def agent(client: httpx.AsyncClient, url: str, turns: int, latencies: list[float]) -> None:
    """One Terminus-2-like conversation: its prefix grows by a reply and an output a turn."""
    session = uuid.uuid4().hex[:8]
    messages = [{"role": "user", "content": f"task {session}: " + words(FIRST_PROMPT_WORDS, "w")}]
    for turn in range(turns):
        began = time.perf_counter()
        response = await client.post(f"{url}/v1/chat/completions", json={
            "model": MODEL, "messages": messages, "max_tokens": REPLY_TOKENS,
            "ignore_eos": True})
        if response.status_code != 200:
            raise SystemExit(f"bench_gateway: HTTP {response.status_code}: {response.text[:200]}")
        latencies.append(time.perf_counter() - began)
        reply = response.json()["choices"][0]["message"]["content"]
        messages += [{"role": "assistant", "content": reply},
                     {"role": "user", "content": words(OUTPUT_WORDS, f"o{turn}-")}]


def scrape(url: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in httpx.get(url, timeout=10).text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            name = key.split("{")[0]
            out[name] = out.get(name, 0.0) + float(value)
    return out


def agents_through(layout: str, protection: bool, n_agents: int, turns: int,
                   kv_tokens: int) -> dict:
    serving = ["--enable-metrics", "--max-running-requests", "5", "--decode-tokens-per-s", "60",
               "--prefill-tokens-per-s", "20000", "--max-total-tokens", str(kv_tokens)]
    plane = Plane()
    try:
        if layout == "dp-aware":
            workers = [plane.worker(h, "--dp-size", "2", *serving)
                       for h in ("127.0.0.1", "127.0.0.2")]
        else:
            workers = [plane.worker(f"127.0.0.{i}", "--dp-size", "1", *serving)
                       for i in range(1, 5)]
        url, metrics = plane.gateway(workers, dp_aware=layout == "dp-aware",
                                     worker_overload_protection=protection)
        time.sleep(11)  # one load poll of smg (every 10 s) before the load
        latencies: list[float] = []

        async def run() -> float:
            limits = httpx.Limits(max_connections=n_agents, max_keepalive_connections=n_agents)
            async with httpx.AsyncClient(timeout=600, limits=limits, trust_env=False) as client:
                began = time.perf_counter()
                await asyncio.gather(*(agent(client, url, turns, latencies)
                                       for _ in range(n_agents)))
                return time.perf_counter() - began
        wall = asyncio.run(run())
        engine = [scrape(f"{w}/metrics") for w in workers]
        gateway = scrape(metrics)
    finally:
        plane.close()
    prompt = sum(e.get("sglang:prompt_tokens_total", 0) for e in engine)
    cached = sum(e.get("sglang:cached_tokens_total", 0) for e in engine)
    return {"layout": layout, "overload_protection": protection, "wall_s": round(wall, 1),
            "median_turn_s": round(statistics.median(latencies), 2),
            "p90_turn_s": round(p(latencies, 0.9), 2),
            "prefix_cache_share": round(cached / prompt, 3) if prompt else None,
            "overload_fallbacks": gateway.get("smg_worker_overload_fallback_total", 0.0),
            "engine_load_polls": gateway.get("smg_engine_load_polls_total", 0.0)}


def main() -> int:
    parser = argparse.ArgumentParser(description="smg against sglang-router; overload protection")
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--kv-tokens", type=int, default=60000,
                        help="each rank's KV pool: 5 long contexts fill most of it")
    parser.add_argument("--skip-gateways", action="store_true")
    args = parser.parse_args()
    result: dict = {}
    if not args.skip_gateways:
        result["gateways"] = gateways(args.requests, args.rounds, args.concurrency)
        g = result["gateways"]
        print(f"smg vs sglang-router at concurrency {g['concurrency']}: median "
              f"{g['median_smg_ms']} vs {g['median_sglang_router_ms']} ms, ratio "
              f"{g['ratio_of_medians']} (goal <= {GOAL})", file=sys.stderr)
    result["overload_protection"] = []
    for layout in ("dp-aware", "workers"):
        for protection in (True, False):
            got = agents_through(layout, protection, args.agents, args.turns, args.kv_tokens)
            result["overload_protection"].append(got)
            print(f"{layout:8} protection {'on ' if protection else 'off'}: wall {got['wall_s']}"
                  f" s, median turn {got['median_turn_s']} s, p90 {got['p90_turn_s']} s, "
                  f"prefix cache {got['prefix_cache_share']}, overload fallbacks "
                  f"{got['overload_fallbacks']:g}, load polls {got['engine_load_polls']:g}",
                  file=sys.stderr)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
