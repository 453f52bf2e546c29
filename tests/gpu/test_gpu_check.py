"""hostside/gpu_check.py on the recorded outputs: an idle host passes, each problem is one line
naming the host and the GPU, all at once; and the step itself, run as a host runs it, against the
replayed nvidia-smi."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from hostside import gpu_check
from hostside.step import HostError
from tests.conftest import ROOT
from tests.gpu.fixtures import FIXTURES, csv_cell, q_value, reading, text

# The h100 stack's layout on one of its hosts: TP=2 x DP=4 on 8 x H100-80GB-HBM3 at 0.90.
LAYOUT = gpu_check.Inputs(
    host="h100", gpus="all", needed=8, needed_from="serving.tp_size x dp_size = 2 x 4",
    model="H100-80GB-HBM3", memory_gb=80, memory_key="benchstack:hosts[0].gpus.memory_gb",
    mem_fraction_static=0.9, image="sha256:" + "ab" * 32, container="benchstack-sglang-h100",
)


def test_the_idle_h100s_pass_and_say_which_gpus_they_are():
    out = gpu_check.check(LAYOUT, reading("h100-idle"))
    assert out["driver_version"] == "535.161.08" and out["cuda_version"] == "12.2"
    assert out["host_gpus"] == 8 and len(out["gpus"]) == 8
    assert out["gpus"][0] == {"index": 0, "uuid": "GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa",
                              "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559,
                              "pci_bus_id": "00000000:19:00.0"}
    assert out["processes"] == []


def test_a_busy_gpu_is_refused_naming_the_host_gpu_and_process():
    with pytest.raises(HostError) as err:
        gpu_check.check(LAYOUT, reading("h100-busy"))
    message = str(err.value)
    assert message.startswith("1 problem(s) with h100's GPUs")
    assert ("h100 GPU 0: 77312 MiB held by other processes (PID 58130 /usr/bin/python 77306 MiB)"
            ", above the 8155 MiB mem_fraction_static 0.9 leaves of 81559 MiB") in message


def test_the_workers_own_processes_are_not_anothers():
    """The check run again while this stack's worker holds the GPU (an update of the step)."""
    out = gpu_check.check(LAYOUT, reading("h100-busy", own_pids=frozenset({58130})))
    assert out["processes"][0]["own"] is True


def test_a_lower_mem_fraction_leaves_room_for_the_other_process():
    roomy = replace(LAYOUT, mem_fraction_static=0.05)
    assert gpu_check.check(roomy, reading("h100-busy"))["processes"][0]["pid"] == 58130


def test_two_gpus_asked_of_one_are_refused():
    """The layout asks for 2 GPUs (tp 2) where the worker sees one (Docker --gpus device=0)."""
    one = replace(LAYOUT, gpus="device=0", needed=2, needed_from="serving.tp_size x dp_size = "
                  "2 x 1", model=None, memory_gb=None, memory_key=None)
    problems = gpu_check.problems_of(one, reading("h100-idle"))
    assert problems == ["h100: the worker would see 1 GPU(s) (index 0 of the host's 8, Docker "
                        "--gpus device=0), the layout needs 2 (serving.tp_size x dp_size = 2 x 1)"]


def test_another_model_or_less_memory_than_the_fit_check_assumed():
    a100 = replace(LAYOUT, model="A100-SXM4-40GB", memory_gb=96,
                   memory_key="benchstack:hosts[1].gpus.memory_gb")
    problems = gpu_check.problems_of(a100, reading("h100-idle"))
    assert len(problems) == 16
    assert problems[0] == ("h100 GPU 0: is a NVIDIA H100 80GB HBM3, the layout declares "
                           "A100-SXM4-40GB (benchstack:hosts[1].gpus.memory_gb beside it)")
    assert problems[1] == ("h100 GPU 0: has 81559 MiB (85.5 GB), below the 96 GB the fit check "
                           "assumed (benchstack:hosts[1].gpus.memory_gb)")
    # The H100's 81559 MiB are 85.5 GB: the stack's 80 GB holds.
    assert gpu_check.fit_problems(LAYOUT, reading("h100-idle").rows[0]) == []


def test_mig_exclusive_mode_and_ecc_errors_each_name_their_gpu():
    """Variants of the real idle output, each one cell changed (tests/gpu/fixtures.py)."""
    csv = text("h100-idle", "query-gpu.csv")
    csv = csv_cell(csv, 2, "mig.mode.current", "Enabled")
    csv = csv_cell(csv, 3, "compute_mode", "Exclusive_Process")
    csv = csv_cell(csv, 5, "ecc.errors.uncorrected.volatile.total", "2")
    csv = csv_cell(csv, 6, "retired_pages.pending", "Yes")
    problems = gpu_check.problems_of(LAYOUT, reading("h100-idle", csv=csv))
    assert [p.split(":")[0] for p in problems] == ["h100 GPU 2", "h100 GPU 3", "h100 GPU 5",
                                                   "h100 GPU 6"]
    assert "MIG mode is enabled" in problems[0]
    assert "compute mode is Exclusive_Process" in problems[1]
    assert "2 uncorrected ECC error(s)" in problems[2]
    assert "retired pages are pending" in problems[3]


def test_rows_pending_remapping_and_a_failed_remap_come_from_the_q_text():
    q = text("h100-idle", "q.txt")
    q = q_value(q, "00000000:9B:00.0", "Remapped Rows", "Pending", "Yes")
    q = q_value(q, "00000000:DB:00.0", "Remapped Rows", "Remapping Failure Occurred", "Yes")
    problems = gpu_check.problems_of(LAYOUT, reading("h100-idle", q=q))
    assert problems == [
        "h100 GPU 4: rows are pending remapping after uncorrectable memory errors: reset the "
        "GPU first",
        "h100 GPU 7: row remapping failed: the GPU needs replacing",
    ]


def test_a_driver_of_an_older_cuda_major_than_the_images_is_refused():
    problems = gpu_check.problems_of(LAYOUT, reading("h100-idle", image_cuda="13.0.1"))
    assert problems == [f"h100: its driver 535.161.08 supports CUDA 12.2, an older major version "
                        f"than the serving image's CUDA 13.0.1 ({LAYOUT.image[:19]}): update the "
                        "driver, or use an image built for CUDA 12"]


def test_a_newer_cuda_minor_runs_under_minor_version_compatibility(capsys):
    assert gpu_check.problems_of(LAYOUT, reading("h100-idle", image_cuda="12.8.1")) == []
    assert "runs under CUDA minor version compatibility" in capsys.readouterr().err
    assert gpu_check.problems_of(LAYOUT, reading("h100-idle", image_cuda="12.2.2")) == []
    # A CPU image says no CUDA: nothing to compare.
    assert gpu_check.problems_of(LAYOUT, reading("h100-idle", image_cuda=None)) == []


def test_every_problem_at_once():
    csv = csv_cell(text("h100-busy", "query-gpu.csv"), 1, "mig.mode.current", "Enabled")
    with pytest.raises(HostError) as err:
        gpu_check.check(LAYOUT, reading("h100-busy", csv=csv, image_cuda="13.0"))
    assert str(err.value).startswith("3 problem(s) with h100's GPUs")
    assert str(err.value).count(" | ") == 2


def test_the_images_cuda_from_its_env_or_its_label():
    # The keys NVIDIA's CUDA images set (ENV CUDA_VERSION; older ones the label).
    assert gpu_check.image_cuda({"Env": ["PATH=/usr/bin", "CUDA_VERSION=12.4.1"]}) == "12.4.1"
    assert gpu_check.image_cuda({"Env": [], "Labels": {"com.nvidia.cuda.version": "11.8.0"}}) \
        == "11.8.0"
    assert gpu_check.image_cuda({"Env": ["PATH=/usr/bin"], "Labels": None}) is None


# --- the step itself, as a host runs it ------------------------------------------------------

DOCKER_STANDIN = """#!/bin/sh
# docker for this test: `image inspect` prints an image config with CUDA_VERSION; `top` finds
# no container (the worker is not running yet).
case "$1 $2" in
  "image inspect") echo '{"Env":["CUDA_VERSION=12.2.2"],"Labels":null}' ;;
  *) echo "Error response from daemon: No such container: $2" >&2; exit 1 ;;
esac
"""


def host_bin(tmp_path: Path, scenario: str) -> dict[str, str]:
    """A PATH with the nvidia-smi replay of `scenario` and a docker that knows the image."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    replay = bin_dir / "nvidia-smi"
    replay.write_text(f"#!/bin/sh\nexec {sys.executable} "
                      f"{ROOT / 'tests/gpu/nvidia_smi_replay.py'} \"$@\"\n")
    (bin_dir / "docker").write_text(DOCKER_STANDIN)
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "NVIDIA_SMI_REPLAY_DIR": str(FIXTURES),
            "NVIDIA_SMI_REPLAY_SCENARIO": scenario}


def run_step(tmp_path: Path, scenario: str, inputs: gpu_check.Inputs):
    env = {**os.environ, **host_bin(tmp_path, scenario),
           "BENCHSTACK_INPUTS": json.dumps(inputs.__dict__), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "hostside", "gpu_check", "create"], env=env,
                          capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_the_step_passes_the_idle_host_and_outputs_what_it_read(tmp_path):
    proc = run_step(tmp_path, "h100-idle", LAYOUT)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["image_cuda_version"] == "12.2.2"
    assert [g["uuid"] for g in out["gpus"]][:1] == ["GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa"]
    assert out["seconds"] >= 0


def test_the_step_refuses_the_busy_host_in_one_last_line(tmp_path):
    proc = run_step(tmp_path, "h100-busy", LAYOUT)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("gpu_check: 1 problem(s) with h100's GPUs")
    assert "PID 58130 /usr/bin/python 77306 MiB" in last
    # Each problem also on its own line above it.
    assert "[gpu_check] h100 GPU 0: 77312 MiB held by other processes" in proc.stderr


def test_the_step_on_a_host_without_the_driver_says_so(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path), "PYTHONPATH": str(ROOT),
           "BENCHSTACK_INPUTS": json.dumps(LAYOUT.__dict__)}
    proc = subprocess.run([sys.executable, "-m", "hostside", "gpu_check", "create"], env=env,
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        "gpu_check: nvidia-smi is not on this host's PATH: the NVIDIA driver is not installed "
        "(or not for this user)")
