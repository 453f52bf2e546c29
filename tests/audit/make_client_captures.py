"""Regenerate `tests/audit/captures/clients/`: what the real model-client libraries record and
raise when an endpoint answers, fails, or never answers.

Every capture is made by RUNNING the client library (Anthropic's and OpenAI's Python SDKs)
against a server on 127.0.0.1, never written by hand:
- `<sdk>-<case>.traceback.txt`: `traceback.format_exc()` of the call, as a harness that lets the
  exception escape leaves it in Harbor's exception.txt (this file, `Agent.run`, is the agent's
  code; the SDK and its HTTP stack are installed packages);
- `<sdk>-<case>/request.json`, `response.json`: a call's dump as a harness keeps it (the request
  the SDK sent, read on the server side; the response as the SDK parsed it, `model_dump()`).

Server behaviours: `ok` (a valid reply with one tool call running a command), `no_usage` (a
chat completion without `usage`), `not_json` (an HTML error page with status 200), `hang` (read
the request, never answer: the client's read timeout fires before any header), `stall` (send
the headers and part of a stream, then nothing: the timeout fires while reading the answer),
`status_500` (a JSON error body with 500).

Run from the repo root with a throwaway venv holding the SDKs (nothing here is a dependency of
the project):
    python3 -m venv /tmp/clientvenv && /tmp/clientvenv/bin/pip install anthropic openai
    /tmp/clientvenv/bin/python tests/audit/make_client_captures.py
Writes `index.json` with the SDK versions.
"""

from __future__ import annotations

import json
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

OUT = Path(__file__).with_name("captures") / "clients"
HANG = 3.0  # seconds a hanging server holds the connection (longer than the client's timeout)

ANTHROPIC_OK = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-test",
    "content": [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_01", "name": "bash", "input": {"command": "ls /app"}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 1200, "output_tokens": 40},
}
CHAT_OK = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1775000000,
    "model": "served-model",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"command": "ls /app"}'},
                    }
                ],
            },
        }
    ],
    "usage": {"prompt_tokens": 900, "completion_tokens": 30, "total_tokens": 930},
}
RESPONSES_OK = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1775000000,
    "status": "completed",
    "model": "served-model",
    "output": [
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_9",
            "name": "bash",
            "arguments": '{"command": "ls /app"}',
            "status": "completed",
        }
    ],
    "usage": {"input_tokens": 800, "output_tokens": 20, "total_tokens": 820},
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
}


class Handler(BaseHTTPRequestHandler):
    behaviour = "ok"
    requests: list[dict] = []

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Handler.requests.append(json.loads(body or b"{}"))
        kind = Handler.behaviour
        if kind == "hang":
            time.sleep(HANG)
            return
        if kind == "stall":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(b'event: message_start\ndata: {"type": "message_start", "message": ')
            self.wfile.flush()
            time.sleep(HANG)
            return
        if kind == "not_json":
            # A JSON content type over an HTML page: a gateway answering for the model.
            self._send(200, b"<html><body><h1>502 Bad Gateway</h1></body></html>")
            return
        if kind == "status_500":
            error = {"type": "error", "error": {"type": "api_error", "message": "Internal error"}}
            self._send(500, json.dumps(error).encode())
            return
        if self.path.endswith("/messages"):
            reply = ANTHROPIC_OK
        elif self.path.endswith("/responses"):
            reply = RESPONSES_OK
        else:
            reply = dict(CHAT_OK)
            if kind == "no_usage":
                reply.pop("usage")
        self._send(200, json.dumps(reply).encode())

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Agent:
    """The harness: one model call through the SDK, as an agent's run loop makes it."""

    def __init__(self, base: str) -> None:
        import anthropic
        import openai

        self.anthropic = anthropic.Anthropic(
            base_url=base, api_key="test", timeout=1.0, max_retries=0
        )
        self.openai = openai.OpenAI(base_url=f"{base}/v1", api_key="test", timeout=1.0,
                                    max_retries=0)

    def run(self, sdk: str, stream: bool = False):
        if sdk == "anthropic":
            if stream:
                with self.anthropic.messages.stream(
                    model="claude-test", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
                ) as events:
                    return list(events)
            return self.anthropic.messages.create(
                model="claude-test",
                max_tokens=64,
                messages=[{"role": "user", "content": "Fix the repo."}],
                tools=[{"name": "bash", "input_schema": {"type": "object"}}],
            )
        if sdk == "responses":
            return self.openai.responses.create(model="served-model", input="Fix the repo.")
        return self.openai.chat.completions.create(
            model="served-model", messages=[{"role": "user", "content": "Fix the repo."}]
        )


def main() -> None:
    import anthropic
    import openai

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    agent = Agent(base)
    OUT.mkdir(parents=True, exist_ok=True)
    cases = [
        ("anthropic", "ok", False),
        ("chat", "ok", False),
        ("responses", "ok", False),
        ("chat", "no_usage", False),
        ("anthropic", "not_json", False),
        ("anthropic", "hang", False),
        ("anthropic", "stall", True),
        ("anthropic", "status_500", False),
        ("chat", "hang", False),
    ]
    index = {"anthropic": anthropic.__version__, "openai": openai.__version__, "cases": []}
    for sdk, behaviour, stream in cases:
        Handler.behaviour, Handler.requests = behaviour, []
        name = f"{sdk}-{behaviour}"
        try:
            reply = agent.run(sdk, stream)
        except Exception:  # noqa: BLE001 (every failure is what is captured)
            (OUT / f"{name}.traceback.txt").write_text(traceback.format_exc())
            index["cases"].append({"name": name, "raised": True})
            continue
        folder = OUT / name
        folder.mkdir(exist_ok=True)
        (folder / "request.json").write_text(json.dumps(Handler.requests[-1], indent=1))
        (folder / "response.json").write_text(json.dumps(reply.model_dump(), indent=1))
        index["cases"].append({"name": name, "raised": False})
    (OUT / "index.json").write_text(json.dumps(index, indent=1) + "\n")
    server.shutdown()


if __name__ == "__main__":
    main()
