"""Each signature rule in audit/rules.yaml, proved on a realistic snippet; and the near misses."""

from __future__ import annotations

import pytest
import yaml

from audit.layout import JobLayout
from audit.report import build_report
from audit.rules import RULES_FILE, load_rules
from tests.audit.audit_jobgen import PYTEST_FAIL, PYTEST_PASS, TrialSpec, apt_502, write_job

DOCKER_COMPOSE_UP = (
    "Docker compose command failed for environment {task}. Command: docker compose "
    "--project-name {task}__abc1234__env --project-directory /data/tb21-tasks/{task}/environment "
    "-f /opt/harbor/environments/docker/docker-compose-prebuilt.yaml up --detach --wait. "
    "Return code: 1. Stdout: {stdout}. Stderr: None. "
)
SETUP_TB = (
    "Traceback (most recent call last):\n"
    '  File "/opt/harbor/harbor/trial/trial.py", line 413, in _prepare\n'
    "    await self._setup_agent()\n"
    '  File "/opt/harbor/harbor/trial/trial.py", line 1242, in _setup_agent\n'
    "    await asyncio.wait_for(\n"
    '  File "/opt/harbor/harbor/agents/terminus_2/tmux_session.py", line 498, in start\n'
    "    await self._attempt_tmux_installation()\n"
    '  File "/opt/harbor/harbor/environments/docker/docker.py", line 682, in exec\n'
    '    raise RuntimeError(f"Command timed out after {timeout_sec} seconds")\n'
    "RuntimeError: Command timed out after 120 seconds\n"
)
VERIFIER_UV = (
    "+ curl -LsSf https://astral.mirror.example/uv/0.9.5/install.sh | sh\n"
    "downloading uv 0.9.5 x86_64-unknown-linux-gnu\n"
)


def _spec(task: str, **kw) -> TrialSpec:
    return TrialSpec(task, **kw)


# rule name -> a trial that shows it, as Harbor 0.21.0 would have written it.
CASES: dict[str, TrialSpec] = {
    "agent_killed_tmux": _spec(
        "headless-terminal",
        reward=None,
        exception_type="RuntimeError",
        exception_message=(
            'hb__x: failed to send non-blocking keys: command="tmux send-keys -t terminus-2 '
            "'ls' Enter\", return_code=1, stderr='no server running on /tmp/tmux-0/default\\n'"
        ),
        commands=["tmux ls\n", "tmux kill-server\n", "ls\n"],
        durations=(4, 2, 300, None),
    ),
    "tmux_session_lost": _spec(
        "headless-terminal",
        reward=None,
        exception_type="RuntimeError",
        exception_message=(
            "hb__x: failed to send blocking keys: command=\"tmux send-keys -t terminus-2 'make' "
            "Enter\", return_code=1, stderr=\"can't find session: terminus-2\\n\", stdout=''"
        ),
        commands=["make -j4\n"],
        durations=(4, 2, 300, None),
    ),
    "docker_address_pools_exhausted": _spec(
        "fix-git",
        reward=None,
        exception_type="RuntimeError",
        exception_message=DOCKER_COMPOSE_UP.format(
            task="fix-git",
            stdout=" Network fix-git__abc1234__env_default  Creating\nfailed to create network "
            "fix-git__abc1234__env_default: Error response from daemon: could not find an "
            "available, non-overlapping IPv4 address pool among the defaults to assign to the "
            "network",
        ),
        durations=(1, 0, 0, None),
    ),
    "egress_sidecar_build_failed": _spec(
        "fix-git",
        reward=None,
        exception_type="RuntimeError",
        exception_message=(
            "Failed to build Docker image harbor-prebuilt:harbor-docker-egress-control-sidecar"
            "--b1e6760734a9e6f6, exit code 125, output: unknown flag: --file"
        ),
        durations=(1, 0, 0, None),
    ),
    "image_pull_failed": _spec(
        "fix-git",
        reward=None,
        exception_type="RuntimeError",
        exception_message=DOCKER_COMPOSE_UP.format(
            task="fix-git",
            stdout=" main Pulling \n main Error pull access denied for alexgshaw/fix-git, "
            "repository does not exist or may require 'docker login'",
        ),
        durations=(1, 0, 0, None),
    ),
    "environment_start_failed": _spec(
        "fix-git",
        reward=None,
        exception_type="RuntimeError",
        exception_message=DOCKER_COMPOSE_UP.format(
            task="fix-git",
            stdout=" main Started\ncontainer fix-git__abc1234__env-main-1 exited (137)",
        ),
        durations=(1, 0, 0, None),
    ),
    "tool_install_failed": _spec(
        "fix-git",
        reward=None,
        exception_type="RuntimeError",
        exception_message="Command timed out after 120 seconds",
        traceback=SETUP_TB,
        durations=(4, 240, 0, None),
    ),
    "model_context_length_exceeded": _spec(
        "fix-git",
        reward=None,
        exception_type="BadRequestError",
        exception_message=(
            "litellm.BadRequestError: OpenAIException - This model's maximum context length is "
            "32768 tokens. However, you requested 35210 tokens in the messages."
        ),
        durations=(4, 2, 900, None),
    ),
    "model_endpoint_unreachable": _spec(
        "fix-git",
        reward=None,
        exception_type="APIConnectionError",
        exception_message=(
            "litellm.APIConnectionError: APIConnectionError: OpenAIException - [Errno 111] "
            "Connection refused"
        ),
        durations=(4, 2, 37, None),
    ),
    "model_endpoint_5xx": _spec(
        "fix-git",
        reward=None,
        exception_type="InternalServerError",
        exception_message=(
            "litellm.InternalServerError: InternalServerError: OpenAIException - Error code: 503 "
            "- {'error': {'message': 'No available workers', 'code': 503}}"
        ),
        durations=(4, 2, 37, None),
    ),
    "verifier_proxy_5xx": _spec(
        "prove-plus-comm",
        reward=0.0,
        verifier_stdout="+ apt-get update\n" + apt_502("coq") + "uvx: command not found\n",
    ),
    "verifier_tls_failure": _spec(
        "fix-git",
        reward=0.0,
        verifier_stdout=VERIFIER_UV
        + "curl: (60) SSL certificate problem: unable to get local issuer certificate\n"
        "/tests/test.sh: line 11: uv: command not found\n",
    ),
    "verifier_dns_failure": _spec(
        "fix-git",
        reward=0.0,
        verifier_stdout="+ curl -LsSf https://astral.mirror.example/uv/install.sh | sh\n"
        "curl: (6) Could not resolve host: astral.mirror.example\n"
        "/tests/test.sh: line 11: uv: command not found\n",
    ),
    "verifier_curl_timeout": _spec(
        "fix-git",
        reward=0.0,
        verifier_stdout="+ curl -LsSf https://astral.mirror.example/uv/install.sh | sh\n"
        "curl: (28) Failed to connect to astral.mirror.example port 443 after 130104 ms: "
        "Couldn't connect to server\n/tests/test.sh: line 11: uv: command not found\n",
    ),
    "verifier_apt_fetch_failed": _spec(
        "fix-git",
        reward=0.0,
        verifier_stdout="+ apt-get install -y python3-pytest\n"
        "Err:1 http://deb.mirror.example/debian bookworm/main amd64 python3-pytest all 7.2.1-2\n"
        "  Connection failed [IP: 10.0.0.5 80]\n"
        "E: Failed to fetch http://deb.mirror.example/debian/pool/main/p/pytest/"
        "python3-pytest_7.2.1-2_all.deb  Connection failed [IP: 10.0.0.5 80]\n",
    ),
    "verifier_package_download_failed": _spec(
        "fix-git",
        reward=0.0,
        verifier_stdout=VERIFIER_UV
        + "error: Failed to fetch: `https://pypi.mirror.example/simple/pytest/`\n"
        "  Caused by: Request failed after 3 retries\n",
    ),
    "verifier_timeout_running_tests": _spec(
        "pytorch-model-recovery",
        reward=None,
        exception_type="VerifierTimeoutError",
        exception_message="Verifier execution timed out after 900.0 seconds",
        verifier_stdout="Installed 38 packages in 2.41s\n"
        "============================= test session starts ==============================\n"
        "collected 5 items\n\ntests/test_outputs.py::test_model_file_exists PASSED\n"
        "tests/test_outputs.py::test_model_loss ",
    ),
    "verifier_timeout_installing_dependencies": _spec(
        "torch-tensor-parallelism",
        reward=None,
        exception_type="VerifierTimeoutError",
        exception_message="Verifier execution timed out after 900.0 seconds",
        verifier_stdout="Reading package lists...\nResolved 31 packages in 1.12s\n"
        "Downloading torch (841.6MiB)\nDownloading nvidia-cudnn-cu12 (634.0MiB)\n",
    ),
    "verifier_timeout": _spec(
        "fix-git",
        reward=None,
        exception_type="VerifierTimeoutError",
        exception_message="Verifier execution timed out after 600.0 seconds",
    ),
    "agent_proxy_5xx": _spec(
        "make-doom-for-mips",
        reward=0.0,
        exception_type="AgentTimeoutError",
        exception_message="Agent execution timed out after 5400.0 seconds",
        commands=["apt-get install -y gcc-mipsel-linux-gnu\n", "pip download pycparser\n"],
        observations=[
            apt_502("gcc-mipsel-linux-gnu"),
            "WARNING: Retrying after connection broken by 'ProxyError('Unable to connect to "
            "proxy', OSError('Tunnel connection failed: 502 Bad Gateway'))'\n",
        ],
        verifier_stdout=PYTEST_FAIL,
    ),
    "agent_apt_fetch_failed": _spec(
        "fix-git",
        reward=0.0,
        commands=["apt-get install -y git-lfs\n", "apt-get install -y git-lfs\n"],
        observations=[
            "Err:1 http://deb.mirror.example/debian bookworm/main amd64 git-lfs amd64 3.3.0-1\n"
            "  Temporary failure resolving 'deb.mirror.example'\n"
            "E: Failed to fetch http://deb.mirror.example/debian/pool/main/g/git-lfs/"
            "git-lfs_3.3.0-1_amd64.deb  Temporary failure resolving 'deb.mirror.example'\n",
            "E: Failed to fetch http://deb.mirror.example/debian/pool/main/g/git-lfs/"
            "git-lfs_3.3.0-1_amd64.deb  Temporary failure resolving 'deb.mirror.example'\n",
        ],
        verifier_stdout=PYTEST_FAIL,
    ),
    "agent_tls_failure": _spec(
        "dna-assembly",
        reward=0.0,
        exception_type="AgentTimeoutError",
        exception_message="Agent execution timed out after 10800.0 seconds",
        commands=["pip install primer3-py\n", "python3 fetch.py\n"],
        observations=[
            "Could not fetch URL https://pypi.mirror.example/simple/primer3-py/: There was a "
            "problem confirming the ssl certificate: [SSL: CERTIFICATE_VERIFY_FAILED] "
            "certificate verify failed (_ssl.c:1006)\n",
            "ssl.SSLEOFError: [SSL: UNEXPECTED_EOF_WHILE_READING] EOF occurred in violation of "
            "protocol (_ssl.c:1006)\n",
        ],
        verifier_stdout=PYTEST_FAIL,
    ),
    "agent_dns_failure": _spec(
        "fix-git",
        reward=0.0,
        commands=[
            "git clone https://git.mirror.example/repo.git\n",
            "curl -O https://x.example/a\n",
        ],
        observations=[
            "fatal: unable to access 'https://git.mirror.example/repo.git/': Could not resolve "
            "host: git.mirror.example\n",
            "curl: (6) Could not resolve host: x.example\n",
        ],
        verifier_stdout=PYTEST_FAIL,
    ),
    "agent_curl_timeout": _spec(
        "build-pov-ray",
        reward=0.0,
        commands=["curl -m 30 -O https://web.archive.example/povray.tgz\n"] * 2,
        observations=[
            "curl: (28) Operation timed out after 30001 milliseconds with 0 bytes received\n",
            "curl: (28) Operation timed out after 30000 milliseconds with 0 bytes received\n",
        ],
        verifier_stdout=PYTEST_FAIL,
    ),
    "agent_package_download_failed": _spec(
        "fix-git",
        reward=0.0,
        commands=["pip install numpy==2.1.0\n", "uv pip install numpy==2.1.0\n"],
        observations=[
            "ERROR: Could not find a version that satisfies the requirement numpy==2.1.0 (from "
            "versions: none)\n",
            "error: Failed to fetch: `https://pypi.mirror.example/simple/numpy/`\n",
        ],
        verifier_stdout=PYTEST_FAIL,
    ),
    "agent_exec_failed": _spec(
        "fix-git",
        reward=None,
        exception_type="RewardFileNotFoundError",
        exception_message="No reward file found at /jobs/x/verifier/reward.txt or reward.json",
        exit_code="126",
    ),
    "reward_file_missing": _spec(
        "fix-git",
        reward=None,
        exception_type="RewardFileNotFoundError",
        exception_message="No reward file found at /jobs/x/verifier/reward.txt or reward.json",
        verifier_stdout='Traceback (most recent call last):\n  File "/tests/grade.py"\n'
        "KeyError: 'expected'\n",
    ),
}


def _classify(tmp_path, spec: TrialSpec):
    job = write_job(tmp_path, "job", [spec], concurrency=1)
    report = build_report(JobLayout.local(job))
    (trial,) = report.trials
    return trial


def test_every_rule_has_a_case_and_the_file_parses():
    names = [r.rule.name for r in load_rules()]
    assert sorted(names) == sorted(CASES), "add a CASES entry for every rule (and only those)"
    raw = yaml.safe_load(RULES_FILE.read_text())["rules"]
    assert all(r["explanation"].strip() for r in raw)


@pytest.mark.parametrize("rule_name", sorted(CASES))
def test_rule(tmp_path, rule_name):
    rule = next(r.rule for r in load_rules() if r.rule.name == rule_name)
    trial = _classify(tmp_path, CASES[rule_name])
    assert (trial.signature, trial.category) == (rule.name, rule.category)
    assert trial.phase == rule.phase
    assert trial.explanation == rule.explanation
    assert trial.evidence, "a signature must show the lines it matched"


# --- near misses: evidence that must NOT turn into the wrong category -------------------------
def test_one_download_timeout_does_not_make_an_agent_failure_infra(tmp_path):
    trial = _classify(
        tmp_path,
        _spec(
            "fix-git",
            reward=0.0,
            commands=["curl -O https://x.example/a\n"],
            observations=["curl: (28) Connection timed out after 10000 milliseconds\n"],
            verifier_stdout=PYTEST_FAIL,
        ),
    )
    assert (trial.category, trial.signature) == ("agent_error", "graded_fail")


def test_verifier_network_noise_with_a_test_summary_is_the_agents_fail(tmp_path):
    # apt complained, but the tests ran and reported: the grade is real.
    trial = _classify(
        tmp_path, _spec("fix-git", reward=0.0, verifier_stdout=apt_502("tree") + PYTEST_FAIL)
    )
    assert trial.category == "agent_error"


def test_network_noise_on_a_passed_trial_is_ignored(tmp_path):
    trial = _classify(
        tmp_path,
        _spec("fix-git", reward=1.0, verifier_stdout=apt_502("tree") + PYTEST_PASS),
    )
    assert (trial.category, trial.signature, trial.evidence) == ("passed", None, [])


def test_agent_timeout_with_reward_1_stands_as_a_pass(tmp_path):
    spec = _spec(
        "fix-git",
        reward=1.0,
        exception_type="AgentTimeoutError",
        exception_message="Agent execution timed out after 900.0 seconds",
        verifier_stdout=PYTEST_PASS,
    )
    job = write_job(tmp_path, "job", [spec], concurrency=1)
    report = build_report(JobLayout.local(job))
    (trial,) = report.trials
    assert (trial.category, trial.signature, trial.counted_as) == (
        "agent_timeout",
        "agent_timeout_graded",
        "pass",
    )
    assert (report.raw.passed, report.raw.score) == (1, 100.0)


def test_tmux_failing_to_start_is_infra_even_if_the_agent_never_ran(tmp_path):
    trial = _classify(
        tmp_path,
        _spec(
            "fix-git",
            reward=None,
            exception_type="RuntimeError",
            exception_message="Failed to start tmux session. Error: None",
            commands=[],
            durations=(4, 48, 0, None),
        ),
    )
    assert (trial.category, trial.signature) == ("infra", "tool_install_failed")


def test_kill_server_seen_only_in_the_recording_still_counts(tmp_path):
    """No trajectory (agent crashed before dumping it): the cast's input events are read."""
    spec = CASES["agent_killed_tmux"]
    job = write_job(tmp_path, "job", [spec], concurrency=1)
    (trial_dir,) = [p for p in job.iterdir() if p.is_dir()]
    (trial_dir / "agent" / "trajectory.json").unlink()
    report = build_report(JobLayout.local(job))
    assert report.trials[0].signature == "agent_killed_tmux"
    assert "agent/recording.cast" in " ".join(report.trials[0].evidence)


def test_unknown_exception_without_reward_is_insufficient_evidence(tmp_path):
    trial = _classify(
        tmp_path,
        _spec(
            "fix-git",
            reward=None,
            exception_type="AddTestsDirError",
            exception_message="Failed to add tests directory to environment.",
        ),
    )
    assert (trial.category, trial.signature) == (
        "insufficient_evidence",
        "unexplained_AddTestsDirError",
    )


def test_a_broken_rules_file_names_the_rule_and_key(tmp_path):
    bad = tmp_path / "rules.yaml"
    bad.write_text(
        "rules:\n  - name: my_rule\n    category: infra\n    phase: agent\n"
        "    all: [{sources: [agent_stdout], patterns: ['x']}]\n    explanation: something here\n"
    )
    with pytest.raises(ValueError, match=r"rules\.0 \(my_rule\)\.all\.0\.sources.*agent_stdout"):
        load_rules(bad)
    bad.write_text(
        "rules:\n  - name: my_rule\n    category: infra\n    phase: agent\n"
        "    all: [{sources: [exception], patterns: ['(unclosed']}]\n"
        "    explanation: something here\n"
    )
    with pytest.raises(ValueError, match=r"my_rule.*not a valid regex"):
        load_rules(bad)
