"""Write realistic Harbor 0.21.0 job dirs for the audit tests and benchmark.

The files follow the layout and field names of the real sample jobs in
shared/reference/harbor-sample-jobs (reference §3): job config.json / result.json / job.log,
and per trial config.json, lock.json, result.json (TrialResult with exception_info,
verifier_result, phase timings and agent_result tokens), trial.log, exception.txt,
agent/trajectory.json (ATIF-v1.7), agent/recording.cast, verifier/test-stdout.txt and
verifier/reward.txt. Hosts in the evidence snippets are placeholders under `.example`.

`seed_final_run()` is the seed's final run (89 trials: 61 reward 1, 24 reward 0, 4 no reward;
13 AgentTimeoutError, 2 VerifierTimeoutError, 1 RuntimeError from `tmux kill-server`) with the
infra evidence of the seed's audit tables.
"""

from __future__ import annotations

import json
import random
import string
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.machine import SHARED

TB21_TASKS = SHARED / "data" / "tb21-tasks"

TRACEBACKS = {
    "AgentTimeoutError": (
        'Traceback (most recent call last):\n  File "/opt/harbor/lib/python3.13/site-packages/'
        'harbor/trial/trial.py", line 489, in _run_agent_phase\n    raise AgentTimeoutError(\n'
        "harbor.trial.errors.AgentTimeoutError: {msg}\n"
    ),
    "VerifierTimeoutError": (
        'Traceback (most recent call last):\n  File "/opt/harbor/lib/python3.13/site-packages/'
        'harbor/trial/trial.py", line 560, in _run_verification\n    raise VerifierTimeoutError(\n'
        "harbor.trial.errors.VerifierTimeoutError: {msg}\n"
    ),
    "RuntimeError": (
        'Traceback (most recent call last):\n  File "/opt/harbor/lib/python3.13/site-packages/'
        'harbor/trial/trial.py", line 480, in _run_agent_phase\n    await asyncio.wait_for(\n'
        '  File "/opt/harbor/lib/python3.13/site-packages/harbor/agents/terminus_2/'
        'tmux_session.py", line 722, in _send_key_batches\n'
        "    raise self._send_keys_error(action, command, result)\nRuntimeError: {msg}\n"
    ),
}


@dataclass
class TrialSpec:
    """One trial to write. Durations are (environment_setup, agent_setup, agent, verifier) s."""

    task: str
    reward: float | None = 1.0
    exception_type: str | None = None
    exception_message: str = ""
    traceback: str | None = None
    trial_log: list[str] = field(default_factory=list)
    verifier_stdout: str | None = None
    commands: list[str] = field(default_factory=lambda: ["ls -la /app\n", "cat README.md\n"])
    observations: list[str] = field(default_factory=lambda: ["total 8\n", "# task\n"])
    tokens: tuple[int, int, int] = (20_000, 0, 1_500)
    durations: tuple[float, float, float, float | None] = (4.0, 2.0, 300.0, 40.0)
    exit_code: str | None = None
    write_result: bool = True
    corrupt_result: bool = False
    trial_id: str | None = None
    # What the board's rows read (audit/score/conventions.py): the agent's version, the model
    # (provider, name; None: result.json records none), the verifier's rewards when not
    # {"reward": reward}, and an exception_info without an exception_type.
    agent_version: str = "2.0.0"
    model: tuple[str, str] | None = ("openai", "qwen38-27b")
    rewards: dict[str, float] | None = None
    untyped_exception: bool = False


def _trial_id(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(7))


def _ts(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _exception_info(spec: TrialSpec, at: str) -> tuple[dict | None, str | None]:
    """The trial's exception_info and its traceback (for exception.txt), or None."""
    if spec.untyped_exception:
        return {"exception_type": None, "exception_message": spec.exception_message,
                "exception_traceback": None, "occurred_at": at}, None
    if not spec.exception_type:
        return None, None
    tb = spec.traceback or TRACEBACKS.get(
        spec.exception_type, "Traceback (most recent call last):\n{msg}\n"
    ).format(msg=spec.exception_message)
    return {"exception_type": spec.exception_type, "exception_message": spec.exception_message,
            "exception_traceback": tb, "occurred_at": at}, tb


def _model_info(spec: TrialSpec) -> dict | None:
    return {"name": spec.model[1], "provider": spec.model[0]} if spec.model else None


def _verifier_result(spec: TrialSpec) -> dict | None:
    if spec.rewards is not None:
        return {"rewards": spec.rewards}
    return None if spec.reward is None else {"rewards": {"reward": spec.reward}}


def write_trial(
    job_dir: Path,
    spec: TrialSpec,
    started: datetime,
    rng: random.Random,
    job_name: str,
    tasks_root: str = "/data/tb21-tasks",
) -> str:
    trial_name = f"{spec.task[:32].rstrip('_-')}__{spec.trial_id or _trial_id(rng)}"
    tdir = job_dir / trial_name
    (tdir / "agent").mkdir(parents=True)
    (tdir / "verifier").mkdir()
    (tdir / "artifacts" / "logs" / "artifacts").mkdir(parents=True)
    task_path = f"{tasks_root}/{spec.task}"
    config = {
        "task": {"path": task_path, "source": "tb21-tasks"},
        "trial_name": trial_name,
        "trials_dir": str(job_dir),
        "agent": {"name": "terminus-2", "model_name": "openai/qwen38-27b", "kwargs": {}},
        "environment": {"type": "docker", "delete": True},
    }
    (tdir / "config.json").write_text(json.dumps(config, indent=4))
    (tdir / "lock.json").write_text(
        json.dumps({"schema_version": 3, "task": {"name": spec.task, "path": task_path}})
    )

    env_s, setup_s, agent_s, verifier_s = spec.durations
    t0 = started
    t1 = t0 + timedelta(seconds=env_s)
    t2 = t1 + timedelta(seconds=setup_s)
    t3 = t2 + timedelta(seconds=agent_s)
    t4 = t3 + timedelta(seconds=0.4)
    t5 = t4 + timedelta(seconds=verifier_s or 0)
    exception_info, traceback = _exception_info(spec, _ts(t3))
    if traceback is not None:
        (tdir / "exception.txt").write_text(traceback)
    n_in, n_cache, n_out = spec.tokens
    result = {
        "id": f"{rng.getrandbits(128):032x}",
        "task_name": f"terminal-bench/{spec.task}",
        "trial_name": trial_name,
        "trial_uri": f"file://{tdir}",
        "task_id": {"path": task_path},
        "source": "tb21-tasks",
        "task_checksum": f"{rng.getrandbits(256):064x}",
        "config": config,
        "agent_info": {
            "name": "terminus-2",
            "version": spec.agent_version,
            "model_info": _model_info(spec),
        },
        "agent_result": {
            "n_input_tokens": n_in,
            "n_cache_tokens": n_cache,
            "n_output_tokens": n_out,
            "cost_usd": None,
            "rollout_details": [],
            "metadata": {"n_episodes": len(spec.commands), "summarization_count": 0},
        },
        "verifier_result": _verifier_result(spec),
        "verifier_environment_mode": "shared",
        "exception_info": exception_info,
        "started_at": _ts(t0),
        "finished_at": _ts(t5 + timedelta(seconds=10)),
        "environment_setup": {"started_at": _ts(t0), "finished_at": _ts(t1)},
        "agent_setup": {"started_at": _ts(t1), "finished_at": _ts(t2)},
        "agent_execution": {"started_at": _ts(t2), "finished_at": _ts(t3)},
        "verifier": None if verifier_s is None else {"started_at": _ts(t4), "finished_at": _ts(t5)},
        "step_results": None,
    }
    if spec.write_result:
        text = json.dumps(result, indent=4)
        if spec.corrupt_result:
            text = text[: len(text) // 2]
        (tdir / "result.json").write_text(text)

    log = list(spec.trial_log)
    log.append(f"Trajectory dumped to {tdir}/agent/trajectory.json")
    if spec.exception_type:
        log.append(f"Trial {trial_name} failed: {spec.exception_message}")
    log.append("Collecting main service artifacts")
    (tdir / "trial.log").write_text("\n".join(log) + "\n")

    steps = [
        {
            "step_id": 1,
            "timestamp": _ts(t2),
            "source": "user",
            "message": "You are an AI assistant tasked with solving command-line tasks...",
        }
    ]
    per_step_in = n_in // max(1, len(spec.commands))
    for i, keys in enumerate(spec.commands):
        obs = spec.observations[i] if i < len(spec.observations) else ""
        steps.append(
            {
                "step_id": i + 2,
                "timestamp": _ts(t2 + timedelta(seconds=i)),
                "source": "agent",
                "model_name": "qwen38-27b",
                "message": "Analysis: continuing\nPlan: run the next command",
                "tool_calls": [
                    {
                        "tool_call_id": f"call_{i}_1",
                        "function_name": "bash_command",
                        "arguments": {"keystrokes": keys, "duration": 1.0},
                    }
                ],
                "observation": {
                    "results": [
                        {
                            "source_call_id": f"call_{i}_1",
                            "content": f"New Terminal Output:\nroot@c0ffee:/app# {keys}{obs}",
                        }
                    ]
                },
                "metrics": {"prompt_tokens": per_step_in, "completion_tokens": 100},
            }
        )
    trajectory = {
        "schema_version": "ATIF-v1.7",
        "session_id": f"{rng.getrandbits(64):016x}",
        "agent": {"name": "terminus-2", "version": "2.0.0", "model_name": "openai/qwen38-27b"},
        "steps": steps,
        "final_metrics": {
            "total_prompt_tokens": n_in,
            "total_completion_tokens": n_out,
            "total_cached_tokens": n_cache,
        },
    }
    (tdir / "agent" / "trajectory.json").write_text(json.dumps(trajectory))
    cast = [json.dumps({"version": 2, "width": 160, "height": 40, "timestamp": 1796031384})]
    for i, keys in enumerate(spec.commands):
        cast.append(json.dumps([float(i), "i", keys]))
        obs = spec.observations[i] if i < len(spec.observations) else ""
        cast.append(json.dumps([i + 0.5, "o", obs]))
    (tdir / "agent" / "recording.cast").write_text("\n".join(cast) + "\n")
    if spec.exit_code is not None:
        (tdir / "agent" / "exit-code.txt").write_text(spec.exit_code)
    if spec.verifier_stdout is not None:
        (tdir / "verifier" / "test-stdout.txt").write_text(spec.verifier_stdout)
    if spec.reward is not None:
        (tdir / "verifier" / "reward.txt").write_text(f"{spec.reward:g}\n")
    (tdir / "artifacts" / "manifest.json").write_text(
        json.dumps(
            [
                {
                    "source": "/logs/artifacts",
                    "destination": "artifacts/logs/artifacts",
                    "type": "directory",
                    "status": "empty",
                    "service": None,
                }
            ]
        )
    )
    return trial_name


def write_job(
    root: Path,
    job_name: str,
    specs: list[TrialSpec],
    started_local: str = "2026-08-30T23:44:31.000000",
    finished_local: str | None = "2026-08-31T07:08:03.000000",
    utc_offset_hours: int = 8,
    concurrency: int = 25,
    seed: int = 7,
) -> Path:
    """Write a whole job dir; trials start in waves of `concurrency` after the job start."""
    rng = random.Random(seed)
    job_dir = root / job_name
    job_dir.mkdir(parents=True)
    start_utc = datetime.fromisoformat(started_local).replace(tzinfo=UTC) - timedelta(
        hours=utc_offset_hours
    )
    slots = [start_utc] * concurrency
    trial_names = []
    for i, spec in enumerate(specs):
        slot = i % concurrency
        begin = slots[slot]
        trial_names.append(write_trial(job_dir, spec, begin, rng, job_name))
        slots[slot] = begin + timedelta(seconds=sum(d or 0 for d in spec.durations) + 12)
    (job_dir / "config.json").write_text(
        json.dumps(
            {
                "job_name": job_name,
                "jobs_dir": str(root),
                "n_concurrent_trials": concurrency,
                "agent_timeout_multiplier": 6.0,
                "agents": [{"name": "terminus-2", "model_name": "openai/qwen38-27b"}],
                "datasets": [{"path": "/data/tb21-tasks"}],
            },
            indent=4,
        )
    )
    rewards: dict[str, list[str]] = {}
    exceptions: dict[str, list[str]] = {}
    for spec, name in zip(specs, trial_names, strict=True):
        if spec.reward is not None:
            rewards.setdefault(f"{spec.reward:.1f}", []).append(name)
        if spec.exception_type:
            exceptions.setdefault(spec.exception_type, []).append(name)
    graded = sum(1 for s in specs if s.reward is not None)
    job_result = {
        "id": f"{rng.getrandbits(128):032x}",
        "started_at": started_local,
        "updated_at": (finished_local or started_local) + "Z",
        "finished_at": finished_local,
        "n_total_trials": len(specs),
        "stats": {
            "n_completed_trials": len(specs),
            "n_errored_trials": sum(1 for s in specs if s.exception_type),
            "n_running_trials": 0,
            "n_pending_trials": 0,
            "n_cancelled_trials": 0,
            "n_retries": 0,
            "evals": {
                "terminus-2__qwen38-27b__tb21-tasks": {
                    "n_trials": graded,
                    "n_errors": sum(1 for s in specs if s.exception_type),
                    "metrics": [{"mean": sum((s.reward or 0) for s in specs) / max(1, len(specs))}],
                    "pass_at_k": {},
                    "reward_stats": {"reward": rewards},
                    "exception_stats": exceptions,
                }
            },
            "n_input_tokens": sum(s.tokens[0] for s in specs),
            "n_cache_tokens": sum(s.tokens[1] for s in specs),
            "n_output_tokens": sum(s.tokens[2] for s in specs),
            "cost_usd": None,
        },
    }
    (job_dir / "result.json").write_text(json.dumps(job_result, indent=4))
    (job_dir / "job.log").write_text(f"Starting job {job_name}\n")
    return job_dir


# --- realistic evidence snippets -----------------------------------------------------------
APT = "http://deb.mirror.example/debian"
PROXY_IP = "[IP: 172.18.0.1 27891]"

PYTEST_PASS = (
    "============================= test session starts ==============================\n"
    "platform linux -- Python 3.13.7, pytest-8.4.1, pluggy-1.6.0\n"
    "collected 3 items\n\n"
    "tests/test_outputs.py::test_output_exists PASSED\n"
    "tests/test_outputs.py::test_output_content PASSED\n"
    "tests/test_outputs.py::test_output_format PASSED\n\n"
    "============================== 3 passed in 1.84s ===============================\n"
)
PYTEST_FAIL = (
    "============================= test session starts ==============================\n"
    "collected 3 items\n\n"
    "tests/test_outputs.py::test_output_exists PASSED\n"
    "tests/test_outputs.py::test_output_content FAILED\n"
    "tests/test_outputs.py::test_output_format FAILED\n\n"
    "=========================== short test summary info ============================\n"
    "FAILED tests/test_outputs.py::test_output_content - AssertionError: wrong result\n"
    "========================= 2 failed, 1 passed in 2.31s ==========================\n"
)


def apt_502(package: str) -> str:
    return (
        f"Err:1 {APT} bookworm/main amd64 {package} amd64 1.0-1\n"
        f"  502  Bad Gateway {PROXY_IP}\n"
        f"E: Failed to fetch {APT}/pool/main/{package[0]}/{package}/{package}_1.0-1_amd64.deb"
        f"  502  Bad Gateway {PROXY_IP}\n"
    )


def seed_final_run(task_names: list[str] | None = None) -> list[TrialSpec]:
    """The seed's final run, trial by trial (see the module docstring)."""
    names = task_names or sorted(p.name for p in TB21_TASKS.iterdir() if p.is_dir())
    if len(names) != 89:
        raise ValueError(f"expected the 89 TB 2.1 task dirs in {TB21_TASKS}, found {len(names)}")
    named: dict[str, TrialSpec] = {
        "prove-plus-comm": TrialSpec(
            "prove-plus-comm",
            reward=0.0,
            commands=["coqc plus_comm.v\n", "echo $?\n"],
            observations=["", "0\n"],
            verifier_stdout=(
                "+ apt-get update\n"
                f"Err:1 {APT} bookworm InRelease\n  502  Bad Gateway {PROXY_IP}\n"
                f"E: Failed to fetch {APT}/dists/bookworm/InRelease  502  Bad Gateway {PROXY_IP}\n"
                "+ curl -LsSf https://astral.mirror.example/uv/install.sh | sh\n"
                "curl: (56) Received HTTP code 502 from proxy after CONNECT\n"
                "/tests/test.sh: line 12: uvx: command not found\n"
            ),
        ),
        "tune-mjcf": TrialSpec(
            "tune-mjcf",
            reward=0.0,
            commands=["python3 eval.py --model tuned.xml\n"],
            observations=["speedup vs reference: 1.92x, all checks consistent\n"],
            verifier_stdout=(
                "+ apt-get install -y curl\n"
                + apt_502("curl")
                + "E: Unable to fetch some archives, maybe run apt-get update or try with "
                "--fix-missing?\n/tests/test.sh: line 8: curl: command not found\n"
                "/tests/test.sh: line 9: uvx: command not found\n"
            ),
        ),
        "make-doom-for-mips": TrialSpec(
            "make-doom-for-mips",
            reward=0.0,
            exception_type="AgentTimeoutError",
            exception_message="Agent execution timed out after 5400.0 seconds",
            commands=[
                "apt-get install -y gcc-mipsel-linux-gnu\n",
                "apt-get install -y gcc-mipsel-linux-gnu binutils-mipsel-linux-gnu\n",
                "node vm.js\n",
            ],
            observations=[
                apt_502("gcc-mipsel-linux-gnu"),
                apt_502("binutils-mipsel-linux-gnu") + apt_502("libc6-dev-mipsel-cross"),
                "Error: ENOENT: no such file or directory, open 'doom.elf'\n",
            ],
            durations=(6.0, 3.0, 5400.0, 95.0),
            verifier_stdout=PYTEST_FAIL.replace("2 failed, 1 passed", "3 failed"),
        ),
        "dna-assembly": TrialSpec(
            "dna-assembly",
            reward=0.0,
            exception_type="AgentTimeoutError",
            exception_message="Agent execution timed out after 10800.0 seconds",
            commands=["pip install primer3-py\n", "python3 fetch_reference.py\n"],
            observations=[
                "WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, "
                "status=None)) after connection broken by 'SSLError(SSLCertVerificationError(1, "
                "'[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get "
                "local issuer certificate (_ssl.c:1006)'))': /simple/primer3-py/\n",
                "requests.exceptions.SSLError: HTTPSConnectionPool(host='files.mirror.example', "
                "port=443): Max retries exceeded with url: /ref/lambda.fa (Caused by "
                "SSLError(SSLEOFError(8, '[SSL: UNEXPECTED_EOF_WHILE_READING] EOF occurred in "
                "violation of protocol (_ssl.c:1006)')))\n",
            ],
            durations=(5.0, 3.0, 10800.0, 60.0),
            verifier_stdout=PYTEST_FAIL.replace("2 failed, 1 passed", "1 failed"),
        ),
        "build-pov-ray": TrialSpec(
            "build-pov-ray",
            reward=0.0,
            commands=[
                "curl -fL -m 30 -o povray.tgz https://web.archive.example/povray/POV-Ray-2.2.tgz\n",
                "curl -fL -m 30 -o povray.tgz https://web.archive.example/povray/POV-Ray-2.2.tgz\n",
                "curl -fL -o povray.tgz https://mirror.example/povray/POV-Ray-2.2.tgz\n",
            ],
            observations=[
                "curl: (28) Operation timed out after 30001 milliseconds with 0 bytes received\n",
                "curl: (28) Operation timed out after 30002 milliseconds with 0 bytes received\n",
                "  % Total    % Received\n100 1843k  100 1843k\n",
            ],
            verifier_stdout=(
                "============================= test session starts =====================\n"
                "collected 3 items\n\n"
                "tests/test_outputs.py::test_povray_source FAILED\n"
                "FAILED tests/test_outputs.py::test_povray_source - AssertionError: source differs"
                " (CRLF line endings, letter case)\n"
                "========================= 1 failed, 2 passed in 3.20s ==================\n"
            ),
        ),
        "pytorch-model-recovery": TrialSpec(
            "pytorch-model-recovery",
            reward=None,
            exception_type="VerifierTimeoutError",
            exception_message="Verifier execution timed out after 900.0 seconds",
            commands=["python3 recover.py\n", "python3 self_test.py\n"],
            observations=["saved model.pt (TorchScript)\n", "MSE before 1.551031 after 0.016358\n"],
            durations=(5.0, 3.0, 2400.0, 900.0),
            verifier_stdout=(
                "Reading package lists...\nSetting up python3.13 (3.13.7-1) ...\n"
                "Downloading torch (841.6MiB)\nDownloading nvidia-cudnn-cu12 (634.0MiB)\n"
                "Installed 38 packages in 2.41s\n"
                "============================= test session starts ==============================\n"
                "collected 5 items\n\n"
                "tests/test_outputs.py::test_model_file_exists PASSED\n"
                "tests/test_outputs.py::test_model_is_torchscript PASSED\n"
                "tests/test_outputs.py::test_model_architecture PASSED\n"
                "tests/test_outputs.py::test_model_weights_changed PASSED\n"
                "tests/test_outputs.py::test_model_loss "
            ),
        ),
        "torch-tensor-parallelism": TrialSpec(
            "torch-tensor-parallelism",
            reward=None,
            exception_type="VerifierTimeoutError",
            exception_message="Verifier execution timed out after 900.0 seconds",
            commands=["cat parallel_linear.py\n"],
            observations=["class ColumnParallelLinear(nn.Module): ...\n"],
            durations=(5.0, 3.0, 3100.0, 900.0),
            verifier_stdout=(
                "Get:1 http://deb.mirror.example/debian bookworm InRelease [151 kB]\n"
                "Reading package lists...\n"
                "Setting up curl (7.88.1-10+deb12u12) ...\n"
                "downloading uv 0.9.5 x86_64-unknown-linux-gnu\n"
                "Resolved 31 packages in 1.12s\n"
                "Downloading torch (841.6MiB)\n"
                "Downloading nvidia-cublas-cu12 (566.8MiB)\n"
                "Downloading nvidia-cudnn-cu12 (634.0MiB)\n"
            ),
        ),
        "headless-terminal": TrialSpec(
            "headless-terminal",
            reward=None,
            exception_type="RuntimeError",
            exception_message=(
                'hb__headless-terminal: failed to send non-blocking keys: command="tmux '
                "send-keys -t terminus-2 'python3 /app/term.py' Enter\", return_code=1, "
                "stderr='no server running on /tmp/tmux-0/default\\n', stdout=''"
            ),
            commands=["tmux ls\n", "tmux kill-server\n", "python3 /app/term.py\n"],
            observations=["terminus-2: 1 windows\n", "", ""],
            durations=(4.0, 2.0, 800.0, None),
        ),
    }
    missing = sorted(set(named) - set(names))
    if missing:
        raise ValueError(f"seed tasks {missing} are not among the TB 2.1 task dirs")
    rest = [n for n in names if n not in named]  # 81 tasks
    specs: list[TrialSpec] = list(named.values())
    roles = (
        ["pass"] * 59
        + ["timeout_pass"] * 2
        + ["timeout_zero"] * 8
        + ["timeout_none"] * 1
        + ["wrong"] * 11
    )
    assert len(roles) == len(rest), (len(roles), len(rest))
    for i, (task, role) in enumerate(zip(rest, roles, strict=True)):
        if role == "pass":
            specs.append(TrialSpec(task, reward=1.0, verifier_stdout=PYTEST_PASS))
        elif role.startswith("timeout"):
            reward = {"timeout_pass": 1.0, "timeout_zero": 0.0, "timeout_none": None}[role]
            specs.append(
                TrialSpec(
                    task,
                    reward=reward,
                    exception_type="AgentTimeoutError",
                    exception_message="Agent execution timed out after 5400.0 seconds",
                    durations=(5.0, 2.0, 5400.0, None if reward is None else 120.0),
                    verifier_stdout=None
                    if reward is None
                    else (PYTEST_PASS if reward == 1.0 else PYTEST_FAIL),
                    commands=["python3 solve.py --long-search\n"] * 3,
                    observations=["thinking...\n"] * 3,
                )
            )
        else:
            # One wrong answer met a single download timeout on the way: one incident is
            # not an infra failure, so it must stay the agent's error.
            obs = ["done\n"]
            if i % 11 == 0:
                obs = ["curl: (28) Connection timed out after 10000 milliseconds\n"]
            specs.append(
                TrialSpec(
                    task,
                    reward=0.0,
                    verifier_stdout=PYTEST_FAIL,
                    commands=["python3 solve.py\n"],
                    observations=obs,
                )
            )
    _spread_tokens(specs, 118_199_621, 8_269_356)
    return specs


def _spread_tokens(specs: list[TrialSpec], total_in: int, total_out: int, seed: int = 3) -> None:
    """Give each trial a share of the seed's token totals; the sums are exact."""
    rng = random.Random(seed)
    weights = [rng.uniform(0.3, 2.0) * (3 if s.exception_type else 1) for s in specs]
    scale = sum(weights)
    ins = [int(total_in * w / scale) for w in weights]
    outs = [int(total_out * w / scale) for w in weights]
    ins[-1] += total_in - sum(ins)
    outs[-1] += total_out - sum(outs)
    for spec, n_in, n_out in zip(specs, ins, outs, strict=True):
        spec.tokens = (n_in, n_in // 4, n_out)


SEED_EXPECTED = {
    "prove-plus-comm": ("infra", "verifier_proxy_5xx"),
    "tune-mjcf": ("infra", "verifier_proxy_5xx"),
    "make-doom-for-mips": ("infra", "agent_proxy_5xx"),
    "dna-assembly": ("infra", "agent_tls_failure"),
    "build-pov-ray": ("infra", "agent_network_timeout"),
    "pytorch-model-recovery": ("verifier_timeout", "verifier_timeout_running_tests"),
    "torch-tensor-parallelism": ("verifier_timeout", "verifier_timeout_installing_dependencies"),
    "headless-terminal": ("agent_error", "agent_killed_tmux"),
}
