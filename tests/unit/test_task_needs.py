"""What a task needs, read from its task.toml (components/manifest.py `TaskNeeds`), and the
pre-launch checks against the stack (components/config_checks.py `check_task_needs`): GPUs
left on the Harbor host after serving, a Harbor version and environment that run GPU tasks at
all, and trials longer than `harbor.max_job_hours`. The stack-file view of the same is
tests/graph/test_newer_terminal_bench.py."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from components.config import ConfigError, check_task_needs, parse_stack_config, split_stack_file
from components.config_checks import selected_tasks, trial_hours
from components.manifest import ManifestError, TaskNeeds, load_manifest
from tests.conftest import ROOT, TB21_TASKS

TB4 = ROOT / "tests" / "graph" / "datasets" / "terminal-bench-4.0"


def task(root: Path, name: str, body: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "task.toml").write_text(
        f'[environment]\ndocker_image = "x/{name}:1"\n{body}')


def test_each_task_reads_its_gpus_and_timeouts(tmp_path: Path) -> None:
    task(tmp_path, "gpu", 'gpus = 2\ngpu_types = ["H100"]\nbuild_timeout_sec = 900\n'
                          '[agent]\ntimeout_sec = 28800\n[verifier]\ntimeout_sec = 1800\n')
    task(tmp_path, "plain", "")
    task(tmp_path, "steps", '[agent]\ntimeout_sec = 100\n'
                            '[[steps]]\nname = "a"\n[steps.agent]\ntimeout_sec = 300\n'
                            '[[steps]]\nname = "b"\n[steps.verifier]\ntimeout_sec = 50\n')
    needs = load_manifest(tmp_path).needs
    assert needs["gpu"] == TaskNeeds(gpus=2, gpu_types=["H100"], agent_timeout_s=28800,
                                     verifier_timeout_s=1800, build_timeout_s=900)
    # Harbor's defaults where task.toml says nothing: no agent timeout at all.
    assert needs["plain"] == TaskNeeds(gpus=0, gpu_types=None, agent_timeout_s=None,
                                       verifier_timeout_s=600, build_timeout_s=600)
    # Steps run in turn: their agents' (the task's where a step sets none) and verifiers' add up.
    assert (needs["steps"].agent_timeout_s, needs["steps"].verifier_timeout_s) == (400, 650)


def test_the_real_tb21_tasks_need_no_gpu_and_all_have_an_agent_timeout() -> None:
    needs = load_manifest(TB21_TASKS).needs
    assert len(needs) == 89 and not [t for t, n in needs.items() if n.gpus]
    assert max(n.agent_timeout_s or 0 for n in needs.values()) == 12000
    assert not [t for t, n in needs.items() if n.agent_timeout_s is None]


@pytest.mark.parametrize(("body", "expected"), [
    ("gpus = -1\n", "[environment].gpus must be a whole number, got -1"),
    ('gpus = "two"\n', "[environment].gpus must be a whole number, got 'two'"),
    ('gpu_types = "H100"\n', "[environment].gpu_types must be a list of names"),
    ("[agent]\ntimeout_sec = 0\n", "[agent].timeout_sec must be a positive number, got 0"),
    ('[verifier]\ntimeout_sec = "1h"\n', "[verifier].timeout_sec must be a positive number"),
])
def test_a_need_that_is_not_one_names_the_file_and_field(tmp_path: Path, body: str,
                                                         expected: str) -> None:
    task(tmp_path, "bad", body)
    with pytest.raises(ManifestError) as info:
        load_manifest(tmp_path)
    assert str(tmp_path / "bad" / "task.toml") in str(info.value)
    assert expected in str(info.value)


def stack() -> dict:
    return copy.deepcopy(split_stack_file(ROOT / "Pulumi.h100-tb4.yaml")[0])


def test_the_job_runs_the_tasks_harbor_selects() -> None:
    needs = load_manifest(TB4).needs
    cfg = parse_stack_config({**stack(), "dataset": {
        **stack()["dataset"], "include": ["*-*-*"], "exclude": ["lora-*", "nsys-*"]}})
    assert sorted(selected_tasks(cfg.dataset, needs)) == [
        "cuda-kernel-fusion", "distributed-log-pipeline", "kernel-module-debug",
        "offline-ledger-audit"]


def test_a_trial_is_bounded_by_its_timeouts_times_their_multipliers() -> None:
    cfg = parse_stack_config(stack())
    needs = TaskNeeds(agent_timeout_s=3600, verifier_timeout_s=600, build_timeout_s=600)
    # 600 x 1 (build) + 360 x 2 (setup) + 3600 x 1 (agent) + 600 x 1 (verifier) = 5520 s.
    assert trial_hours(cfg.harbor, needs) == pytest.approx(5520 / 3600)
    assert trial_hours(cfg.harbor, TaskNeeds()) is None


def test_no_agent_timeout_is_named_when_the_job_is_bounded(tmp_path: Path) -> None:
    task(tmp_path, "forever", "")
    task(tmp_path, "bounded", "[agent]\ntimeout_sec = 60\n")
    cfg = parse_stack_config(stack())
    with pytest.raises(ConfigError) as info:
        check_task_needs(cfg, load_manifest(tmp_path).needs, str(tmp_path))
    assert ("benchstack:harbor.max_job_hours: tasks forever set no agent timeout "
            "([agent].timeout_sec in task.toml): Harbor never stops their agent") in str(
        info.value)
    unbounded = parse_stack_config({**stack(), "harbor": {
        k: v for k, v in stack()["harbor"].items() if k != "max_job_hours"}})
    check_task_needs(unbounded, load_manifest(tmp_path).needs, str(tmp_path))


def test_a_harbor_host_without_gpus_runs_no_gpu_task(tmp_path: Path) -> None:
    """The local rehearsal's host (no GPUs; its stand-in workers serve on CPU) with 0.26.0,
    which could reserve GPUs on docker: there are none to reserve."""
    task(tmp_path, "gpu-task", "gpus = 1\n[agent]\ntimeout_sec = 60\n")
    values = copy.deepcopy(split_stack_file(ROOT / "Pulumi.local.yaml")[0])
    values["harbor"].update(version="0.26.0", wheel_sha256=(
        "b7c752c5b51ae2ee1fc2ea30621493c7dc0b5a3d0157295bed4552115027baee"))
    cfg = parse_stack_config(values)
    needs = load_manifest(tmp_path).needs
    with pytest.raises(ConfigError, match=r"benchstack:hosts\[0\].gpus: the Harbor host local "
                                          r"has 0 GPUs, so 0 left for tasks"):
        check_task_needs(cfg, needs, str(tmp_path))
