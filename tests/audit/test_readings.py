"""Issue #34's readings (audit/RULES.md §9), each twice: on a dev trial read in place from
../shared/data/real-jobs-3 (with the reading on, and switched off, where it must change the
verdict), and on a synthetic trial worded another way, built here (another client library,
another log format, another sandbox provider). Each reading's guard is tested beside it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from audit.pipeline import build_report
from audit.read import readings
from audit.read.layout import JobLayout
from audit.score.rows import TrialRow
from tests.audit import dev_set
from tests.audit.agent_formats import agent_crash_tb, bare, edit_result, make_trial
from tests.audit.audit_jobgen import TrialSpec, write_job
from tests.audit.proof_check import quoted_in_file

SITE = "/opt/harbor/lib/python3.13/site-packages"


# --- dev trials, read in place --------------------------------------------------------------
def _dev_trial(source: str, trial: str) -> Path:
    src = dev_set.SOURCES[source]
    (key,) = [k for k in src.labels() if k.endswith(f"/{trial}")]
    return src.trial_dir(key)


def dev_row(source: str, trial: str, off: tuple[str, ...] = ()) -> TrialRow:
    """The trial's row, its job audited whole (with the named readings switched off)."""
    path = _dev_trial(source, trial)
    with readings.switched_off(off):
        rows = build_report(JobLayout.local(path.parent)).trials
    (row,) = [r for r in rows if r.trial == trial]
    return row


def _quoted(row: TrialRow, trial_dir: Path) -> None:
    for p in row.proof:
        assert quoted_in_file(trial_dir.parent, trial_dir.name, p.where, p.quote), p


# --- synthetic trials -------------------------------------------------------------------------
def _one(job: Path) -> TrialRow:
    (row,) = build_report(JobLayout.local(job)).trials
    return row


def _trial(tmp_path: Path, spec: TrialSpec, agent: str | None = None) -> tuple[Path, Path]:
    job, trial = make_trial(tmp_path, spec)
    if agent:
        bare(trial, agent)
    return job, trial


def _record_only(trial: Path) -> None:
    """What a leaderboard submission keeps: result.json and config.json alone."""
    for child in trial.iterdir():
        if child.name not in ("result.json", "config.json"):
            shutil.rmtree(child) if child.is_dir() else child.unlink()


def _failed(message: str, reward: float | None = 0.0) -> TrialSpec:
    return TrialSpec(
        "fix-git",
        reward=reward,
        exception_type="NonZeroAgentExitCodeError",
        exception_message=message,
        traceback=agent_crash_tb(
            [(f"{SITE}/harbor/agents/installed/base.py", "run", "raise NonZeroAgentExitCodeError")],
            f"harbor.agents.installed.base.NonZeroAgentExitCodeError: {message}",
        ),
        tokens=(0, 0, 0),
        verifier_stdout="FAILED ../tests/test_outputs.py::test_it\n1 failed in 0.1s\n",
    )


# --- 1. a client that could not build a request from its address -----------------------------
def test_address_not_built_dev():
    trial = "fix-git__U2ekkEK"
    row = dev_row("argus", trial)
    assert (row.category, row.signature) == ("infra", "model_address_invalid")
    assert row.proof[0].cause == "launch_config"
    assert "relative URL without a base" in row.proof[0].quote
    _quoted(row, _dev_trial("argus", trial))
    assert dev_row("argus", trial, ("address_not_built",)).category == "insufficient_evidence"


def test_address_not_built_synthetic_gemini_stream(tmp_path):
    job, trial = _trial(tmp_path, TrialSpec("fix-git", reward=0.0, tokens=(0, 0, 0)), "gemini-cli")
    (trial / "agent" / "gemini-cli.txt").write_text(
        "\n".join(json.dumps(e) for e in (
            {"type": "init", "session_id": "s", "model": "gemini-2.5-pro"},
            {"type": "result", "status": "error", "error": {
                "message": "TypeError: Failed to parse URL from ${GEMINI_BASE_URL}/v1beta/models"}},
        )) + "\n"
    )
    row = _one(job)
    assert (row.category, row.signature) == ("infra", "model_address_invalid")
    # The guard: a model that answered before keeps its grade.
    (trial / "agent" / "gemini-cli.txt").write_text(
        "\n".join(json.dumps(e) for e in (
            {"type": "init", "session_id": "s", "model": "gemini-2.5-pro"},
            {"type": "message", "role": "assistant", "content": "Looking at the repo."},
            {"type": "result", "status": "error", "error": {
                "message": "TypeError: Failed to parse URL from ${GEMINI_BASE_URL}/v1beta"},
             "stats": {"input_tokens": 900, "output_tokens": 40}},
        )) + "\n"
    )
    assert _one(job).category == "agent_error"


# --- 2. a stream the server ended with its protocol's failure event ---------------------------
def test_stream_failed_event_dev():
    row = dev_row("argus", "configure-git-webserver__kFcoLKC")
    assert (row.category, row.signature) == ("infra", "model_endpoint_stream_failed")
    assert "response.failed" in row.proof[0].quote
    _quoted(row, _dev_trial("argus", "configure-git-webserver__kFcoLKC"))
    off = dev_row("argus", "configure-git-webserver__kFcoLKC", ("stream_failed_event",))
    assert off.category == "agent_error"
    # The guard: a run that wrote a file (Codex's file_change) keeps its grade.
    assert dev_row("argus", "cancel-async-tasks__Mgz3hwg").category == "agent_error"


def _codex(trial: Path, events: list[dict]) -> None:
    (trial / "agent" / "codex.txt").write_text("\n".join(json.dumps(e) for e in events) + "\n")


def test_stream_failed_event_synthetic_sse_error_event(tmp_path):
    job, trial = _trial(tmp_path, TrialSpec("fix-git", reward=0.0), "codex")
    failed = "stream closed: the server sent an error event (upstream)"
    base = [{"type": "thread.started", "thread_id": "t"}, {"type": "turn.started"}]
    _codex(trial, [*base, {"type": "error", "message": failed},
                   {"type": "turn.failed", "error": {"message": failed}}])
    assert (_one(job).category, _one(job).signature) == ("infra", "model_endpoint_stream_failed")
    # A completed turn earlier keeps the grade: the model's work was graded.
    _codex(trial, [*base,
                   {"type": "item.completed", "item": {"type": "agent_message", "text": "done"}},
                   {"type": "turn.completed", "usage": {"input_tokens": 900, "output_tokens": 50}},
                   {"type": "turn.started"},
                   {"type": "turn.failed", "error": {"message": failed}}])
    assert _one(job).category == "agent_error"


# --- 3. the terminal error of a log no reader knows -----------------------------------------
def test_terminal_error_dev():
    row = dev_row("stella", "compile-compcert__cHEx9cp")
    assert (row.category, row.signature) == ("infra", "model_endpoint_quota")
    assert "402" in row.proof[0].quote and row.proof[0].where.startswith("agent/stella-")
    _quoted(row, _dev_trial("stella", "compile-compcert__cHEx9cp"))
    assert dev_row("stella", "compile-compcert__cHEx9cp", ("terminal_error",)).category == (
        "agent_error"
    )
    # The guard: 429s retried and recovered early in a run that finished are not its end.
    assert dev_row("stella", "kv-store-grpc__NQKvoqx").category == "agent_error"


def test_terminal_error_synthetic_plain_log(tmp_path):
    spec = _failed("Command failed (exit 1): myagent run --task task.md\nstdout: \nstderr: None")
    job, trial = _trial(tmp_path, spec, "myagent")
    log = trial / "agent" / "myagent.log"
    log.write_text("step 1: reading the task\nstep 2: calling the model\n"
                   "fatal: model request failed: HTTP 503 Service Unavailable\n")
    row = _one(job)
    assert (row.category, row.signature) == ("infra", "model_endpoint_server_error")
    assert row.proof[0].where == "agent/myagent.log:3"
    # The guard: an error the run went on after (more than five records) is not its end.
    log.write_text("fatal: model request failed: HTTP 503 Service Unavailable\n"
                   + "".join(f"step {i}: working\n" for i in range(8)))
    assert _one(job).category == "agent_error"


# --- 4. a reply the client synthesised with no tokens ----------------------------------------
def test_synthesised_reply_dev():
    trial = "fix-git__PZiHyqD"
    row = dev_row("stella", trial)
    assert (row.category, row.signature) == ("infra", "model_never_reached")
    assert "session limit" in row.proof[0].quote
    assert dev_row("stella", trial, ("synthesised_reply",)).category == "agent_error"


def _atif_reply(trial: Path, message: str, tool: bool) -> None:
    step = {"step_id": 2, "source": "agent", "model_name": "m", "message": message,
            "metrics": {"prompt_tokens": 0, "completion_tokens": 0}}
    if tool:
        step["tool_calls"] = [{"tool_call_id": "c", "function_name": "bash",
                               "arguments": {"command": "ls"}}]
    (trial / "agent" / "trajectory.json").write_text(json.dumps(
        {"schema_version": "ATIF-v1.2", "steps": [
            {"step_id": 1, "source": "user", "message": "task"}, step]}))


def test_synthesised_reply_synthetic_usage_limit(tmp_path):
    spec = _failed("Command failed (exit 1): agent --print task\nstdout: {}\nstderr: None")
    job, trial = _trial(tmp_path, spec, "some-cli")
    _atif_reply(trial, "Usage limit reached for this API key; the limit resets at 14:00 UTC.",
                tool=False)
    row = _one(job)
    assert (row.category, row.signature) == ("infra", "model_never_reached")
    # The guard: a zero-token reply that called a tool is the model's.
    _atif_reply(trial, "Usage limit reached; the limit resets at 14:00 UTC.", tool=True)
    assert _one(job).category != "infra"


# --- 5. a sandbox provider's 5xx status page -------------------------------------------------
def test_sandbox_provider_5xx_dev():
    trial = "db-wal-recovery__kUJ75te"
    row = dev_row("hive-swarm-hub", trial)
    assert (row.category, row.signature) == ("infra", "sandbox_provider_5xx")
    assert "502 Bad Gateway" in row.proof[0].quote
    _quoted(row, _dev_trial("hive-swarm-hub", trial))
    assert dev_row("hive-swarm-hub", trial, ("sandbox_provider_5xx",)).category == (
        "insufficient_evidence"
    )
    # The guard: the provider's words without a status stay insufficient.
    assert dev_row("hive-swarm-hub", "caffe-cifar-10__xcbf7DS").category == "insufficient_evidence"


def _provider_error(body: str) -> TrialSpec:
    tb = (
        "Traceback (most recent call last):\n"
        f'  File "{SITE}/harbor/trial/trial.py", line 538, in run\n'
        "    await self._execute_agent()\n"
        f'  File "{SITE}/harbor/environments/e2b.py", line 310, in exec\n'
        "    result = await self._sandbox.commands.run(command)\n"
        f'  File "{SITE}/e2b/sandbox_async/commands/command.py", line 88, in run\n'
        "    raise SandboxException(format_error(response))\n"
        f"e2b.exceptions.SandboxException: {body}\n"
    )
    return TrialSpec("fix-git", reward=None, exception_type="SandboxException",
                     exception_message=body, traceback=tb, verifier_stdout=None)


def test_sandbox_provider_5xx_synthetic_json_body(tmp_path):
    job, _ = _trial(tmp_path, _provider_error('{"statusCode": 503, "message": "no capacity"}'))
    assert (_one(job).category, _one(job).signature) == ("infra", "sandbox_provider_5xx")
    job, _ = _trial(tmp_path / "b", _provider_error("sandbox was not found"))
    assert _one(job).category == "insufficient_evidence"


# --- 6. tmux in its own words -----------------------------------------------------------------
def test_tmux_own_words_dev():
    row = dev_row("hive-swarm-hub", "adaptive-rejection-sampler__seyVuA5")
    assert (row.category, row.signature) == ("agent_error", "tmux_usage_error")
    row = dev_row("hive-swarm-hub", "db-wal-recovery__w9CjQKo")
    assert (row.category, row.signature) == ("agent_error", "agent_removed_tmux_socket")
    assert any("mount -t tmpfs tmpfs /tmp" in e for e in row.evidence)
    off = dev_row("hive-swarm-hub", "db-wal-recovery__w9CjQKo", ("tmux_own_words",))
    assert off.category == "insufficient_evidence"


def _tmux(message: str, commands: list[str]) -> TrialSpec:
    return TrialSpec("fix-git", reward=None, exception_type="RuntimeError",
                     exception_message=message, commands=commands,
                     observations=["" for _ in commands], verifier_stdout=None)


def test_tmux_own_words_synthetic(tmp_path):
    job, _ = _trial(tmp_path, _tmux(
        "fix-git: failed to send blocking keys: command send-keys: unknown flag -e", ["ls\n"]))
    assert _one(job).signature == "tmux_usage_error"
    lost = "fix-git: failed to send non-blocking keys: error connecting to " \
        "/tmp/tmux-1000/default (No such file or directory)"
    job, _ = _trial(tmp_path / "b", _tmux(lost, ["ls\n", "rm -rf /tmp/* && echo cleaned\n"]))
    assert _one(job).signature == "agent_removed_tmux_socket"
    # The guard: a socket lost with no such command of the agent's stays as before.
    job, _ = _trial(tmp_path / "c", _tmux(lost, ["ls\n", "cat README.md\n"]))
    assert _one(job).signature == "tmux_session_lost"


# --- 7. a full disk while the agent's own install ran -----------------------------------------
def test_disk_full_own_work_dev():
    trial = "sam-cell-seg__ziLNZGy"
    row = dev_row("hive-swarm-hub", trial)
    assert (row.category, row.signature) == ("agent_error", "agent_own_work_filled_disk")
    assert any("pip install" in e for e in row.evidence)
    assert dev_row("hive-swarm-hub", trial, ("disk_full_own_work",)).category == "infra"


def test_disk_full_own_work_synthetic(tmp_path):
    def spec(commands):
        return TrialSpec("fix-git", reward=None, exception_type="OSError",
                         exception_message="[Errno 28] No space left on device: '/app/out.bin'",
                         commands=commands, observations=["" for _ in commands],
                         verifier_stdout=None)
    job, _ = _trial(tmp_path, spec(["cd /app\n", "cargo build --release > build.log 2>&1 &\n"]))
    assert _one(job).signature == "agent_own_work_filled_disk"
    job, _ = _trial(tmp_path / "b", spec(["cd /app\n", "ls -la\n"]))
    assert (_one(job).category, _one(job).signature) == ("infra", "disk_full")


# --- 8. a limit the agent's own code set on an exec into the sandbox --------------------------
def test_agent_cap_on_exec_dev():
    row = dev_row("hive-swarm-hub", "install-windows-3.11__aNErygM")
    assert (row.category, row.signature) == ("agent_error", "agent_command_over_cap")
    assert "_reset_terminal" in row.explanation
    off = dev_row("hive-swarm-hub", "install-windows-3.11__aNErygM", ("agent_cap_on_exec",))
    assert off.category == "insufficient_evidence"
    # The guard: Harbor's own call while the agent's unbounded build ran proves nothing.
    row = dev_row("hive-swarm-hub", "caffe-cifar-10__LardLXC")
    assert (row.category, row.signature) == (
        "insufficient_evidence", "unproven_container_exec_hung")


def _capped(caller: tuple[str, str, str]) -> TrialSpec:
    agent = "/srv/myagent/myagent/loop.py"
    tb = (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.12/asyncio/tasks.py", line 520, in wait_for\n'
        "    return await fut\n"
        f'  File "{caller[0]}", line 40, in {caller[1]}\n'
        f"    {caller[2]}\n"
        f'  File "{SITE}/harbor/environments/docker/docker.py", line 485, in exec\n'
        "    return await self._run_docker_compose_command(\n"
        "asyncio.exceptions.CancelledError\n\n"
        "The above exception was the direct cause of the following exception:\n\n"
        "Traceback (most recent call last):\n"
        f'  File "{agent}", line 12, in guarded\n'
        "    return await asyncio.wait_for(coro, timeout=300)\n"
        '  File "/usr/lib/python3.12/asyncio/timeouts.py", line 115, in __aexit__\n'
        "    raise TimeoutError from exc_val\n"
        "TimeoutError\n"
    )
    return TrialSpec("fix-git", reward=None, exception_type="TimeoutError", exception_message="",
                     traceback=tb, verifier_stdout=None)


def test_agent_cap_on_exec_synthetic(tmp_path):
    own = ("/srv/myagent/myagent/tools.py", "run_tool", "await env.exec(command=cmd)")
    job, trial = _trial(tmp_path, _capped(own))
    _agent_config(trial)
    assert (_one(job).category, _one(job).signature) == ("agent_error", "agent_command_over_cap")
    harbors = (f"{SITE}/harbor/agents/terminus_2/tmux_session.py", "capture_pane",
               "result = await self.environment.exec(")
    job, trial = _trial(tmp_path / "b", _capped(harbors))
    _agent_config(trial)
    assert (_one(job).category, _one(job).signature) == ("infra", "container_exec_hung")


def _agent_config(trial: Path) -> None:
    config = json.loads((trial / "config.json").read_text())
    config["agent"] = {"name": None, "import_path": "myagent.loop:Agent", "kwargs": {}}
    (trial / "config.json").write_text(json.dumps(config))


# --- 9. a cap hit through Harbor's model layer ------------------------------------------------
def test_cap_in_model_layer_dev():
    trial = "feal-linear-cryptanalysis__JLHWbrX"
    row = dev_row("lore-hex", trial)
    assert (row.category, row.signature) == ("insufficient_evidence", "model_call_timed_out")
    assert dev_row("lore-hex", trial, ("cap_in_model_layer",)).category == "infra"


def test_cap_in_model_layer_synthetic(tmp_path):
    tb = (
        "Traceback (most recent call last):\n"
        f'  File "{SITE}/harbor/agents/terminus_2/terminus_2.py", line 998, in _query_llm\n'
        "    response = await chat.chat(prompt)\n"
        f'  File "{SITE}/harbor/llms/chat.py", line 89, in chat\n'
        "    return await self._model.call(prompt)\n"
        '  File "/srv/adapter/cli_model.py", line 30, in call\n'
        "    out = subprocess.run(argv, timeout=300)\n"
        "subprocess.TimeoutExpired: Command '['gemini', '-p', 'solve it']' timed out after 300 "
        "seconds\n"
    )
    spec = TrialSpec("fix-git", reward=None, exception_type="TimeoutExpired",
                     exception_message="Command '['gemini', '-p', 'solve it']' timed out after "
                     "300 seconds", traceback=tb, verifier_stdout=None)
    job, _ = _trial(tmp_path, spec)
    assert (_one(job).category, _one(job).signature) == (
        "insufficient_evidence", "model_call_timed_out")


# --- 10. a coroutine closed under the trial; an install-only trial ----------------------------
def test_coroutine_closed_dev():
    trial = "train-fasttext__nEko7Uv"
    assert dev_row("lore-hex", trial).category == "cancelled"
    assert dev_row("lore-hex", trial, ("coroutine_closed",)).category == "insufficient_evidence"
    row = dev_row("lore-hex", "fix-code-vulnerability__qZMT8ad")
    assert (row.category, row.signature) == ("insufficient_evidence", "install_only_not_attempted")


def test_coroutine_closed_synthetic(tmp_path):
    spec = TrialSpec("fix-git", reward=None, exception_type="GeneratorExit",
                     exception_message="", verifier_stdout=None)
    job = write_job(tmp_path, "stopped", [spec], concurrency=1, finished_local=None)
    assert _one(job).category == "cancelled"
    # The guard: in a job that finished, the same words prove no stop.
    job = write_job(tmp_path, "finished", [spec], concurrency=1)
    assert _one(job).category == "insufficient_evidence"


# --- 11. an endpoint refusing every trial from one moment -------------------------------------
def test_refused_from_a_moment_dev():
    trial = "circuit-fibsqrt__hNYiomL"
    row = dev_row("lore-hex", trial)
    assert (row.category, row.signature) == ("infra", "model_endpoint_refusing_from_a_moment")
    assert row.model_reached == "no"  # the first refused call included
    assert dev_row("lore-hex", trial, ("refused_from_a_moment",)).category == "agent_error"


def _refused(task: str, status_body: str) -> TrialSpec:
    error = f'"message": "{status_body}", "type": "invalid_request", "status": 422'
    message = f'{{"error": {{{error}}}}}'
    return TrialSpec(
        task, reward=None, exception_type="UnprocessableEntityError", exception_message=message,
        traceback="Traceback (most recent call last):\n"
        f'  File "{SITE}/litellm/main.py", line 401, in acompletion\n'
        f"litellm.exceptions.UnprocessableEntityError: {message}\n",
        tokens=(0, 0, 0), durations=(4, 2, 1, None), verifier_stdout=None,
    )


def test_refused_from_a_moment_synthetic_json_status(tmp_path):
    served = TrialSpec("regex-log", reward=1.0, durations=(4, 2, 30, 5))
    body = "deployment paused for maintenance"
    tasks = ("fix-git", "count-dataset-tokens", "sqlite-db-truncate")
    job = write_job(tmp_path, "j", [served, *(_refused(t, body) for t in tasks)], concurrency=1)
    rows = [r for r in build_report(JobLayout.local(job)).trials if r.reward is None]
    assert {(r.category, r.signature) for r in rows} == {
        ("infra", "model_endpoint_refusing_from_a_moment")}
    # The guard: different bodies are different refusals, each the request's.
    job = write_job(tmp_path, "k", [served, *(_refused(t, f"bad field {t}") for t in tasks)],
                    concurrency=1)
    rows = [r for r in build_report(JobLayout.local(job)).trials if r.reward is None]
    assert {r.category for r in rows} == {"agent_error"}


# --- 12. the loader's cannot-run words wherever recorded --------------------------------------
def test_cannot_run_anywhere_dev():
    trial = "qemu-startup__BCQQKNm"
    row = dev_row("stella", trial)
    assert (row.category, row.signature) == ("agent_error", "agent_setup_cannot_run")
    assert dev_row("stella", trial, ("cannot_run_anywhere",)).category == "infra"
    # An exec that never returned before Harbor's timeout is still shown as an outside cause.
    row = dev_row("captaindpt-kill-terminalbench", "regex-log__SQ6uM5p")
    assert (row.category, row.signature) == ("infra", "agent_setup_failed")


def _setup(message: str) -> TrialSpec:
    tb = agent_crash_tb(
        [(f"{SITE}/harbor/trial/trial.py", "_setup_agent", "await self._agent.setup(env)")],
        f"harbor.agents.installed.base.NonZeroAgentExitCodeError: {message}",
    )
    return TrialSpec("fix-git", reward=None, exception_type="NonZeroAgentExitCodeError",
                     exception_message=message, traceback=tb, tokens=(0, 0, 0),
                     verifier_stdout=None, durations=(4, 30, 0, None))


def test_cannot_run_anywhere_synthetic_record_only(tmp_path):
    job, trial = _trial(tmp_path, _setup(
        "Command failed (exit 127): npm i -g myagent && myagent --version\nstdout: \n"
        "stderr: bash: line 1: myagent: command not found"), "myagent")
    _record_only(trial)
    edit_result(trial, agent_execution=None)
    assert (_one(job).category, _one(job).signature) == ("agent_error", "agent_setup_cannot_run")
    # The guard: a setup that failed with no outside cause shown is insufficient, not infra.
    job, trial = _trial(tmp_path / "b", _setup(
        "Command failed (exit 1): npm i -g myagent\nstdout: \nstderr: npm error code 1"), "myagent")
    _record_only(trial)
    edit_result(trial, agent_execution=None)
    assert (_one(job).category, _one(job).signature) == (
        "insufficient_evidence", "unproven_agent_setup_failed")


# --- 13. the endpoint's words in a non-zero exit's captured output ----------------------------
def test_exit_output_words_dev():
    # anode keeps no agent log: its captured output names no cause, so nothing is read there.
    row = dev_row("anode", "regex-chess__dcdjgBy")
    assert row.category == "insufficient_evidence"
    assert row.evidence_families == ["harbor_record", "exception_chain", "verifier_output",
                                     "job_trials"]


def test_exit_output_words_synthetic_record_only(tmp_path):
    job, trial = _trial(tmp_path, _failed(
        "Command failed (exit 1): agent run task.md\nstdout: planning\n"
        "Error: 429 Too Many Requests: rate limit exceeded for organization\nstderr: None"))
    _record_only(trial)
    row = _one(job)
    assert (row.category, row.signature) == ("infra", "model_endpoint_rate_limit")
    assert row.proof[0].where == "result.json exception_info"
    with readings.switched_off(("exit_output_words",)):
        assert _one(job).category == "insufficient_evidence"


# --- 14. Harbor's record alone decides an owner only where its words do -----------------------
def test_record_decides_dev():
    row = dev_row("anode", "regex-chess__dcdjgBy")
    assert (row.signature, row.record_alone) == ("undecided_NonZeroAgentExitCodeError", True)
    assert dev_row("anode", "regex-chess__dcdjgBy", ("record_decides",)).category == "agent_error"
    # A run that ended on its own and was graded: the record decides.
    row = dev_row("anode", "db-wal-recovery__wiBeuEU")
    assert (row.category, row.record_alone) == ("agent_error", True)


@pytest.mark.parametrize("keep_log", [False, True])
def test_record_decides_synthetic(tmp_path, keep_log):
    spec = TrialSpec("fix-git", reward=0.0, exception_type="RuntimeError",
                     exception_message="agent process exited with status 2",
                     verifier_stdout="FAILED ../tests/test_outputs.py::test_it\n")
    job, trial = _trial(tmp_path, spec)
    if not keep_log:
        shutil.rmtree(trial / "agent")
    row = _one(job)
    if keep_log:
        assert (row.category, row.signature, row.record_alone) == (
            "agent_error", "graded_fail_RuntimeError", False)
    else:
        assert (row.category, row.signature, row.record_alone) == (
            "insufficient_evidence", "undecided_RuntimeError", True)


def test_every_reading_is_registered_with_a_real_source():
    assert set(readings.READINGS) == {
        "address_not_built", "stream_failed_event", "terminal_error", "synthesised_reply",
        "sandbox_provider_5xx", "tmux_own_words", "disk_full_own_work", "agent_cap_on_exec",
        "cap_in_model_layer", "coroutine_closed", "refused_from_a_moment",
        "cannot_run_anywhere", "exit_output_words", "record_decides",
    }
    real = set(dev_set.REAL_SOURCES)
    assert all(r.met_in in real for r in readings.READINGS.values())
    with pytest.raises(KeyError):
        readings.on("no_such_reading")


def test_record_alone_proves_no_full_disk_or_oom(tmp_path):
    """Without the agent's log its own install or build cannot be ruled out: a full disk or the
    OOM killer in Harbor's record alone proves nothing; with the log (nothing of the agent's
    running) it does."""
    spec = TrialSpec("fix-git", reward=None, exception_type="OSError",
                     exception_message="[Errno 28] No space left on device: '/app/out.bin'",
                     verifier_stdout=None)
    job, trial = _trial(tmp_path, spec)
    assert (_one(job).category, _one(job).signature) == ("infra", "disk_full")
    _record_only(trial)
    assert (_one(job).category, _one(job).signature) == ("insufficient_evidence",
                                                         "unproven_disk_full")
