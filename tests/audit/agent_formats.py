"""Trials as real agents leave them, for the audit tests: small hand-written logs in each format.

The shapes follow the agents' own code and docs (read with the search tool, nothing copied):
- Terminus-2: `agent/episode-N/{prompt.txt, response.txt, debug.json}` (its episode logging;
  the reply is its JSON parser's `{analysis, plan, commands: [{keystrokes, duration}],
  task_complete}`, the next prompt holds the terminal output and its timeout template) and
  Harbor's ATIF `agent/trajectory.json` (written by audit_jobgen.write_trial);
- Claude Code: `agent/claude-code.txt`, its `--output-format stream-json` events (`assistant`
  with `message.content` blocks and `usage`, `user` with `tool_result`, the final `result`);
- OpenHands: `agent/sessions/<id>/events/<n>.json` (`action: run` with `args.command`, the
  `observation: run` that answers it with `extras.metadata.exit_code`, `agent_state_changed`);
- mini-swe-agent: `agent/mini-swe-agent.trajectory.json` (`info.exit_status`, `messages` with
  `extra.response.usage` and, v2, `tool_calls`);
- a custom agent: OpenAI-style messages in its own `agent/<name>.json` or in result.json's
  `agent_result.metadata`, and tracebacks through its own code.

Each helper writes into a trial dir made by audit_jobgen.write_job; `make_trial` makes the one
trial of a one-trial job and returns (job dir, trial dir).
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.audit.audit_jobgen import TrialSpec, write_job

SITE = "/opt/harbor/lib/python3.13/site-packages"


def make_trial(tmp_path: Path, spec: TrialSpec, finished: str | None = "2026-08-31T07:08:03.0"):
    job = write_job(tmp_path, "job", [spec], concurrency=1, finished_local=finished)
    (trial,) = [p for p in job.iterdir() if p.is_dir()]
    return job, trial


def bare(trial: Path, agent: str, import_path: str | None = None) -> None:
    """Remove what write_trial wrote for Terminus-2 and name another agent in result.json."""
    for name in ("trajectory.json", "recording.cast"):
        (trial / "agent" / name).unlink(missing_ok=True)
    if (trial / "result.json").exists():
        edit_result(trial, agent_info={"name": agent, "version": "1.0", "model_info": None})
    if import_path:
        config = json.loads((trial / "config.json").read_text())
        config["agent"] = {"name": None, "import_path": import_path, "kwargs": {}}
        (trial / "config.json").write_text(json.dumps(config))


def edit_result(trial: Path, **fields) -> None:
    path = trial / "result.json"
    data = json.loads(path.read_text())
    data.update(fields)
    path.write_text(json.dumps(data, indent=2))


def set_metadata(trial: Path, metadata: dict) -> None:
    path = trial / "result.json"
    data = json.loads(path.read_text())
    data["agent_result"]["metadata"] = metadata
    path.write_text(json.dumps(data, indent=2))


def set_agent_kwargs(job: Path, trial: Path, kwargs: dict, env: dict | None = None) -> None:
    """The agent's kwargs (and env) in both the job's and the trial's config.json."""
    config = json.loads((job / "config.json").read_text())
    config["agents"][0]["kwargs"] = kwargs
    config["agents"][0]["env"] = env or {}
    (job / "config.json").write_text(json.dumps(config, indent=2))
    tconfig = json.loads((trial / "config.json").read_text())
    tconfig["agent"]["kwargs"] = kwargs
    tconfig["agent"]["env"] = env or {}
    (trial / "config.json").write_text(json.dumps(tconfig, indent=2))


# --- tracebacks --------------------------------------------------------------------------------
def harbor_exec_timeout_tb(agent_frames: list[tuple[str, str, str]], seconds: int) -> str:
    """A crash on Harbor's docker exec cap, reached through the given (path, func, line) frames."""
    lines = [
        "Traceback (most recent call last):",
        f'  File "{SITE}/harbor/trial/trial.py", line 547, in run',
        "    await self._execute_agent()",
        f'  File "{SITE}/harbor/trial/trial.py", line 285, in _execute_agent',
        "    await asyncio.wait_for(",
        '  File "/usr/lib/python3.13/asyncio/tasks.py", line 507, in wait_for',
        "    return await fut",
    ]
    for path, func, src in agent_frames:
        lines += [f'  File "{path}", line 61, in {func}', f"    {src}"]
    lines += [
        f'  File "{SITE}/harbor/environments/docker/docker.py", line 600, in exec',
        "    return await self._run_docker_compose_command(",
        f'  File "{SITE}/harbor/environments/docker/docker.py", line 370, in '
        "_run_docker_compose_command",
        '    raise RuntimeError(f"Command timed out after {timeout_sec} seconds")',
        f"RuntimeError: Command timed out after {seconds} seconds",
    ]
    return "\n".join(lines) + "\n"


def agent_crash_tb(frames: list[tuple[str, str, str]], last: str) -> str:
    """A traceback through Harbor's trial into the agent's own code, ending in `last`."""
    lines = [
        "Traceback (most recent call last):",
        f'  File "{SITE}/harbor/trial/trial.py", line 547, in run',
        "    await self._execute_agent()",
    ]
    for path, func, src in frames:
        lines += [f'  File "{path}", line 88, in {func}', f"    {src}"]
    return "\n".join(lines + [last]) + "\n"


# --- Terminus-2 episode dirs ------------------------------------------------------------------
def terminus_episodes(
    trial: Path,
    episodes: list[tuple[str, list[str]]],
    prompts: list[str],
    usage: bool = True,
    ended: list[str] | None = None,
) -> None:
    """episode N: (analysis, keystrokes); prompts[N] is the prompt of episode N (0: the task);
    ended[N]: when the reply of episode N came (litellm's `end_time` in debug.json)."""
    for n, (analysis, keys) in enumerate(episodes):
        base = trial / "agent" / f"episode-{n}"
        base.mkdir(parents=True, exist_ok=True)
        (base / "prompt.txt").write_text(prompts[n] if n < len(prompts) else "")
        reply = {
            "analysis": analysis,
            "plan": "next step",
            "commands": [{"keystrokes": k, "duration": 10.0} for k in keys],
            "task_complete": False,
        }
        (base / "response.txt").write_text(json.dumps(reply, indent=2))
        debug: dict = {"log_event_type": "post_api_call", "original_response": {"id": f"r{n}"}}
        if ended and n < len(ended):
            debug["end_time"] = ended[n]
        if usage:
            debug["original_response"]["usage"] = {
                "prompt_tokens": 1200 + n,
                "completion_tokens": 90,
            }
        (base / "debug.json").write_text(json.dumps(debug))
    n = len(episodes)
    if n < len(prompts):
        base = trial / "agent" / f"episode-{n}"
        base.mkdir(parents=True, exist_ok=True)
        (base / "prompt.txt").write_text(prompts[n])


# --- Claude Code stream-json --------------------------------------------------------------------
def cc_assistant(mid: str, text: str = "", bash: tuple[str, str] | None = None, usage=True) -> dict:
    content: list[dict] = [{"type": "text", "text": text}] if text else []
    if bash:
        content.append(
            {"type": "tool_use", "id": bash[0], "name": "Bash", "input": {"command": bash[1]}}
        )
    message = {
        "id": mid,
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content,
        "stop_reason": "tool_use" if bash else "end_turn",
    }
    if usage:
        message["usage"] = {
            "input_tokens": 4,
            "cache_read_input_tokens": 12000,
            "output_tokens": 80,
        }
    return {"type": "assistant", "message": message, "session_id": "s1"}


def cc_tool_result(tool_id: str, content: str, is_error: bool = False) -> dict:
    block = {
        "type": "tool_result",
        "tool_use_id": tool_id,
        "content": content,
        "is_error": is_error,
    }
    return {"type": "user", "message": {"role": "user", "content": [block]}, "session_id": "s1"}


def cc_result(result: str, is_error: bool, subtype: str = "success") -> dict:
    return {
        "type": "result",
        "subtype": subtype,
        "is_error": is_error,
        "duration_ms": 91000,
        "num_turns": 4,
        "result": result,
        "session_id": "s1",
        "total_cost_usd": 0.41,
    }


def claude_code_stream(trial: Path, events: list[dict]) -> None:
    init = {"type": "system", "subtype": "init", "session_id": "s1", "tools": ["Bash", "Read"]}
    lines = [json.dumps(init)] + [json.dumps(e) for e in events]
    (trial / "agent" / "claude-code.txt").write_text("\n".join(lines) + "\n")


# --- OpenHands events ----------------------------------------------------------------------------
def oh_run(eid: int, command: str) -> dict:
    return {
        "id": eid,
        "timestamp": "2026-08-30T15:50:00",
        "source": "agent",
        "message": f"Running command: {command}",
        "action": "run",
        "args": {"command": command, "is_input": False, "thought": "", "blocking": False},
        "tool_call_metadata": {
            "function_name": "execute_bash",
            "model_response": {"usage": {"prompt_tokens": 8000 + eid, "completion_tokens": 60}},
        },
    }


def oh_run_obs(eid: int, cause: int, content: str, exit_code: int, suffix: str = "") -> dict:
    return {
        "id": eid,
        "source": "agent",
        "observation": "run",
        "cause": cause,
        "content": content,
        "extras": {"command": "", "metadata": {"exit_code": exit_code, "suffix": suffix}},
    }


def oh_state(eid: int, state: str, reason: str = "") -> dict:
    return {
        "id": eid,
        "source": "environment",
        "observation": "agent_state_changed",
        "content": "",
        "extras": {"agent_state": state, "reason": reason},
    }


def openhands_events(trial: Path, events: list[dict]) -> None:
    base = trial / "agent" / "sessions" / "0f3c" / "events"
    base.mkdir(parents=True, exist_ok=True)
    for i, event in enumerate(events):
        (base / f"{i}.json").write_text(json.dumps(event))


# --- mini-swe-agent ------------------------------------------------------------------------------
def mini_swe_trajectory(
    trial: Path, steps: list[tuple[str, str, str]], exit_status: str, exception_str: str = ""
) -> None:
    """steps: (thought, command, observation) of each turn (v2 tool-calling format)."""
    messages: list[dict] = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Solve the task in /app."},
    ]
    for i, (thought, command, observation) in enumerate(steps):
        messages.append(
            {
                "role": "assistant",
                "content": thought,
                "tool_calls": [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"command": command})},
                    }
                ],
                "extra": {
                    "response": {"usage": {"prompt_tokens": 3000 + i, "completion_tokens": 70}}
                },
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": observation})
    if exit_status not in ("Submitted", "LimitsExceeded"):
        messages.append(
            {
                "role": "exit",
                "content": exception_str,
                "extra": {"exit_status": exit_status, "exception_str": exception_str},
            }
        )
    data = {
        "info": {
            "exit_status": exit_status,
            "submission": "",
            "model_stats": {"instance_cost": 0.0, "api_calls": len(steps)},
            "mini_version": "2.1.0",
        },
        "messages": messages,
        "trajectory_format": "mini-swe-agent-1.1",
    }
    (trial / "agent" / "mini-swe-agent.trajectory.json").write_text(json.dumps(data, indent=2))


# --- a custom agent's OpenAI-style messages -----------------------------------------------------
def openai_messages(steps: list[tuple[str, str, str | None]]) -> list[dict]:
    """steps: (content, command, tool output or None when it never came back)."""
    messages: list[dict] = [
        {"role": "system", "content": "You are a terminal agent."},
        {"role": "user", "content": "Solve the task in /app."},
    ]
    for i, (content, command, output) in enumerate(steps):
        messages.append(
            {
                "role": "assistant",
                "content": content,
                "tool_calls": [
                    {
                        "id": f"t{i}",
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"cmd": command})},
                    }
                ],
            }
        )
        if output is not None:
            messages.append({"role": "tool", "tool_call_id": f"t{i}", "content": output})
    return messages
