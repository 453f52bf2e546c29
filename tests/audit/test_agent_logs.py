"""The agent-log readers (audit/read/logs/): each format read to the same shape, with places.

One trial per format as the agent writes it (tests/audit/agent_formats.py); what is checked is
what detectors rely on: the order of calls and commands, the usage a reply carried (or that it
carried none), a command's output and the cap it ran past, how the run ended, and where each
was read. A damaged log is noted, never fatal.
"""

from __future__ import annotations

import json

from audit.read.evidence import TrialEvidence
from audit.read.layout import JobLayout
from audit.read.logs import Action, Call
from tests.audit.agent_formats import (
    bare,
    cc_assistant,
    cc_result,
    cc_tool_result,
    claude_code_stream,
    make_trial,
    mini_swe_trajectory,
    oh_run,
    oh_run_obs,
    oh_state,
    openai_messages,
    openhands_events,
    set_metadata,
    terminus_episodes,
)
from tests.audit.audit_jobgen import TrialSpec


def _logs(job, trial):
    ev = TrialEvidence.load(JobLayout.local(job), trial.name)
    return {log.source: log for log in ev.agent_logs()}, ev


def _trial(tmp_path, agent="terminus-2"):
    job, trial = make_trial(tmp_path, TrialSpec("fix-git", reward=0.0))
    if agent != "terminus-2":
        bare(trial, agent)
    return job, trial


def test_atif_calls_commands_outputs_and_usage(tmp_path):
    job, trial = _trial(tmp_path)
    logs, _ = _logs(job, trial)
    atif = logs["atif"]
    kinds = [type(e).__name__ for e in atif.events]
    assert kinds == ["Call", "Action", "Call", "Action"]
    call, action = atif.events[0], atif.events[1]
    assert isinstance(call, Call) and call.usage and call.usage.prompt_tokens == 10000
    assert isinstance(action, Action) and action.command == "ls -la /app\n"
    assert action.output and "total 8" in action.output
    assert action.where == action.output_where == "agent/trajectory.json step 2"


def test_terminus_episodes_with_the_timeout_template(tmp_path):
    job, trial = _trial(tmp_path)
    terminus_episodes(
        trial,
        [("Start the server.", ["python3 -m http.server\n"]), ("Wait.", [])],
        [
            "Task.",
            "Previous command:\npython3 -m http.server\n\nThe previous command timed out after "
            "10.0 seconds\n\nHere is the current state of the terminal:\nServing HTTP",
        ],
    )
    episodes = _logs(job, trial)[0]["terminus-episodes"]
    first, action, second = episodes.events
    assert isinstance(first, Call) and first.acted and first.usage.prompt_tokens == 1200
    assert first.usage_where == "agent/episode-0/debug.json"
    assert isinstance(action, Action) and action.cap_seconds == 10.0
    assert action.output_where == "agent/episode-1/prompt.txt"
    assert isinstance(second, Call) and not second.acted


def test_claude_code_stream(tmp_path):
    job, trial = _trial(tmp_path, "claude-code")
    claude_code_stream(
        trial,
        [
            cc_assistant("m1", "Run the tests.", ("t1", "pytest -x")),
            cc_tool_result("t1", "Command timed out after 2m 0.0s", True),
            cc_assistant("m2", "API Error: 529 overloaded", usage=False),
            cc_result("API Error: 529 overloaded", True),
        ],
    )
    log = _logs(job, trial)[0]["claude-code"]
    call, action, error = log.events
    assert isinstance(call, Call) and call.usage.prompt_tokens == 12004
    assert isinstance(action, Action) and action.cap_seconds == 120.0
    assert isinstance(error, Call) and error.error == "API Error: 529 overloaded"
    assert log.end and log.end.is_error and log.end.where == "agent/claude-code.txt:5"


def test_openhands_events(tmp_path):
    job, trial = _trial(tmp_path, "openhands")
    openhands_events(
        trial,
        [
            oh_run(1, "sleep 300"),
            oh_run_obs(2, 1, "", -1, "\n[The command timed out after 120 seconds. ...]"),
            oh_state(3, "error", "litellm.RateLimitError: 429"),
        ],
    )
    log = _logs(job, trial)[0]["openhands"]
    call, action = log.events
    assert isinstance(call, Call) and call.usage.prompt_tokens == 8001
    assert isinstance(action, Action) and (action.exit_code, action.cap_seconds) == (-1, 120.0)
    assert log.end and (log.end.status, log.end.message) == ("error", "litellm.RateLimitError: 429")


def test_mini_swe_agent_trajectory(tmp_path):
    job, trial = _trial(tmp_path, "mini-swe-agent")
    mini_swe_trajectory(
        trial,
        [
            (
                "Serve.",
                "nc -l 9000",
                "An error occurred while executing the command: Command "
                "'nc -l 9000' timed out after 30 seconds",
            )
        ],
        "Submitted",
    )
    log = _logs(job, trial)[0]["mini-swe-agent"]
    call, action = log.events
    assert isinstance(call, Call) and call.acted and call.usage.prompt_tokens == 3000
    assert isinstance(action, Action) and action.cap_seconds == 30.0
    assert log.end and not log.end.is_error


def test_a_custom_agents_messages_in_metadata_and_in_its_own_file(tmp_path):
    job, trial = _trial(tmp_path, "my-agent")
    trace = openai_messages([("Look.", "ls /app", "main.py\n"), ("Run.", "python3 x.py", None)])
    set_metadata(trial, {"harness": {"status": "turn_limit", "turns": 2, "trace": trace}})
    (trial / "agent" / "session.json").write_text(json.dumps({"messages": trace}))
    ev = TrialEvidence.load(JobLayout.local(job), trial.name)
    log, own = [g for g in ev.agent_logs() if g.source == "openai-messages"]
    assert [type(e).__name__ for e in log.events] == ["Call", "Action", "Call", "Action"]
    assert log.events[1].output == "main.py\n" and log.events[3].output is None
    assert log.events[1].where == "result.json agent_result.metadata.harness.trace[2]"
    assert log.end and (log.end.status, log.end.is_error) == ("turn_limit", False)
    assert own.events[1].where == "agent/session.json messages[2]" and own.end is None


def test_the_other_formats_feed_the_network_detector(tmp_path):
    """Commands and outputs read from any format are evidence like ATIF's."""
    job, trial = _trial(tmp_path, "claude-code")
    claude_code_stream(
        trial,
        [
            cc_assistant("m1", "", ("t1", "pip install flask")),
            cc_tool_result("t1", "ERROR: Could not fetch URL https://pypi.mirror.example/simple/"),
        ],
    )
    _, ev = _logs(job, trial)
    commands = [c.text for c in ev.source("agent_commands")]
    assert "pip install flask" in commands
    assert any(ex.output and "pypi.mirror.example" in ex.output.text for ex in ev.exchanges())


def test_a_damaged_log_is_skipped(tmp_path):
    job, trial = _trial(tmp_path, "mini-swe-agent")
    (trial / "agent" / "mini-swe-agent.trajectory.json").write_text('{"messages": [')
    (trial / "agent" / "claude-code.txt").write_text('not json\n{"type": "result"}\n')
    logs, ev = _logs(job, trial)
    assert "mini-swe-agent" not in logs
    assert logs["claude-code"].end is not None


def test_a_usage_block_is_missing_only_without_any_prompt_count():
    from audit.read.logs.common import usage_of

    assert usage_of({"prompt_tokens": 0, "completion_tokens": 44}).missing
    assert usage_of({"completion_tokens": 44}).missing
    # A prompt read whole from the cache was counted (ATIF's and OpenAI's ways of saying so).
    assert not usage_of({"prompt_tokens": 0, "completion_tokens": 9, "cached_tokens": 800}).missing
    assert not usage_of(
        {"prompt_tokens": 0, "prompt_tokens_details": {"cached_tokens": 800}}
    ).missing
    assert not usage_of({"prompt_tokens": 12, "completion_tokens": 9}).missing
    assert usage_of(None) is None
