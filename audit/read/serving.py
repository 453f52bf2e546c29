"""The serving plane's own record: what the stack's sampler wrote beside Harbor's files.

While a job runs, the stack reads the gateway's Prometheus endpoint (smg or sglang-router:
`smg_*`) and each SGLang worker's (`sglang:*`) every few seconds into `serving-metrics.jsonl` in
the job dir (hostside/serving_sampler.py; the name is contracts/jobdir.py's): one JSON line per
read, `{"t", "at", "source": "gateway" | "worker", "url", "ok", "values" | "error"}`, and a
`{"kind": "start", "interval_s", ...}` line each time the sampler started.

Read here into what the audit asks of it:
- `failures(start, end)`: the serving plane's own words for a failure in a time window, each with
  the line it was read from (`../serving-metrics.jsonl:N`) and the read's own text to quote: a
  worker the gateway reports unhealthy (`smg_worker_health 0`), a circuit breaker open
  (`smg_worker_cb_state 1`), a worker gone from the gateway's pool, a worker whose metrics
  endpoint did not answer the sampler, requests the gateway failed for want of a worker
  (`smg_router_request_errors_total{error_type="no_workers"|"unavailable"}`, a 503
  `no_available_workers`), and a burst of 5xx answers on the model routes (BURST or more
  between two reads);
- `generating(start, end)`: whether the record shows the model generating normally then (a
  worker read whose generation counter rose, no failure);
- `during(start, end)`: what the plane did in a window, for a report line (queue depth, running
  requests, generation throughput, errors, workers down);
- `timeline()`: the plane over the whole job, downsampled, for the HTML report.

Counters are read as their increase between consecutive reads of the same endpoint (a counter
that went down is a restarted process: its new value is the increase). Nothing here raises: a
line that is not JSON of the expected shape is counted and skipped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from audit.read import layout as L

# 5xx answers on the model routes between two reads that make a burst (one is a request's).
BURST = 5
# How many points the timeline keeps at most (the job's reads are averaged into them).
TIMELINE_POINTS = 600
READ_LIMIT = 512 * 1024 * 1024
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
_MODEL_ROUTE = ("/v1/", "/generate")
_NO_WORKERS = ("no_workers", "unavailable")


def labels(series: str) -> dict[str, str]:
    return dict(_LABEL.findall(series.partition("{")[2]))


def name_of(series: str) -> str:
    return series.partition("{")[0]


@dataclass(frozen=True)
class Read:
    """One read of one endpoint (one line of the record)."""

    line: int
    t: float
    at: str
    source: str  # gateway | worker
    url: str
    ok: bool
    error: str | None
    values: dict[str, float]
    text: str  # the line itself, to quote

    @property
    def where(self) -> str:
        return f"../{L.SERVING_RECORD}:{self.line}"

    def total(self, name: str, **want: str) -> float:
        return sum(v for k, v in self.values.items() if name_of(k) == name
                   and all(labels(k).get(a) == b for a, b in want.items()))


@dataclass(frozen=True)
class Failure:
    """The serving plane's own words for a failure, and when it held."""

    kind: str  # worker_down | circuit_open | no_workers | burst_5xx
    first: float
    last: float
    read: Read  # the read quoted
    quote: str  # the series (or error) that shows it, as the record wrote it
    reading: str
    # A counter's failures (no_workers, burst_5xx): how many requests, since which read.
    count: int = 0
    since: str = ""

    def overlaps(self, start: float, end: float) -> bool:
        return self.first <= end and self.last >= start


@dataclass(frozen=True)
class Window:
    """What the serving plane did in a window of time (report lines)."""

    reads: int
    max_queue: float
    max_running: float
    mean_throughput: float | None
    errors: int
    workers_down: list[str]

    def line(self) -> str:
        if not self.reads:
            return "no read of the serving plane in this window"
        parts = [f"queue max {self.max_queue:g}", f"running max {self.max_running:g}"]
        if self.mean_throughput is not None:
            parts.append(f"generating {self.mean_throughput:.1f} tokens/s")
        parts.append(f"{self.errors} failed requests" if self.errors else "no failed request")
        parts.append(f"workers down: {', '.join(self.workers_down)}" if self.workers_down
                     else "every worker up")
        return "; ".join(parts)


@dataclass
class ServingRecord:
    present: bool = False
    interval_s: float = 10.0
    reads: list[Read] = field(default_factory=list)
    unreadable: int = 0
    _failures: list[Failure] | None = field(default=None, repr=False)

    # --- per endpoint, in time order ----------------------------------------------------------
    def series(self, source: str) -> dict[str, list[Read]]:
        out: dict[str, list[Read]] = {}
        for read in self.reads:
            if read.source == source:
                out.setdefault(read.url, []).append(read)
        return out

    def failures(self, start: float | None = None, end: float | None = None) -> list[Failure]:
        if self._failures is None:
            self._failures = _find_failures(self)
        return [f for f in self._failures
                if start is None or end is None or f.overlaps(start, end)]

    def generating(self, start: float, end: float) -> bool:
        """A worker's generation counter rose inside the window (from the read before it): the
        model was generating then, whatever else failed."""
        for reads in self.series("worker").values():
            before = None
            for read in reads:
                if read.t > end + self.interval_s:
                    break
                if before is not None and read.ok and before.ok and read.t >= start:
                    gen = read.total("sglang:generation_tokens_total")
                    if gen > before.total("sglang:generation_tokens_total"):
                        return True
                before = read
        return False

    def during(self, start: float, end: float) -> Window:
        inside = [r for r in self.reads if start - self.interval_s <= r.t <= end + self.interval_s]
        workers = [r for r in inside if r.source == "worker" and r.ok]
        throughput = [r.total("sglang:gen_throughput") for r in workers]
        failures = self.failures(start, end)
        down = sorted({labels(f.quote).get("worker") or f.read.url.removesuffix("/metrics")
                       for f in failures if f.kind in ("worker_down", "circuit_open")})
        return Window(
            reads=len(inside),
            max_queue=max((r.total("sglang:num_queue_reqs") for r in workers), default=0.0),
            max_running=max((r.total("sglang:num_running_reqs") for r in workers), default=0.0),
            mean_throughput=(sum(throughput) / len(throughput)) if throughput else None,
            errors=self.failed_requests(start, end),
            workers_down=down,
        )

    def failed_requests(self, start: float, end: float) -> int:
        """5xx answers on the model routes the gateway gave in the window (its counters'
        increases between the reads there)."""
        return sum(n for read, n in self.failed_by_read()
                   if start - self.interval_s <= read.t <= end + self.interval_s)

    def failed_by_read(self) -> list[tuple[Read, int]]:
        """Each gateway read and the 5xx answers on the model routes since its read before."""
        out = []
        for reads in self.series("gateway").values():
            before: Read | None = None
            for read in (r for r in reads if r.ok):
                if before is not None:
                    failed = 0.0
                    for series, value in read.values.items():
                        tags = labels(series)
                        if (name_of(series) == "smg_http_responses_total"
                                and tags.get("status_code", "").startswith("5")
                                and tags.get("path", "/v1/").startswith(_MODEL_ROUTE)):
                            failed += _increase(value, before.values.get(series, 0.0))
                    out.append((read, int(failed)))
                before = read
        return out

    def timeline(self) -> list[dict]:
        """The plane over the job: per point, the time, running and queued requests and
        generation throughput summed over the workers, failed requests since the last point,
        and whether a worker was down."""
        if not self.reads:
            return []
        rounds: dict[int, dict] = {}
        step = self.interval_s
        for read in self.reads:
            key = int(read.t // step)
            point = rounds.setdefault(key, {"t": key * step, "running": 0.0, "queued": 0.0,
                                            "throughput": 0.0, "errors": 0, "down": False})
            if read.source == "worker":
                if read.ok:
                    point["running"] += read.total("sglang:num_running_reqs")
                    point["queued"] += read.total("sglang:num_queue_reqs")
                    point["throughput"] += read.total("sglang:gen_throughput")
                else:
                    point["down"] = True
        for failure in self.failures():
            key = int(failure.read.t // step)
            if key in rounds and failure.kind in ("worker_down", "circuit_open"):
                rounds[key]["down"] = True
        for read, failed in self.failed_by_read():
            rounds[int(read.t // step)]["errors"] += failed
        points = [rounds[k] for k in sorted(rounds)]
        if len(points) <= TIMELINE_POINTS:
            return points
        size = -(-len(points) // TIMELINE_POINTS)
        merged = []
        for i in range(0, len(points), size):
            group = points[i:i + size]
            merged.append({
                "t": group[0]["t"],
                "running": max(p["running"] for p in group),
                "queued": max(p["queued"] for p in group),
                "throughput": sum(p["throughput"] for p in group) / len(group),
                "errors": sum(p["errors"] for p in group),
                "down": any(p["down"] for p in group),
            })
        return merged


def _increase(now: float, before: float) -> float:
    return now - before if now >= before else now


def _find_failures(record: ServingRecord) -> list[Failure]:
    found: list[Failure] = []
    for url, reads in record.series("worker").items():
        down = [r for r in reads if not r.ok]
        for run in _runs(down, record.interval_s):
            first = run[0]
            found.append(Failure(
                "worker_down", first.t, run[-1].t, first, short(first.error or "no answer"),
                f"the worker's metrics endpoint {url} did not answer the sampler "
                f"({len(run)} reads from {first.at})"))
    pool: dict[str, float] = {}
    for reads in record.series("gateway").values():
        before: Read | None = None
        for read in (r for r in reads if r.ok):
            found.extend(_gateway_failures(read, before, pool))
            before = read
    return _merge(found, record.interval_s)


def _gateway_failures(read: Read, before: Read | None, pool: dict[str, float]) -> list[Failure]:
    out = []
    for series, value in read.values.items():
        name, tags = name_of(series), labels(series)
        worker = tags.get("worker", "")
        if name == "smg_worker_health" and value == 0:
            out.append(Failure("worker_down", read.t, read.t, read, series,
                               f"the gateway reports worker {worker} unhealthy at {read.at}"))
        elif name == "smg_worker_cb_state" and value == 1:
            out.append(Failure("circuit_open", read.t, read.t, read, series,
                               f"the gateway's circuit breaker for {worker} is open at "
                               f"{read.at}"))
        if before is None:
            continue
        grew = _increase(value, before.values.get(series, 0.0))
        if grew <= 0:
            continue
        if name == "smg_router_request_errors_total" and tags.get("error_type") in _NO_WORKERS:
            out.append(_counted("no_workers", before, read, series, int(grew)))
        elif (name == "smg_http_responses_total" and tags.get("status_code", "").startswith("5")
              and tags.get("path", "/v1/").startswith(_MODEL_ROUTE)):
            if tags.get("error_code") == "no_available_workers":
                out.append(_counted("no_workers", before, read, series, int(grew)))
            elif grew >= BURST:
                out.append(_counted("burst_5xx", before, read, series, int(grew)))
    # A worker the gateway listed before and lists no more: removed from its pool.
    listed = {labels(k).get("worker", "") for k in read.values
              if name_of(k) == "smg_worker_health"}
    for worker in sorted(set(pool) - listed):
        out.append(Failure("worker_down", read.t, read.t, read, f"worker {worker}",
                           f"worker {worker} is gone from the gateway's pool at {read.at} "
                           "(listed before)"))
        pool.pop(worker)
    for worker in listed:
        pool[worker] = read.t
    return out


def _counted(kind: str, before: Read, read: Read, series: str, count: int) -> Failure:
    """Requests a counter says failed between two reads."""
    return Failure(kind, before.t, read.t, read, series, _counter_reading(series, count,
                   before.at, read.at), count=count, since=before.at)


def _counter_reading(series: str, count: int, since: str, until: str) -> str:
    tags = labels(series)
    what = ("requests failed with no worker available"
            if name_of(series) == "smg_router_request_errors_total"
            else f"answers {tags.get('status_code')} {tags.get('error_code') or ''}".rstrip())
    return f"{count} {what} between {since} and {until}"


def _runs(reads: list[Read], interval: float) -> list[list[Read]]:
    """Consecutive reads (no more than two intervals apart) grouped."""
    runs: list[list[Read]] = []
    for read in reads:
        if runs and read.t - runs[-1][-1].t <= 2.5 * interval:
            runs[-1].append(read)
        else:
            runs.append([read])
    return runs


def _merge(found: list[Failure], interval: float) -> list[Failure]:
    """One failure per kind and quoted series while it lasts: the first read quoted, the
    window from its first to its last read."""
    found.sort(key=lambda f: (f.kind, f.quote, f.first))
    merged: list[Failure] = []
    for f in found:
        last = merged[-1] if merged else None
        if not (last and last.kind == f.kind and last.quote == f.quote
                and f.first - last.last <= 2.5 * interval):
            merged.append(f)
        elif last.count:
            # A counter's failures one after the other: one failure, their requests summed.
            count = last.count + f.count
            merged[-1] = Failure(last.kind, last.first, max(last.last, f.last), last.read,
                                 last.quote, _counter_reading(last.quote, count, last.since,
                                                              f.read.at), count, last.since)
        else:
            merged[-1] = Failure(last.kind, last.first, max(last.last, f.last), last.read,
                                 last.quote, last.reading)
    merged.sort(key=lambda f: f.first)
    return merged


def short(text: str, limit: int = 240) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def read_record(layout: L.JobLayout) -> ServingRecord:
    """The job's serving-metrics.jsonl; `present` is False without it."""
    record = ServingRecord()
    try:
        raw = layout.read_bytes(L.SERVING_RECORD, READ_LIMIT)
    except OSError:
        raw = None
    if raw is None:
        return record
    record.present = True
    for number, line in enumerate(raw.decode(errors="replace").splitlines(), 1):
        try:
            value = json.loads(line)
        except ValueError:
            record.unreadable += 1
            continue
        if not isinstance(value, dict) or not isinstance(value.get("t"), int | float):
            record.unreadable += 1
            continue
        if value.get("kind") == "start":
            interval = value.get("interval_s")
            if isinstance(interval, int | float) and interval > 0:
                record.interval_s = float(interval)
            continue
        if value.get("source") not in ("gateway", "worker"):
            continue
        raw_values = value.get("values")
        values: dict = raw_values if isinstance(raw_values, dict) else {}
        record.reads.append(Read(
            number, float(value["t"]), str(value.get("at") or ""), str(value["source"]),
            str(value.get("url") or ""), value.get("ok") is True,
            str(value["error"]) if value.get("error") else None,
            {str(k): float(v) for k, v in values.items() if isinstance(v, int | float)},
            line,
        ))
    record.reads.sort(key=lambda r: (r.t, r.line))
    return record
