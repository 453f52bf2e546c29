"""The stand-in worker's own contract (demo/gpu_standin/sglang_worker.py): what other tests and the
Harbor-job developer rely on when they script a Terminus-2 agent through it.

Tests that start processes or the real router use the `processes` fixture (marked real); the
episode selection, the request log and the demo checkpoint need no peer (the fast loop)."""

from __future__ import annotations

import concurrent.futures
import json
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from demo.gpu_standin import sglang_worker as standin
from hostside.readiness import READY_PROMPT
from tests.conftest import ROOT
from tests.serving.conftest import MODEL, STANDIN, Processes, chat, free_port, run_step

pytestmark = pytest.mark.no_docker

DEMO_MODEL = ROOT / "demo" / "model"
DEMO_TASKS = ROOT / "demo" / "tasks"

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
    replies = tmp_path / "replies.jsonl"
    replies.write_text('{"ok": 1}\nnot json\n')
    proc = subprocess.run([sys.executable, str(STANDIN), "--port", "1", "--replies", str(replies)],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0
    assert f"{replies}:2: not a JSON line" in proc.stderr


# --- scripted episodes and the request log: no peer ---------------------------------------

EPISODES = {"episodes": [
    {"when": "MARK-B", "replies": [{"step": "b0"}, "b1 as a string"]},
    {"when": "", "replies": [{"step": "d0"}, {"step": "d1"}]},
]}


def conversation(first: str, turns: int) -> list[dict]:
    """A first user message, then `turns` assistant answers each followed by a user message."""
    messages = [{"role": "system", "content": "You are an agent."},
                {"role": "user", "content": first}]
    for n in range(turns):
        messages += [{"role": "assistant", "content": f"answer {n}"},
                     {"role": "user", "content": f"output {n}"}]
    return messages


def worker_for(model_dir: Path, *flags: str) -> standin.Worker:
    """A worker whose choices these tests call in this process: it never listens (port 0)."""
    return standin.Worker(standin.parse_args(
        ["--port", "0", "--model-path", str(model_dir), *flags]))


@pytest.fixture
def scripted(tmp_path: Path) -> Path:
    (tmp_path / "standin-episodes.json").write_text(json.dumps(EPISODES))
    return tmp_path


def test_the_first_matching_episode_answers_by_turn_and_the_last_reply_repeats(
    scripted: Path,
) -> None:
    worker = worker_for(scripted)
    got = [worker.choose(conversation("task MARK-B here", turn)) for turn in range(4)]
    assert [c.content for c in got] == ['{"step": "b0"}', "b1 as a string", "b1 as a string",
                                        "b1 as a string"]
    assert [(c.source, c.episode, c.turn) for c in got] == [("episode", 0, t) for t in range(4)]
    # The empty `when` is the default: any other first user message.
    default = [worker.choose(conversation("another task", turn)) for turn in range(3)]
    assert [json.loads(c.content) for c in default] == [{"step": "d0"}, {"step": "d1"},
                                                        {"step": "d1"}]
    assert {c.episode for c in default} == {1}
    # Only the first user message selects: a marker in a later message does not.
    later = conversation("another task", 1) + [{"role": "user", "content": "MARK-B"}]
    assert worker.choose(later).episode == 1


def test_stateless_the_same_request_gets_the_same_reply(scripted: Path) -> None:
    # Two workers (or DP ranks) behind a router: whichever takes a turn answers it alike.
    a, b = worker_for(scripted), worker_for(scripted)
    messages = conversation("MARK-B", 1)
    assert a.choose(messages) == a.choose(messages) == b.choose(messages)


def test_the_readiness_probe_gets_ready_whatever_the_episodes(scripted: Path) -> None:
    worker = worker_for(scripted)
    choice = worker.choose([{"role": "user", "content": standin.READY_PROMPT}])
    assert (choice.content, choice.source) == ("READY", "ready")
    assert standin.READY_PROMPT == READY_PROMPT


def test_without_a_match_or_an_episodes_file_the_answer_is_ready(tmp_path: Path) -> None:
    (tmp_path / "standin-episodes.json").write_text(json.dumps(
        {"episodes": [{"when": "only this", "replies": ["x"]}]}))
    assert worker_for(tmp_path).choose(conversation("something else", 0)).content == "READY"
    assert worker_for(tmp_path / "no-such-dir").episodes is None
    assert worker_for(tmp_path / "no-such-dir").choose(conversation("x", 2)).source == "default"


def test_replies_flag_takes_precedence_over_the_checkpoint_episodes(
    scripted: Path, tmp_path: Path
) -> None:
    replies = tmp_path / "replies.jsonl"
    replies.write_text('"one"\n"two"\n')
    worker = worker_for(scripted, "--replies", str(replies))
    assert worker.episodes is None
    assert [worker.choose(conversation("MARK-B", 0)).content for _ in range(3)] == [
        "one", "two", "two"]


def test_content_parts_are_read_as_text(scripted: Path) -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": "a MARK-"},
                                             {"type": "text", "text": "B task"}]}]
    assert worker_for(scripted).choose(messages).episode == 0


@pytest.mark.parametrize("text, reason", [
    ("not json", "unreadable or not JSON"),
    ('{"episodes": []}', 'want {"episodes"'),
    ('{"episodes": [{"when": "x", "replies": []}]}', "episodes[0] needs a string `when`"),
])
def test_a_bad_episodes_file_names_the_problem(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "standin-episodes.json"
    path.write_text(text)
    with pytest.raises(SystemExit) as exc:
        worker_for(tmp_path)
    assert str(path) in str(exc.value) and reason in str(exc.value)


def test_unknown_flags_are_ignored_with_a_warning(capsys: pytest.CaptureFixture[str]) -> None:
    args = standin.parse_args(["--port", "1", "--enable-metrics", "--chunked-prefill-size",
                               "8192", "--max-running", "3", "--tp-size", "2"])
    assert args.tp_size == 2 and args.max_running_requests == 5  # no abbreviation taken
    assert args.enable_metrics is True
    assert args.ignored_flags == ["--chunked-prefill-size", "8192", "--max-running", "3"]
    err = capsys.readouterr().err
    assert "ignoring flags the stand-in does not implement: --chunked-prefill-size" in err


def metric_values(text: str) -> dict[str, float]:
    """`name{labels}` -> value of every sample line of a Prometheus exposition."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def total(values: dict[str, float], name: str) -> float:
    return sum(v for k, v in values.items() if k.split("{")[0] == name)


def test_metrics_are_sglangs_names_under_load(processes: Processes) -> None:
    """With --enable-metrics the stand-in serves what SGLang serves with it: the scheduler's
    gauges per DP rank (running, queued, token usage, throughput) and the tokenizer's counters
    and time-to-first-token histogram, moving as requests run and wait. Each state is waited
    for, not assumed after a pause: the first request (600 tokens at 40/s, 15 s: time for a
    loaded machine to send two more) runs while two more are sent and queue behind it."""
    worker = processes.standin("--enable-metrics", "--dp-size", "1",
                               "--max-running-requests", "1", "--decode-tokens-per-s", "40",
                               "--max-total-tokens", "10000")
    quiet = metrics(worker.url)
    assert total(quiet, "sglang:num_running_reqs") == 0
    body = {"model": MODEL, "messages": [{"role": "user", "content": "x " * 400}],
            "max_tokens": 40, "ignore_eos": True}
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        post = f"{worker.url}/v1/chat/completions"
        futures = [pool.submit(httpx.post, post, json={**body, "max_tokens": 600}, timeout=90)]
        metrics_once(worker.url, "sglang:num_running_reqs", 1)
        futures += [pool.submit(httpx.post, post, json=body, timeout=90) for _ in range(2)]
        busy = metrics_once(worker.url, "sglang:num_queue_reqs", 2)
        replies = [f.result() for f in futures]
    # One slot: one request runs, two wait in the queue; the running one holds its tokens.
    assert total(busy, "sglang:num_running_reqs") == 1
    assert 0 < total(busy, "sglang:token_usage") < 1
    assert total(busy, "sglang:gen_throughput") > 0
    assert [r.json()["usage"]["completion_tokens"] for r in replies] == [600, 40, 40]
    done = metrics(worker.url)
    assert total(done, "sglang:num_requests_total") == 3
    assert total(done, "sglang:generation_tokens_total") == 680
    assert total(done, "sglang:time_to_first_token_seconds_count") == 3
    # The queued ones waited for the first to finish (600 tokens at 40/s): a longer TTFT.
    assert total(done, "sglang:time_to_first_token_seconds_sum") > 1.0
    # The same conversation again: its prompt is in the rank's cache now.
    assert total(done, "sglang:cached_tokens_total") > 0
    assert httpx.get(f"{processes.standin().url}/metrics", timeout=5).status_code == 404


def metrics(url: str) -> dict[str, float]:
    return metric_values(httpx.get(f"{url}/metrics", timeout=5).text)


def metrics_once(url: str, name: str, value: float, timeout: float = 60) -> dict[str, float]:
    """The worker's metrics once their total of `name` is `value`."""
    deadline = time.monotonic() + timeout
    while total(seen := metrics(url), name) != value:
        assert time.monotonic() < deadline, f"{name} never {value} within {timeout} s: {seen}"
        time.sleep(0.05)
    return seen


def test_a_stream_comes_token_by_token_at_the_decode_speed(processes: Processes) -> None:
    worker = processes.standin("--decode-tokens-per-s", "50")
    arrivals = []
    began = time.monotonic()
    with httpx.stream("POST", f"{worker.url}/v1/chat/completions", timeout=30,
                      json={"model": MODEL, "stream": True, "max_tokens": 25, "ignore_eos": True,
                            "messages": [{"role": "user", "content": "go"}]}) as response:
        for line in response.iter_lines():
            if line.startswith("data: {"):
                arrivals.append((time.monotonic() - began, json.loads(line[6:])))
    contents = [a[1]["choices"][0]["delta"].get("content") for a in arrivals]
    assert len([c for c in contents if c]) == 25
    assert arrivals[-1][1]["usage"]["completion_tokens"] == 25
    # 24 tokens after the first at 50/s: about half a second between first and last (a first
    # chunk read late on a loaded machine shortens it; unpaced, it would be milliseconds).
    assert 0.25 < arrivals[-2][0] - arrivals[0][0] < 5.0


@pytest.fixture
def in_process(scripted: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The stand-in's HTTP server in this process, on a loopback port (no other peer)."""
    port = free_port()
    log = tmp_path / "requests.jsonl"
    worker = standin.Worker(standin.parse_args(
        ["--port", str(port), "--model-path", str(scripted), "--served-model-name", MODEL,
         "--request-log", str(log)]))
    server = standin.Server(("127.0.0.1", port), standin.make_handler(worker))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}", log
    finally:
        server.shutdown()
        server.server_close()


def test_every_request_is_one_json_line_on_stdout_and_in_the_file(
    in_process: tuple[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    url, log = in_process
    capsys.readouterr()
    # What a dp-aware router 0.3.2 forwards: its own re-encoding of the body, rank pinned.
    body = {"model": MODEL, "messages": conversation("MARK-B", 1), "temperature": 0.699999988,
            "top_p": 0.8, "top_k": 20, "max_completion_tokens": 64, "presence_penalty": 1.0,
            "stream": False, "skip_special_tokens": True, "data_parallel_rank": 1}
    reply = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=5).json()
    assert reply["choices"][0]["message"]["content"] == "b1 as a string"
    assert httpx.get(f"{url}/health", timeout=5).status_code == 200
    native = httpx.post(f"{url}/generate", timeout=5, json={
        "text": "MARK-B", "sampling_params": {"temperature": 0.5, "max_new_tokens": 8}})
    assert native.json()["text"] == '{"step": "b0"}'

    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    chat_line, health_line, native_line = lines
    port = int(url.rsplit(":", 1)[1])
    assert chat_line == {
        "t": chat_line["t"], "time": chat_line["time"], "worker": f"127.0.0.1:{port}",
        "method": "POST", "path": "/v1/chat/completions", "status": 200, "model": MODEL,
        "sampling": {"temperature": 0.699999988, "top_p": 0.8, "top_k": 20,
                     "max_completion_tokens": 64, "presence_penalty": 1.0},
        "data_parallel_rank": 1, "stream": False, "messages": 4,
        "reply": {"source": "episode", "episode": 0, "turn": 1},
    }
    assert chat_line["time"].endswith("+00:00")
    assert health_line["path"] == "/health" and health_line["status"] == 200
    assert "sampling" not in health_line
    assert native_line["sampling"] == {"temperature": 0.5, "max_new_tokens": 8}
    assert native_line["reply"]["turn"] == 0
    # The file: the same records, each POST with its whole body (what other tests read).
    in_file = [json.loads(x) for x in log.read_text().splitlines()]
    assert [{k: v for k, v in r.items() if k != "body"} for r in in_file] == lines
    assert in_file[0]["body"] == body and "body" not in in_file[1]


def test_a_rejected_request_is_logged_with_its_status(
    in_process: tuple[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    url, _ = in_process
    capsys.readouterr()
    bad = httpx.post(f"{url}/v1/chat/completions", timeout=5, json={
        "model": MODEL, "messages": [], "data_parallel_rank": 7})
    assert bad.status_code == 400
    (line,) = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert (line["status"], line["data_parallel_rank"], line.get("reply")) == (400, 7, None)


# --- the demo checkpoint and its episodes: no peer ----------------------------------------

def terminus_first_message(task: str) -> str:
    # Terminus-2 (Harbor 0.21, terminus-json-plain.txt) puts the instruction in its first and
    # only initial user message, after "Task Description:".
    instruction = (DEMO_TASKS / task / "instruction.md").read_text()
    return f"You are an AI assistant ...\n\nTask Description:\n{instruction}\n\nCurrent terminal"


def test_demo_checkpoint_passes_the_model_check() -> None:
    result = run_step("model_check", {"model_path": str(DEMO_MODEL), "user": "1000:1000"})
    assert result.returncode == 0, result.stderr
    assert result.outputs["shards"] == 2
    assert result.outputs["bytes"] >= result.outputs["index_total_size"] > 0


def test_demo_episodes_script_the_three_demo_tasks() -> None:
    worker = worker_for(DEMO_MODEL)
    assert worker.episodes is not None
    writes = {}
    for task in ("hello-file", "hello-file-slow", "hello-file-wrong"):
        timeout = tomllib.loads((DEMO_TASKS / task / "task.toml").read_text())["agent"]
        turns = [json.loads(worker.choose(conversation(terminus_first_message(task), n)).content)
                 for n in range(3)]
        first, done, confirm = turns
        (command,) = first["commands"]
        assert first["task_complete"] is False
        assert command["keystrokes"].startswith("sleep 12; ") and command["keystrokes"][-1] == "\n"
        # Terminus-2 waits the whole duration: the 12 s outlast hello-file-slow's agent timeout
        # and its verifier (which runs after the timeout, while the sleep still runs) with room,
        # and fit in the others'.
        assert command["duration"] > 12
        if task == "hello-file-slow":
            assert timeout["timeout_sec"] * 2 <= 12
        else:
            assert timeout["timeout_sec"] > command["duration"]
        writes[task] = command["keystrokes"].split("printf ", 1)[1]
        # Then complete, and the repeat confirms Terminus-2's "are you sure?".
        assert done == confirm and done["task_complete"] is True and done["commands"] == []
        for turn in turns:
            assert {"analysis", "plan", "commands"} <= set(turn)
    assert writes["hello-file"] == writes["hello-file-slow"] == "'hello\\n' > /app/hello.txt\n"
    assert writes["hello-file-wrong"] == "'goodbye\\n' > /app/hello.txt\n"


def test_a_fixed_length_request_is_a_load_never_an_agents_turn(processes: Processes) -> None:
    """The speed check's and the benchmarks' requests (SGLang's ignore_eos) get filler tokens
    and are logged as a load, even where a scripted episode would match (the demo model has
    one that matches any conversation): the episodes' turns stay the agent's alone."""
    worker = processes.standin("--model-path", str(ROOT / "demo" / "model"))
    reply = httpx.post(f"{worker.url}/v1/chat/completions", timeout=10, json={
        "model": MODEL, "max_tokens": 12, "ignore_eos": True,
        "messages": [{"role": "user", "content": "any task at all"}]}).json()
    assert reply["usage"]["completion_tokens"] == 12
    assert reply["choices"][0]["finish_reason"] == "length"
    turn = httpx.post(f"{worker.url}/v1/chat/completions", timeout=10, json={
        "model": MODEL, "messages": [{"role": "user", "content": "any task at all"}]})
    assert turn.status_code == 200
    sources = [r["reply"]["source"] for r in worker.requests("/v1/chat/completions")]
    assert sources == ["load", "episode"]


# --- the startup replay: a real SGLang startup at a chosen pace -----------------------------

def test_the_replay_opens_the_port_at_uvicorns_line_and_is_healthy_after_the_last(
        processes: Processes, tmp_path: Path) -> None:
    """A startup of three lines at 1x: nothing listens before uvicorn's line, /health is 503
    through the warm-up, 200 after the last line, as SGLang's."""
    startup = tmp_path / "startup.json"
    startup.write_text(json.dumps({
        "startup": [{"at_s": 0.0, "log": "Load weight begin. avail mem=78.47 GB"},
                    {"at_s": 1.0, "log": "INFO:     Uvicorn running on http://{address} (Press "
                                         "CTRL+C to quit)"},
                    # Ready 5 s after the port opens: time to read "loading" on a loaded machine.
                    {"at_s": 6.0, "raw": "The server is fired up and ready to roll!"}],
        "listening_at": "Uvicorn running on"}))
    start = time.monotonic()
    worker = processes.standin("--startup-speed", "1", "--startup-log", str(startup))
    assert time.monotonic() - start >= 0.9  # the port opened at uvicorn's line, not before
    assert httpx.get(f"{worker.url}/health", timeout=5).status_code == 503
    assert httpx.get(f"{worker.url}/get_server_info", timeout=5).json()["status"] == "loading"
    while httpx.get(f"{worker.url}/health", timeout=5).status_code != 200:
        assert time.monotonic() - start < 60
        time.sleep(0.1)
    assert time.monotonic() - start >= 5.9
    lines = worker.stderr().splitlines()
    replay = [line for line in lines if not line.startswith("[standin]")]
    assert replay[0].endswith("] Load weight begin. avail mem=78.47 GB")
    assert replay[1].endswith(f"] INFO:     Uvicorn running on {worker.url} (Press CTRL+C to "
                              "quit)")
    assert replay[2] == "The server is fired up and ready to roll!"  # a raw line: no stamp
    assert all(line.startswith("[20") for line in replay[:2])


@pytest.mark.parametrize(("failure", "last_lines"), [
    ("oom-in-capture", ["Exception: Capture cuda graph failed: CUDA out of memory. Tried to "
                        "allocate 448.00 MiB. GPU 7 has a total capacity of 95.00", ""]),
    ("nccl-at-init", ["RuntimeError: NCCL error: unhandled system error (run with "
                      "NCCL_DEBUG=INFO for details)", ""]),
])
def test_a_failure_replay_prints_the_traceback_and_exits_never_listening(
        failure: str, last_lines: list[str]) -> None:
    port = free_port()
    start = time.monotonic()
    proc = subprocess.run([sys.executable, str(STANDIN), "--port", str(port),
                           "--startup-speed", "400", "--startup-failure", failure],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1
    assert time.monotonic() - start < 60  # 222 s of startup at 400x: 0.6 s, unscaled 222 s
    lines = proc.stderr.splitlines()
    assert lines[-3:-1] == last_lines
    assert lines[-1].endswith("] Received sigquit from a child process. It usually means the "
                              "child failed.")
    assert not any("Uvicorn running" in line or "stand-in worker on" in line for line in lines)


def test_the_published_startup_and_its_failures_load() -> None:
    whole = standin.load_startup(standin.STARTUP_LOG, None)
    assert "Uvicorn running on" in whole.lines[whole.listening].text
    assert whole.lines[-1].text == "The server is fired up and ready to roll!"
    assert [line.at_s for line in whole.lines] == sorted(line.at_s for line in whole.lines)
    assert whole.lines[-1].at_s == pytest.approx(293.04)
    oom = standin.load_startup(standin.STARTUP_LOG, "oom-in-capture")
    assert oom.listening == len(oom.lines)  # never listening
    assert oom.lines[-1].at_s == pytest.approx(221.75 + 1.0)


@pytest.mark.parametrize(("flags", "reason"), [
    (["--startup-failure", "oom-in-capture"],
     "--startup-failure needs --startup-speed (the replay's pace)"),
    (["--startup-speed", "0"], "--startup-speed 0: want a pace above 0"),
    (["--startup-speed", "10", "--startup-failure", "disk-full"],
     "--startup-failure disk-full: {log} has nccl-at-init, oom-in-capture"),
])
def test_bad_replay_flags_are_named(flags: list[str], reason: str) -> None:
    with pytest.raises(SystemExit) as exc:
        standin.startup_replay(standin.parse_args(["--port", "1", *flags]))
    assert str(exc.value) == reason.format(log=standin.STARTUP_LOG)


@pytest.mark.parametrize(("doc", "reason"), [
    ({"startup": []}, "startup must be a non-empty list of lines"),
    ({"startup": [{"at_s": "soon", "log": "x"}]}, 'startup[0] needs "at_s" (seconds)'),
    ({"startup": [{"at_s": 0, "log": "x"}], "listening_at": "Uvicorn"},
     "listening_at 'Uvicorn' is in no startup line"),
])
def test_a_bad_startup_log_names_the_key(tmp_path: Path, doc: dict, reason: str) -> None:
    path = tmp_path / "startup.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(SystemExit) as exc:
        standin.load_startup(path, None)
    assert str(exc.value).startswith(f"{path}: {reason}")
