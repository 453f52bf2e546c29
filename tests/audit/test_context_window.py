"""A served context window smaller than the one the agent was told (the seed's pitfall).

Issue #20: a serving misconfiguration, named with both numbers, when the server serves less than
the agent was told and the request fitted what it was told; otherwise the agent outgrew its
window. The told number is read wherever the agent was told it: Terminus-2's model_info in the
job config, litellm's registration line in job.log, OpenHands' LLM_MAX_INPUT_TOKENS env, a
custom agent's own kwarg.
"""

from __future__ import annotations

import pytest

from audit.judge import context_window as CW
from audit.pipeline import build_report
from audit.read.layout import JobLayout
from tests.audit.agent_formats import (
    bare,
    make_trial,
    oh_run,
    oh_run_obs,
    oh_state,
    openai_messages,
    openhands_events,
    set_agent_kwargs,
    set_metadata,
)
from tests.audit.audit_jobgen import PYTEST_FAIL, TrialSpec

LITELLM_TB = (
    "Traceback (most recent call last):\n"
    '  File "/opt/harbor/lib/python3.13/site-packages/litellm/main.py", line 401, in acompletion\n'
    "    raise exception_type(\n"
)
VLLM = (
    "litellm.BadRequestError: OpenAIException - This model's maximum context length is 131072 "
    "tokens. However, you requested {n} tokens in the messages."
)


def _audit(job):
    (row,) = build_report(JobLayout.local(job)).trials
    return row


def _terminus(tmp_path, requested: int):
    message = VLLM.format(n=requested)
    spec = TrialSpec(
        "fix-git",
        reward=None,
        exception_type="BadRequestError",
        exception_message=message,
        traceback=LITELLM_TB + f"litellm.exceptions.BadRequestError: {message}\n",
        durations=(4, 2, 600, None),
    )
    return make_trial(tmp_path, spec)


def test_terminus_told_more_than_served_is_a_serving_misconfiguration(tmp_path):
    job, trial = _terminus(tmp_path, 140000)
    set_agent_kwargs(job, trial, {"model_info": {"max_input_tokens": 262144}})
    row = _audit(job)
    assert (row.category, row.signature) == ("infra", "model_context_misconfigured")
    assert "262144" in row.explanation and "131072" in row.explanation
    told, served = row.proof
    assert told.cause == served.cause == "serving_config"
    assert told.where.endswith("model_info.max_input_tokens") and "262144" in told.quote
    assert "131072" in served.quote


def test_a_request_past_even_the_told_window_is_the_agents(tmp_path):
    job, trial = _terminus(tmp_path, 300000)
    set_agent_kwargs(job, trial, {"model_info": {"max_input_tokens": 262144}})
    row = _audit(job)
    assert (row.category, row.signature) == ("agent_error", "model_context_overflow")
    assert "300000" in row.explanation


def test_nothing_told_means_the_agent_outgrew_the_served_window(tmp_path):
    job, _ = _terminus(tmp_path, 140000)
    assert _audit(job).category == "agent_error"


def test_the_told_window_from_litellms_registration_in_job_log(tmp_path):
    job, _ = _terminus(tmp_path, 140000)
    (job / "job.log").write_text(
        "Registered custom model 'openai/qwen' with info: {'max_input_tokens': 262144, "
        "'max_output_tokens': 65536}\n"
    )
    row = _audit(job)
    assert (row.category, row.signature) == ("infra", "model_context_misconfigured")
    assert row.proof[0].where == "../job.log:1"


def test_openhands_told_by_env_and_overflowing_in_its_error_state(tmp_path):
    spec = TrialSpec(
        "fix-git", reward=0.0, verifier_stdout=PYTEST_FAIL, commands=[], observations=[]
    )
    job, trial = make_trial(tmp_path, spec)
    bare(trial, "openhands")
    set_agent_kwargs(job, trial, {}, env={"LLM_MAX_INPUT_TOKENS": "131072"})
    openhands_events(
        trial,
        [
            oh_run(1, "cat /app/big.log"),
            oh_run_obs(2, 1, "...", 0),
            oh_state(
                3,
                "error",
                "litellm.ContextWindowExceededError: litellm.BadRequestError: "
                "ContextWindowExceededError: OpenAIException - This model's maximum context "
                "length is 32768 tokens. However, you requested 40211 tokens.",
            ),
        ],
    )
    row = _audit(job)
    assert (row.category, row.signature) == ("infra", "model_context_misconfigured"), row.evidence
    assert "LLM_MAX_INPUT_TOKENS" in row.proof[0].quote


def test_a_custom_agents_own_kwarg_and_llama_cpps_words(tmp_path):
    spec = TrialSpec(
        "fix-git", reward=0.0, verifier_stdout=PYTEST_FAIL, commands=[], observations=[]
    )
    job, trial = make_trial(tmp_path, spec)
    bare(trial, "my-agent", "harness.agent:MyAgent")
    set_agent_kwargs(job, trial, {"max_context_tokens": 262144})
    trace = openai_messages([("Look.", "ls /app", "main.py\n")])
    error = (
        "Error code: 400 - {'error': {'code': 400, 'message': 'request (150211 tokens) exceeds "
        "the available context size (131072 tokens), try increasing it', 'type': "
        "'exceed_context_size_error', 'n_prompt_tokens': 150211, 'n_ctx': 131072}}"
    )
    set_metadata(trial, {"r": {"status": "server_bad_request", "trace": trace, "error": error}})
    row = _audit(job)
    assert (row.category, row.signature) == ("infra", "model_context_misconfigured")
    # Without the kwarg it is the agent's overflow again: graded 0, the grade stands.
    set_agent_kwargs(job, trial, {})
    assert _audit(job).category == "agent_error"


def test_llama_cpps_words_and_another_servers_are_read():
    text = (
        "request (150211 tokens) exceeds the available context size (131072 tokens), "
        "'n_prompt_tokens': 150211, 'n_ctx': 131072"
    )
    assert (CW.served_in(text), CW.request_in(text)) == (131072, 150211)
    vllm = VLLM.format(n=140000)
    assert (CW.served_in(vllm), CW.request_in(vllm)) == (131072, 140000)


def test_terminus_fallback_limit_is_what_it_was_told():
    """Terminus-2 without model info logs the limit it falls back to (Harbor reference §5.1):
    the window it manages its context against, as in singhh5050-tbench-eval's job.log."""
    log = (
        "Sending keys: ['ls -la\\n'] min_timeout_sec: 0.1\n"
        "Failed to retrieve model info for 'openai/Qwen3-Coder-Next-GGUF': This model isn't "
        "mapped yet. Using fallback context limit: 1000000\n"
        "Failed to retrieve model info ... Using fallback context limit: 1000000\n"
    )
    (told,) = CW.told_in_text(log, "../job.log")
    assert (told.tokens, told.where) == (1000000, "../job.log:2")
    error = (
        "litellm.BadRequestError: OpenAIException - request (33107 tokens) exceeds the "
        "available context size (32768 tokens), try increasing it"
    )
    j = CW.judge(error, "trial.log:9", [told])
    assert j.misconfigured and (j.served, j.request) == (32768, 33107)
    assert [p.cause for p in j.proof] == ["serving_config", "serving_config"]


@pytest.mark.parametrize(
    ("text", "served", "requested"),
    [
        (VLLM.format(n=140000), 131072, 140000),
        (
            "The input (40211 tokens) is longer than the model's context length (32768 tokens).",
            32768,
            40211,
        ),
        (
            "request (1484981 tokens) exceeds the available context size (131072 tokens)",
            131072,
            1484981,
        ),
        (
            "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 32768. Given: "
            "31000 `inputs` tokens and 4096 `max_new_tokens`",
            32768,
            31000,
        ),
        ("prompt is too long: 215000 tokens > 200000 maximum", 200000, 215000),
    ],
)
def test_served_and_requested_numbers_as_servers_word_them(text, served, requested):
    assert (CW.served_in(text), CW.request_in(text)) == (served, requested)
