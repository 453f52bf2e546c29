"""What keeping the serving record costs the job: trials per minute with and without the sampler.

The serving plane of the rehearsal, on loopback: two stand-in workers (dp 2 each, SGLang's
metrics on, decoding at 200 tokens/s) behind smg with the Router component's argv. A job of
`--trials` simulated agent trials at `--concurrency`, each `--turns` turns of a model call (a
300-word prompt that grows, 40 tokens generated) and a command (`--command-s` of sleep). Each
run measures trials per minute; runs alternate without and with the real sampler
(hostside/serving_sampler.py, the launch's own entry point) reading the gateway's and both
workers' metrics every `--interval` seconds into a temp job dir: 1 s by default, ten times the
stack's own 10 s, so its cost shows if it has one. Order ABBA, `--repeats` times. Reported: the
median trials per minute of each and their ratio (goal >= 0.99), and the record's size per hour.

    .venv/bin/python benchmarks/bench_serving_record.py [--trials 40] [--concurrency 8]

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
import tempfile
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_gateway import Plane  # noqa: E402
from contracts import jobdir  # noqa: E402

MODEL = "Qwen/Qwen3.8-27B"
GOAL = 0.99


async def trial(client: httpx.AsyncClient, url: str, turns: int, command_s: float) -> None:
    messages = [{"role": "user", "content": f"trial {uuid.uuid4().hex} " + "word " * 300}]
    for turn in range(turns):
        response = await client.post(f"{url}/v1/chat/completions", json={
            "model": MODEL, "messages": messages, "max_tokens": 40, "ignore_eos": True})
        if response.status_code != 200:
            raise SystemExit(f"bench_serving_record: HTTP {response.status_code}")
        messages += [{"role": "assistant", "content": response.json()["choices"][0]["message"]
                      ["content"]}, {"role": "user", "content": f"output {turn} " + "line " * 50}]
        await asyncio.sleep(command_s)


async def job(url: str, trials: int, concurrency: int, turns: int, command_s: float) -> float:
    """Trials per minute of one job run."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(trials):
        queue.put_nowait(i)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=120, limits=limits, trust_env=False) as client:

        async def slot() -> None:
            while not queue.empty():
                queue.get_nowait()
                await trial(client, url, turns, command_s)

        began = time.perf_counter()
        await asyncio.gather(*(slot() for _ in range(concurrency)))
        return trials / ((time.perf_counter() - began) / 60)


def main() -> int:
    parser = argparse.ArgumentParser(description="the serving sampler's cost to the job")
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--command-s", type=float, default=0.1)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    plane = Plane()
    without: list[float] = []
    with_sampler: list[float] = []
    record_bytes: list[float] = []
    try:
        flags = ["--dp-size", "2", "--enable-metrics", "--decode-tokens-per-s", "200"]
        workers = [plane.worker(h, *flags) for h in ("127.0.0.1", "127.0.0.2")]
        url, metrics = plane.gateway(workers)
        asyncio.run(job(url, args.concurrency, args.concurrency, 1, 0))  # warm-up
        spec = {"targets": [{"source": "gateway", "url": metrics}]
                + [{"source": "worker", "url": f"{w}/metrics"} for w in workers],
                "interval_s": args.interval, "max_bytes": 256 * 1024 * 1024}
        for order in [(False, True, True, False)] * args.repeats:
            for sampled in order:
                sampler = None
                job_dir = Path(tempfile.mkdtemp(prefix="bench-record-"))
                if sampled:
                    sampler = subprocess.Popen(
                        [sys.executable, "-m", "hostside.serving_sampler", "run", str(job_dir),
                         json.dumps(spec), str(os.getpid())], cwd=ROOT,
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                began = time.monotonic()
                rate = asyncio.run(job(url, args.trials, args.concurrency, args.turns,
                                       args.command_s))
                if sampler is not None:
                    sampler.terminate()
                    sampler.wait(timeout=30)
                    size = (job_dir / jobdir.SERVING_RECORD).stat().st_size
                    record_bytes.append(size / (time.monotonic() - began) * 3600)
                    with_sampler.append(rate)
                else:
                    without.append(rate)
    finally:
        plane.close()
    ratio = statistics.median(with_sampler) / statistics.median(without)
    per_hour_at_10s = statistics.median(record_bytes) * args.interval / 10
    result = {"trials": args.trials, "concurrency": args.concurrency, "turns": args.turns,
              "interval_s": args.interval,
              "trials_per_minute_without": [round(x, 1) for x in without],
              "trials_per_minute_with": [round(x, 1) for x in with_sampler],
              "ratio_of_medians": round(ratio, 4), "goal": GOAL, "goal_met": ratio >= GOAL,
              "record_mb_per_hour_at_interval": round(statistics.median(record_bytes) / 1e6, 2),
              "record_mb_per_hour_at_10s": round(per_hour_at_10s / 1e6, 2)}
    print(f"trials per minute without the sampler {statistics.median(without):.1f}, with it "
          f"(reading every {args.interval:g} s) {statistics.median(with_sampler):.1f}: ratio "
          f"{ratio:.4f} (goal >= {GOAL}); record {result['record_mb_per_hour_at_interval']} "
          f"MB/hour at this interval, {result['record_mb_per_hour_at_10s']} MB/hour at 10 s",
          file=sys.stderr)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
