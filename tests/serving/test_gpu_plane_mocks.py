"""The GPU plane of each worker under Pulumi mocks (components/gpu_plane.py): the host's GPUs and
its container runtime checked before the container, with the layout's values, again with every
new container; none on a CPU host; what they read reaches the worker's outputs."""

from __future__ import annotations

import json

from components.config import load_stack_file
from components.sglang_worker import SGLangWorker
from tests.conftest import ROOT
from tests.serving.test_components_mocks import (
    IMAGE_ID,
    declare,
    stack,
    stdout_for,
    step_inputs,
    worker_args,
)


def test_the_gpu_check_takes_the_layout_and_the_fit_checks_assumptions():
    cfg = stack("a100")
    rec = declare(lambda: [SGLangWorker("w", worker_args(cfg, "worker-a")).url])
    check = rec.named("w-gpu-check").inputs
    assert "python3 -m hostside gpu_check create" in check["create"]
    assert step_inputs(check["create"]) == {
        "host": "worker-a", "gpus": "all", "needed": 8,
        "needed_from": "serving.tp_size x dp_size = 4 x 2",
        "model": "A100-SXM4-40GB", "memory_gb": 40,
        "memory_key": "benchstack:hosts[0].gpus.memory_gb", "mem_fraction_static": 0.9,
        "image": IMAGE_ID, "container": "benchstack-sglang-worker-a",
    }
    # Again whenever the container will be created again: a new image, or a new run token (a
    # stopped worker; "start" while none exists, tests/graph/program.py's probe answers {}).
    assert check["triggers"] == [IMAGE_ID, "start"]
    # Read-only: nothing to undo on destroy.
    assert check.get("delete") is None


def test_the_runtime_check_smokes_the_serving_image_for_the_gpus_the_check_found():
    cfg = stack("h100")
    rec = declare(lambda: [SGLangWorker("w", worker_args(cfg, "h100")).url])
    runtime = step_inputs(rec.named("w-gpu-runtime").inputs["create"])
    facts = json.loads(_stdout(rec, "w-gpu-check"))
    assert runtime == {"host": "h100", "image": IMAGE_ID, "gpus": "all", "user": "1000:1000",
                       "uuids": [g["uuid"] for g in facts["gpus"]],
                       "container": "benchstack-gpu-smoke-h100"}
    assert len(runtime["uuids"]) == 8


def _stdout(rec, name: str) -> str:
    """What the mocks answered for step `name` (its outputs as the program saw them)."""
    return stdout_for(name, rec.named(name).inputs)


def test_what_the_checks_read_reaches_the_workers_outputs():
    cfg = stack("a100")
    seen: dict = {}

    def build():
        w = SGLangWorker("w", worker_args(cfg, "worker-b"))
        return [w.gpus.apply(lambda v: seen.__setitem__("gpus", v)),
                w.startup.apply(lambda v: seen.__setitem__("startup", v))]

    declare(build)
    gpus = seen["gpus"]
    assert gpus["driver_version"] == "535.161.08" and gpus["cuda_version"] == "12.2"
    assert gpus["gpus"][0]["uuid"] == "GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa"
    assert gpus["runtime"]["seen"] == [g["uuid"] for g in gpus["gpus"]]
    assert seen["startup"] == []


def test_a_cpu_host_declaring_no_gpus_has_no_gpu_steps():
    cfg = load_stack_file(ROOT / "Pulumi.local.yaml")
    rec = declare(lambda: [SGLangWorker("w", worker_args(cfg, "local")).url])
    names = {r.name for r in rec.records}
    assert "w-gpu-check" not in names and "w-gpu-runtime" not in names
    assert "w-container" in names


def test_a_cpu_stand_in_rehearsing_a_gpu_host_has_its_gpus_checked_not_given():
    """The two-host rehearsal's GPU phase (tests/e2e/gpu_plane.py): hosts[].gpus declared,
    serving.gpus null: the host's GPUs are checked, the stand-in container gets none, and no
    smoke container is run (the rehearsal hosts' Docker has no NVIDIA runtime)."""
    cfg = load_stack_file(ROOT / "Pulumi.a100-rehearsal.yaml")
    a100 = load_stack_file(ROOT / "Pulumi.a100.yaml")
    args = worker_args(cfg, "worker-a", gpu_spec=a100.hosts[0].gpus,
                       gpu_spec_key="benchstack:hosts[0].gpus")
    rec = declare(lambda: [SGLangWorker("w", args).url])
    check = step_inputs(rec.named("w-gpu-check").inputs["create"])
    assert check["gpus"] == "all" and check["model"] == "A100-SXM4-40GB"
    assert "w-gpu-runtime" not in {r.name for r in rec.records}
    assert "gpus" not in rec.named("w-container").inputs
    assert rec.resource("w-gpu-check") in rec.opts("w-container").depends_on
