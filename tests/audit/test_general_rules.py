"""The base audit's general rules, each on hand-built trials (no dev-set data).

These rules name no source, server or agent: they are written from what a status class, a
traceback or a trial's own record means (audit/RULES.md §1, "what is not proof"), so they hold
in every leave-one-source-out fold. Each is proved here on trials shaped differently from the
dev set's (litellm exceptions under Terminus-2, a custom agent's run-end record, several trials
of one job), and the conservative default is checked with the dev-set refinements switched off:
without a specific rule a trial is insufficient_evidence or the model's, never infra.
"""

from __future__ import annotations

import pytest

from audit.pipeline import build_report
from audit.read.layout import JobLayout
from tests.audit.agent_formats import bare, openai_messages, set_metadata
from tests.audit.audit_jobgen import PYTEST_FAIL, TrialSpec, write_job
from tests.audit.proof_check import quoted_in_file

LITELLM_TB = (
    "Traceback (most recent call last):\n"
    '  File "/opt/harbor/lib/python3.13/site-packages/litellm/main.py", line 401, in acompletion\n'
    "    raise exception_type(\n"
)


def _endpoint(etype: str, message: str, task: str = "fix-git", agent_s: float = 60) -> TrialSpec:
    return TrialSpec(
        task,
        reward=None,
        exception_type=etype,
        exception_message=message,
        traceback=LITELLM_TB + f"litellm.exceptions.{etype}: {message}\n",
        durations=(4, 2, agent_s, None),
    )


def _rows(job):
    return {t.trial: t for t in build_report(JobLayout.local(job)).trials}


def _one(tmp_path, spec: TrialSpec):
    job = write_job(tmp_path, "job", [spec], concurrency=1)
    (row,) = _rows(job).values()
    return row


INTERNAL = "litellm.InternalServerError: OpenAIException - Internal Server Error"


# --- a 5xx is the serving plane's: outside the system under test ------------------------------
@pytest.mark.parametrize(
    "message",
    [
        INTERNAL,
        "litellm.InternalServerError: OpenAIException - Error code: 500 - "
        "{'error': {'message': 'Internal error', 'code': 500}}",
        "litellm.APIError: APIError: OpenAIException - Error code: 500 - The server had an error "
        "while processing your request",
    ],
)
def test_a_single_500_is_the_serving_planes_quoting_its_words(tmp_path, message):
    """Issue #28's ownership rule: the serving plane is outside the model and its harness."""
    row = _one(tmp_path, _endpoint("InternalServerError", message))
    assert (row.category, row.signature) == ("infra", "model_endpoint_internal_error"), row.evidence
    assert row.proof and row.proof[0].cause == "endpoint_response"
    assert "500" in row.proof[0].quote or "Internal" in row.proof[0].quote


@pytest.mark.parametrize(
    ("message", "word"),
    [
        (
            "litellm.ServiceUnavailableError: OpenAIException - Error code: 503 - Service "
            "Unavailable",
            "503",
        ),
        ("litellm.InternalServerError: OpenAIException - Error code: 502 - Bad Gateway", "502"),
        (
            "litellm.InternalServerError: AnthropicException - Error code: 529 - "
            "{'type': 'error', 'error': {'type': 'overloaded_error', 'message': 'Overloaded'}}",
            "529",
        ),
        (
            "litellm.InternalServerError: OpenAIException - Error code: 500 - "
            "{'error': 'upstream connect error or disconnect/reset before headers'}",
            "upstream connect error",
        ),
    ],
)
def test_an_endpoint_unavailable_whatever_the_request_is_infra(tmp_path, message, word):
    row = _one(tmp_path, _endpoint("InternalServerError", message))
    assert (row.category, row.signature) == ("infra", "model_endpoint_server_error"), row.evidence
    assert any(word in p.quote for p in row.proof)


def test_a_500_repeated_across_trials_at_once_is_an_outage(tmp_path):
    specs = [_endpoint("InternalServerError", INTERNAL, task) for task in ("fix-git", "regex-log")]
    job = write_job(tmp_path, "job", specs, concurrency=2)  # both end at the same time
    rows = _rows(job)
    for trial, row in rows.items():
        assert (row.category, row.signature) == (
            "infra",
            "model_endpoint_internal_error_repeated",
        ), row.evidence
        (other,) = [t for t in rows if t != trial]
        quoted = [p for p in row.proof if p.where.startswith(f"../{other}/")]
        assert quoted, row.proof
        for p in row.proof:
            assert quoted_in_file(job, trial, p.where, p.quote), p


def test_500s_far_apart_in_time_are_each_their_own(tmp_path):
    # One after the other, 900 s of agent time each: more than the outage window apart, so
    # neither quotes the other; each is the serving plane's failure on its own request.
    specs = [
        _endpoint("InternalServerError", INTERNAL, task, agent_s=900)
        for task in ("fix-git", "regex-log")
    ]
    job = write_job(tmp_path, "job", specs, concurrency=1)
    for trial, row in _rows(job).items():
        assert (row.category, row.signature) == ("infra", "model_endpoint_internal_error")
        assert all(not p.where.startswith("../") for p in row.proof), (trial, row.proof)


def test_a_500_that_failed_to_parse_the_models_tool_call_is_the_models(tmp_path):
    message = (
        "litellm.InternalServerError: OpenAIException - Error code: 500 - {'error': {'code': "
        "500, 'message': 'Error while parsing tool call: unexpected end of arguments'}}"
    )
    row = _one(tmp_path, _endpoint("InternalServerError", message))
    assert (row.category, row.signature) == ("agent_error", "model_output_unparseable")


def test_a_500_that_failed_to_parse_its_input_is_no_outage(tmp_path):
    message = (
        "litellm.InternalServerError: OpenAIException - Error code: 500 - {'error': {'code': "
        "500, 'message': 'Failed to parse input at pos 212'}}"
    )
    # Repeated in another trial at the same time: a parse failure is still tied to its input.
    specs = [_endpoint("InternalServerError", message, t) for t in ("fix-git", "regex-log")]
    job = write_job(tmp_path, "job", specs, concurrency=2)
    # llama.cpp's own wording for a generation it could not place: the model's, repeated or not.
    for row in _rows(job).values():
        assert (row.category, row.signature) == ("agent_error", "model_output_unparseable")


@pytest.mark.parametrize(
    "body",
    [
        "{'error': {'message': 'Provider returned error', 'code': 400}}",
        "{'error': {'message': 'Invalid JSON in request body', 'code': 400}}",
    ],
)
def test_a_4xx_is_the_request_whatever_its_body_says(tmp_path, body):
    message = f"litellm.BadRequestError: OpenAIException - Error code: 400 - {body}"
    row = _one(tmp_path, _endpoint("BadRequestError", message))
    assert (row.category, row.signature) == ("agent_error", "agent_request_rejected")


def _custom_agent_trial(tmp_path, name: str, error: str):
    spec = TrialSpec(
        "fix-git", reward=0.0, verifier_stdout=PYTEST_FAIL, commands=[], observations=[]
    )
    job = write_job(tmp_path, name, [spec, TrialSpec("regex-log")], concurrency=2)
    trial = next(p for p in sorted(job.iterdir()) if p.is_dir() and p.name.startswith("fix-git"))
    bare(trial, "my-agent", "harness.agent:MyAgent")
    trace = openai_messages([("Look.", "ls /app", "main.py\n")])
    set_metadata(trial, {"run": {"status": "server_error", "trace": trace, "error": error}})
    return job, trial


def test_a_custom_agents_run_ending_on_one_500_is_the_serving_planes(tmp_path):
    job, trial = _custom_agent_trial(
        tmp_path, "one", "Error code: 500 - {'error': {'message': 'Internal Server Error'}}"
    )
    row = _rows(job)[trial.name]
    assert (row.category, row.signature) == ("infra", "model_endpoint_internal_error")
    assert row.proof[0].where.endswith(".error"), row.proof
    # Its tool call the server could not parse: the model's, the grade stands.
    job, trial = _custom_agent_trial(
        tmp_path,
        "parse",
        "Error code: 500 - {'error': {'message': 'Failed to parse tool call arguments as JSON'}}",
    )
    assert _rows(job)[trial.name].category == "agent_error"


# --- a network failure the same trial contradicts is no proof ---------------------------------
def _agent(commands: list[str], observations: list[str]) -> TrialSpec:
    return TrialSpec(
        "build-pov-ray",
        reward=0.0,
        commands=commands,
        observations=observations,
        verifier_stdout=PYTEST_FAIL,
    )


UNRESOLVED = "curl: (6) Could not resolve host: src.mirror.example\n"


def test_failures_nothing_contradicts_are_proof(tmp_path):
    row = _one(
        tmp_path,
        _agent(["curl -fsSO https://src.mirror.example/povray.tgz\n"] * 2, [UNRESOLVED] * 2),
    )
    assert (row.category, row.signature) == ("infra", "agent_dns_failure"), row.evidence
    assert all(p.cause == "network_outside" for p in row.proof)


def test_a_name_that_does_not_resolve_while_others_did_is_a_wrong_name(tmp_path):
    row = _one(
        tmp_path,
        _agent(
            [
                "curl -fsSO https://src.mirror.example/povray.tgz\n",
                "wget -S https://ftp.other.example/pub/povray/\n",
                "curl -fsSO https://src.mirror.example/povray-2.2.tgz\n",
            ],
            [UNRESOLVED, "  HTTP/1.1 404 Not Found\n", UNRESOLVED],
        ),
    )
    assert (row.category, row.signature) == ("agent_error", "graded_fail"), row.evidence


def test_a_host_that_answered_earlier_was_up(tmp_path):
    busy = "curl: (22) The requested URL returned error: 503\n"
    row = _one(
        tmp_path,
        _agent(
            [
                "wget -S https://archive.mirror.example/web/povray/\n",
                "curl -fsS https://archive.mirror.example/web/2003/povray/ -o a.html\n",
                "curl -fsS https://archive.mirror.example/web/2003/pub/ -o b.html\n",
            ],
            ["HTTP request sent, awaiting response... 200 OK\n", busy, busy],
        ),
    )
    assert (row.category, row.signature) == ("agent_error", "graded_fail"), row.evidence


def test_a_failure_after_the_agent_rewired_the_network_is_its_own(tmp_path):
    row = _one(
        tmp_path,
        _agent(
            [
                "echo 'nameserver 10.9.9.9' > /etc/resolv.conf\n",
                "curl -fsSO https://src.mirror.example/povray.tgz\n",
                "curl -fsSO https://src.mirror.example/povray-2.2.tgz\n",
            ],
            ["", UNRESOLVED, UNRESOLVED],
        ),
    )
    assert (row.category, row.signature) == ("agent_error", "graded_fail"), row.evidence
    # The same failures before it rewired anything are still proof.
    row = _one(
        tmp_path / "before",
        _agent(
            [
                "curl -fsSO https://src.mirror.example/povray.tgz\n",
                "curl -fsSO https://src.mirror.example/povray-2.2.tgz\n",
                "echo 'nameserver 10.9.9.9' > /etc/resolv.conf\n",
            ],
            [UNRESOLVED, UNRESOLVED, ""],
        ),
    )
    assert (row.category, row.signature) == ("infra", "agent_dns_failure"), row.evidence


# --- the agent's own code, the request it built -----------------------------------------------
def _harness_crash() -> TrialSpec:
    return TrialSpec(
        "fix-git",
        reward=None,
        exception_type="KeyError",
        exception_message="'plan'",
        traceback=(
            "Traceback (most recent call last):\n"
            '  File "/opt/harbor/lib/python3.13/site-packages/harbor/trial/trial.py", '
            "line 547, in run\n"
            '  File "/srv/agents/planner/loop.py", line 88, in step\n'
            '    todo = state["plan"][0]\n'
            "KeyError: 'plan'\n"
        ),
        durations=(4, 2, 60, None),
    )


def test_a_crash_in_the_agents_own_code_is_the_agents(tmp_path):
    row = _one(tmp_path, _harness_crash())
    assert (row.category, row.signature) == ("agent_error", "agent_harness_crash"), row.evidence


