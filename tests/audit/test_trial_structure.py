"""Reading a trial's structure (issue #28): the exception chain whole, the layer its root cause
arose in, the model-API dumps a harness keeps, and the smaller cases, each on a trial shaped
like the real one it comes from.

The chains and dumps of `captures/clients/` were made by the real Anthropic and OpenAI SDKs
against loopback servers (tests/audit/make_client_captures.py); the trials are shaped as the
dev set's sources leave them (captaindpt-kill-terminalbench: a custom agent whose episodes keep
raw Messages-API requests and responses; singhh5050-tbench-eval: Terminus-2 on llama.cpp killed
by a runner's timeout; new-wording: other tools' words).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from audit.judge.commands import kind_of
from audit.pipeline import build_report
from audit.read import chain as C
from audit.read.evidence import TrialEvidence
from audit.read.layout import JobLayout
from audit.read.logs import api_dumps
from audit.read.reached import model_reached
from tests.audit.agent_formats import SITE, bare, edit_result, make_trial
from tests.audit.audit_jobgen import PYTEST_FAIL, TrialSpec, write_job
from tests.audit.proof_check import quoted_in_file

CLIENTS = Path(__file__).with_name("captures") / "clients"
CAPTURER = C.Agent("make_client_captures:Agent")
KTB = "ktb.harbor_agent:OpenRouterHarborAgent"


def _chain(name: str) -> tuple[C.Raised, ...]:
    return C.parse((CLIENTS / f"{name}.traceback.txt").read_text())


def _row(job: Path):
    (row,) = build_report(JobLayout.local(job)).trials
    return row


def _proofs_are_in_their_files(job: Path, trial: Path, row) -> None:
    for p in row.proof:
        assert quoted_in_file(job, trial.name, p.where, p.quote), p


# --- the chain, read whole, from real client libraries -----------------------------------------
@pytest.mark.parametrize(
    ("name", "root"),
    [
        ("anthropic-hang", "ReadTimeout"),
        ("anthropic-stall", "TimeoutError"),  # the socket's own, under httpcore
        ("anthropic-not_json", "JSONDecodeError"),
        ("chat-hang", "ReadTimeout"),
    ],
)
def test_a_failed_model_call_arises_in_the_model_client(name, root):
    chain = _chain(name)
    assert len(chain) >= 1 and chain[0].name == root
    found = C.origin(chain, CAPTURER)
    assert found is not None
    assert (found.layer, found.remote) == ("model_client", True)
    # The call site is the agent's own frame, whatever library raised below it.
    assert found.site is not None and found.site.path.endswith("make_client_captures.py")


def test_the_chain_keeps_every_exception_and_its_link():
    chain = _chain("anthropic-hang")
    assert [r.name for r in chain] == ["ReadTimeout", "ReadTimeout", "APITimeoutError"]
    assert [r.link for r in chain] == ["cause", "cause", None]
    assert chain[-1].type == "anthropic.APITimeoutError"
    assert any(f.func == "_receive_response_headers" for f in chain[0].frames)


def test_the_layer_comes_from_paths_and_the_configured_agent_not_library_names():
    agent = C.Agent(KTB)
    assert C.layer("/root/kill-terminalbench/ktb/harbor_agent.py", agent) == "agent"
    assert C.layer(f"{SITE}/harbor/environments/docker/docker.py", agent) == "environment"
    assert C.layer(f"{SITE}/harbor/verifier/verifier.py", agent) == "verifier"
    assert C.layer(f"{SITE}/harbor/llms/lite_llm.py", agent) == "model_client"
    assert C.layer(f"{SITE}/harbor/agents/terminus_2/tmux_session.py", agent) == "harbor"
    # A package nobody listed is a library acting for its caller, not the agent.
    assert C.layer(f"{SITE}/some_new_sdk/client.py", agent) == "library"
    assert C.layer("/usr/lib/python3.12/json/decoder.py", agent) == "stdlib"


def test_an_agent_wrapping_the_clients_failure_does_not_hide_it(tmp_path):
    """captaindpt's regex-chess: the client's JSONDecodeError wrapped in the agent's own
    RuntimeError. The root cause is the endpoint's body; the verdict is infra."""
    wrapped = (CLIENTS / "anthropic-not_json.traceback.txt").read_text() + (
        "\nThe above exception was the direct cause of the following exception:\n\n"
        "Traceback (most recent call last):\n"
        f'  File "{SITE}/harbor/trial/trial.py", line 538, in run\n'
        "    await self._execute_agent()\n"
        '  File "/root/kill-terminalbench/ktb/harbor_agent.py", line 206, in run\n'
        "    raise RuntimeError(\n"
        "RuntimeError: Model call failed at episode 11: Expecting value: line 1 column 1 "
        "(char 0)\n"
    )
    job, trial = make_trial(tmp_path, _crash("RuntimeError", "Model call failed", wrapped))
    bare(trial, "", "make_client_captures:Agent")
    row = _row(job)
    assert (row.category, row.signature) == ("infra", "model_endpoint_not_json"), row.evidence
    assert any("JSONDecodeError" in p.quote for p in row.proof)
    _proofs_are_in_their_files(job, trial, row)


def _crash(etype: str, message: str, traceback: str, reward=None) -> TrialSpec:
    return TrialSpec(
        "regex-chess",
        reward=reward,
        exception_type=etype,
        exception_message=message,
        traceback=traceback,
        verifier_stdout=None,
        durations=(4, 2, 300, None),
    )


@pytest.mark.parametrize(
    ("name", "etype", "verdict"),
    [
        # No answer, not even the headers, before the client's timeout: the endpoint's.
        ("anthropic-hang", "APITimeoutError", ("infra", "model_endpoint_unanswered")),
        ("chat-hang", "APITimeoutError", ("infra", "model_endpoint_unanswered")),
        # The timeout fired while the answer streamed in: the model was generating.
        ("anthropic-stall", "ReadTimeout", ("agent_error", "model_call_timed_out_generating")),
        ("anthropic-status_500", "InternalServerError", ("infra", "model_endpoint_internal_error")),
    ],
)
def test_a_failed_model_call_is_judged_by_what_the_record_shows(tmp_path, name, etype, verdict):
    text = (CLIENTS / f"{name}.traceback.txt").read_text()
    last = text.strip().splitlines()[-1]
    job, trial = make_trial(tmp_path, _crash(etype, last.split(": ", 1)[-1], text))
    bare(trial, "", "make_client_captures:Agent")
    row = _row(job)
    assert (row.category, row.signature) == verdict, row.evidence
    _proofs_are_in_their_files(job, trial, row)


# --- model-API dumps the harness keeps (read by their own fields) ------------------------------
def _episodes(trial: Path, calls: list[tuple[str, dict | None]]) -> None:
    """agent/episodes/episode-N/{request,response,tool-results}.json from real SDK dumps: each
    call is (capture folder, tool results or None)."""
    for n, (capture, results) in enumerate(calls):
        folder = trial / "agent" / "episodes" / f"episode-{n}"
        folder.mkdir(parents=True)
        for name in ("request.json", "response.json"):
            shutil.copy(CLIENTS / capture / name, folder / name)
        if results is not None:
            (folder / "tool-results.json").write_text(json.dumps(results))


class _Files:
    def __init__(self, trial: Path) -> None:
        self.trial = trial

    def text(self, rel: str) -> str | None:
        path = self.trial / rel
        return path.read_text() if path.is_file() else None

    def json(self, rel: str) -> object | None:
        text = self.text(rel)
        return json.loads(text) if text else None

    def agent_files(self) -> list[str]:
        base = self.trial / "agent"
        return sorted(p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file())

    def result_metadata(self) -> dict | None:
        return None


@pytest.mark.parametrize(
    ("capture", "usage"),
    [("anthropic-ok", (1200, 40)), ("chat-ok", (900, 30)), ("responses-ok", (800, 20))],
)
def test_each_protocols_dump_reads_to_one_shape(tmp_path, capture, usage):
    trial = tmp_path / "t"
    _episodes(trial, [(capture, None)])
    log = api_dumps.read(_Files(trial))
    assert log is not None and log.source == "api-dumps"
    (call,) = log.calls
    assert call.acted and call.answered and not call.usage.missing
    assert (call.usage.prompt_tokens, call.usage.completion_tokens) == usage
    (action,) = log.actions
    assert action.command == "ls /app" and action.output is None  # never answered: running


def test_a_chat_reply_without_usage_reads_as_missing_usage(tmp_path):
    trial = tmp_path / "t"
    _episodes(trial, [("chat-no_usage", None)])
    (call,) = api_dumps.read(_Files(trial)).calls
    assert call.usage is not None and call.usage.missing and call.answered


def test_a_tool_result_answers_its_command_with_its_exit_code(tmp_path):
    trial = tmp_path / "t"
    result = [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "[exit_code=2]\n\nno"}]
    _episodes(trial, [("anthropic-ok", result)])
    (action,) = api_dumps.read(_Files(trial)).actions
    assert (action.output, action.exit_code) == ("[exit_code=2]\n\nno", 2)
    assert action.output_where == "agent/episodes/episode-0/tool-results.json"


def _capped(tmp_path, command: str, seconds: int = 300, answered_all: bool = False):
    """captaindpt's shape: a custom agent's exec of the model's command ran past its cap, and the
    last episode's command got no tool result."""
    caller = [("/root/kill-terminalbench/ktb/harbor_agent.py", "run",
               "result = await environment.exec(command, timeout_sec=timeout_sec)")]
    from tests.audit.agent_formats import harbor_exec_timeout_tb

    spec = _crash(
        "RuntimeError",
        f"Command timed out after {seconds} seconds",
        harbor_exec_timeout_tb(caller, seconds),
    )
    job, trial = make_trial(tmp_path, spec)
    bare(trial, "", KTB)
    response = json.loads((CLIENTS / "anthropic-ok" / "response.json").read_text())
    response["content"][1]["input"]["command"] = command
    folder = trial / "agent" / "episodes" / "episode-0"
    folder.mkdir(parents=True)
    shutil.copy(CLIENTS / "anthropic-ok" / "request.json", folder / "request.json")
    (folder / "response.json").write_text(json.dumps(response))
    if answered_all:
        result = [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "[exit_code=0]"}]
        (folder / "tool-results.json").write_text(json.dumps(result))
    return job, trial


@pytest.mark.parametrize(
    ("command", "verdict"),
    [
        ("apt-get update -qq && apt-get install -y -qq r-base", "agent_command_over_cap"),
        ("cat /proc/*/fd/*", "agent_command_over_cap"),
        ("od -c /app/data/input.dat", "container_exec_hung"),
        ("which python3 && python3 --version && pip3 --version", "container_exec_hung"),
        ('# check it\npython3 -c "import mobile_sam" 2>&1 || echo "NOT INSTALLED"',
         "container_exec_hung"),
    ],
)
def test_the_command_in_the_dump_decides_a_cap(tmp_path, command, verdict):
    job, trial = _capped(tmp_path, command)
    row = _row(job)
    assert row.signature == verdict, row.evidence
    _proofs_are_in_their_files(job, trial, row)


def test_the_harnesss_own_short_exec_that_hangs_is_the_containers(tmp_path):
    """captaindpt's rstan-to-pystan: every command the model sent was answered; the harness's
    own check, bounded at 10 s, never returned."""
    job, trial = _capped(tmp_path, "ls /app", seconds=10, answered_all=True)
    row = _row(job)
    assert (row.category, row.signature) == ("infra", "container_exec_hung"), row.evidence
    # The same with the model's commands' own cap: nothing shows whose command it was.
    job2, _ = _capped(tmp_path / "b", "ls /app", seconds=300, answered_all=True)
    assert _row(job2).category != "infra"


def test_a_reply_read_without_usage_after_replies_with_it_is_the_endpoints(tmp_path):
    """captaindpt's break-filter-js-from-html: the harness crashed on `usage.input_tokens`
    after 36 replies that carried usage."""
    tb = (
        "Traceback (most recent call last):\n"
        f'  File "{SITE}/harbor/trial/trial.py", line 538, in run\n'
        "    await self._execute_agent()\n"
        '  File "/root/kill-terminalbench/ktb/harbor_agent.py", line 168, in run\n'
        "    total_input_tokens += usage.input_tokens\n"
        "AttributeError: 'NoneType' object has no attribute 'input_tokens'\n"
    )
    job, trial = make_trial(
        tmp_path, _crash("AttributeError", "'NoneType' object has no attribute 'input_tokens'", tb)
    )
    bare(trial, "", KTB)
    row = _row(job)
    assert row.signature == "agent_harness_crash"  # nothing shows the endpoint sends usage
    result = [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "[exit_code=0]"}]
    _episodes(trial, [("anthropic-ok", result)])
    row = _row(job)
    assert (row.category, row.signature) == ("infra", "model_endpoint_no_usage"), row.evidence


# --- the model reached, or not ----------------------------------------------------------------
def test_the_model_reached_is_read_from_replies_tokens_and_the_first_call(tmp_path):
    job, trial = make_trial(tmp_path, TrialSpec("fix-git", reward=0.0, verifier_stdout=PYTEST_FAIL))
    layout = JobLayout.local(job)
    ev = TrialEvidence.load(layout, trial.name)
    assert model_reached(ev).answer == "yes"  # Terminus-2's trajectory with metrics
    bare(trial, "", KTB)
    edit_result(trial, agent_result={"n_input_tokens": 0, "n_output_tokens": 0})
    folder = trial / "agent" / "episodes" / "episode-0"
    folder.mkdir(parents=True)
    shutil.copy(CLIENTS / "anthropic-ok" / "request.json", folder / "request.json")
    error = {"type": "error", "error": {"type": "not_found_error", "message": "model: nope"},
             "status_code": 404}
    (folder / "response.json").write_text(json.dumps(error))
    ev = TrialEvidence.load(layout, trial.name)
    reached = model_reached(ev)
    assert (reached.answer, reached.replies, reached.failed_calls) == ("no", 0, 1)
    assert reached.first_call.startswith("failed: model: nope")
    # A graded 0 of a model never reached is not the model's: the endpoint's 404 (the model
    # name the operator launched it with) is quoted.
    row = _row(job)
    assert (row.category, row.signature, row.model_reached) == (
        "infra",
        "model_never_reached",
        "no",
    ), row.evidence
    _proofs_are_in_their_files(job, trial, row)


# --- a job stopped around a trial --------------------------------------------------------------
def test_a_trial_that_ended_on_its_exception_before_the_job_stopped_is_judged_from_it(tmp_path):
    """singhh5050-tbench-eval's build-pov-ray: exception.txt written, then the runner's timeout
    killed the job before result.json."""
    message = (
        "litellm.BadRequestError: OpenAIException - request (33107 tokens) exceeds the "
        "available context size (32768 tokens), try increasing it"
    )
    spec = TrialSpec(
        "build-pov-ray",
        reward=None,
        exception_type="BadRequestError",
        exception_message=message,
        write_result=False,
        trial_log=[
            "Failed to retrieve model info for 'openai/Qwen3-Coder-Next-GGUF': This model isn't "
            "mapped yet. Using fallback context limit: 1000000",
            f"Trial build-pov-ray__x failed: {message}",
        ],
    )
    job = write_job(tmp_path, "job", [spec], finished_local=None, concurrency=1)
    (trial,) = [p for p in job.iterdir() if p.is_dir()]
    (trial / "exception.txt").write_text(
        "Traceback (most recent call last):\n"
        f'  File "{SITE}/litellm/main.py", line 401, in acompletion\n'
        f"litellm.exceptions.BadRequestError: {message}\n"
    )
    row = _row(job)
    assert (row.category, row.signature) == ("infra", "model_context_misconfigured"), row.evidence
    _proofs_are_in_their_files(job, trial, row)


def test_a_result_cut_off_while_the_job_was_stopped_is_cancelled(tmp_path):
    spec = TrialSpec("fix-git", corrupt_result=True)
    job = write_job(tmp_path, "job", [spec], finished_local=None, concurrency=1)
    row = _row(job)
    assert (row.category, row.signature) == ("cancelled", "interrupted_writing_result")
    job2 = write_job(tmp_path / "b", "job", [spec], concurrency=1)  # the job finished
    assert _row(job2).category == "insufficient_evidence"


# --- the verifier's own infrastructure ---------------------------------------------------------
HF_429 = (
    "collected 3 items\n\n"
    "../tests/test_outputs.py EEE\n\n"
    "E   huggingface_hub.errors.HfHubHTTPError: 429 Client Error: Too Many Requests for url: "
    "https://huggingface.co/api/models/BAAI/bge-small-en-v1.5/revision/main\n"
    "=========================== short test summary info ============================\n"
    "ERROR ../tests/test_outputs.py::test_top1_matches - huggingface_hub.errors.HfHubHTTPError: "
    "429 Client Error: Too Many Requests for url: https://huggingface.co/api/models/x\n"
    "============================== 3 errors in 4.12s ===============================\n"
)
UNREACHABLE = (
    "Collecting torch==2.5.1+cpu\n"
    "ERROR: Could not install packages due to an OSError: HTTPSConnectionPool(host="
    "'download.pytorch.org', port=443): Max retries exceeded with url: /whl/cpu/torch.whl "
    "(Caused by NewConnectionError('<HTTPSConnection object>: Failed to establish a new "
    "connection: [Errno 101] Network is unreachable'))\n"
)


@pytest.mark.parametrize(
    ("stdout", "signature"),
    [(HF_429, "verifier_http_429"), (UNREACHABLE, "verifier_network_unreachable")],
)
def test_a_verifier_that_judged_nothing_on_an_outside_failure_is_infra(
    tmp_path, stdout, signature
):
    spec = TrialSpec("mteb-retrieve", reward=0.0, verifier_stdout=stdout)
    job, trial = make_trial(tmp_path, spec)
    row = _row(job)
    assert (row.category, row.signature) == ("infra", signature), row.evidence
    _proofs_are_in_their_files(job, trial, row)


def test_errors_beside_a_judged_test_are_the_solutions(tmp_path):
    judged = HF_429.replace("3 errors in", "1 failed, 2 errors in")
    job, _ = make_trial(tmp_path, TrialSpec("mteb-retrieve", reward=0.0, verifier_stdout=judged))
    assert _row(job).category == "agent_error"


KILLED = (
    "collected 4 items\n\n../tests/test_outputs.py ..\n"
    "/tests/test.sh: line 15:   241 Killed                  uvx -p 3.13 pytest /tests\n"
)


def test_the_verifier_killed_in_a_container_the_job_shrank_is_infra(tmp_path):
    override = (
        "Overriding memory for task hf-model-inference: 4096 MB -> 512 MB (override_memory_mb)"
    )
    spec = TrialSpec("hf-model-inference", reward=0.0, verifier_stdout=KILLED, trial_log=[override])
    job, trial = make_trial(tmp_path, spec)
    row = _row(job)
    assert (row.category, row.signature) == ("infra", "verifier_out_of_memory"), row.evidence
    _proofs_are_in_their_files(job, trial, row)
    # With the memory the task asks, the kill is the solution's.
    spec2 = TrialSpec("hf-model-inference", reward=0.0, verifier_stdout=KILLED)
    job2, _ = make_trial(tmp_path / "b", spec2)
    assert _row(job2).category == "agent_error"


# --- commands --------------------------------------------------------------------------------
def test_a_script_under_app_is_no_foreground_server():
    assert kind_of("python3 /app/x.py").kind == "other"
    assert kind_of("python3 /app/solution.py --check").kind == "other"
    assert kind_of("python3 server.py").kind == "server"
    assert kind_of("python3 /srv/web/app.py").kind == "server"


# --- CLI agents' JSONL event streams and a harness's plain stdout (documented formats) ---------
CODEX = [
    {"type": "thread.started", "thread_id": "0199a213-81c0-7800-8aa1-bbab2a035a53"},
    {"type": "turn.started"},
    {"type": "item.completed", "item": {"id": "item_0", "type": "reasoning", "text": "Look."}},
    {"type": "item.started", "item": {"id": "item_1", "type": "command_execution",
                                      "command": "bash -lc 'ls /app'", "aggregated_output": "",
                                      "exit_code": None, "status": "in_progress"}},
    {"type": "item.completed", "item": {"id": "item_1", "type": "command_execution",
                                        "command": "bash -lc 'ls /app'",
                                        "aggregated_output": "main.py\n", "exit_code": 0,
                                        "status": "completed"}},
    {"type": "item.completed", "item": {"id": "item_2", "type": "agent_message", "text": "Done."}},
    {"type": "turn.completed",
     "usage": {"input_tokens": 1200, "cached_input_tokens": 200, "output_tokens": 345}},
    {"type": "turn.started"},
    {"type": "turn.failed", "error": {"message": "stream error: unexpected status 429 Too Many "
                                                 "Requests: You exceeded your current quota"}},
]
GEMINI = [
    {"type": "init", "timestamp": "2026-04-02T10:00:00.000Z", "session_id": "s1",
     "model": "gemini-2.5-pro"},
    {"type": "message", "timestamp": "2026-04-02T10:00:01.000Z", "role": "user",
     "content": "Fix the repo."},
    {"type": "message", "timestamp": "2026-04-02T10:00:02.000Z", "role": "assistant",
     "content": "Let me ", "delta": True},
    {"type": "message", "timestamp": "2026-04-02T10:00:02.100Z", "role": "assistant",
     "content": "look.", "delta": True},
    {"type": "tool_use", "timestamp": "2026-04-02T10:00:03.000Z", "tool_name": "run_shell_command",
     "tool_id": "t1", "parameters": {"command": "ls /app"}},
    {"type": "tool_result", "timestamp": "2026-04-02T10:00:04.000Z", "tool_id": "t1",
     "status": "success", "output": "main.py"},
    {"type": "result", "timestamp": "2026-04-02T10:00:09.000Z", "status": "error",
     "error": {"type": "ApiError", "message": "[API Error: 503 Service Unavailable] "
                                              "The model is overloaded."},
     "stats": {"total_tokens": 950, "input_tokens": 900, "output_tokens": 50}},
]


def _stream(trial: Path, name: str, events: list[dict]) -> None:
    (trial / "agent" / name).write_text("\n".join(json.dumps(e) for e in events) + "\n")


def test_codex_and_gemini_streams_read_to_one_shape(tmp_path):
    trial = tmp_path / "t"
    (trial / "agent").mkdir(parents=True)
    _stream(trial, "codex.txt", CODEX)
    _stream(trial, "gemini-cli.txt", GEMINI)
    from audit.read.logs import cli_events

    logs = {log.source: log for log in cli_events.read(_Files(trial))}
    codex, gemini = logs["codex"], logs["gemini-cli"]
    (first, failed) = codex.calls
    assert first.answered and first.usage.completion_tokens == 345 and first.text == "Done."
    assert failed.error and "429" in failed.error and codex.end.is_error
    (action,) = codex.actions
    assert (action.command, action.output) == ("bash -lc 'ls /app'", "main.py\n")
    assert action.exit_code == 0
    assert gemini.calls[0].text == "Let me look." and gemini.calls[0].acted
    (g_action,) = gemini.actions
    assert (g_action.command, g_action.output) == ("ls /app", "main.py")
    assert g_action.started == "2026-04-02T10:00:03.000Z"
    assert gemini.end.status == "error" and "503" in gemini.end.message


@pytest.mark.parametrize(
    ("name", "events", "signature"),
    [("codex.txt", CODEX, "model_endpoint_quota"),
     ("gemini-cli.txt", GEMINI, "model_endpoint_server_error")],
)
def test_a_cli_agents_run_ending_on_the_endpoint_is_infra(tmp_path, name, events, signature):
    job, trial = make_trial(tmp_path, TrialSpec("fix-git", reward=0.0, verifier_stdout=PYTEST_FAIL))
    bare(trial, name.split(".")[0])
    _stream(trial, name, events)
    row = _row(job)
    assert (row.category, row.signature) == ("infra", signature), row.evidence
    _proofs_are_in_their_files(job, trial, row)


def test_a_harnesss_stdout_reads_commands_and_how_it_ended(tmp_path):
    from audit.read.logs import stdout

    trial = tmp_path / "t"
    (trial / "agent").mkdir(parents=True)
    (trial / "agent" / "harness.log").write_text(
        "step 1\n$ curl -s https://api.example.org/data\nHTTP 503 Service Unavailable\n"
        "$ ls /app\nmain.py\n"
        "openai.RateLimitError: Error code: 429 - {'error': {'message': 'Rate limit reached'}}\n"
    )
    (log,) = stdout.read(_Files(trial))
    assert [a.command for a in log.actions] == ["curl -s https://api.example.org/data", "ls /app"]
    assert log.actions[0].output == "HTTP 503 Service Unavailable"
    # The last line follows the last command's output, so it is read as that output, not as
    # how the run ended: a console cannot tell them apart without a client's own words.
    assert log.end is None
    (trial / "agent" / "harness.log").write_text(
        "$ ls /app\nmain.py\n\n[harness] model call failed\n"
        "openai.RateLimitError: Error code: 429 - {'error': {'message': 'Rate limit reached'}}\n"
    )
    (log,) = stdout.read(_Files(trial))
    assert log.actions[0].output == "main.py"
    assert log.end is not None and log.end.where == "agent/harness.log:5"
    assert log.end.message.startswith("openai.RateLimitError: Error code: 429")
