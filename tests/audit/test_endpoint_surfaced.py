"""The model endpoint failing behind a crash of the agent's harness, or in the agent's own log.

Issue #20: the trigger is the endpoint, so it is infra with the endpoint's words as proof, even
when the traceback ends in the agent's code; but a parse of what the MODEL wrote is the
agent's. Trials as each agent leaves them (tests/audit/agent_formats.py).
"""

from __future__ import annotations

import json

import pytest

from audit.pipeline import build_report
from audit.read.layout import JobLayout
from tests.audit.agent_formats import (
    agent_crash_tb,
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
    openhands_events,
    terminus_episodes,
)
from tests.audit.audit_jobgen import PYTEST_FAIL, TrialSpec, write_job

RUN = ("/home/u/my-agent/harness/agent.py", "run", "result = await run_agent(instruction, env)")
CHAT = "/home/u/my-agent/harness/client.py"


def _audit(job):
    (row,) = build_report(JobLayout.local(job)).trials
    return row


def _crash(tmp_path, frames, last: str, etype: str, message: str):
    spec = TrialSpec(
        "fix-git",
        reward=None,
        exception_type=etype,
        exception_message=message,
        traceback=agent_crash_tb([RUN, *frames], last),
        verifier_stdout=None,
        durations=(4, 2, 120, None),
    )
    job, trial = make_trial(tmp_path, spec)
    bare(trial, "my-agent", "harness.agent:MyAgent")
    return job


CRASHES = {
    # A body that is not JSON (an HTML error page from a gateway), read by the agent's client.
    "not_json": (
        [(CHAT, "chat", "data = resp.json()")],
        "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
        "JSONDecodeError",
        "Expecting value: line 1 column 1 (char 0)",
        "model_endpoint_not_json",
        "resp.json()",
    ),
    # A 200 reply without `usage` (a provider's error object).
    "no_usage": (
        [(CHAT, "chat", 'tokens = data["usage"]["prompt_tokens"]')],
        "KeyError: 'usage'",
        "KeyError",
        "'usage'",
        "model_endpoint_no_usage",
        "usage",
    ),
    "credits_402": (
        [(CHAT, "chat", 'raise RuntimeError(f"model API returned {r.status_code}: {r.text}")')],
        'RuntimeError: model API returned 402: {"error": {"message": "Insufficient credits"}}',
        "RuntimeError",
        'model API returned 402: {"error": {"message": "Insufficient credits"}}',
        "model_endpoint_quota",
        "402",
    ),
    "key_403": (
        [(CHAT, "complete", "resp.raise_for_status()")],
        "RuntimeError: HTTP 403 Forbidden: invalid api key",
        "RuntimeError",
        "HTTP 403 Forbidden: invalid api key",
        "model_endpoint_auth",
        "invalid api key",
    ),
    "outage_503": (
        [(CHAT, "chat", "raise ModelError(body)")],
        "harness.client.ModelError: 503 upstream connect error or disconnect/reset before headers",
        "ModelError",
        "503 upstream connect error or disconnect/reset before headers",
        "model_endpoint_server_error",
        "upstream connect error",
    ),
}


@pytest.mark.parametrize("case", sorted(CRASHES))
def test_an_endpoint_failure_behind_a_harness_crash_is_infra(tmp_path, case):
    frames, last, etype, message, signature, word = CRASHES[case]
    row = _audit(_crash(tmp_path, frames, last, etype, message))
    assert (row.category, row.signature) == ("infra", signature), row.evidence
    assert row.proof and all(p.cause == "endpoint_response" for p in row.proof)
    assert any(word in p.quote for p in row.proof), row.proof


@pytest.mark.parametrize(
    ("src", "why"),
    [
        ("args = json.loads(tc.function.arguments)", "the model's tool-call arguments"),
        ("plan = json.loads(response.choices[0].message.content)", "the model's message"),
    ],
)
def test_a_parse_of_the_models_output_stays_the_agents(tmp_path, src, why):
    row = _audit(
        _crash(
            tmp_path,
            [(CHAT.replace("client", "loop"), "run_agent", src)],
            "json.decoder.JSONDecodeError: Unterminated string starting at: line 1 column 47",
            "JSONDecodeError",
            "Unterminated string starting at: line 1 column 47 (char 46)",
        )
    )
    assert (row.category, row.signature) == ("agent_error", "agent_harness_crash"), why


def test_a_missing_field_outside_any_model_call_is_the_agents_bug(tmp_path):
    row = _audit(
        _crash(
            tmp_path,
            [("/home/u/my-agent/harness/report.py", "summarize", 'n = stats["usage"]')],
            "KeyError: 'usage'",
            "KeyError",
            "'usage'",
        )
    )
    assert row.category == "agent_error"


# --- the agent's own log of how its run ended -------------------------------------------------
def _installed(tmp_path, agent: str):
    """An installed agent whose CLI exited non-zero: Harbor still ran the verifier."""
    spec = TrialSpec(
        "fix-git",
        reward=0.0,
        exception_type="NonZeroAgentExitCodeError",
        exception_message="Agent command exited with non-zero exit code 1",
        traceback=(
            "Traceback (most recent call last):\n"
            '  File "/opt/harbor/lib/python3.13/site-packages/harbor/agents/installed/base.py",'
            " line 210, in run\n"
            "harbor.trial.errors.NonZeroAgentExitCodeError: Agent command exited with non-zero "
            "exit code 1\n"
        ),
        verifier_stdout=PYTEST_FAIL,
    )
    job, trial = make_trial(tmp_path, spec)
    bare(trial, agent)
    return job, trial


@pytest.mark.parametrize(
    ("result", "signature"),
    [
        (
            'API Error: 400 {"type":"error","error":{"type":"invalid_request_error","message":'
            '"Your credit balance is too low to access the Anthropic API."}}',
            "model_endpoint_quota",
        ),
        (
            'API Error: 401 {"type":"error","error":{"type":"authentication_error","message":'
            '"invalid x-api-key"}}',
            "model_endpoint_auth",
        ),
        (
            'API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":'
            '"Overloaded"}}',
            "model_endpoint_server_error",
        ),
    ],
)
def test_claude_codes_api_error_ends_its_run_on_the_endpoint(tmp_path, result, signature):
    job, trial = _installed(tmp_path, "claude-code")
    claude_code_stream(
        trial,
        [
            cc_assistant("m1", "Look at the repo.", ("tu1", "git status")),
            cc_tool_result("tu1", "On branch master\nnothing to commit"),
            cc_result(result, True),
        ],
    )
    row = _audit(job)
    assert (row.category, row.signature) == ("infra", signature), row.evidence
    (proof,) = row.proof
    assert proof.where.startswith("agent/claude-code.txt:") and "API Error" in proof.quote


def test_claude_code_that_finished_its_turns_is_graded_as_is(tmp_path):
    job, trial = _installed(tmp_path, "claude-code")
    claude_code_stream(trial, [cc_result("Reached max turns (30)", True, "error_max_turns")])
    assert _audit(job).category == "agent_error"


def test_mini_swe_agent_rate_limited_until_it_gave_up(tmp_path):
    job, trial = _installed(tmp_path, "mini-swe-agent")
    mini_swe_trajectory(
        trial,
        [("Inspect.", "ls /app", "main.py\n")],
        "RateLimitError",
        "litellm.RateLimitError: RateLimitError: OpenAIException - Error code: 429 - "
        "{'error': {'message': 'Rate limit exceeded'}}",
    )
    row = _audit(job)
    assert (row.category, row.signature) == ("infra", "model_endpoint_rate_limit")
    assert row.proof[0].where.startswith("agent/mini-swe-agent.trajectory.json")
    # Its own step limit is its own: no excuse.
    mini_swe_trajectory(trial, [("Inspect.", "ls /app", "main.py\n")], "LimitsExceeded")
    assert _audit(job).category == "agent_error"


def test_openhands_error_state_from_the_endpoint(tmp_path):
    job, trial = _installed(tmp_path, "openhands")
    openhands_events(
        trial,
        [
            oh_run(1, "ls /app"),
            oh_run_obs(2, 1, "main.py", 0),
            oh_state(
                3,
                "error",
                "litellm.ServiceUnavailableError: OpenAIException - Error code: 503 - "
                "Service Unavailable",
            ),
        ],
    )
    row = _audit(job)
    assert (row.category, row.signature) == ("infra", "model_endpoint_server_error")
    assert row.proof[0].where == "agent/sessions/0f3c/events/2.json"


def test_a_model_call_that_timed_out_proves_nothing(tmp_path):
    job, trial = _installed(tmp_path, "openhands")
    openhands_events(
        trial, [oh_state(1, "error", "litellm.Timeout: APITimeoutError - Request timed out.")]
    )
    assert _audit(job).category == "agent_error"  # graded 0, and no proof of an outside cause


def test_a_custom_agents_status_in_metadata(tmp_path):
    """A custom agent records its end in result.json metadata (`status`, `error`)."""
    job, trial = _installed(tmp_path, "my-agent")
    from tests.audit.agent_formats import openai_messages, set_metadata

    trace = openai_messages([("Look.", "ls /app", "main.py\n")])
    set_metadata(
        trial,
        {
            "run": {
                "status": "server_error",
                "turns": 1,
                "trace": trace,
                "error": "Error code: 502 - {'error': 'Bad Gateway'}",
            }
        },
    )
    row = _audit(job)
    assert (row.category, row.signature) == ("infra", "model_endpoint_server_error")
    assert row.proof[0].where == "result.json agent_result.metadata.run.error"
    # The server could not parse the model's own tool call: the model's doing.
    set_metadata(
        trial,
        {
            "run": {
                "status": "server_error",
                "trace": trace,
                "error": "Error code: 500 - {'error': {'message': 'Failed to parse tool call "
                "arguments as JSON: parse error at line 1'}}",
            }
        },
    )
    assert _audit(job).category == "agent_error"


# --- a reply cut off by the serving side, in any log that records usage ----------------------
def _cut_off_job(tmp_path, other_trial_has_usage: bool):
    """Terminus-2 episode logs whose last reply carried no usage, in a two-trial job."""
    specs = [
        TrialSpec("fix-git", reward=0.0, verifier_stdout=PYTEST_FAIL, commands=[], observations=[]),
        TrialSpec("regex-log", reward=1.0, commands=[], observations=[]),
    ]
    job = write_job(tmp_path, "job", specs, concurrency=2)
    for trial in (p for p in job.iterdir() if p.is_dir()):
        (trial / "agent" / "trajectory.json").unlink()
        terminus_episodes(
            trial,
            [("Let me write the solver:", [])],
            ["Task."],
            usage=trial.name.startswith("regex-log") and other_trial_has_usage,
        )
        debug = trial / "agent" / "episode-0" / "debug.json"
        data = json.loads(debug.read_text())
        data["original_response"].setdefault("usage", {"prompt_tokens": 0, "completion_tokens": 41})
        debug.write_text(json.dumps(data))
    return job


def test_a_final_reply_without_usage_from_an_endpoint_that_sends_it_is_infra(tmp_path):
    report = build_report(JobLayout.local(_cut_off_job(tmp_path, True)))
    row = next(t for t in report.trials if t.task == "fix-git")
    assert (row.category, row.signature) == ("infra", "model_reply_cut_off"), row.evidence
    assert {p.where.split(" ")[0].split(":")[0] for p in row.proof} >= {
        "agent/episode-0/response.txt"
    }
    assert any(p.where.startswith("../regex-log") for p in row.proof)


def test_an_endpoint_that_never_sends_usage_proves_nothing(tmp_path):
    report = build_report(JobLayout.local(_cut_off_job(tmp_path, False)))
    row = next(t for t in report.trials if t.task == "fix-git")
    assert row.category == "agent_error"


def test_a_reply_outside_the_apis_schema_is_the_endpoints(tmp_path):
    """The client could not read the reply as a ChatCompletion (an error object in a 200)."""
    row = _audit(
        _crash(
            tmp_path,
            [
                (CHAT, "chat", "resp = await client.chat.completions.create(**request)"),
                (
                    "/x/site-packages/pydantic/main.py",
                    "model_validate",
                    "return cls.__pydantic_validator__",
                ),
            ],
            "pydantic_core._pydantic_core.ValidationError: 1 validation error for ChatCompletion",
            "ValidationError",
            "1 validation error for ChatCompletion\nchoices\n  Field required",
        )
    )
    assert (row.category, row.signature) == ("infra", "model_endpoint_malformed_reply")


def test_a_number_in_the_agents_own_error_is_no_http_status(tmp_path):
    """A crash in the agent's code near a model call whose message merely holds 500 or 429."""
    row = _audit(
        _crash(
            tmp_path,
            [(CHAT, "chat", "assert len(rows) == 500, f'expected 500 rows, got {len(rows)}'")],
            "AssertionError: expected 500 rows, got 429",
            "AssertionError",
            "expected 500 rows, got 429",
        )
    )
    assert (row.category, row.signature) == ("agent_error", "agent_harness_crash")
