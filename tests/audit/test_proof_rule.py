"""The rule: a verdict that puts a non-pass up for rerun stands only with proof (audit/RULES.md).

Proved four ways: admit() on verdicts built by hand; a detector that forgets its proof is
overruled end to end; a rules.yaml infra rule without `proof:` does not load; and, over
hundreds of generated trials mixing every failure family, every rerun verdict quotes a line
that really is in the file it names.
"""

from __future__ import annotations

import random

import pytest

from audit.judge import detectors as D
from audit.judge.rules import load_rules
from audit.judge.verdict import RERUN_CATEGORIES, Classification, Proof, admit
from audit.pipeline import build_report
from audit.read.layout import JobLayout
from tests.audit import agent_formats as F
from tests.audit.audit_jobgen import PYTEST_FAIL, PYTEST_PASS, TrialSpec, apt_502, write_job
from tests.audit.proof_check import quoted_in_file
from tests.conftest import SAMPLE_JOBS


def _verdict(category: str, proof: list[Proof]) -> Classification:
    return Classification(category, "sig", "agent", "why", ["x: y"], proof=proof)


@pytest.mark.parametrize("category", RERUN_CATEGORIES)
def test_a_rerun_verdict_without_proof_is_insufficient(category):
    got = admit(_verdict(category, []))
    assert (got.category, got.signature) == ("insufficient_evidence", "unproven_sig")
    assert "not put up for rerun" in got.explanation


@pytest.mark.parametrize(
    "bad",
    [
        Proof("endpoint_response", "", "503"),  # nowhere
        Proof("endpoint_response", "trial.log:3", "  "),  # nothing quoted
        Proof("the_model_was_tired", "trial.log:3", "503"),  # type: ignore[arg-type]
    ],
)
def test_a_proof_must_say_where_what_and_of_which_kind(bad):
    assert admit(_verdict("infra", [bad])).category == "insufficient_evidence"


def test_a_proven_verdict_and_any_other_verdict_stand():
    proof = [Proof("environment_event", "agent/command-1/return-code.txt", "137")]
    assert admit(_verdict("infra", proof)).category == "infra"
    for category in ("agent_error", "agent_timeout", "verifier_timeout", "passed"):
        assert admit(_verdict(category, [])).category == category


def test_a_detector_that_forgets_its_proof_is_overruled(tmp_path, monkeypatch):
    def careless(ev, ctx):
        return Classification("infra", "looks_like_infra", "agent", "trust me", ["trial.log: ?"])

    fake = D.Detector(careless, "careless")
    monkeypatch.setattr(D, "DETECTORS", [fake, *D.DETECTORS])
    monkeypatch.setattr("audit.judge.classify.DETECTORS", [fake, *D.DETECTORS])
    job = write_job(tmp_path, "job", [TrialSpec("fix-git", reward=0.0)], concurrency=1)
    report = build_report(JobLayout.local(job))
    (row,) = report.trials
    assert (row.category, row.signature) == ("insufficient_evidence", "unproven_looks_like_infra")
    assert report.rerun == []


def test_an_infra_rule_must_name_its_proof(tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rules:\n"
        "  - name: agent_proxy_5xx\n"
        "    category: infra\n"
        "    phase: agent\n"
        "    all: [{sources: [agent_output], patterns: ['502']}]\n"
        "    explanation: a 502 somewhere in the output\n"
    )
    with pytest.raises(ValueError, match="proof"):
        load_rules(rules)
    rules.write_text(
        rules.read_text().replace("    all:", "    proof: network_outside\n    all:")
    )
    assert load_rules(rules)[0].rule.proof == "network_outside"


def test_every_rule_is_a_registered_signature_of_its_category(tmp_path):
    from audit.judge.signatures import lookup

    for compiled in load_rules():
        registered = lookup(compiled.rule.name)
        assert registered is not None and registered.category == compiled.rule.category
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rules:\n"
        "  - name: made_up_signature\n"
        "    category: agent_error\n"
        "    phase: agent\n"
        "    all: [{sources: [agent_output], patterns: ['oops']}]\n"
        "    explanation: a signature nobody registered\n"
    )
    with pytest.raises(ValueError, match="not in the registry"):
        load_rules(rules)
    rules.write_text(rules.read_text().replace("made_up_signature", "disk_full"))
    with pytest.raises(ValueError, match="category"):
        load_rules(rules)


# --- the property: every rerun verdict quotes a line that is in the file it names ------------
EXCEPTIONS = [
    (None, "", None),
    ("AgentTimeoutError", "Agent execution timed out after 900.0 seconds", None),
    ("VerifierTimeoutError", "Verifier execution timed out after 900.0 seconds", None),
    ("CancelledError", "", None),
    ("RewardFileNotFoundError", "No reward file found at /logs/verifier/reward.txt", None),
    ("RuntimeError", "Command timed out after 120 seconds", None),
    (
        "InternalServerError",
        "litellm.InternalServerError: OpenAIException - Error code: 503 - No available workers",
        '  File "/x/site-packages/litellm/main.py", line 1, in acompletion\n',
    ),
    (
        "RateLimitError",
        "litellm.RateLimitError: OpenAIException - Error code: 429 - Too Many Requests",
        '  File "/x/site-packages/litellm/main.py", line 1, in acompletion\n',
    ),
    (
        "BadRequestError",
        "Error code: 400 - {'error': {'message': 'request (200000 tokens) exceeds the available "
        "context size (131072 tokens)'}}",
        '  File "/x/site-packages/openai/_base_client.py", line 1, in request\n',
    ),
    (
        "JSONDecodeError",
        "Expecting value: line 1 column 1 (char 0)",
        '  File "/home/u/agent/client.py", line 9, in chat\n    data = resp.json()\n',
    ),
    (
        "RuntimeError",
        "Docker compose command failed for environment x. all predefined address "
        "pools have been fully subnetted",
        None,
    ),
]
COMMANDS = [
    ("ls -la /app\n", "total 8\nmain.py\n"),
    ("apt-get install -y gcc\n", apt_502("gcc")),
    (
        "pip install primer3-py\n",
        "ssl.SSLError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed\n",
    ),
    (
        "curl -fsSL https://files.mirror.example/a.tgz\n",
        "curl: (6) Could not resolve host: files.mirror.example\n",
    ),
    ("qemu-system-x86_64 -nographic\n", "rosetta error: Unimplemented syscall number 282\n"),
    ("make -j8\n", "Killed\n[ 42.0] Out of memory: Killed process 812 (cc1plus)\n"),
    ("tail -f /var/log/syslog\n", "Aug 30 host kernel: up\n"),
    ("python3 solve.py\n", "done\n"),
    ("echo hi > /tmp/x\n", ""),
]
VERIFIER = [
    PYTEST_PASS,
    PYTEST_FAIL,
    "+ apt-get update\n" + apt_502("curl"),
    "",
    None,
    "curl: (35) OpenSSL SSL_connect: SSL_ERROR_SYSCALL in connection to "
    "release-assets.code.example:443\n/tests/test.sh: line 11: uvx: command not found\n",
]


def _random_spec(rng: random.Random, tasks: list[str]) -> TrialSpec:
    etype, message, frames = rng.choice(EXCEPTIONS)
    reward = rng.choice([1.0, 0.0, 0.0, None])
    if etype in (
        "VerifierTimeoutError",
        "CancelledError",
        "RuntimeError",
        "InternalServerError",
        "RateLimitError",
        "BadRequestError",
        "JSONDecodeError",
        "RewardFileNotFoundError",
    ):
        reward = None
    picked = rng.sample(COMMANDS, rng.randint(0, 3))
    traceback = None
    if frames:
        last = f"{etype}: {message}"
        traceback = f"Traceback (most recent call last):\n{frames}{last}\n"
    return TrialSpec(
        rng.choice(tasks),
        reward=reward,
        exception_type=etype,
        exception_message=message,
        traceback=traceback,
        verifier_stdout=rng.choice(VERIFIER),
        commands=[c for c, _ in picked],
        observations=[o for _, o in picked],
        exit_code=rng.choice([None, None, "137", "126"]),
        write_result=rng.random() > 0.1,
        trial_log=rng.choice([[], [], ["Received SIGTERM, shutting down"]]),
    )


ENDINGS = [
    'API Error: 402 {"type":"error","error":{"message":"Insufficient credits"}}',
    "litellm.RateLimitError: OpenAIException - Error code: 429 - Too Many Requests",
    "Error code: 503 - {'error': 'Service Unavailable'}",
    "Error code: 400 - {'error': {'message': 'request (9000 tokens) exceeds the available "
    "context size (8192 tokens)'}}",
    "Reached max turns (30)",
]


def _other_agent(trial, rng: random.Random) -> None:
    """Dress a generated trial as another agent would leave it, ending its run some way."""
    fmt = rng.choice(["terminus", "claude-code", "openhands", "mini-swe-agent", "custom"])
    if fmt == "terminus":
        return
    words = rng.choice(ENDINGS)
    F.bare(trial, fmt)
    if fmt == "claude-code":
        F.claude_code_stream(
            trial,
            [
                F.cc_assistant("m1", "Look.", ("t1", "ls")),
                F.cc_tool_result("t1", "a.py"),
                F.cc_result(words, rng.random() < 0.7),
            ],
        )
    elif fmt == "openhands":
        F.openhands_events(
            trial, [F.oh_run(1, "ls"), F.oh_run_obs(2, 1, "a.py", 0), F.oh_state(3, "error", words)]
        )
    elif fmt == "mini-swe-agent":
        status = rng.choice(["APIError", "RateLimitError", "LimitsExceeded", "Submitted"])
        F.mini_swe_trajectory(trial, [("Look.", "ls", "a.py")], status, words)
    elif (trial / "result.json").exists():
        trace = F.openai_messages([("Look.", "ls", "a.py")])
        F.set_metadata(trial, {"run": {"status": "error", "trace": trace, "error": words}})


@pytest.mark.parametrize("seed", range(6))
def test_every_rerun_verdict_quotes_a_line_of_the_file_it_names(tmp_path, seed):
    """Seeds 2-5 also dress trials as Claude Code, OpenHands, mini-swe-agent or a custom agent."""
    rng = random.Random(seed)
    tasks = ["fix-git", "regex-log", "mailman", "build-pov-ray", "caffe-cifar-10", "dna-assembly"]
    specs = [_random_spec(rng, tasks) for _ in range(60)]
    finished = None if seed % 2 else "2026-08-31T07:08:03.000000"
    job = write_job(
        tmp_path, f"job{seed}", specs, concurrency=8, finished_local=finished, seed=seed
    )
    if seed >= 2:
        for trial in sorted(p for p in job.iterdir() if p.is_dir()):
            _other_agent(trial, rng)
    report = build_report(JobLayout.local(job))
    rerun = [t for t in report.trials if t.category in RERUN_CATEGORIES]
    assert rerun, "the generator should produce some rerun verdicts"
    for row in rerun:
        assert row.proof, (row.trial, row.signature)
        for p in row.proof:
            assert quoted_in_file(job, row.trial, p.where, p.quote), (row.trial, row.signature, p)


@pytest.mark.parametrize(
    "job",
    [
        "sigint-demo",
        "terminus2-dead-endpoint",
        "terminus2-no-tmux",
        "pitfall-missing-image",
        "pitfall-workdir-missing",
    ],
)
def test_the_sample_jobs_rerun_verdicts_quote_their_files(job):
    report = build_report(JobLayout.local(SAMPLE_JOBS / job))
    for row in report.trials:
        if row.category in RERUN_CATEGORIES:
            assert row.proof
            for p in row.proof:
                assert quoted_in_file(SAMPLE_JOBS / job, row.trial, p.where, p.quote), p
