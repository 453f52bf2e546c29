"""The ownership rule (audit/RULES.md §1, issue #28), one test per clause.

The system under test is the model together with the agent harness as configured; the serving
plane and any model endpoint, the sandbox, the host, the operator's launch configuration when it
kept the model from being reached, and the verifier's environment are outside it.
"""

from __future__ import annotations

from pathlib import Path

from audit.pipeline import build_report
from audit.read.layout import JobLayout
from tests.audit.agent_formats import SITE, agent_crash_tb, bare, make_trial, set_metadata
from tests.audit.agent_formats import openai_messages as messages
from tests.audit.audit_jobgen import PYTEST_FAIL, TrialSpec, write_job
from tests.conftest import ROOT

CLIENTS = Path(__file__).with_name("captures") / "clients"
CAPTURER = "make_client_captures:Agent"


def _row(job: Path, trial: str | None = None):
    rows = {r.trial: r for r in build_report(JobLayout.local(job)).trials}
    return rows[trial] if trial else next(iter(rows.values()))


def _crash(traceback: str, etype: str, message: str) -> TrialSpec:
    return TrialSpec(
        "fix-git",
        reward=None,
        exception_type=etype,
        exception_message=message,
        traceback=traceback,
        verifier_stdout=None,
        durations=(4, 2, 300, None),
    )


def test_the_rule_is_written_in_rules_md():
    text = (ROOT / "audit" / "RULES.md").read_text()
    section = text[text.index("## 1. The ownership rule") : text.index("## 2.")]
    for clause in (
        "The system under test is the model together with the agent harness as configured",
        "A harness crash triggered by an outside response",
        "A call that produced nothing before its limit is the endpoint's",
        "An agent's setup that fails for an outside reason",
        "A quota, credit or rate-limit refusal from the endpoint is the endpoint's",
        "A 4xx is the request's, unless",
        "Excusing still needs proof",
    ):
        assert clause in section, clause


# --- a harness crash: an outside response behind it, or none --------------------------------
def test_a_crash_on_an_outside_response_is_infra_one_without_is_the_agents(tmp_path):
    text = (CLIENTS / "anthropic-not_json.traceback.txt").read_text()
    job, trial = make_trial(tmp_path, _crash(text, "JSONDecodeError", "Expecting value"))
    bare(trial, "", CAPTURER)
    assert _row(job).signature == "model_endpoint_not_json"
    # The agent's own parse of the model's words fails the same way: no outside response.
    own = agent_crash_tb(
        [("/srv/agent/loop.py", "step", "plan = json.loads(reply_text)"),
         ("/usr/lib/python3.12/json/__init__.py", "loads", "return _default_decoder.decode(s)")],
        "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
    )
    job2, trial2 = make_trial(tmp_path / "b", _crash(own, "JSONDecodeError", "Expecting value"))
    bare(trial2, "", "agent.loop:Agent")
    row = _row(job2)
    assert (row.category, row.signature) == ("agent_error", "agent_harness_crash"), row.evidence


# --- a model call that timed out ------------------------------------------------------------------
def test_a_timeout_is_judged_by_what_the_record_shows(tmp_path):
    for name, expected in (
        ("anthropic-hang", "infra"),  # never answered: not even the headers
        ("anthropic-stall", "agent_error"),  # the answer was streaming in: generating
    ):
        text = (CLIENTS / f"{name}.traceback.txt").read_text()
        job, trial = make_trial(tmp_path / name, _crash(text, "APITimeoutError", "timed out"))
        bare(trial, "", CAPTURER)
        assert _row(job).category == expected, name
    # Neither shown: the client's words alone.
    bare_words = (
        "Traceback (most recent call last):\n"
        f'  File "{SITE}/harbor/trial/trial.py", line 480, in _run_agent_phase\n'
        "    await asyncio.wait_for(\n"
        "Timeout: litellm.Timeout: APITimeoutError - Request timed out.\n"
    )
    job, _ = make_trial(tmp_path / "c", _crash(bare_words, "Timeout", "litellm.Timeout"))
    row = _row(job)
    assert (row.category, row.signature) == ("insufficient_evidence", "model_call_timed_out")


# --- a quota, credit or rate-limit refusal, wherever it is recorded ------------------------------
def test_a_credit_refusal_in_the_agents_own_record_is_the_endpoints(tmp_path):
    spec = TrialSpec("fix-git", reward=0.0, verifier_stdout=PYTEST_FAIL, commands=[],
                     observations=[])
    job, trial = make_trial(tmp_path, spec)
    bare(trial, "my-agent", "harness.agent:MyAgent")
    error = "Error code: 402 - {'error': {'message': 'Insufficient credits', 'code': 402}}"
    trace = messages([("Look.", "ls /app", "main.py\n")])
    set_metadata(trial, {"run": {"status": "error", "trace": trace, "error": error}})
    row = _row(job)
    assert (row.category, row.signature) == ("infra", "model_endpoint_quota"), row.evidence


# --- a 4xx: the request's, unless it began at one moment across trials --------------------------
def _bad_request(task: str) -> TrialSpec:
    message = (
        "litellm.BadRequestError: OpenAIException - Error code: 400 - "
        "{'error': {'message': 'model is not loaded', 'code': 400}}"
    )
    return TrialSpec(
        task,
        reward=None,
        exception_type="BadRequestError",
        exception_message=message,
        traceback=(
            "Traceback (most recent call last):\n"
            f'  File "{SITE}/litellm/main.py", line 401, in acompletion\n'
            f"litellm.exceptions.BadRequestError: {message}\n"
        ),
        verifier_stdout=None,
        durations=(4, 2, 120, None),
    )


def test_a_4xx_is_the_requests_unless_it_began_at_one_moment_across_trials(tmp_path):
    job = write_job(tmp_path, "one", [_bad_request("fix-git")], concurrency=1)
    assert _row(job).signature == "agent_request_rejected"
    # Three trials that had been answered (their trajectories carry replies) all refused with
    # the same 400 at the same moment: the endpoint changed.
    tasks = ("fix-git", "regex-log", "count-dataset-tokens")
    job = write_job(tmp_path, "three", [_bad_request(t) for t in tasks], concurrency=3)
    for row in build_report(JobLayout.local(job)).trials:
        assert (row.category, row.signature) == (
            "infra",
            "model_endpoint_refusing_from_a_moment",
        ), row.evidence
        assert row.model_reached == "yes"
        assert len(row.proof) == 3  # its own words and the other two trials'


# --- the agent's setup --------------------------------------------------------------------------
def test_a_setup_that_cannot_run_in_the_image_is_the_agents_a_hung_one_is_not(tmp_path):
    spec = TrialSpec(
        "fix-git",
        reward=None,
        exception_type="AgentSetupTimeoutError",
        exception_message="Agent setup timed out after 360.0 seconds",
        verifier_stdout=None,
        durations=(4, 360, 0, None),
    )
    job, trial = make_trial(tmp_path, spec)
    bare(trial, "codex")
    (trial / "agent" / "setup").mkdir(parents=True)
    out = trial / "agent" / "setup" / "stdout.txt"
    out.write_text("+ npm install -g @openai/codex\nadded 1 package in 2s\n+ codex --version\n")
    # Its setup timed out and nothing shows why (issue #34): no outside cause, insufficient.
    assert _row(job).category == "insufficient_evidence"
    out.write_text("+ codex --version\n/usr/bin/codex: cannot execute binary file: Exec format "
                   "error\n")
    row = _row(job)
    assert (row.category, row.signature) == ("agent_error", "agent_setup_cannot_run")
    # A download refused by an outside host during the same setup is the outside's.
    out.write_text(
        "+ curl -fsSL https://downloads.example.org/codex.tgz\n"
        "curl: (22) The requested URL returned error: 503\n"
    )
    assert _row(job).category == "infra"
