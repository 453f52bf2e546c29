"""Harbor 0.26.0, the other pinned profile, for real where no Docker engine is needed: its own
error-policy table is the one contracts/harbor_profiles.py carries, the Terminal-Bench 4.0
fixtures parse as its tasks, and the preflight step runs it: `--print-config` with the
endpoint flags resolves to what the stack asked for, then `--dry-run` checks the job itself,
refusing in Harbor's words what print-config lets through. A whole job with it (install,
Terminus-2 through the router, SIGTERM and resume, a rerun, the audit) is
tests/e2e/test_harbor_profiles.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from components.config import KNOWN_HARBOR_WHEELS, DatasetConfig
from components.job_spec import render_plan
from contracts import jobdir
from contracts.harbor_profiles import ERROR_POLICY_0_26, UNKNOWN_POLICY
from tests.conftest import ROOT
from tests.harbor.conftest import harbor_section, seam_step

MODEL = "openai/benchstack/stand-in"
API = "http://127.0.0.1:30000/v1"
TB4 = ROOT / "tests" / "graph" / "datasets" / "terminal-bench-4.0"
LATEST = harbor_section(
    {"name": "terminus-2", "n_concurrent": 3, "temperature": 0.7, "top_p": 0.9,
     "max_input_tokens": 32768, "max_output_tokens": 4096},
    n_concurrent_trials=3, version="0.26.0", wheel_sha256=KNOWN_HARBOR_WHEELS["0.26.0"],
)


def harbor_python(harbor_latest_bin: Path, code: str) -> str:
    proc = subprocess.run([str(harbor_latest_bin.parent / "python"), "-c", code],
                          capture_output=True, text=True, timeout=120,
                          env={"HARBOR_TELEMETRY": "0", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_its_error_policy_table_is_the_one_the_contracts_carry(harbor_latest_bin: Path):
    table = json.loads(harbor_python(harbor_latest_bin, (
        "import json; from harbor.models.trial.error_policy import ERROR_POLICIES as P, "
        "UNKNOWN_ERROR_POLICY as U; print(json.dumps({k: [v.should_retry, v.should_grade, "
        "v.has_valid_reward] for k, v in [*P.items(), ('?', U)]}))")))
    unknown = table.pop("?")
    assert table == {name: [p.should_retry, p.should_grade, p.has_valid_reward]
                     for name, p in ERROR_POLICY_0_26.items()}
    assert unknown == [UNKNOWN_POLICY.should_retry, UNKNOWN_POLICY.should_grade,
                       UNKNOWN_POLICY.has_valid_reward]


def test_the_terminal_bench_4_fixtures_are_tasks_to_it(harbor_latest_bin: Path):
    read = json.loads(harbor_python(harbor_latest_bin, (
        "import json, pathlib; from harbor.models.task.config import TaskConfig as T\n"
        f"root = pathlib.Path({str(TB4)!r})\n"
        "out = {}\n"
        "for f in sorted(root.glob('*/task.toml')):\n"
        "    c = T.model_validate_toml(f.read_text())\n"
        "    out[f.parent.name] = [c.environment.gpus, c.agent.timeout_sec]\n"
        "print(json.dumps(out))")))
    assert read == {
        "cuda-kernel-fusion": [1, 28800.0], "lora-finetune-recovery": [2, 28800.0],
        "nsys-profile-regression": [1, 28800.0], "distributed-log-pipeline": [0, 28800.0],
        "kernel-module-debug": [0, 28800.0], "offline-ledger-audit": [0, 28800.0]}


def plan_job(workspace: Path, dataset: Path):
    """The demo job as the 0.26.0 profile renders it, its files placed by the configs step."""
    spec = DatasetConfig(path=str(dataset), expected_tasks=3, manifest_path=str(dataset))
    plan = render_plan(LATEST, spec, model_name=MODEL, workspace=str(workspace),
                       tasks_dir=str(dataset), api_base=API, tools_dir=None,
                       proxy_url="http://host.docker.internal:27891")
    placed = seam_step("harbor_configs", "create", {
        "config_path": plan.config_path, "compose_path": plan.compose_path,
        "job_config_yaml": plan.config_yaml, "compose_yaml": plan.compose_yaml})
    assert placed.returncode == 0, placed.stderr
    return plan


def preflight(plan, harbor_latest_bin: Path, workspace: Path):
    return seam_step("harbor_preflight", "create", {
        "harbor_bin": str(harbor_latest_bin), "job_config": plan.config_path,
        "compose_path": plan.compose_path, "job_name": plan.job_name,
        "jobs_dir": jobdir.jobs_dir(str(workspace)), "expected": json.loads(plan.expected),
        "resolved_out": jobdir.resolved_config(jobdir.log_dir(str(workspace)), plan.job_name),
        "harbor_flags": list(plan.flags), "harbor_version": "0.26.0",
    }, timeout=300)


def test_the_preflight_resolves_the_flags_then_harbor_dry_runs_the_job(
        harbor_latest_bin: Path, demo_dataset: Path, tmp_path: Path):
    workspace = tmp_path / "ws"
    plan = plan_job(workspace, demo_dataset)
    result = preflight(plan, harbor_latest_bin, workspace)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.outputs["checked_fields"] == len(json.loads(plan.expected))
    assert result.outputs["dry_run"]["trials"] == 3
    resolved = json.loads(Path(result.outputs["resolved_config"]).read_text())
    agent = resolved["agents"][0]
    # 0.26.0's own fields carry the endpoint; the agent's kwargs do not.
    assert (agent["base_url"], agent["model_api_key_name"], agent["model_api_format"]) == (
        API, "OPENAI_API_KEY", "openai_chat_completions")
    assert "api_base" not in agent["kwargs"]
    assert not Path(jobdir.job_dir(jobdir.jobs_dir(str(workspace)), plan.job_name)).exists()


def test_what_print_config_lets_through_the_dry_run_refuses(
        harbor_latest_bin: Path, demo_dataset: Path, tmp_path: Path):
    """An agent kwarg 0.26.0's Terminus-2 does not know (0.26.0's options are a pydantic model
    that forbids unknown keys): the fields all match, and Harbor's dry run stops the job."""
    workspace = tmp_path / "ws"
    plan = plan_job(workspace, demo_dataset)
    config = Path(plan.config_path)
    config.write_text(config.read_text().replace(
        "    record_terminal_session: true\n",
        "    record_terminal_session: true\n    episodes_budget: 40\n"))
    result = preflight(plan, harbor_latest_bin, workspace)
    assert result.returncode == 1
    assert result.reason.startswith(
        f"harbor_preflight: harbor run --dry-run rejected {plan.config_path} (Dry run failed: "
        "agents[0]: Invalid kwargs for agent 'terminus-2': Unknown option 'episodes_budget'."), (
        result.reason)
    assert not Path(jobdir.resolved_config(jobdir.log_dir(str(workspace)),
                                           plan.job_name)).exists()
