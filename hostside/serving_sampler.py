"""The serving sampler: the serving plane's own record, kept beside the job while Harbor runs it.

Every `interval_s` it reads the gateway's Prometheus endpoint (smg or sglang-router: `smg_*`)
and each SGLang worker's (`--enable-metrics`: `sglang:*`) and appends one JSON line per read to
`<job_dir>/serving-metrics.jsonl` (contracts/jobdir.py: SERVING_RECORD):

    {"t": 1796245166.1, "at": "2026-12-02T21:00:00Z", "source": "gateway" | "worker",
     "url": ".../metrics", "ok": true, "ms": 3.1, "values": {"name{labels}": value, ...}}
    {"t": ..., "source": "worker", "url": ..., "ok": false, "error": "ConnectionRefusedError: ..."}

and, each time it starts (a launch, a resume), `{"t": ..., "kind": "start", "interval_s": ...,
"targets": [...], "until_pid": ...}`. Only the series the audit reads are kept (KEEP: health,
circuit breakers, errors by type and status, retries, in-flight and active requests, queue
depth, token usage, generation throughput, token counters, the sums and counts of the time to
first token and request latency histograms, never their buckets), and counters still at 0 are
left out. A read that fails is a line too: a worker that does not answer is part of the record.

Bounded in size (`max_bytes`): past half of it the sampler reads at twice the interval, past
three quarters at four times, past seven eighths at eight; at the bound it writes one last line
(`{"kind": "capped"}`) and stops reading. Each line is one write() to a file opened O_APPEND.
Nothing is written until Harbor has made the job dir (the lines wait in memory).

It ends by itself when the Harbor process it watches over (`until_pid`) is gone, after one last
read, or on SIGTERM or SIGINT (the same last read). It never makes Harbor fail: it runs detached
(hostside/beside.py), and every error goes to its log.

Entry points:

    start(job_dir, until_pid, spec, log_path) -> int   (from the launch, once Harbor runs)
    stop(job_dir)                                      (from the stop, once Harbor is gone)
    python3 -m hostside.serving_sampler run JOB_DIR SPEC_JSON UNTIL_PID

SPEC_JSON: {"targets": [{"source": "gateway" | "worker", "url": ...}], "interval_s": 10,
"max_bytes": 268435456}. Standard library only.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from contracts import jobdir

from . import beside

MODULE = "hostside.serving_sampler"
RECORD = jobdir.SERVING_RECORD
# A read is given this long at most (a hung endpoint is recorded as such, not waited for).
READ_TIMEOUT_S = 5.0
POLL_S = 0.5

# The series kept of each endpoint, by metric family (a histogram's `_sum` and `_count` are
# kept under its name; its buckets never).
KEEP = frozenset({
    # the gateway (smg 1.13.0; sglang-router 0.3.2 serves the same names)
    "smg_worker_health", "smg_worker_cb_state", "smg_worker_cb_transitions_total",
    "smg_worker_requests_active", "smg_worker_pool_size", "smg_router_request_errors_total",
    "smg_http_responses_total", "smg_router_upstream_responses_total",
    "smg_worker_retries_total", "smg_worker_retries_exhausted_total", "smg_worker_errors_total",
    "smg_workers_overloaded", "smg_worker_overload_fallback_total",
    "smg_worker_overload_shed_total", "smg_http_inflight_request_age_count",
    "smg_http_connections_active", "smg_router_requests_total",
    "smg_discovery_deregistrations_total", "smg_router_request_duration_seconds",
    "smg_router_ttft_seconds",
    # an SGLang worker with --enable-metrics
    "sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
    "sglang:num_used_tokens", "sglang:gen_throughput", "sglang:cache_hit_rate",
    "sglang:prompt_tokens_total", "sglang:generation_tokens_total",
    "sglang:cached_tokens_total", "sglang:num_requests_total",
    "sglang:num_aborted_requests_total", "sglang:num_retracted_reqs",
    "sglang:time_to_first_token_seconds", "sglang:e2e_request_latency_seconds",
    "sglang:inter_token_latency_seconds",
})
_HISTOGRAM_PARTS = ("_sum", "_count")


def pid_file(job_dir: str) -> str:
    return jobdir.serving_sampler_pid(os.path.abspath(job_dir))


def say(message: str) -> None:
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(f"{stamp} serving_sampler: {message}", flush=True)


def start(job_dir: str, until_pid: int, spec: dict, log_path: str) -> int:
    """Spawn the sampler detached (see the module's doc); its PID. A live one of this job dir
    watching over `until_pid` is reused; one watching over another PID is replaced."""
    job_dir = os.path.abspath(job_dir)
    running = beside.recorded(pid_file(job_dir), MODULE, job_dir)
    if running is not None:
        pid, watched = running
        if watched == until_pid:
            return pid
        beside.stop(pid)
    return beside.spawn(MODULE, [job_dir, json.dumps(spec, sort_keys=True), str(until_pid)],
                        pid_file(job_dir), log_path, f"serving sampler for {job_dir}")


def stop(job_dir: str) -> int | None:
    """Stop the job's sampler (its last read first); the PID stopped, or None."""
    running = beside.recorded(pid_file(job_dir), MODULE, os.path.abspath(job_dir))
    if running is None:
        return None
    beside.stop(running[0])
    return running[0]


# --- one read ----------------------------------------------------------------------------------


def family(series: str) -> str:
    """The metric family a sample line's name belongs to (a histogram's sum and count: its own)."""
    name = series.split("{", 1)[0]
    for part in _HISTOGRAM_PARTS:
        if name.endswith(part) and name[: -len(part)] in KEEP:
            return name[: -len(part)]
    return name


def kept(text: str) -> dict[str, float]:
    """The kept series of a Prometheus text exposition: `name{labels}` -> value."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        series, _, raw = line.rpartition(" ")
        if not series:
            continue
        if series.split("{", 1)[0].endswith("_bucket") or family(series) not in KEEP:
            continue
        try:
            value = float(raw)
        except ValueError:
            continue
        if value == 0 and series.split("{", 1)[0].endswith("_total"):
            continue
        values[series] = value
    return values


def read(target: dict, timeout_s: float) -> dict[str, Any]:
    """One read of one endpoint, as the line the record keeps of it."""
    now = time.time()
    line: dict[str, Any] = {
        "t": round(now, 3),
        "at": datetime.fromtimestamp(now, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "source": target["source"], "url": target["url"],
    }
    began = time.monotonic()
    request = urllib.request.Request(target["url"], headers={"Accept": "text/plain"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout_s) as response:
            body = response.read().decode(errors="replace")
            line.update(ok=True, status=response.status, values=kept(body))
    except urllib.error.HTTPError as exc:
        line.update(ok=False, status=exc.code, error=f"HTTP {exc.code} {exc.reason}")
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        line.update(ok=False, error=f"{type(reason).__name__}: {reason}"[:300])
    line["ms"] = round((time.monotonic() - began) * 1000, 1)
    return line


# --- the record --------------------------------------------------------------------------------


class Record:
    """The record file, opened once Harbor has made the job dir; bounded by `max_bytes`."""

    def __init__(self, job_dir: str, max_bytes: int):
        self.job_dir = Path(job_dir)
        self.max_bytes = max_bytes
        self.fd: int | None = None
        self.pending: list[bytes] = []
        self.capped = False

    def size(self) -> int:
        try:
            return (self.job_dir / RECORD).stat().st_size
        except OSError:
            return sum(len(b) for b in self.pending)

    def slowdown(self) -> int:
        """How many intervals one read waits, from how full the record is (1, 2, 4, 8)."""
        used = self.size() / self.max_bytes
        return 8 if used >= 7 / 8 else 4 if used >= 3 / 4 else 2 if used >= 1 / 2 else 1

    def put(self, value: dict) -> None:
        if self.capped:
            return
        line = (json.dumps(value, separators=(",", ":"), sort_keys=True) + "\n").encode()
        if self.size() + len(line) > self.max_bytes:
            self.capped = True
            line = (json.dumps({"t": round(time.time(), 3), "kind": "capped",
                                "max_bytes": self.max_bytes}) + "\n").encode()
        if self.fd is None and self.job_dir.is_dir():
            self.fd = os.open(str(self.job_dir / RECORD), os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                              0o644)
            for waiting in self.pending:
                os.write(self.fd, waiting)
            self.pending = []
        if self.fd is None:
            self.pending.append(line)
        else:
            os.write(self.fd, line)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.pending:
            say(f"the job dir {self.job_dir} never appeared: {len(self.pending)} lines lost")


def run(job_dir: str, spec: dict, until_pid: int) -> int:
    targets = list(spec["targets"])
    interval = float(spec["interval_s"])
    record = Record(job_dir, int(spec["max_bytes"]))
    stopping = beside.stop_on_signals(say, "a last read")
    say(f"reading {len(targets)} endpoints every {interval:g}s into {job_dir} while PID "
        f"{until_pid} lives")
    record.put({"t": round(time.time(), 3), "kind": "start", "interval_s": interval,
                "targets": targets, "until_pid": until_pid})
    timeout = min(READ_TIMEOUT_S, interval)
    reads = 0
    with ThreadPoolExecutor(max_workers=max(1, len(targets))) as pool:
        while True:
            began = time.monotonic()
            for line in pool.map(lambda t: read(t, timeout), targets):
                record.put(line)
            reads += 1
            if record.capped:
                say(f"the record reached its bound ({record.max_bytes} bytes): no more reads")
                break
            if stopping.is_set() or not beside.alive(until_pid):
                break
            wake = began + interval * record.slowdown()
            while time.monotonic() < wake and not stopping.is_set():
                if not beside.alive(until_pid):
                    break
                time.sleep(min(POLL_S, max(0.0, wake - time.monotonic())))
            if not beside.alive(until_pid) and not stopping.is_set():
                # One last read after Harbor ended: how the serving plane stood at the end.
                for line in pool.map(lambda t: read(t, timeout), targets):
                    record.put(line)
                break
    record.close()
    say(f"done: {reads} rounds of reads")
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 4 or argv[0] != "run" or not argv[3].isdigit():
        print(f"usage: python3 -m {MODULE} run JOB_DIR SPEC_JSON UNTIL_PID", file=sys.stderr)
        return 2
    return run(os.path.abspath(argv[1]), json.loads(argv[2]), int(argv[3]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
