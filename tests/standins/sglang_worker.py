"""A stand-in SGLang worker for tests: the HTTP surface the router, the probes and Harbor use.

SGLang itself needs GPUs; this speaks the same endpoints on a loopback port so that the real
`sglang-router` can sit in front of it:

- GET  /health, /health_generate            200 once "loaded" (503 while loading, or forever
                                              with --never-healthy), as SGLang does
- GET  /server_info, /get_server_info       the server args (tp_size, dp_size, ...); the router
                                              asks /server_info first, then /get_server_info
- GET  /model_info, /get_model_info          model path and type
- GET  /v1/models                            the served model name
- GET  /get_load, /metrics                   what the router polls for load
- POST /v1/chat/completions                  an OpenAI chat.completion with usage; content
                                              "READY" or, with --replies FILE, the lines of FILE
                                              in turn (the last one repeats); stream=true is
                                              answered as server-sent events
- POST /generate                             SGLang's native API, same replies
- POST /flush_cache                          200

Tests only: never shipped. Standard library only, so it runs from any Python 3.11+.

    python tests/standins/sglang_worker.py --host 127.0.0.1 --port 30001 \
        [--tp-size 4 --dp-size 2 ...] [--never-healthy] [--healthy-after 2.5] \
        [--replies FILE] [--latency-ms 50] [--request-log FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
    parser.add_argument(
        "--healthy-after", type=float, default=0.0, help="seconds of 503 on /health first"
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
    return parser.parse_args(argv)


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
                # An object is a Terminus-2 reply: the agent reads it from the content as JSON.
                items.append(value if isinstance(value, str) else json.dumps(value))
            if not items:
                raise SystemExit(f"{path}: no replies in file")
            self._items = items

    def next(self) -> str:
        with self._lock:
            item = self._items[min(self._index, len(self._items) - 1)]
            self._index += 1
            return item


class Worker:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.started = time.monotonic()
        self.replies = Replies(args.replies)
        self.log_lock = threading.Lock()
        self.running = 0
        self.running_lock = threading.Lock()

    def healthy(self) -> bool:
        if self.args.never_healthy:
            return False
        return time.monotonic() - self.started >= self.args.healthy_after

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
            "load_balance_method": "round_robin",
            "disaggregation_mode": "null",
            "is_embedding": False,
            "status": "ready" if self.healthy() else "loading",
            "version": "standin",
            "internal_states": [
                {"max_total_num_tokens": a.max_total_tokens or 1_000_000, "last_gen_throughput": 0}
            ],
        }

    def log(self, record: dict) -> None:
        if self.args.request_log is None:
            return
        with self.log_lock, self.args.request_log.open("a") as handle:
            handle.write(json.dumps(record) + "\n")


def count_tokens(messages: object) -> int:
    # A rough whitespace count: enough for usage fields that must be present and positive.
    text = json.dumps(messages)
    return max(1, len(text.split()))


def make_handler(worker: Worker) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # Keep-alive: the router pools connections, and a close per request would dominate
        # the latency the benchmark measures.
        protocol_version = "HTTP/1.1"
        # Headers and body go out as two writes: with Nagle on, the body waits for the
        # client's delayed ACK (40 ms on Linux) on every keep-alive response.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

        def _send(self, code: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _read_json(self) -> dict:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                value = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                return {}
            return value if isinstance(value, dict) else {}

        def do_GET(self) -> None:  # noqa: N802
            path = self.path.split("?", 1)[0]
            worker.log({"t": time.time(), "method": "GET", "path": path})
            if path in ("/health", "/health_generate"):
                if worker.healthy():
                    self._send(200, {})
                else:
                    self._send(503, {"error": "model is still loading"})
            elif path in ("/server_info", "/get_server_info"):
                self._send(200, worker.server_info())
            elif path in ("/model_info", "/get_model_info"):
                self._send(
                    200,
                    {
                        "model_path": worker.args.model_path,
                        "tokenizer_path": worker.args.model_path,
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
                                "id": worker.args.served_model_name,
                                "object": "model",
                                "created": int(worker.started),
                                "owned_by": "sglang",
                                "root": worker.args.served_model_name,
                                "max_model_len": worker.args.context_length,
                            }
                        ],
                    },
                )
            elif path == "/get_load":
                with worker.running_lock:
                    running = worker.running
                self._send(200, [{"dp_rank": r, "num_reqs": running, "num_waiting_reqs": 0,
                                  "num_tokens": 0} for r in range(worker.args.dp_size)])
            elif path == "/metrics":
                data = b"# stand-in worker: no metrics\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            else:
                self._send(404, {"error": f"no route {path}"})

        def do_POST(self) -> None:  # noqa: N802
            path = self.path.split("?", 1)[0]
            body = self._read_json()
            worker.log({"t": time.time(), "method": "POST", "path": path, "body": body})
            if path == "/flush_cache":
                self._send(200, {})
                return
            if path not in ("/v1/chat/completions", "/generate"):
                self._send(404, {"error": f"no route {path}"})
                return
            if not worker.healthy():
                self._send(503, {"error": "model is still loading"})
                return
            rank = body.get("data_parallel_rank")
            # A dp-aware router pins each request to a rank; SGLang rejects a rank it lacks.
            if rank is not None and not (0 <= int(rank) < worker.args.dp_size):
                self._send(400, {"error": f"data_parallel_rank {rank} out of range "
                                          f"(dp_size {worker.args.dp_size})"})
                return
            with worker.running_lock:
                worker.running += 1
            try:
                if worker.args.latency_ms:
                    time.sleep(worker.args.latency_ms / 1000)
                content = worker.replies.next()
            finally:
                with worker.running_lock:
                    worker.running -= 1
            if path == "/generate":
                self._send(200, {"text": content, "meta_info": {"finish_reason": {"type": "stop"},
                                 "prompt_tokens": count_tokens(body.get("text")),
                                 "completion_tokens": max(1, len(content.split()))}})
                return
            prompt_tokens = count_tokens(body.get("messages", []))
            completion_tokens = max(1, len(content.split()))
            created = int(time.time())
            completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
            model = body.get("model") or worker.args.served_model_name
            usage = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            }
            if body.get("stream"):
                self._stream(completion_id, created, model, content, usage)
                return
            self._send(
                200,
                {
                    "id": completion_id,
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": "stop",
                            "logprobs": None,
                        }
                    ],
                    "usage": usage,
                },
            )

        def _stream(self, cid: str, created: int, model: str, content: str, usage: dict) -> None:
            def chunk(delta: dict, finish: str | None, with_usage: bool = False) -> bytes:
                event = {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                }
                if with_usage:
                    event["usage"] = usage
                return f"data: {json.dumps(event)}\n\n".encode()

            parts = [
                chunk({"role": "assistant", "content": content}, None),
                chunk({}, "stop", with_usage=True),
                b"data: [DONE]\n\n",
            ]
            data = b"".join(parts)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # The benchmark opens many connections at once; the default backlog (5) drops some.
    request_queue_size = 256


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    worker = Worker(args)
    server = Server((args.host, args.port), make_handler(worker))
    print(f"stand-in worker on http://{args.host}:{args.port}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
