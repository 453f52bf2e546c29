"""A command that ran past the per-command cap: the agent's own wait, or a hung container?

Issue #20: the command decides, read from the agent's own log in whatever format it writes.
Each case is a trial as the agent would leave it (tests/audit/agent_formats.py).
"""

from __future__ import annotations

import json

import pytest

from audit.pipeline import build_report
from audit.read.layout import JobLayout
from tests.audit.agent_formats import (
    SITE,
    bare,
    cc_assistant,
    cc_result,
    cc_tool_result,
    claude_code_stream,
    harbor_exec_timeout_tb,
    make_trial,
    mini_swe_trajectory,
    oh_run,
    oh_run_obs,
    openai_messages,
    openhands_events,
    terminus_episodes,
)
from tests.audit.audit_jobgen import PYTEST_FAIL, TrialSpec

AGENT_FRAMES = [
    ("/home/u/my-agent/harness/agent.py", "run", "result = await run_agent(instruction, env)"),
    (
        "/home/u/my-agent/harness/tools.py",
        "bash",
        "res = await environment.exec(cmd, timeout_sec=600)",
    ),
]


def _audit(job):
    (row,) = build_report(JobLayout.local(job)).trials
    return row


def _custom_crash(tmp_path, last_command: str | None, seconds: int = 600):
    """A custom agent whose harness did not catch Harbor's exec cap, with its own trace."""
    spec = TrialSpec(
        "fix-git",
        reward=None,
        exception_type="RuntimeError",
        exception_message=f"Command timed out after {seconds} seconds",
        traceback=harbor_exec_timeout_tb(AGENT_FRAMES, seconds),
        verifier_stdout=None,
        durations=(4, 2, 700, None),
    )
    job, trial = make_trial(tmp_path, spec)
    bare(trial, "my-agent", "harness.agent:MyAgent")
    if last_command is not None:
        steps = [("Look around.", "ls /app", "main.py\nREADME.md\n"), ("Next.", last_command, None)]
        (trial / "agent" / "trace.json").write_text(
            json.dumps({"messages": openai_messages(steps)})
        )
    return job


@pytest.mark.parametrize(
    ("command", "kind"),
    [
        ("tail -f /var/log/app.log", "follow"),
        ("cd /app && python3 -m http.server 8000", "server"),
        ("cat /proc/1/fd/0", "blocking read"),
        ("sleep 900", "sleeps"),
        ("apt-get update && apt-get install -y texlive-full", "install or build"),
        ("make -j8 all", "install or build"),
        ("python3 train.py --epochs 50", "own program"),
    ],
)
def test_the_agents_own_long_command_is_its_failure(tmp_path, command, kind):
    row = _audit(_custom_crash(tmp_path, command))
    assert (row.category, row.signature) == ("agent_error", "agent_command_over_cap"), row.evidence
    assert any(command.split("&&")[-1].strip()[:20] in e for e in row.evidence)
    assert row.proof == []


@pytest.mark.parametrize(
    "command",
    ["ls -la /app", "echo done", "cat /app/README.md", "timeout 20 curl -s http://127.0.0.1:8000/"],
)
def test_a_command_that_cannot_take_long_proves_a_hung_container(tmp_path, command):
    row = _audit(_custom_crash(tmp_path, command))
    assert (row.category, row.signature) == ("infra", "container_exec_hung"), row.evidence
    (proof,) = row.proof
    assert proof.cause == "environment_event" and proof.where.startswith("agent/trace.json")
    assert command.split()[0] in proof.quote


def test_no_log_of_the_command_is_insufficient_never_infra(tmp_path):
    row = _audit(_custom_crash(tmp_path, None))
    assert row.category == "insufficient_evidence"
    assert row.signature == "command_cap_unknown_command"


def test_a_container_gone_is_infra_whatever_the_command(tmp_path):
    job = _custom_crash(tmp_path, "tail -f /var/log/app.log")
    (trial,) = [p for p in job.iterdir() if p.is_dir()]
    (trial / "trial.log").write_text("Error response from daemon: container 3f2a is not running\n")
    row = _audit(job)
    assert (row.category, row.signature) == ("infra", "container_exec_hung")
    assert row.proof[0].where == "trial.log:1"


def test_harbors_own_command_that_hangs_is_infra(tmp_path):
    """Harbor's verifier exec (not an agent's command) did not return: the container hung."""
    tb = harbor_exec_timeout_tb(
        [
            (
                "/opt/harbor/lib/python3.13/site-packages/harbor/verifier/verifier.py",
                "verify",
                'await self._environment.exec("chmod +x /tests/test.sh", timeout_sec=120)',
            )
        ],
        120,
    )
    spec = TrialSpec(
        "fix-git",
        reward=None,
        exception_type="RuntimeError",
        exception_message="Command timed out after 120 seconds",
        traceback=tb,
    )
    job, _ = make_trial(tmp_path, spec)
    row = _audit(job)
    assert (row.category, row.signature) == ("infra", "container_exec_hung")
    assert "verify" in row.proof[0].reading


def test_mini_swe_agents_timeout_names_the_command(tmp_path):
    """subprocess.TimeoutExpired names the command: that is enough to judge it."""
    tb = (
        "Traceback (most recent call last):\n"
        f'  File "{SITE}/harbor/trial/trial.py", line 547, in run\n'
        '  File "/home/u/agent/run.py", line 40, in step\n'
        "    out = subprocess.run(cmd, shell=True, timeout=30)\n"
        '  File "/usr/lib/python3.13/subprocess.py", line 1209, in run\n'
        "subprocess.TimeoutExpired: Command 'nc -l 9000' timed out after 30 seconds\n"
    )
    spec = TrialSpec(
        "fix-git",
        reward=None,
        exception_type="TimeoutExpired",
        exception_message="Command 'nc -l 9000' timed out after 30 seconds",
        traceback=tb,
    )
    job, trial = make_trial(tmp_path, spec)
    bare(trial, "mini-swe-agent")
    mini_swe_trajectory(trial, [("Listen.", "nc -l 9000", "")], "TimeoutExpired")
    row = _audit(job)
    assert (row.category, row.signature) == ("agent_error", "agent_command_over_cap")


# --- the agent timeout ended a run whose last command never answered ------------------------
def _terminus_timeout(tmp_path, commands, observations):
    spec = TrialSpec(
        "fix-git",
        reward=0.0,
        exception_type="AgentTimeoutError",
        exception_message="Agent execution timed out after 900.0 seconds",
        commands=commands,
        observations=observations,
        verifier_stdout=PYTEST_FAIL,
    )
    return make_trial(tmp_path, spec)


def test_terminus_ls_typed_behind_tail_f_is_the_agents_wait(tmp_path):
    job, _ = _terminus_timeout(
        tmp_path,
        ["tail -f /var/log/syslog\n", "ls /app\n"],
        ["Aug 30 15:50 host kernel: eth0 up\nAug 30 15:51 host cron: run\n", ""],
    )
    row = _audit(job)
    assert row.category == "agent_timeout", row.evidence


def test_terminus_ls_after_a_finished_command_that_never_returns_is_infra(tmp_path):
    job, _ = _terminus_timeout(
        tmp_path, ["make -j4\n", "ls /app\n"], ["done\nroot@c0ffee:/app# \n", ""]
    )
    row = _audit(job)
    assert (row.category, row.signature) == ("infra", "container_exec_hung")
    assert row.proof[0].where == "agent/trajectory.json step 3"


def test_terminus_ls_typed_while_the_previous_command_still_prints_is_the_agents(tmp_path):
    """Its script printed progress but no prompt came back: the `ls` queued behind it."""
    job, _ = _terminus_timeout(
        tmp_path, ["python3 train.py\n", "ls /app\n"], ["epoch 1/50 loss 0.91\n", ""]
    )
    assert _audit(job).category == "agent_timeout"


def test_terminus_episode_dirs_without_trajectory(tmp_path):
    """Terminus-2's episode logs alone (no ATIF): the same reading."""
    job, trial = _terminus_timeout(tmp_path, [], [])
    (trial / "agent" / "trajectory.json").unlink()
    (trial / "agent" / "recording.cast").unlink()
    terminus_episodes(
        trial,
        [("Build it.", ["make -j4\n"]), ("Check.", ["ls /app\n"])],
        [
            "Task: fix the repo.",
            "New Terminal Output:\nroot@c0ffee:/app# make -j4\ndone\nroot@c0ffee:/app# \n",
            "",
        ],
    )
    # Nothing says when the `ls` was sent: it may have been cut off by the timeout at once.
    assert _audit(job).category == "agent_timeout"
    # With the reply's time in litellm's log, the `ls` waited from 15:50 to the timeout.
    terminus_episodes(
        trial,
        [("Build it.", ["make -j4\n"]), ("Check.", ["ls /app\n"])],
        [
            "Task: fix the repo.",
            "New Terminal Output:\nroot@c0ffee:/app# make -j4\ndone\nroot@c0ffee:/app# \n",
            "",
        ],
        ended=["2026-08-30T15:45:00Z", "2026-08-30T15:46:00Z"],
    )
    row = _audit(job)
    assert (row.category, row.signature) == ("infra", "container_exec_hung"), row.evidence
    assert row.proof[0].where == "agent/episode-1/response.txt"
    # The same trial whose build is a `tail -f` in the foreground: the `ls` waited behind it.
    job2, trial2 = _terminus_timeout(tmp_path / "b", [], [])
    (trial2 / "agent" / "trajectory.json").unlink()
    (trial2 / "agent" / "recording.cast").unlink()
    terminus_episodes(
        trial2,
        [("Watch.", ["tail -f /tmp/build.log\n"]), ("Check.", ["ls /app\n"])],
        ["Task.", "New Terminal Output:\nroot@c0ffee:/app# tail -f /tmp/build.log\n[1/9] cc a.c\n"],
    )
    assert _audit(job2).category == "agent_timeout"


def test_openhands_server_in_the_foreground_is_never_excused(tmp_path):
    spec = TrialSpec(
        "fix-git",
        reward=0.0,
        exception_type="AgentTimeoutError",
        exception_message="Agent execution timed out after 1800.0 seconds",
        verifier_stdout=PYTEST_FAIL,
    )
    job, trial = make_trial(tmp_path, spec)
    bare(trial, "openhands")
    openhands_events(
        trial,
        [
            oh_run(1, "python3 -m http.server 8000"),
            oh_run_obs(
                2,
                1,
                "Serving HTTP on 0.0.0.0 port 8000 ...",
                -1,
                "\n[The command timed out after 120 seconds. You may wait longer to see "
                "additional output by sending empty command '']",
            ),
            oh_run(3, "ls /app"),
        ],
    )
    row = _audit(job)
    assert row.category == "agent_timeout", row.evidence


def test_claude_codes_bash_timeout_on_its_dev_server_is_never_excused(tmp_path):
    spec = TrialSpec(
        "fix-git",
        reward=0.0,
        exception_type="AgentTimeoutError",
        exception_message="Agent execution timed out after 1800.0 seconds",
        verifier_stdout=PYTEST_FAIL,
    )
    job, trial = make_trial(tmp_path, spec)
    bare(trial, "claude-code")
    claude_code_stream(
        trial,
        [
            cc_assistant("m1", "Start the dev server.", ("tu1", "npm run dev")),
            cc_tool_result("tu1", "Command timed out after 2m 0.0s\n> vite\nready in 400ms", True),
            cc_assistant("m2", "", ("tu2", "ls")),
        ],
    )
    row = _audit(job)
    assert row.category == "agent_timeout", row.evidence
    claude_code_stream(trial, [cc_result("done", False)])  # keeps the reader honest: no crash
    assert _audit(job).category == "agent_timeout"


def test_a_container_killed_during_the_agents_own_unbounded_build_is_not_excused(tmp_path):
    """SIGKILL (137) while `make -j$(nproc)` ran: the memory was most likely the agent's."""
    spec = TrialSpec(
        "caffe-cifar-10",
        reward=None,
        exception_type="RewardFileNotFoundError",
        exception_message="No reward file found at /logs/verifier/reward.txt",
        commands=["cd /app/caffe && make all -j$(nproc) 2>&1 | tail -5\n"],
        observations=[""],
        verifier_stdout="",
    )
    job, trial = make_trial(tmp_path, spec)
    (trial / "agent" / "command-1").mkdir()
    (trial / "agent" / "command-1" / "return-code.txt").write_text("137")
    row = _audit(job)
    assert (row.category, row.signature) == ("agent_error", "agent_build_memory_pressure")
    # The same kill while the agent only edited a file: the container died under it.
    spec.commands = ["sed -i 's/a/b/' /app/main.c\n"]
    job2, trial2 = make_trial(tmp_path / "b", spec)
    (trial2 / "agent" / "command-1").mkdir()
    (trial2 / "agent" / "command-1" / "return-code.txt").write_text("137")
    assert _audit(job2).signature == "container_killed"


def test_an_installed_agents_own_run_past_its_cap_is_the_agents(tmp_path):
    """The exec that outran the cap is the agent's CLI run (command-N without a return code),
    whatever its last tool call was: the agent ran long, nothing shows a hung container."""
    tb = harbor_exec_timeout_tb(
        [
            (
                f"{SITE}/harbor/agents/installed/base.py",
                "run",
                "result = await environment.exec(command=exec_input.command, timeout_sec=1800)",
            )
        ],
        1800,
    )
    spec = TrialSpec(
        "fix-git",
        reward=None,
        exception_type="RuntimeError",
        exception_message="Command timed out after 1800 seconds",
        traceback=tb,
    )
    job, trial = make_trial(tmp_path, spec)
    bare(trial, "claude-code")
    claude_code_stream(trial, [cc_assistant("m1", "List.", ("t1", "ls"))])
    for n, (cmd, rc) in enumerate(
        [
            ("npm install -g @anthropic-ai/claude-code", "0"),
            ("claude --print -- 'Solve the task' | tee /logs/agent/claude-code.txt", None),
        ]
    ):
        d = trial / "agent" / f"command-{n}"
        d.mkdir()
        (d / "command.txt").write_text(cmd + "\n")
        if rc is not None:
            (d / "return-code.txt").write_text(rc)
    row = _audit(job)
    assert (row.category, row.signature) == ("agent_error", "agent_command_over_cap"), row.evidence
    assert any("agent/command-1/command.txt" in e for e in row.evidence)
