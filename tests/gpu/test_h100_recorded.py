"""gpu_check on the outputs recorded on a real H100 (fixtures h100-recorded-*, and the step's own
runs there, h100-recorded-runs.json): what the code decides now from those outputs is what the
step decided on the machine, so a change that would pass the busy GPU, or word its refusal
otherwise, fails here and not first on a rented server."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from hostside import gpu_check
from hostside.step import HostError
from tests.gpu.fixtures import FIXTURES, reading

RUNS = json.loads((FIXTURES / "h100-recorded-runs.json").read_text())
# The layout the recording ran with (record_h100.py's: the machine's one GPU, TP 1).
LAYOUT = gpu_check.Inputs(**RUNS["idle"][0]["inputs"])
IMAGE_CUDA = RUNS["torch_cuda"]


def test_the_recording_is_of_one_h100_and_its_runs_went_as_the_issue_asks():
    """Idle passes (every timed run), the PyTorch holder is refused, two GPUs asked of one are
    refused: on the real card."""
    assert [r["rc"] for r in RUNS["idle"]] == [0] * len(RUNS["idle"])
    assert RUNS["busy"]["rc"] == 1 and RUNS["two_gpus_on_one"]["rc"] == 1
    assert RUNS["holder_listed_by_nvidia_smi"] is True
    assert "H100" in RUNS["idle"][0]["outputs"]["gpus"][0]["name"]


def test_idle_passes_and_outputs_what_the_step_output_there():
    out = gpu_check.check(LAYOUT, reading("h100-recorded-idle", image_cuda=IMAGE_CUDA))
    recorded = RUNS["idle"][0]["outputs"]
    for key in ("gpus", "driver_version", "cuda_version", "host_gpus", "processes"):
        assert out[key] == recorded[key], key


def test_busy_is_refused_naming_the_holder_as_on_the_machine():
    with pytest.raises(HostError) as err:
        gpu_check.check(LAYOUT, reading("h100-recorded-busy", image_cuda=IMAGE_CUDA))
    recorded_last = RUNS["busy"]["stderr"][-1]
    assert f"gpu_check: {err.value}" == recorded_last
    assert f"PID {RUNS['holder_pid']} /opt/torch/.venv/bin/python3" in recorded_last


def test_two_gpus_asked_of_the_one_are_refused_as_on_the_machine():
    two = replace(LAYOUT, needed=2, needed_from=RUNS["two_gpus_on_one"]["inputs"]["needed_from"])
    with pytest.raises(HostError) as err:
        gpu_check.check(two, reading("h100-recorded-idle", image_cuda=IMAGE_CUDA))
    assert f"gpu_check: {err.value}" == RUNS["two_gpus_on_one"]["stderr"][-1]


def test_the_holder_is_this_stacks_own_when_its_pid_is_the_workers():
    """The same busy GPU on an update, the worker's own process holding it: not refused."""
    out = gpu_check.check(LAYOUT, reading("h100-recorded-busy", image_cuda=IMAGE_CUDA,
                                          own_pids=frozenset({RUNS["holder_pid"]})))
    assert out["processes"][0]["own"] is True


def test_the_images_cuda_against_the_real_drivers():
    """Driver 580 reports CUDA 13.0: an image on 13.1 runs under minor version compatibility,
    one on the next major CUDA needs a newer driver."""
    assert gpu_check.problems_of(LAYOUT, reading("h100-recorded-idle", image_cuda="13.1")) == []
    problems = gpu_check.problems_of(LAYOUT, reading("h100-recorded-idle", image_cuda="14.0"))
    assert len(problems) == 1 and "14.0" in problems[0] and "13.0" in problems[0]
