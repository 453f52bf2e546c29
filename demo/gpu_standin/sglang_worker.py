"""A stand-in SGLang worker for the demo and the tests: the HTTP surface the router, the probes
and Harbor use.

SGLang itself needs GPUs; this speaks the same endpoints on a loopback port so that the real
`sglang-router` can sit in front of it:

- GET  /health, /health_generate            200 once "loaded" (503 while loading, or forever
                                              with --never-healthy), as SGLang does
- GET  /server_info, /get_server_info       the server args (tp_size, dp_size, ...); the router
                                              asks /server_info first, then /get_server_info
- GET  /model_info, /get_model_info          model path and type
- GET  /v1/models                            the served model name
- GET  /get_load                             what a router polls for load
- GET  /metrics                              with --enable-metrics, SGLang's Prometheus metrics
                                              under their real names (sglang:num_running_reqs,
                                              num_queue_reqs, token_usage, gen_throughput,
                                              time_to_first_token_seconds, ...; see "Serving"
                                              below), which smg also polls for load; 404 without
- POST /v1/chat/completions                  an OpenAI chat.completion with usage (the content:
                                              see "Replies" below); stream=true is answered as
                                              server-sent events, one chunk per token
- POST /generate                             SGLang's native API, same replies
- POST /flush_cache                          200

Replies, first rule that applies (a request with SGLang's `ignore_eos` is a load, answered with
`max_tokens` filler tokens and logged as source "load"):
1. --replies FILE: the JSON lines of FILE in turn, whatever is asked (the last one repeats).
2. The readiness probe's "Reply with exactly READY.": "READY".
3. <model-path>/standin-episodes.json, a scripted agent read from the "checkpoint" it serves:
   {"episodes": [{"when": "<substring of the first user message; empty: any>",
                  "replies": [<a Terminus-2 JSON object, or a string>, ...]}]}
   The first episode whose `when` occurs in the conversation's first user message answers; its
   reply is chosen by the number of assistant messages already in the request (the turn; the
   last reply repeats). Stateless, so any worker or DP rank behind a router can take any turn.
4. "READY".

Serving, as a GPU server behaves under load (for the metrics, the speed check and the gateway
benchmarks): each DP rank runs at most --max-running-requests requests at once, the others
wait in its queue; a request's prompt tokens not already cached on its rank (the same
conversation's earlier prompt, per rank, evicted oldest first past --max-total-tokens) take
--prefill-tokens-per-s, then its tokens come at --decode-tokens-per-s each (0: at once). The
reply's tokens are its words; with SGLang's `ignore_eos` a request gets `max_tokens` of them.

Startup: at once by default. With --startup-speed N the stand-in replays a real SGLang startup
(sglang_startup.json: Qwen3-32B on one H100, its log lines for the weights, the KV cache, the
CUDA graph captures and the warm-up, with their published durations) N times faster, on
stderr: its port opens at uvicorn's line and /health answers 200 after the last one, as
SGLang's. --startup-failure NAME replays one of the file's failures instead (oom-in-capture:
CUDA out of memory while capturing CUDA graphs; nccl-at-init: an NCCL error as torch
distributed starts): the startup up to it, its traceback and SGLang's "Received sigquit" line,
then exit 1, the port never opened.

Every request is one JSON line on stdout (so `docker logs` shows it): path, model, the sampling
parameters, the DP rank the router pinned, this worker's host:port, the episode and turn, a
timestamp; with --request-log FILE also appended to FILE with the whole body. Progress and
warnings go to stderr. Unknown flags (SGLang has hundreds) are ignored with a warning.

A stand-in for a GPU server, never shipped as product: setup/serving_image.sh packages it, with
the `sglang` shim beside it, as the local stack's CPU "model"; the tests run it too. Standard
library only, so it runs from any Python 3.11+.

    python demo/gpu_standin/sglang_worker.py --host 127.0.0.1 --port 30001 \
        [--model-path DIR] [--tp-size 4 --dp-size 2 ...] [--never-healthy] \
        [--healthy-after-checks 5] [--replies FILE] [--latency-ms 50] [--request-log FILE]
        [--enable-metrics] [--decode-tokens-per-s 30] [--prefill-tokens-per-s 5000]
        [--startup-speed 100 [--startup-log FILE] [--startup-failure oom-in-capture]]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import signal
import sys
import threading
import time
import uuid
from collections import OrderedDict, deque
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

# What hostside/readiness.py asks through the router before it declares it ready.
READY_PROMPT = "Reply with exactly READY."
EPISODES_FILE = "standin-episodes.json"
# A real SGLang startup, line by line with its durations (PROVENANCE.md beside it says where
# each was published).
STARTUP_LOG = Path(__file__).with_name("sglang_startup.json")
# The body fields that say how the model was asked to sample. The router (0.3.2) re-encodes
# the body: `max_tokens` arrives as `max_completion_tokens`, floats as their f32 value.
SAMPLING_KEYS = (
    "temperature", "top_p", "top_k", "min_p", "max_tokens", "max_completion_tokens",
    "presence_penalty", "frequency_penalty", "repetition_penalty", "min_tokens", "seed", "stop",
    "n",
)


def warn(message: str) -> None:
    print(f"[standin] {message}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    # No abbreviations: an unknown SGLang flag that starts like a known one must not take its
    # place (`--max-running` is not `--max-running-requests`).
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--served-model-name", default="Qwen/Qwen3.8-27B")
    parser.add_argument("--model-path", default="/models/Qwen3.8-27B")
    parser.add_argument("--tp-size", type=int, default=4)
    parser.add_argument("--dp-size", type=int, default=2)
    parser.add_argument("--context-length", type=int, default=262144)
    parser.add_argument("--max-running-requests", type=int, default=5)
    parser.add_argument("--max-mamba-cache-size", type=int, default=25)
    parser.add_argument("--mem-fraction-static", type=float, default=0.9)
    parser.add_argument("--reasoning-parser", default="qwen3")
    parser.add_argument("--tool-call-parser", default="qwen3_coder")
    parser.add_argument("--max-total-tokens", type=int, default=None)
    parser.add_argument(
        "--never-healthy", action="store_true", help="/health answers 503 forever (stuck load)"
    )
    # Counted in health checks, not seconds: a test sees "loading" however late its probe
    # starts on a slow machine.
    parser.add_argument(
        "--healthy-after-checks", type=int, default=0,
        help="/health answers 503 to this many checks first (loading)"
    )
    parser.add_argument(
        "--replies", type=Path, default=None, help="JSON lines: assistant contents in turn"
    )
    parser.add_argument(
        "--latency-ms", type=float, default=0.0, help="simulated generation time per request"
    )
    parser.add_argument(
        "--request-log", type=Path, default=None, help="append every request as a JSON line"
    )
    parser.add_argument("--enable-metrics", action="store_true",
                        help="serve SGLang's Prometheus metrics on /metrics")
    parser.add_argument("--decode-tokens-per-s", type=float, default=0.0,
                        help="each request's decode speed (0: its tokens at once)")
    parser.add_argument("--prefill-tokens-per-s", type=float, default=0.0,
                        help="prefill speed for prompt tokens not cached (0: at once)")
    parser.add_argument("--startup-speed", type=float, default=None,
                        help="replay SGLang's startup log this many times faster than it was "
                             "recorded (unset: no replay, healthy at once)")
    parser.add_argument("--startup-log", type=Path, default=STARTUP_LOG,
                        help="the startup to replay (default: the published one beside this)")
    parser.add_argument("--startup-failure", default=None,
                        help="replay this failure of the startup log (oom-in-capture, "
                             "nccl-at-init) and exit")
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        warn(f"warning: ignoring flags the stand-in does not implement: {' '.join(unknown)}")
    args.ignored_flags = unknown
    return args


def reply_text(value: object) -> str:
    # An object is a Terminus-2 reply: the agent reads it from the content as JSON.
    return value if isinstance(value, str) else json.dumps(value)


class Replies:
    """Assistant contents in turn; the last one repeats (a scripted agent's final answer)."""

    def __init__(self, path: Path | None) -> None:
        self._lock = threading.Lock()
        self._index = 0
        self._items = ["READY"]
        if path is not None:
            items = []
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise SystemExit(f"{path}:{number}: not a JSON line ({exc})") from exc
                items.append(reply_text(value))
            if not items:
                raise SystemExit(f"{path}: no replies in file")
            self._items = items

    def next(self) -> str:
        with self._lock:
            item = self._items[min(self._index, len(self._items) - 1)]
            self._index += 1
            return item


def message_text(content: object) -> str:
    """A message's text: a string, or OpenAI content parts ({"type": "text", "text": ...})."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", "")) for part in content
            if isinstance(part, dict) and part.get("type", "text") == "text"
        )
    return ""


def first_user_message(messages: object) -> str:
    if not isinstance(messages, list):
        return ""
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "user":
            return message_text(message.get("content"))
    return ""


def turn_index(messages: object) -> int:
    """How many times the model already answered in this conversation."""
    if not isinstance(messages, list):
        return 0
    return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")


@dataclass(frozen=True)
class Episode:
    when: str
    replies: tuple[str, ...]


@dataclass(frozen=True)
class Choice:
    """The reply to one request, and why it was chosen (for the request log)."""

    content: str
    source: str  # "replies", "ready", "episode", "default" or "load"
    episode: int | None = None
    turn: int | None = None


class Episodes:
    """A scripted agent: the episode the first user message selects, the reply of its turn."""

    def __init__(self, episodes: list[Episode]) -> None:
        self.episodes = episodes

    @classmethod
    def load(cls, path: Path) -> Episodes:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise SystemExit(f"{path}: unreadable or not JSON ({exc})") from exc
        items = data.get("episodes") if isinstance(data, dict) else None
        if not isinstance(items, list) or not items:
            raise SystemExit(f'{path}: want {{"episodes": [{{"when": ..., "replies": [...]}}]}}')
        episodes = []
        for number, item in enumerate(items):
            when = item.get("when", "") if isinstance(item, dict) else None
            replies = item.get("replies") if isinstance(item, dict) else None
            if not isinstance(when, str) or not isinstance(replies, list) or not replies:
                raise SystemExit(f"{path}: episodes[{number}] needs a string `when` and a "
                                 "non-empty list `replies`")
            episodes.append(Episode(when, tuple(reply_text(r) for r in replies)))
        return cls(episodes)

    def choose(self, messages: object) -> Choice | None:
        first = first_user_message(messages)
        for number, episode in enumerate(self.episodes):
            if episode.when in first:
                turn = turn_index(messages)
                content = episode.replies[min(turn, len(episode.replies) - 1)]
                return Choice(content, "episode", episode=number, turn=turn)
        return None


def sampling_of(body: dict) -> dict:
    """The sampling parameters a request carries (OpenAI fields, or /generate's own dict)."""
    sampling = {k: body[k] for k in SAMPLING_KEYS if k in body}
    native = body.get("sampling_params")
    if isinstance(native, dict):
        sampling.update(native)
    return sampling


def request_record(worker: str, method: str, path: str, body: dict | None,
                   choice: Choice | None = None, status: int | None = None) -> dict:
    """One request as the log shows it (without the body: the caller adds it for the file)."""
    now = time.time()
    record: dict = {
        "t": now,
        "time": datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds"),
        "worker": worker,
        "method": method,
        "path": path,
        "status": status,
    }
    if body is not None:
        record["model"] = body.get("model")
        record["sampling"] = sampling_of(body)
        # Where a dp-aware router pins the request: SGLang's own body field.
        record["data_parallel_rank"] = body.get("data_parallel_rank")
        record["stream"] = bool(body.get("stream"))
        messages = body.get("messages")
        if isinstance(messages, list):
            record["messages"] = len(messages)
    if choice is not None:
        record["reply"] = {"source": choice.source, "episode": choice.episode,
                           "turn": choice.turn}
    return record


# SGLang's TTFT buckets (seconds) and its e2e latency buckets, as its /metrics shows them.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                5.0, 7.5, 10.0, 15.0, 20.0, 25.0, 30.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0)
# The window gen_throughput is measured over, as SGLang's scheduler logs it.
THROUGHPUT_WINDOW_S = 5.0


class Histogram:
    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.total = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.total += 1
        self.sum += value
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1

    def lines(self, name: str, labels: str) -> list[str]:
        out = [f"# TYPE {name} histogram"]
        for bound, count in zip(self.buckets, self.counts, strict=True):
            out.append(f'{name}_bucket{{le="{bound}",{labels}}} {float(count)}')
        out.append(f'{name}_bucket{{le="+Inf",{labels}}} {float(self.total)}')
        out.append(f"{name}_sum{{{labels}}} {self.sum}")
        out.append(f"{name}_count{{{labels}}} {float(self.total)}")
        return out


class Rank:
    """One DP rank's scheduler: its running slots, its queue, its prefix cache."""

    def __init__(self, slots: int, capacity: int) -> None:
        self.slots = slots
        self.capacity = capacity
        self.running = 0
        self.waiting = 0
        self.running_tokens = 0
        # conversation -> tokens of its last prompt kept in the cache (oldest first).
        self.cache: OrderedDict[str, int] = OrderedDict()


class Engine:
    """How the stand-in serves under load (the module's "Serving"), and what it counts for
    /metrics: the scheduler gauges per DP rank, the tokenizer's counters and histograms."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        capacity = args.max_total_tokens or 1_000_000
        self.ranks = [Rank(args.max_running_requests, capacity) for _ in range(args.dp_size)]
        self.cond = threading.Condition()
        self.next_rank = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.cached_tokens = 0
        self.requests = 0
        self.aborted = 0
        self.generated: deque[tuple[float, int]] = deque()
        self.ttft = Histogram(TTFT_BUCKETS)
        self.e2e = Histogram(E2E_BUCKETS)

    def rank_of(self, body: dict) -> int:
        rank = body.get("data_parallel_rank")
        if isinstance(rank, int) and 0 <= rank < len(self.ranks):
            return rank
        with self.cond:
            self.next_rank = (self.next_rank + 1) % len(self.ranks)
            return self.next_rank

    def admit(self, rank: int, conversation: str, prompt: int) -> int:
        """Wait for a running slot on `rank`; the prompt tokens already cached there."""
        state = self.ranks[rank]
        with self.cond:
            state.waiting += 1
            while state.running >= state.slots:
                self.cond.wait()
            state.waiting -= 1
            state.running += 1
            state.running_tokens += prompt
            cached = min(state.cache.pop(conversation, 0), prompt)
            state.cache[conversation] = prompt
            while sum(state.cache.values()) > state.capacity and len(state.cache) > 1:
                state.cache.popitem(last=False)
            self.prompt_tokens += prompt
            self.cached_tokens += cached
            return cached

    def produced(self, tokens: int) -> None:
        with self.cond:
            self.generation_tokens += tokens
            self.generated.append((time.monotonic(), tokens))

    def release(self, rank: int, prompt: int, ttft: float, total: float) -> None:
        state = self.ranks[rank]
        with self.cond:
            state.running -= 1
            state.running_tokens -= prompt
            self.requests += 1
            self.ttft.observe(ttft)
            self.e2e.observe(total)
            self.cond.notify_all()

    def throughput(self) -> float:
        now = time.monotonic()
        while self.generated and self.generated[0][0] < now - THROUGHPUT_WINDOW_S:
            self.generated.popleft()
        return sum(n for _, n in self.generated) / THROUGHPUT_WINDOW_S

    def metrics(self) -> str:
        """The exposition SGLang serves with --enable-metrics, for these counts."""
        model = self.args.served_model_name
        base = f'model_name="{model}"'
        out: list[str] = []
        with self.cond:
            gauges = {
                "sglang:num_running_reqs": [r.running for r in self.ranks],
                "sglang:num_queue_reqs": [r.waiting for r in self.ranks],
                "sglang:num_used_tokens": [r.running_tokens for r in self.ranks],
                "sglang:token_usage": [round(r.running_tokens / r.capacity, 4)
                                       for r in self.ranks],
                "sglang:gen_throughput": [self.throughput() / len(self.ranks)] * len(self.ranks),
                "sglang:cache_hit_rate": [self.cached_tokens / max(1, self.prompt_tokens)]
                * len(self.ranks),
                "sglang:max_total_num_tokens": [r.capacity for r in self.ranks],
            }
            for name, values in gauges.items():
                out.append(f"# TYPE {name} gauge")
                for rank, value in enumerate(values):
                    labels = (f'{base},engine_type="unified",tp_rank="0",pp_rank="0",'
                              f'dp_rank="{rank}"')
                    out.append(f"{name}{{{labels}}} {float(value)}")
            counters = {
                "sglang:prompt_tokens_total": self.prompt_tokens,
                "sglang:generation_tokens_total": self.generation_tokens,
                "sglang:cached_tokens_total": self.cached_tokens,
                "sglang:num_requests_total": self.requests,
                "sglang:num_aborted_requests_total": self.aborted,
            }
            for name, value in counters.items():
                out += [f"# TYPE {name} counter", f"{name}{{{base}}} {float(value)}"]
            out += self.ttft.lines("sglang:time_to_first_token_seconds", base)
            out += self.e2e.lines("sglang:e2e_request_latency_seconds", base)
        return "\n".join(out) + "\n"


def conversation_of(messages: object) -> str:
    """What the prefix cache keys a conversation by: its first two messages."""
    head = messages[:2] if isinstance(messages, list) else messages
    return hashlib.sha256(json.dumps(head, sort_keys=True).encode()).hexdigest()[:16]


# --- The startup replay ---------------------------------------------------------------------
# SGLang's own startup log (STARTUP_LOG), replayed at --startup-speed times its pace.


@dataclass(frozen=True)
class LogLine:
    at_s: float  # seconds after the replay's start (a failure's: after the line it follows)
    text: str
    stamped: bool  # after SGLang's logger prefix, as its logger prints it

    def render(self, address: str) -> str:
        text = self.text.replace("{address}", address)
        if not self.stamped:
            return text
        return f"[{datetime.now(UTC).strftime('%Y-%m-%d %H:%M:%S')}] {text}"


@dataclass(frozen=True)
class Startup:
    lines: tuple[LogLine, ...]
    listening: int  # the index of the line from which the HTTP port is open


def log_lines(path: Path, where: str, items: object) -> tuple[LogLine, ...]:
    if not isinstance(items, list) or not items:
        raise SystemExit(f"{path}: {where} must be a non-empty list of lines")
    lines = []
    for number, item in enumerate(items):
        text = item.get("log", item.get("raw")) if isinstance(item, dict) else None
        at_s = item.get("at_s") if isinstance(item, dict) else None
        if not isinstance(text, str) or not isinstance(at_s, int | float):
            raise SystemExit(f'{path}: {where}[{number}] needs "at_s" (seconds) and "log" or '
                             '"raw" (the line)')
        lines.append(LogLine(float(at_s), text, "log" in item))
    return tuple(lines)


def index_of(path: Path, lines: tuple[LogLine, ...], key: str, marker: object) -> int:
    found = [i for i, line in enumerate(lines) if isinstance(marker, str) and marker in line.text]
    if not found:
        raise SystemExit(f"{path}: {key} {marker!r} is in no startup line")
    return found[0]


def load_startup(path: Path, failure: str | None) -> Startup:
    """The startup to replay: the whole of it, or up to a failure and that failure's lines."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(f"--startup-log {path}: unreadable or not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise SystemExit(f"--startup-log {path}: want a JSON object")
    lines = log_lines(path, "startup", data.get("startup"))
    listening = index_of(path, lines, "listening_at", data.get("listening_at"))
    if failure is None:
        return Startup(lines, listening)
    failures = data.get("failures") if isinstance(data.get("failures"), dict) else {}
    if failure not in failures:
        raise SystemExit(f"--startup-failure {failure}: {path} has "
                         f"{', '.join(sorted(failures)) or 'no failures'}")
    after = index_of(path, lines, f"failures.{failure}.after", failures[failure].get("after"))
    if after >= listening:
        raise SystemExit(f"{path}: failures.{failure} follows the server's start: only a "
                         "failure before it is replayed")
    tail = log_lines(path, f"failures.{failure}.lines", failures[failure].get("lines"))
    shifted = tuple(LogLine(lines[after].at_s + t.at_s, t.text, t.stamped) for t in tail)
    failing = (*lines[: after + 1], *shifted)
    # Never listening: SGLang's HTTP server starts only once its scheduler is ready.
    return Startup(failing, len(failing))


class StartupReplay:
    """Prints the startup's lines on stderr at their time, scaled by `speed`."""

    def __init__(self, startup: Startup, speed: float, address: str) -> None:
        self.startup, self.speed, self.address = startup, speed, address
        self.origin = time.monotonic()

    def wait_for(self, line: LogLine) -> None:
        time.sleep(max(0.0, self.origin + line.at_s / self.speed - time.monotonic()))

    def play(self, lines: tuple[LogLine, ...]) -> None:
        for line in lines:
            self.wait_for(line)
            print(line.render(self.address), file=sys.stderr, flush=True)

    def before_listening(self) -> None:
        """Up to the server's start (its port opens at the time of uvicorn's line); a
        failure's replay ends the process here, as SGLang's launcher kills its own process
        tree once a child reports one."""
        self.play(self.startup.lines[: self.startup.listening])
        if self.startup.listening >= len(self.startup.lines):
            sys.exit(1)
        self.wait_for(self.startup.lines[self.startup.listening])

    def after_listening(self, loaded: threading.Event) -> None:
        self.play(self.startup.lines[self.startup.listening:])
        loaded.set()


def startup_replay(args: argparse.Namespace) -> StartupReplay | None:
    if args.startup_speed is None:
        if args.startup_failure:
            raise SystemExit("--startup-failure needs --startup-speed (the replay's pace)")
        return None
    if args.startup_speed <= 0:
        raise SystemExit(f"--startup-speed {args.startup_speed:g}: want a pace above 0")
    startup = load_startup(args.startup_log, args.startup_failure)
    return StartupReplay(startup, args.startup_speed, f"{args.host}:{args.port}")


class Worker:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.started = time.monotonic()
        self.health_checks = 0
        self.health_lock = threading.Lock()
        # Set once the startup is over: at once, or at the end of its replay.
        self.loaded = threading.Event()
        if args.startup_speed is None:
            self.loaded.set()
        self.address = f"{args.host}:{args.port}"
        self.replies = Replies(args.replies) if args.replies is not None else None
        self.episodes: Episodes | None = None
        episodes = Path(args.model_path) / EPISODES_FILE
        if self.replies is None and episodes.is_file():
            self.episodes = Episodes.load(episodes)
            warn(f"scripted episodes: {len(self.episodes.episodes)} from {episodes}")
        self.log_lock = threading.Lock()
        self.running = 0
        self.running_lock = threading.Lock()
        self.engine = Engine(args)

    def choose(self, messages: object) -> Choice:
        """The reply to a conversation (the rules in the module docstring, in order)."""
        if self.replies is not None:
            return Choice(self.replies.next(), "replies")
        if READY_PROMPT in first_user_message(messages):
            return Choice("READY", "ready")
        if self.episodes is not None:
            choice = self.episodes.choose(messages)
            if choice is not None:
                return choice
        return Choice("READY", "default")

    def healthy(self) -> bool:
        if self.args.never_healthy or not self.loaded.is_set():
            return False
        return self.health_checks >= self.args.healthy_after_checks

    def health_check(self) -> bool:
        """A /health request: whether it is healthy, and one more check counted."""
        with self.health_lock:
            healthy = self.healthy()
            self.health_checks += 1
        return healthy

    def server_info(self) -> dict:
        a = self.args
        return {
            "model_path": a.model_path,
            "tokenizer_path": a.model_path,
            "served_model_name": a.served_model_name,
            "host": a.host,
            "port": a.port,
            "tp_size": a.tp_size,
            "dp_size": a.dp_size,
            "context_length": a.context_length,
            "max_running_requests": a.max_running_requests,
            "max_mamba_cache_size": a.max_mamba_cache_size,
            "mem_fraction_static": a.mem_fraction_static,
            "reasoning_parser": a.reasoning_parser,
            "tool_call_parser": a.tool_call_parser,
            "max_total_tokens": a.max_total_tokens,
            "enable_metrics": a.enable_metrics,
            "load_balance_method": "round_robin",
            "disaggregation_mode": "null",
            "is_embedding": False,
            "status": "ready" if self.healthy() else "loading",
            "version": "standin",
            "internal_states": [
                {"max_total_num_tokens": a.max_total_tokens or 1_000_000, "last_gen_throughput": 0}
            ],
        }

    def log(self, record: dict, body: dict | None = None) -> None:
        """The request on stdout; with --request-log, also in the file, with its body."""
        with self.log_lock:
            print(json.dumps(record), flush=True)
            if self.args.request_log is not None:
                full = record if body is None else {**record, "body": body}
                with self.args.request_log.open("a") as handle:
                    handle.write(json.dumps(full) + "\n")


def count_tokens(messages: object) -> int:
    # A rough whitespace count: enough for usage fields that must be present and positive.
    text = json.dumps(messages)
    return max(1, len(text.split()))


def reply_tokens(content: str, body: dict) -> list[str]:
    """The reply's tokens (its words); with SGLang's `ignore_eos`, `max_tokens` of them."""
    words = content.split() or [content]
    limit = body.get("max_tokens") or body.get("max_completion_tokens")
    if body.get("ignore_eos") and isinstance(limit, int) and limit > 0:
        return (words + ["tok"] * limit)[:limit]
    return words


def pace(tokens: list[str], per_s: float, engine: Engine):
    """Yield each token when the decode speed says it is generated (all at once at 0)."""
    for token in tokens:
        if per_s:
            time.sleep(1 / per_s)
        engine.produced(1)
        yield token


def usage_of(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


class Handler(BaseHTTPRequestHandler):
    """The worker's HTTP surface; `make_handler` binds it to its worker."""

    worker: Worker
    # Keep-alive: the router pools connections, and a close per request would dominate
    # the latency the benchmark measures.
    protocol_version = "HTTP/1.1"
    # Headers and body go out as two writes: with Nagle on, the body waits for the
    # client's delayed ACK (40 ms on Linux) on every keep-alive response.
    disable_nagle_algorithm = True
    # The request being handled, as the request log tells it: logged once, just before
    # the response goes out (a client that reads the log after its answer finds it).
    req_path = ""
    body: dict | None = None
    status: int | None = None
    choice: Choice | None = None
    logged = False

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def _log(self) -> None:
        if self.logged:
            return
        self.logged = True
        record = request_record(self.worker.address, self.command, self.req_path, self.body,
                                self.choice, self.status)
        self.worker.log(record, self.body)

    def _write(self, code: int, content_type: str, data: bytes) -> None:
        self.status = code
        self._log()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send(self, code: int, body: object) -> None:
        self._write(code, "application/json", json.dumps(body).encode())

    def _begin(self, body: dict | None) -> str:
        self.req_path = self.path.split("?", 1)[0]
        self.body, self.status, self.choice, self.logged = body, None, None, False
        return self.req_path

    def _read_json(self) -> dict:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            value = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            return {}
        return value if isinstance(value, dict) else {}

    def do_GET(self) -> None:  # noqa: N802
        path = self._begin(None)
        try:
            self._get(path)
        finally:
            self._log()

    def _get(self, path: str) -> None:
        if path in ("/health", "/health_generate"):
            if self.worker.health_check():
                self._send(200, {})
            else:
                self._send(503, {"error": "model is still loading"})
        elif path in ("/server_info", "/get_server_info"):
            self._send(200, self.worker.server_info())
        elif path in ("/model_info", "/get_model_info"):
            self._send(
                200,
                {
                    "model_path": self.worker.args.model_path,
                    "tokenizer_path": self.worker.args.model_path,
                    "is_generation": True,
                    "model_type": "qwen3_next",
                    "architectures": ["Qwen3NextForCausalLM"],
                },
            )
        elif path == "/v1/models":
            self._send(
                200,
                {
                    "object": "list",
                    "data": [
                        {
                            "id": self.worker.args.served_model_name,
                            "object": "model",
                            "created": int(self.worker.started),
                            "owned_by": "sglang",
                            "root": self.worker.args.served_model_name,
                            "max_model_len": self.worker.args.context_length,
                        }
                    ],
                },
            )
        elif path == "/get_load":
            with self.worker.running_lock:
                running = self.worker.running
            self._send(200, [{"dp_rank": r, "num_reqs": running, "num_waiting_reqs": 0,
                              "num_tokens": 0} for r in range(self.worker.args.dp_size)])
        elif path == "/metrics" and self.worker.args.enable_metrics:
            self._write(200, "text/plain; version=0.0.4",
                        self.worker.engine.metrics().encode())
        else:
            self._send(404, {"error": f"no route {path}"})

    def do_POST(self) -> None:  # noqa: N802
        body = self._read_json()
        path = self._begin(body)
        try:
            self._post(path, body)
        finally:
            self._log()

    def _post(self, path: str, body: dict) -> None:
        if path == "/flush_cache":
            self._send(200, {})
            return
        if path not in ("/v1/chat/completions", "/generate"):
            self._send(404, {"error": f"no route {path}"})
            return
        if not self.worker.healthy():
            self._send(503, {"error": "model is still loading"})
            return
        rank = body.get("data_parallel_rank")
        # A dp-aware router pins each request to a rank; SGLang rejects a rank it lacks.
        if rank is not None and not (0 <= int(rank) < self.worker.args.dp_size):
            self._send(400, {"error": f"data_parallel_rank {rank} out of range "
                                      f"(dp_size {self.worker.args.dp_size})"})
            return
        messages = body.get("messages")
        if path == "/generate":
            messages = [{"role": "user", "content": str(body.get("text") or "")}]
        engine, args = self.worker.engine, self.worker.args
        on_rank = engine.rank_of(body)
        prompt_tokens = count_tokens(messages if messages is not None else [])
        began = time.monotonic()
        with self.worker.running_lock:
            self.worker.running += 1
        cached = engine.admit(on_rank, conversation_of(messages), prompt_tokens)
        try:
            if args.latency_ms:
                time.sleep(args.latency_ms / 1000)
            if args.prefill_tokens_per_s:
                time.sleep((prompt_tokens - cached) / args.prefill_tokens_per_s)
            # A request for a fixed length (SGLang's ignore_eos) is a load (the speed check,
            # a benchmark), never an agent's turn: no scripted episode answers it.
            self.choice = (Choice("load", "load") if body.get("ignore_eos")
                           else self.worker.choose(messages))
            tokens = reply_tokens(self.choice.content, body)
            first = time.monotonic() - began
            if body.get("stream") and path != "/generate":
                self._stream(body, tokens, prompt_tokens, engine)
            else:
                engine.produced(1)
                list(pace(tokens[1:], args.decode_tokens_per_s, engine))
                self._answer(path, body, tokens, prompt_tokens)
        finally:
            with self.worker.running_lock:
                self.worker.running -= 1
            engine.release(on_rank, prompt_tokens, first if "first" in locals() else 0.0,
                           time.monotonic() - began)

    def _answer(self, path: str, body: dict, tokens: list[str], prompt_tokens: int) -> None:
        content = " ".join(tokens) if body.get("ignore_eos") else self.choice.content
        if path == "/generate":
            self._send(200, {"text": content, "meta_info": {"finish_reason": {"type": "stop"},
                             "prompt_tokens": prompt_tokens,
                             "completion_tokens": len(tokens)}})
            return
        self._send(
            200,
            {
                "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model") or self.worker.args.served_model_name,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "length" if body.get("ignore_eos") else "stop",
                        "logprobs": None,
                    }
                ],
                "usage": usage_of(prompt_tokens, len(tokens)),
            },
        )

    def _stream(self, body: dict, tokens: list[str], prompt_tokens: int,
                engine: Engine) -> None:
        """Server-sent events, one chunk a token as it is generated (chunked encoding)."""
        cid, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())
        model = body.get("model") or self.worker.args.served_model_name

        def event(delta: dict, finish: str | None, usage: dict | None = None) -> bytes:
            value = {"id": cid, "object": "chat.completion.chunk", "created": created,
                     "model": model,
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            if usage is not None:
                value["usage"] = usage
            return f"data: {json.dumps(value)}\n\n".encode()

        def send(data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        self.status = 200
        self._log()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        send(event({"role": "assistant", "content": tokens[0]}, None))
        engine.produced(1)
        for token in pace(tokens[1:], self.worker.args.decode_tokens_per_s, engine):
            send(event({"content": " " + token}, None))
        finish = "length" if body.get("ignore_eos") else "stop"
        send(event({}, finish, usage_of(prompt_tokens, len(tokens))))
        send(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def make_handler(worker: Worker) -> type[BaseHTTPRequestHandler]:
    return type("WorkerHandler", (Handler,), {"worker": worker})


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # The benchmark opens many connections at once; the default backlog (5) drops some.
    request_queue_size = 256


def stop_on_sigterm(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def serve(args: argparse.Namespace, worker: Worker, replay: StartupReplay | None) -> None:
    server = Server((args.host, args.port), make_handler(worker))
    warn(f"stand-in worker on http://{args.host}:{args.port} serving {args.served_model_name} "
         f"(tp {args.tp_size}, dp {args.dp_size})")
    if replay is not None:
        # The rest of the startup (the warm-up) while the port answers 503, as SGLang's.
        threading.Thread(target=replay.after_listening, args=(worker.loaded,),
                         daemon=True).start()
    try:
        server.serve_forever()
    finally:
        server.server_close()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    replay = startup_replay(args)
    worker = Worker(args)
    # As a container's PID 1 a signal without a handler is ignored: `docker stop` would wait
    # out its whole grace period.
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    try:
        if replay is not None:
            replay.before_listening()
        serve(args, worker, replay)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
