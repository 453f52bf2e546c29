"""Each signature rule in audit/rules.yaml, proved on a realistic snippet; and the near misses."""

from __future__ import annotations

import pytest
import yaml

from audit.judge.rules import RULES_FILE, load_rules
from audit.pipeline import build_report
from audit.read.layout import JobLayout
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
    # The new-wording set's shape: tmux's server gone after a benign command, and Harbor's own
    # tmux exec into the container killed (exit 137) in trial.log.
    "tmux_server_killed": _spec(
        "headless-terminal",
        reward=None,
        exception_type="RuntimeError",
        exception_message=(
            "hb__x: failed to send non-blocking keys: command=\"tmux send-keys -t terminus-2 "
            "'cat /app/README.md' Enter\", return_code=1, stderr='server exited unexpectedly\\n'"
        ),
        commands=["ls\n"],
        trial_log=["docker compose exec main tmux has-session -t terminus-2 exited with code 137"],
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
    assert (report.score("harbor-0.21").passed, report.score("harbor-0.21").score) == (1, 100.0)


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
