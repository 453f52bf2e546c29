"""A newer Terminal-Bench release on a GPU layout (`Pulumi.h100-tb4.yaml`: GPU tasks, 4.0's flat
8-hour agent timeout, Harbor 0.26.0) under Pulumi mocks: what the program declares for the 0.26.0
profile, and the layouts it refuses before anything runs, each naming the key and the tasks.

The task.toml files are fixtures in the release's shape
(tests/graph/datasets/terminal-bench-4.0/SOURCE.md).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.config import ConfigError, split_stack_file
from contracts.harbor_profiles import PROFILES
from tests.conftest import ROOT
from tests.graph.program import run_program
from tests.graph.test_graph import SECRETS, step_inputs

STACK = "h100-tb4"
GPU_TASKS = "cuda-kernel-fusion, lora-finetune-recovery, nsys-profile-regression"
ENDPOINT_FLAGS = ["--base-url", "http://127.0.0.1:30000/v1", "--api-key-name", "OPENAI_API_KEY",
                  "--api-format", "openai_chat_completions"]


def values() -> dict[str, Any]:
    return copy.deepcopy(split_stack_file(ROOT / f"Pulumi.{STACK}.yaml")[0])


def refusal(overrides: dict[str, Any]) -> str:
    """The program's one error for the stack file with `overrides`; no resource was declared
    before it (the stack itself aside)."""
    declared: list[str] = []
    with pytest.raises(ConfigError) as info:
        run_program(STACK, overrides=overrides, secrets=SECRETS,
                    on_declare=lambda d, _: declared.append(d.type))
    assert declared in ([], ["pulumi:pulumi:Stack"]), declared
    return str(info.value)


def test_the_026_profile_is_what_the_program_declares():
    run = run_program(STACK, secrets=SECRETS)
    pin = PROFILES["0.26.0"]
    install = step_inputs(run.named("job-install").inputs["create"])
    assert (install["version"], install["wheel_sha256"]) == ("0.26.0", pin.wheel_sha256)
    config = step_inputs(run.named("job-configs").inputs["create"])["job_config_yaml"]
    # The endpoint goes through 0.26.0's own flags, not the agent's kwargs.
    assert "api_base" not in config and "model_name: openai/Qwen/Qwen3.8-27B" in config
    preflight = step_inputs(run.named("job-preflight").inputs["create"])
    launch = step_inputs(run.named("job-launch").inputs["create"])
    assert preflight["harbor_flags"] == launch["harbor_flags"] == ENDPOINT_FLAGS
    assert preflight["harbor_version"] == launch["harbor_version"] == "0.26.0"
    checked = {tuple(c["path"]): c["expect"] for c in preflight["expected"]}
    assert checked[("agents", 0, "base_url")] == "http://127.0.0.1:30000/v1"
    assert checked[("agents", 0, "kwargs", "api_base")] is None
    assert checked[("override_error_policy",)] == {}
    # The no-network task needs 0.26.0's egress sidecar, not 0.21.0's.
    pull = step_inputs(run.named("images-pull").inputs["create"])
    assert pull["sidecar_image"] == pin.sidecar_image != PROFILES["0.21.0"].sidecar_image
    assert pull["no_network_tasks"] == ["offline-ledger-audit"]


def test_the_seeds_layout_has_no_gpu_left_for_the_tasks():
    """Harbor on the host whose 8 GPUs all serve the model (the seed's layout)."""
    stack = values()
    serve = {**stack["hosts"][0], "roles": ["gpu_worker", "harbor"]}
    message = refusal({"hosts": [serve]})
    assert (f"benchstack:hosts[0].gpus: the Harbor host serve-a has 8 GPUs, 8 of them serving "
            f"the model (benchstack:serving.tp_size x dp_size), so 0 left for tasks; GPU tasks "
            f"{GPU_TASKS} run up to 3 trials at once (benchstack:harbor.n_concurrent_trials 16) "
            "needing 4 GPUs") in message
    # Without those tasks the same layout runs the rest.
    run = run_program(STACK, overrides={
        "hosts": [serve], "dataset": {**stack["dataset"], "expected_tasks": 3,
                                      "exclude": ["cuda-*", "lora-*", "nsys-*"]}},
        secrets=SECRETS)
    assert run.named("job-launch")


def test_fewer_gpus_than_the_concurrent_gpu_trials_need():
    stack = values()
    hosts = copy.deepcopy(stack["hosts"])
    hosts[1]["gpus"]["count"] = 2
    message = refusal({"hosts": hosts})
    assert "benchstack:hosts[1].gpus: the Harbor host tasks-gpu has 2 GPUs, so 2 left" in message
    assert "needing 4 GPUs" in message
    # Five attempts of each: the 16 slots hold the hungriest, 2 + 2 + ... = 20 GPUs at worst.
    message = refusal({"harbor": {**stack["harbor"], "n_attempts": 5}})
    assert "needing 20 GPUs" in message and "run up to 15 trials at once" in message


def test_a_gpu_type_the_tasks_do_not_accept():
    hosts = values()["hosts"]
    hosts[1]["gpus"]["model"] = "A100-SXM4-80GB"
    message = refusal({"hosts": hosts})
    assert ("benchstack:hosts[1].gpus.model: A100-SXM4-80GB is none of the GPU types tasks "
            "cuda-kernel-fusion accept (H100; [environment].gpu_types)") in message


def test_harbor_021_cannot_run_gpu_tasks_on_docker():
    stack = values()
    message = refusal({"harbor": {**stack["harbor"], "version": "0.21.0",
                                  "wheel_sha256": PROFILES["0.21.0"].wheel_sha256}})
    assert (f"benchstack:harbor.version: tasks {GPU_TASKS} need GPUs ([environment].gpus in "
            "task.toml), but Harbor 0.21.0's Docker environment reserves no GPUs") in message
    assert "benchstack:harbor.version 0.26.0 and trials on docker" in message


def test_a_timeout_longer_than_the_job_may_hold():
    """4.0's 8 hours times the seed's x6 agent multiplier: 49 h a trial."""
    stack = values()
    message = refusal({"harbor": {**stack["harbor"], "agent_timeout_multiplier": 6.0}})
    assert ("benchstack:harbor.max_job_hours: 10 h, but a trial of cuda-kernel-fusion, "
            "distributed-log-pipeline, kernel-module-debug, lora-finetune-recovery, "
            "nsys-profile-regression, offline-ledger-audit can take up to 49.2 h") in message
    assert "agent timeout 28800 s x benchstack:harbor.agent_timeout_multiplier 6" in message


def test_the_refusal_names_every_problem_at_once():
    stack = values()
    serve = {**stack["hosts"][0], "roles": ["gpu_worker", "harbor"]}
    message = refusal({"hosts": [serve],
                       "harbor": {**stack["harbor"], "agent_timeout_multiplier": 6.0}})
    assert message.startswith("stack config against the tasks in ")
    assert "benchstack:hosts[0].gpus" in message and "benchstack:harbor.max_job_hours" in message
