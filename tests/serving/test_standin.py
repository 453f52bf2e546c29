"""The stand-in worker's own contract (tests/standins/sglang_worker.py): what other tests and the
Harbor-job developer rely on when they script a Terminus-2 agent through it."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.serving.conftest import MODEL, Processes, chat

pytestmark = pytest.mark.real

TERMINUS_REPLIES = [
    {"analysis": "Need the file.", "plan": "Write it.",
     "commands": [{"keystrokes": "echo hello > /app/hello.txt\n", "duration": 1}],
     "task_complete": True},
    {"analysis": "Done.", "plan": "Confirm.", "commands": [], "task_complete": True},
]


def test_replies_in_turn_then_the_last_repeats(processes: Processes, tmp_path: Path) -> None:
    replies = tmp_path / "replies.jsonl"
    replies.write_text("".join(json.dumps(r) + "\n" for r in TERMINUS_REPLIES))
    worker = processes.standin("--replies", str(replies))
    got = []
    for _ in range(3):
        response = chat(worker.url)
        assert response.status_code == 200
        reply = response.json()
        assert reply["object"] == "chat.completion"
        assert reply["choices"][0]["finish_reason"] == "stop"
        assert reply["usage"]["prompt_tokens"] > 0 and reply["usage"]["completion_tokens"] > 0
        got.append(json.loads(reply["choices"][0]["message"]["content"]))
    assert got == [TERMINUS_REPLIES[0], TERMINUS_REPLIES[1], TERMINUS_REPLIES[1]]


def test_replies_through_the_real_router(processes: Processes, tmp_path: Path) -> None:
    replies = tmp_path / "replies.jsonl"
    replies.write_text(json.dumps(TERMINUS_REPLIES[0]) + "\n")
    worker = processes.standin("--replies", str(replies))
    router = processes.router([worker.url])
    response = chat(router)
    assert response.status_code == 200
    assert json.loads(response.json()["choices"][0]["message"]["content"]) == TERMINUS_REPLIES[0]


def test_surface(processes: Processes) -> None:
    worker = processes.standin("--tp-size", "8", "--dp-size", "1")
    assert httpx.get(f"{worker.url}/health_generate", timeout=5).status_code == 200
    info = httpx.get(f"{worker.url}/get_server_info", timeout=5).json()
    assert (info["tp_size"], info["dp_size"]) == (8, 1)
    assert httpx.get(f"{worker.url}/server_info", timeout=5).json() == info
    models = httpx.get(f"{worker.url}/v1/models", timeout=5).json()
    assert [m["id"] for m in models["data"]] == [MODEL]
    stream = httpx.post(f"{worker.url}/v1/chat/completions", timeout=5,
                        json={"model": MODEL, "stream": True,
                              "messages": [{"role": "user", "content": "hi"}]})
    events = [line[6:] for line in stream.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    assert json.loads(events[0])["choices"][0]["delta"]["content"] == "READY"
    bad_rank = httpx.post(f"{worker.url}/v1/chat/completions", timeout=5,
                          json={"model": MODEL, "data_parallel_rank": 1,
                                "messages": [{"role": "user", "content": "hi"}]})
    assert bad_rank.status_code == 400


def test_loading_then_healthy(processes: Processes) -> None:
    worker = processes.standin("--never-healthy")
    assert httpx.get(f"{worker.url}/health", timeout=5).status_code == 503
    assert chat(worker.url).status_code == 503
    assert httpx.get(f"{worker.url}/get_server_info", timeout=5).json()["status"] == "loading"


def test_bad_replies_file_names_the_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.serving.conftest import STANDIN

    replies = tmp_path / "replies.jsonl"
    replies.write_text('{"ok": 1}\nnot json\n')
    proc = subprocess.run([sys.executable, str(STANDIN), "--port", "1", "--replies", str(replies)],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0
    assert f"{replies}:2: not a JSON line" in proc.stderr
