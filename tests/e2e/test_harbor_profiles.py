"""The other pinned Harbor profile (0.26.0) rehearsed on the `local` stack through the real
Pulumi CLI, in one lifecycle: install from its sha256-pinned wheel, the preflight with Harbor's
own `--dry-run`, Terminus-2 through the real router with the endpoint given by 0.26.0's flags,
SIGTERM then the resume `up` makes, a rerun declared in the stack file, the audit through
`--stack`, destroy. The 0.21.0 profile's rehearsal is tests/e2e/test_local_stack.py; what both
share (the serving plane, the host plane) is not repeated here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.config import split_stack_file
from contracts import outputs as keys
from contracts.harbor_profiles import PROFILES
from tests.conftest import ROOT, STATE
from tests.e2e.conftest import LocalStack
from tests.e2e.test_local_stack import (
    MODEL,
    assert_demo_scores,
    audit_json,
    interrupt_harbor,
    leftovers,
    wait_for,
    wait_for_job,
    worker_requests,
)
from tests.engine.conftest import changed

pytestmark = pytest.mark.real

LATEST = PROFILES["0.26.0"]
API_KEY = "sk-benchstack-e2e-026"
ENDPOINT = "http://127.0.0.1:30000/v1"


def step_outputs(local: LocalStack, name: str) -> dict:
    """What a host step reported (its last stdout line), as the state holds it."""
    for resource in local.resources():
        if resource["urn"].endswith(f"::{name}"):
            stdout = resource.get("outputs", {}).get("stdout", "")
            return json.loads(stdout.strip().splitlines()[-1])
    raise AssertionError(f"no resource {name} in the state")


def trial_results(job_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(job_dir.glob("*/result.json"))]


def test_harbor_026_runs_the_local_rehearsal(local: LocalStack, harbor_latest_bin: Path,
                                             tmp_path: Path):
    # The wheel the tests' own 0.26.0 venv came from: the install checks its sha256 and
    # downloads nothing.
    wheel = STATE / "wheels" / f"harbor-{LATEST.version}-py3-none-any.whl"
    harbor = split_stack_file(ROOT / "Pulumi.local.yaml")[0]["harbor"]
    local.config("benchstack:harbor", json.dumps({
        **harbor, "version": LATEST.version, "wheel_sha256": LATEST.wheel_sha256,
        "wheel_path": str(wheel), "job_name_prefix": "local-026", "reruns": ["hello-file"]}))
    local.config("--secret", "benchstack:apiKey", API_KEY)

    # --- up: the 0.26.0 install, its preflight with --dry-run, the launch -----------------
    local.up()
    outputs = local.outputs()
    install = step_outputs(local, "job-install")
    assert (install["version"], install["wheel_sha256"]) == (LATEST.version, LATEST.wheel_sha256)
    assert Path(install["harbor_bin"]).is_relative_to(local.workspace / "harbor-0.26.0")
    preflight = step_outputs(local, "job-preflight")
    assert preflight["dry_run"]["trials"] == 3, preflight
    assert outputs[keys.RERUN_WAITING].startswith("waits for the main job")
    job_dir = Path(outputs[keys.JOB_DIR])
    agent = json.loads((job_dir / "config.json").read_text())["agents"][0]
    assert (agent["base_url"], agent["model_api_key_name"], agent["model_api_format"]) == (
        ENDPOINT, "OPENAI_API_KEY", "openai_chat_completions")
    assert "api_base" not in agent["kwargs"]

    # --- SIGTERM, then the next up resumes it (0.26.0's resume), and only that -------------
    interrupt_harbor(outputs, timeout=120)
    assert changed(local.preview()) == {"job-launch": "replace"}
    assert changed(local.up()) == {"job-launch": "replace"}
    wait_for_job(outputs)
    results = trial_results(job_dir)
    assert sorted(r["task_name"] for r in results) == [
        "hello-file", "hello-file-slow", "hello-file-wrong"]
    # 0.26.0's result.json: its schema, and its own verdict on each reward.
    for result in results:
        assert result["schema_version"] == 1 and isinstance(result["reward_valid"], bool)
    # Terminus-2 reached the stand-in model through the router, with the stack's sampling.
    calls = [r for r in worker_requests() if r["path"] == "/v1/chat/completions"
             and r["reply"]["source"] == "episode"]
    assert len(calls) >= 6 and {r["model"] for r in calls} == {MODEL}, calls
    assert all(abs(c["sampling"]["temperature"] - 0.7) < 1e-6 for c in calls)
    assert_demo_scores(audit_json(str(job_dir)))

    # --- the declared rerun: once the main job finished, up launches it as its own job -----
    rerun = changed(local.up())
    assert {"rerun-configs", "rerun-preflight", "rerun-launch"} <= rerun.keys(), rerun
    assert "job-launch" not in rerun
    assert step_outputs(local, "rerun-preflight")["dry_run"]["trials"] == 1
    (rerun_dir,) = local.outputs()[keys.RERUN_JOB_DIRS]
    logs = Path(outputs[keys.JOB_LOG]).parent
    wait_for(rerun_dir, str(logs / f"{Path(rerun_dir).name}.pid"))
    assert [r["task_name"] for r in trial_results(Path(rerun_dir))] == ["hello-file"]

    # --- the audit through the stack's outputs: the main job and its rerun, merged ---------
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    report = audit_json("--stack", "local", "--project", str(local.project),
                        env=local.engine.env, cwd=elsewhere)
    h21 = report["scores"]["harbor-0.21"]["rows"][0]["raw"]
    assert (h21["passed"], h21["counted"]) == (1, 3)
    # Every convention, and Harbor's own verdicts read from its result.json beside the audit's:
    # the agent timeout is graded (valid), so here they agree.
    assert report["job"]["reported_convention"] == "harbor-0.26"
    assert report["scores"]["harbor-0.26"]["title"].startswith("Harbor 0.26's job mean")
    h26 = report["scores"]["harbor-0.26"]["rows"][0]["raw"]
    assert (h26["passed"], h26["counted"]) == (1, 3)
    policy = report["harbor_policy"]
    assert policy["source"] == "the job's result.json (Harbor 0.26)", policy
    assert (policy["agree"], policy["differ"]) == (3, 0), policy
    attempts = {t["task"]: [a["category"] for a in t["attempts"]]
                for t in report["merge"]["tasks"]}
    assert attempts["hello-file"] == ["passed", "passed"], attempts
    assert report["provenance"]["harbor"]["version"] == LATEST.version

    local.preview("--expect-no-changes")
    local.destroy()
    for name in (outputs[keys.JOB_NAME], Path(rerun_dir).name):
        assert leftovers(name, local.workspace) == {
            "containers": [], "networks": [], "processes": []}
    assert (job_dir / "result.json").is_file(), "destroy lost the results"
