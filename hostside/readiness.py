"""Readiness probes for the serving plane: SGLang workers and the router, over HTTP with httpx.

The one program of the host package that needs more than the standard library: the
`serving_probe` step runs it with the python of a small venv that has httpx (hostside/
pinned_venv.py), on the host where the network path matters (a worker's probe on its own host,
the router's on the Harbor host, which also proves the private network from there to every
worker). It imports nothing from the project (nor from the package) and runs standalone, on
python3 3.9 or later:

    python readiness.py spec '{"mode": "worker", "url": ..., "expect": {...}, "timeout_s": 1800,
                               "interval_s": 5, "container": ...}'

(modes worker, router and reach; the spec is the whole input, as hostside steps take theirs:
its bounds come from the config through the components, so this file has no defaults of its own.)

Progress goes to stderr; the result is ONE JSON object on the last stdout line. On failure the
last stderr line says what is wrong (every mismatch at once) and the exit code is 1.

A worker's wait follows its startup in its container's log (`docker logs`), phase by phase, from
the lines SGLang itself prints (PHASES: sglang 0.5.23's srt/model_executor/model_runner.py "Load
weight begin/end", mem_cache/memory_pool.py "KV Cache is allocated", model_runner_components/
cuda_graph_setup.py "Capture ... CUDA graph begin/end" (older releases: "Capture cuda graph"),
entrypoints/http_server.py "The server is fired up and ready to roll!"): its progress says the
phase and the time in it, and a line that means the worker cannot come up (FATAL: CUDA out of
memory, a failed CUDA graph capture, an NCCL error, SGLang's own "Received sigquit from a child
process") fails the wait at once, naming the phase and the line, even while the container runs
(SGLang's HTTP server can outlive its dead scheduler). Its result lists each phase's duration.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import httpx

# The fields a worker must report as configured; anything else in /get_server_info is ignored.
WORKER_FIELDS = (
    "served_model_name",
    "tp_size",
    "dp_size",
    "context_length",
    "max_running_requests",
    "max_mamba_cache_size",
    "mem_fraction_static",
    "reasoning_parser",
    "tool_call_parser",
    "max_total_tokens",
    "enable_metrics",
)
READY_PROMPT = "Reply with exactly READY."
# connect is short (a dead host should fail fast and be retried by the loop); read is long
# enough for a first chat completion on a cold server.
DEFAULT_TIMEOUT = httpx.Timeout(10.0, connect=5.0, read=120.0)


class ProbeError(Exception):
    """A readiness failure; its message is the one line the user reads."""


def log(message: str) -> None:
    print(f"[readiness] {message}", file=sys.stderr, flush=True)


def make_client(timeout: httpx.Timeout = DEFAULT_TIMEOUT) -> httpx.Client:
    # Transport retries cover refused/reset connects (a server restarting); the callers' own
    # bounded loops cover everything else (503 while loading, timeouts).
    # trust_env=False: a host-wide HTTP proxy must not intercept private-network probes.
    return httpx.Client(
        timeout=timeout, transport=httpx.HTTPTransport(retries=3), trust_env=False
    )


def describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"


LOAD_HINT = "check the container log, or raise the health timeout if loading is just slow"
REACH_HINT = (
    "check the private network and firewall between the hosts, and the worker's bind address"
)


def container_failure(name: str, tail: int = 5) -> str | None:
    """Why container `name` can no longer become healthy (exited, gone), with the last log
    lines; None while it runs, or when the docker CLI cannot tell."""
    try:
        proc = subprocess.run(
            ["docker", "inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", name],
            capture_output=True, text=True, timeout=30, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        if "No such" in proc.stderr:
            return f"container {name} is gone"
        return None
    status, _, code = proc.stdout.strip().partition(" ")
    if status in ("running", "created", "restarting"):
        return None
    try:
        logs = subprocess.run(
            ["docker", "logs", "--tail", str(tail), name],
            capture_output=True, text=True, timeout=30, check=False,
        )
        lines = [x.strip() for x in (logs.stdout + logs.stderr).splitlines() if x.strip()]
    except (OSError, subprocess.TimeoutExpired):
        lines = []
    last = " | ".join(lines[-tail:]) or "no log output"
    return f"container {name} {status} (exit code {code}); last log lines: {last}"


class ContainerWatch:
    """The container a wait gives up on at once once it cannot become healthy (exited, gone)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def check(self, what: str) -> None:
        dead = container_failure(self.name)
        if dead:
            raise ProbeError(f"{what} will not become healthy: {dead}")

    def progress(self) -> str:
        return ""

    def finished(self) -> list[dict]:
        return []


CAPTURING = "capturing CUDA graphs"
# SGLang's startup as its log marks it: the line that opens each phase (searched in order, the
# first match wins; the sources are in the module's docstring).
PHASES = (
    (re.compile(r"Init torch distributed begin"), "initialising torch distributed"),
    (re.compile(r"Load weight begin"), "loading weights"),
    (re.compile(r"Load weight end"), "allocating the KV cache"),
    (re.compile(r"Capture .*graph begin", re.IGNORECASE), CAPTURING),
    (re.compile(r"Capture .*graph end", re.IGNORECASE), "starting the server"),
    (re.compile(r"Uvicorn running on|Application startup complete"), "warming up"),
    (re.compile(r"The server is fired up and ready to roll"), "ready"),
)
# Lines after which the worker cannot come up. Releases of early 2025 spelled the launcher's
# line "from a child proces." (sgl-project/sglang#3460, #3685): both spellings match.
FATAL = re.compile(
    r"CUDA out of memory|OutOfMemoryError|Capture .*graph failed|NCCL error"
    r"|Not enough memory\. Please try to increase --mem-fraction-static"
    r"|Scheduler hit an exception|Received sigquit from a child proces|Initialization failed",
    re.IGNORECASE,
)
# What a Python traceback ends with: the exception and its message (`RuntimeError: NCCL error:
# ...`, `Exception: Capture cuda graph failed: ...`). SGLang's scheduler logs a failure as one
# record whose first line is only `Scheduler hit an exception: Traceback ...` and whose last
# says why; its launcher's `Received sigquit from a child process` can come before it (another
# rank's). The wait names the exception's line when it comes.
EXCEPTION_LINE = re.compile(r"([A-Za-z_][\w.]*)?(Error|Exception|Exit|Interrupt)(:|$)")
FIRST_PHASE = "starting"
# The first read of a starting container's log is bounded (a startup prints a few hundred lines).
LOG_TAIL = 20000


def log_time(stamp: str) -> float:
    """Seconds since the epoch of a `docker logs --timestamps` stamp (RFC 3339, nanoseconds)."""
    main, _, frac = stamp.rstrip("Z").partition(".")
    base = datetime.strptime(main, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    return base.timestamp() + float(f"0.{frac or 0}")


def stamped(output: str) -> list[tuple[str, str]]:
    """(stamp, text) of each `docker logs --timestamps` line, in time order (the two streams
    come apart); a line without a stamp (a partial write) is left out."""
    lines = []
    for raw in output.splitlines():
        stamp, _, text = raw.partition(" ")
        try:
            lines.append((log_time(stamp), stamp, text))
        except ValueError:
            continue
    return [(stamp, text) for _, stamp, text in sorted(lines, key=lambda line: line[0])]


def docker_log_lines(container: str, since: str | None) -> list[tuple[str, str]]:
    """(stamp, text) of the container's log lines from `since` on (both streams, in time)."""
    cmd = ["docker", "logs", "--timestamps"]
    cmd += ["--since", since] if since else ["--tail", str(LOG_TAIL)]
    try:
        proc = subprocess.run([*cmd, container], capture_output=True, text=True,
                              errors="replace", timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return stamped(proc.stdout + proc.stderr)


@dataclass
class Fatal:
    """A fatal line seen: the phase it came in, and the line that says why (the exception's,
    once its traceback ends)."""

    phase: str
    seconds: float
    line: str
    checks: int = 0

    def error(self, container: str) -> ProbeError:
        return ProbeError(f"container {container} failed while {self.phase} "
                          f"({self.seconds:.0f}s in it): {self.line[:400]}")


class StartupWatch(ContainerWatch):
    """A starting SGLang worker's container: its phase from its log, and its death."""

    def __init__(self, name: str, *,
                 read: Callable[[str, str | None], list[tuple[str, str]]] = docker_log_lines,
                 failure: Callable[[str], str | None] = container_failure,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(name)
        self.read, self.failure, self.clock = read, failure, clock
        self.phase, self.entered = FIRST_PHASE, clock()
        self.phases: list[dict] = []
        self.since: str | None = None
        self.seen_at_since: set[str] = set()
        self.fatal: Fatal | None = None

    def _new_lines(self) -> list[tuple[str, str]]:
        fresh = [(stamp, text) for stamp, text in self.read(self.name, self.since)
                 if not (stamp == self.since and text in self.seen_at_since)]
        if fresh:
            last = fresh[-1][0]
            at_last = {text for stamp, text in fresh if stamp == last}
            self.seen_at_since = at_last | (self.seen_at_since if last == self.since else set())
            self.since = last
        return fresh

    def _enter(self, phase: str, at: float) -> None:
        # Forward only: with several ranks the slower ones repeat earlier phases' lines; a
        # second CUDA graph capture (prefill, then decode) opens capturing again.
        order = [name for _, name in PHASES]
        now = order.index(self.phase) if self.phase in order else -1
        again = phase == CAPTURING and self.phase == order[order.index(CAPTURING) + 1]
        if order.index(phase) <= now and not again:
            return
        # A line logged before this watch began (the container started first, the probe late on
        # a busy host) ends the phase the watch began in at once: no negative time.
        took = max(0.0, at - self.entered)
        self.phases.append({"phase": self.phase, "seconds": round(took, 1)})
        log(f"{self.name}: {phase} ({self.phase} took {took:.1f}s)")
        self.phase, self.entered = phase, at

    def _feed(self, stamp: str, text: str) -> None:
        at = log_time(stamp)
        # A traceback's indented source lines quote the error's words; its last line says it.
        if self.fatal is None and FATAL.search(text) and not text[:1].isspace():
            self.fatal = Fatal(self.phase, max(0.0, at - self.entered), text.strip())
        if self.fatal is None:
            phase = next((name for pattern, name in PHASES if pattern.search(text)), None)
            if phase:
                self._enter(phase, at)
        elif EXCEPTION_LINE.match(text):
            self.fatal.line = text.strip()
            raise self.fatal.error(self.name)

    def _give_up(self, dead: str | None) -> None:
        """A fatal line whose exception has not come: named as it is once the container is
        gone or one check later (a traceback is one write; its end is not minutes away)."""
        if self.fatal is None:
            return
        if dead or self.fatal.checks:
            raise self.fatal.error(self.name)
        self.fatal.checks += 1

    def check(self, what: str) -> None:
        dead = self.failure(self.name)
        try:
            for stamp, text in self._new_lines():
                self._feed(stamp, text)
            self._give_up(dead)
        except ProbeError as exc:
            raise ProbeError(f"{what}: {exc}" + (f" ({dead})" if dead else "")) from None
        if dead:
            raise ProbeError(f"{what} will not become healthy: died while {self.phase} "
                             f"({self.clock() - self.entered:.0f}s in it): {dead}")

    def progress(self) -> str:
        return f"{self.phase} for {self.clock() - self.entered:.0f}s"

    def finished(self) -> list[dict]:
        """Every phase seen with its duration, the last one closed now (none when the log
        showed no SGLang startup: a worker already serving, a stand-in)."""
        if not self.phases:
            return []
        now = self.clock()
        return [*self.phases,
                {"phase": self.phase, "seconds": round(max(0.0, now - self.entered), 1)}]


def wait_healthy(
    client: httpx.Client,
    base_url: str,
    timeout_s: float,
    *,
    interval_s: float,
    progress_every_s: float = 30.0,
    what: str = "server",
    hint: str = LOAD_HINT,
    watch: ContainerWatch | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> float:
    """Poll `{base_url}/health` until 200 or `timeout_s`; returns the seconds waited.

    With `watch` (the container), a container that exits while we wait (an OOM or a bad flag,
    minutes into loading) fails the wait at once, with its last log lines, instead of at the
    timeout; a StartupWatch also follows the worker's phases and fails on a fatal log line.
    """
    start = clock()
    deadline = start + timeout_s
    last = "no answer yet"
    next_progress = start
    while True:
        status = _health(client, base_url)
        if watch:
            # Also once healthy: the log since the last check (the warm-up, the server's last
            # lines) belongs to the startup the result reports.
            watch.check(f"{what} {base_url}")
        if status is None:
            waited = clock() - start
            log(f"{what} {base_url} healthy after {waited:.1f}s")
            return waited
        last = status
        now = clock()
        doing = f"{watch.progress()}, " if watch and watch.progress() else ""
        if now >= deadline:
            raise ProbeError(
                f"{what} {base_url}/health not healthy after {timeout_s:g}s ({doing}last: "
                f"{last}); " + hint
            )
        if now >= next_progress:
            log(f"waiting for {what} {base_url}/health: {doing}{now - start:.0f}s/"
                f"{timeout_s:g}s, last: {last}")
            next_progress = now + progress_every_s
        time.sleep(max(0.0, min(interval_s, deadline - now)))


def _health(client: httpx.Client, base_url: str) -> str | None:
    """None once /health answers 200, else what it answered."""
    try:
        response = client.get(f"{base_url}/health")
    except httpx.HTTPError as exc:
        return describe(exc)
    return None if response.status_code == 200 else f"HTTP {response.status_code}"


def get_json(client: httpx.Client, url: str, *, attempts: int = 3) -> object:
    """GET a JSON document, retrying transient failures a bounded number of times."""
    last = ""
    for attempt in range(attempts):
        try:
            response = client.get(url)
            if response.status_code == 200:
                return response.json()
            last = f"HTTP {response.status_code}: {response.text[:200]}"
            if response.status_code == 404:
                break
        except (httpx.HTTPError, ValueError) as exc:
            last = describe(exc)
        time.sleep(min(2.0, 0.5 * (attempt + 1)))
    raise ProbeError(f"GET {url} failed: {last}")


def server_info(client: httpx.Client, base_url: str) -> dict:
    # SGLang has served it as /get_server_info (the seed's) and, newer, /server_info.
    errors = []
    for path in ("/get_server_info", "/server_info"):
        try:
            info = get_json(client, f"{base_url}{path}")
        except ProbeError as exc:
            errors.append(str(exc))
            continue
        if not isinstance(info, dict):
            raise ProbeError(f"{base_url}{path} did not return a JSON object")
        return info
    raise ProbeError("; ".join(errors))


def same(want: object, got: object) -> bool:
    if isinstance(want, bool) or isinstance(got, bool):
        return want == got
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        # 0.90 in the config and 0.9 from the server are the same setting.
        return math.isclose(float(want), float(got), rel_tol=1e-9, abs_tol=1e-9)
    return want == got


def mismatches(expect: Mapping[str, object], info: Mapping[str, object]) -> list[str]:
    """Every field of `expect` the server reports differently, as 'field is X, want Y'."""
    found = []
    for key, want in expect.items():
        if key not in info:
            found.append(f"{key} is missing, want {want!r}")
        elif not same(want, info[key]):
            found.append(f"{key} is {info[key]!r}, want {want!r}")
    return found


def check_worker(
    url: str,
    expect: Mapping[str, object],
    timeout_s: float,
    *,
    interval_s: float,
    container: str | None = None,
    client: httpx.Client | None = None,
) -> dict:
    """Wait for a worker's /health, then prove /get_server_info reports what was asked."""
    url = url.rstrip("/")
    unknown = sorted(set(expect) - set(WORKER_FIELDS))
    if unknown:
        raise ProbeError(f"worker probe: unknown expected field(s) {', '.join(unknown)}")
    watch = StartupWatch(container) if container else None
    with client or make_client() as http:
        waited = wait_healthy(http, url, timeout_s, interval_s=interval_s, what="worker",
                              watch=watch)
        info = server_info(http, url)
        wrong = mismatches(expect, info)
        if wrong:
            raise ProbeError(
                f"worker {url} is not serving what the config asked: {'; '.join(wrong)}"
            )
        log(f"worker {url} reports the configured {', '.join(expect)}")
        return {
            "url": url,
            "waited_s": round(waited, 1),
            "server_info": {key: info.get(key) for key in WORKER_FIELDS if key in info},
            "version": info.get("version"),
            "phases": watch.finished() if watch else [],
        }


def check_reach(worker_urls: Sequence[str], timeout_s: float, *, interval_s: float) -> dict:
    """Every worker answers /health from this host: proves the network path the router uses."""
    failures = []
    with make_client() as http:
        for url in worker_urls:
            try:
                wait_healthy(http, url.rstrip("/"), timeout_s, interval_s=interval_s,
                             what="worker", hint=REACH_HINT)
            except ProbeError as exc:
                failures.append(str(exc))
    if failures:
        raise ProbeError(
            f"{len(failures)} of {len(worker_urls)} worker(s) unreachable from this host: "
            + " | ".join(failures)
        )
    return {"worker_urls": [url.rstrip("/") for url in worker_urls]}


def _router_workers(http: httpx.Client, url: str) -> list[dict] | None:
    try:
        listing = get_json(http, f"{url}/workers", attempts=2)
    except ProbeError:
        return None  # older routers have no /workers: the chat completion still proves routing
    workers = listing.get("workers") if isinstance(listing, dict) else None
    return workers if isinstance(workers, list) else None


def check_workers_registered(
    workers: list[dict], worker_urls: Sequence[str], dp_size: int | None = None
) -> list[str]:
    """Problems with the router's view of the workers: missing or unhealthy ones, by URL, and
    (dp-aware, `dp_size` given) a worker not registered once per DP rank."""
    problems = []
    for expected in worker_urls:
        base = expected.rstrip("/")
        # A dp-aware router registers one entry per rank: `url@0`, `url@1`, ...
        entries = [w for w in workers if str(w.get("url", "")).split("@")[0].rstrip("/") == base]
        if not entries:
            problems.append(f"{base} is not registered")
            continue
        sick = [str(w.get("url")) for w in entries if w.get("is_healthy") is False]
        if sick:
            problems.append(f"{', '.join(sick)} marked unhealthy")
        if dp_size:
            ranks = sorted(str(w.get("url")).partition("@")[2] for w in entries)
            want = [str(r) for r in range(dp_size)]
            if sorted(ranks, key=lambda r: (len(r), r)) != want:
                problems.append(
                    f"{base} registered for DP rank(s) {ranks}, want 0..{dp_size - 1}: the "
                    "router did not see the worker's dp_size (is --dp-aware set?)"
                )
    return problems


def chat(http: httpx.Client, url: str, model: str, *, attempts: int = 5) -> tuple[str, float]:
    """One real chat completion through `url`; returns the reply text and its latency (ms)."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": READY_PROMPT}],
        "temperature": 0,
        "max_tokens": 128,
    }
    last = ""
    for attempt in range(attempts):
        start = time.perf_counter()
        try:
            response = http.post(f"{url}/v1/chat/completions", json=body)
            elapsed_ms = (time.perf_counter() - start) * 1000
            if response.status_code == 200:
                reply = response.json()
                message = reply["choices"][0]["message"]
                # A reasoning parser may move everything into reasoning_content.
                text = message.get("content") or message.get("reasoning_content") or ""
                if not text.strip():
                    raise ProbeError(f"chat completion through {url} came back empty: {reply}")
                return text.strip(), elapsed_ms
            last = f"HTTP {response.status_code}: {response.text[:300]}"
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
            last = describe(exc)
        log(f"chat completion through {url} failed (attempt {attempt + 1}/{attempts}): {last}")
        time.sleep(min(5.0, 1.0 * (attempt + 1)))
    raise ProbeError(f"chat completion through {url} failed after {attempts} attempts: {last}")


def wait_registered(
    http: httpx.Client,
    url: str,
    worker_urls: Sequence[str],
    deadline: float,
    interval_s: float,
    dp_size: int | None = None,
) -> list[dict] | None:
    """The router's worker list once every expected worker is registered and healthy."""
    while True:
        workers = _router_workers(http, url)
        if workers is None:
            return None
        problems = check_workers_registered(workers, worker_urls, dp_size)
        if not problems:
            return workers
        if time.monotonic() >= deadline:
            raise ProbeError(f"router {url} worker problems: {'; '.join(problems)}")
        log(f"router {url}: {'; '.join(problems)}; waiting")
        time.sleep(interval_s)


# Read in the gateway's container: the version of the distribution that runs there.
VERSION_OF = "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))"


def gateway_version(container: str, package: str) -> str:
    """The version of `package` installed in `container` (`docker exec`, its own python3)."""
    try:
        proc = subprocess.run(
            ["docker", "exec", container, "python3", "-c", VERSION_OF, package],
            capture_output=True, text=True, timeout=60, check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProbeError(f"cannot read {package}'s version in container {container}: "
                         f"{describe(exc)}") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise ProbeError(f"container {container} has no {package} ({last[:200]}): its image "
                         "does not carry the gateway router.implementation names")
    return proc.stdout.strip()


def check_gateway(container: str | None, pin: Mapping[str, str] | None) -> str | None:
    """The running gateway is the pinned one; its version (None: nothing to check)."""
    if not pin or not container:
        return None
    got = gateway_version(container, pin["package"])
    if got != pin["version"]:
        raise ProbeError(f"container {container} runs {pin['package']} {got}, the stack pins "
                         f"{pin['version']}: use an image with {pin['package']}=="
                         f"{pin['version']} (router.image) or the implementation it carries")
    log(f"{pin['package']} {got} in container {container}, as pinned")
    return got


def check_router(
    url: str,
    model: str,
    worker_urls: Sequence[str],
    timeout_s: float,
    *,
    interval_s: float,
    worker_timeout_s: float,
    dp_size: int | None = None,
    container: str | None = None,
    gateway: Mapping[str, str] | None = None,
) -> dict:
    """Workers reachable from here, router /health, /v1/models lists `model`, every worker
    registered, and a real chat completion.

    The workers are probed directly, not only through the router: with a worker gone, the router
    keeps answering (it retries on the others) and reports it healthy until its next health
    check (60 s by default), so only a direct probe names the dead worker.
    """
    url = url.rstrip("/")
    start = time.monotonic()
    if worker_urls:
        check_reach(worker_urls, min(worker_timeout_s, timeout_s), interval_s=interval_s)
    with make_client() as http:
        wait_healthy(http, url, timeout_s, interval_s=interval_s, what="router",
                     watch=ContainerWatch(container) if container else None)
        version = check_gateway(container, gateway)
        # The workers first: a gateway registers them from a queue after its port opens, and
        # lists their models only then.
        workers = wait_registered(
            http, url, worker_urls, start + timeout_s, interval_s, dp_size
        )
        listing = get_json(http, f"{url}/v1/models")
        data = listing.get("data") if isinstance(listing, dict) else None
        models = [str(m.get("id")) for m in data or [] if isinstance(m, dict)]
        if model not in models:
            raise ProbeError(
                f"router {url}/v1/models lists {models or 'no models'}, not {model!r}: "
                "check served_model_name on the workers"
            )
        reply, latency_ms = chat(http, url, model)
        log(f"router {url} answered {reply[:60]!r} in {latency_ms:.0f} ms")
        return {
            "router_url": url,
            "waited_s": round(time.monotonic() - start, 1),
            "models": models,
            "worker_urls": [u.rstrip("/") for u in worker_urls],
            "workers": sorted(str(w.get("url")) for w in workers) if workers is not None else None,
            "reply": reply,
            "reply_is_ready": reply.rstrip(".").strip().upper() == "READY",
            "latency_ms": round(latency_ms, 1),
            "gateway": {**gateway, "running": version} if gateway else None,
        }


def run_spec(spec: Mapping[str, Any]) -> dict:
    """The host script's entry point: one JSON spec, one result (its values as JSON gives them)."""
    mode = spec.get("mode")
    # Every bound comes with the spec (the components pass them from the config): none here.
    timeout_s = float(spec["timeout_s"])
    interval_s = float(spec["interval_s"])
    if mode == "worker":
        expect = spec.get("expect") or {}
        if not isinstance(expect, dict):
            raise ProbeError("probe spec: 'expect' must be an object")
        container = spec.get("container")
        return check_worker(str(spec["url"]), expect, timeout_s, interval_s=interval_s,
                            container=str(container) if container else None)
    if mode == "router":
        return check_router(
            str(spec["url"]),
            str(spec["model"]),
            [str(u) for u in spec.get("worker_urls") or []],
            timeout_s,
            interval_s=interval_s,
            worker_timeout_s=float(spec["worker_timeout_s"]),
            dp_size=int(spec["dp_size"]) if spec.get("dp_size") else None,
            container=str(spec["container"]) if spec.get("container") else None,
            gateway=spec.get("gateway"),
        )
    if mode == "reach":
        return check_reach([str(u) for u in spec.get("worker_urls") or []], timeout_s,
                           interval_s=interval_s)
    raise ProbeError(f"probe spec: unknown mode {mode!r} (worker, router or reach)")


def parse_args(argv: Sequence[str]) -> dict:
    """`spec JSON`: the probe's one JSON object, every bound in it (the serving_probe step
    passes it); a missing key is a bad argument (exit 2), never a default of this file's."""
    if len(argv) != 2 or argv[0] != "spec":
        raise ProbeError("usage: readiness.py spec JSON (as the serving_probe step runs it)")
    value = json.loads(argv[1])
    if not isinstance(value, dict):
        raise ProbeError("probe spec must be a JSON object")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    try:
        spec = parse_args(sys.argv[1:] if argv is None else argv)
        result = run_spec(spec)
    except ProbeError as exc:
        print(f"readiness: {exc}", file=sys.stderr, flush=True)
        return 1
    except (KeyError, ValueError) as exc:
        print(f"readiness: bad probe arguments ({describe(exc)})", file=sys.stderr, flush=True)
        return 2
    print(json.dumps(result, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
