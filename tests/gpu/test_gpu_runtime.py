"""hostside/gpu_runtime.py on recorded `docker info` outputs with and without the NVIDIA runtime,
and the smoke container's answers: the GPUs it lists against the host's."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from hostside import gpu_runtime
from tests.conftest import ROOT
from tests.gpu.fixtures import DOCKER_INFO, FIXTURES, NO_GPU_DRIVER, text

HOST_UUIDS = [line.split("UUID: ")[1].rstrip(")")
              for line in text("h100-idle", "L.txt").splitlines()]
INPUTS = gpu_runtime.Inputs(host="worker-a", image="sha256:" + "ab" * 32, gpus="all",
                            user="1000:1000", uuids=HOST_UUIDS,
                            container="benchstack-gpu-smoke-worker-a")


def info(name: str) -> gpu_runtime.DockerInfo:
    return gpu_runtime.parse_info((DOCKER_INFO / name).read_text())


def test_docker_info_without_the_nvidia_runtime():
    here = info("runc-only-here.txt")
    assert here.server_version == "20.10.24+dfsg1"
    assert here.runtimes == ["io.containerd.runc.v2", "io.containerd.runtime.v1.linux", "runc"]
    assert here.default_runtime == "runc"
    assert not here.nvidia_runtime and not here.nvidia_cdi


def test_docker_info_with_the_nvidia_runtime_and_cdi_devices():
    cdi = info("nvidia-cdi.txt")
    assert cdi.server_version == "29.7.2"
    assert cdi.runtimes == ["io.containerd.runc.v2", "nvidia", "runc"]
    assert cdi.cdi_spec_dirs == ["/etc/cdi", "/var/run/cdi"]
    assert cdi.cdi_devices == ["nvidia.com/gpu=0",
                               "nvidia.com/gpu=GPU-0008bcf4-cae8-0120-a18f-bc344fb1c710",
                               "nvidia.com/gpu=all"]
    assert cdi.nvidia_runtime and cdi.nvidia_cdi
    registered = info("nvidia-runtime.txt")
    assert registered.nvidia_runtime and not registered.cdi_devices


def test_the_smoke_container_seeing_the_hosts_gpus_passes():
    assert gpu_runtime.problems_of(INPUTS, info("nvidia-cdi.txt"), 0,
                                   text("h100-idle", "L.txt")) == []


def test_no_gpu_driver_in_docker_fails_naming_what_docker_info_lacks():
    problems = gpu_runtime.problems_of(INPUTS, info("runc-only-here.txt"), 125, NO_GPU_DRIVER)
    assert problems == [
        "worker-a: a container of the serving image with --gpus all failed (exit 125: docker: "
        'Error response from daemon: could not select device driver "" with capabilities: '
        "[[gpu]].); docker info lists no NVIDIA runtime and no NVIDIA CDI device (Runtimes: "
        "io.containerd.runc.v2 io.containerd.runtime.v1.linux runc; no CDI devices): install the "
        "NVIDIA Container Toolkit and register it with Docker (nvidia-ctk runtime configure "
        "--runtime=docker), then restart Docker"]


def test_a_failure_with_the_runtime_present_gives_dockers_words_alone():
    problems = gpu_runtime.problems_of(INPUTS, info("nvidia-runtime.txt"), 125, NO_GPU_DRIVER)
    assert problems[0].endswith("capabilities: [[gpu]].)")


def test_a_container_seeing_fewer_gpus_names_the_missing_ones():
    two = "".join(text("h100-idle", "L.txt").splitlines(keepends=True)[:2])
    problems = gpu_runtime.problems_of(INPUTS, info("nvidia-cdi.txt"), 0, two)
    assert problems[0].startswith("worker-a: a container of the serving image with --gpus all "
                                  "sees 2 GPU(s), the host's nvidia-smi 8 for the worker; "
                                  f"missing {HOST_UUIDS[2]}")


def test_the_smoke_runs_the_serving_image_as_the_worker_would():
    assert gpu_runtime.smoke_argv(INPUTS) == [
        "docker", "run", "--rm", "--name", "benchstack-gpu-smoke-worker-a", "--gpus", "all",
        "--user", "1000:1000", "--entrypoint", "nvidia-smi", INPUTS.image, "-L"]


# --- the step itself, as a host runs it --------------------------------------------------------

DOCKER_STANDIN = """#!/bin/sh
# docker for this test: `info` prints a recorded docker info; `run` the smoke container's answer
# (the recorded nvidia-smi -L, or Docker's refusal without a GPU driver); `rm` finds nothing.
case "$1" in
  info) cat "$INFO" ;;
  run) if [ -n "$REFUSE" ]; then printf '%s' "$REFUSE" >&2; exit 125; fi; cat "$LIST" ;;
  *) echo "Error: No such container: $3" >&2; exit 1 ;;
esac
"""


def run_step(tmp_path, info: str, refuse: str = ""):
    (tmp_path / "docker").write_text(DOCKER_STANDIN)
    (tmp_path / "docker").chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT),
           "INFO": str(DOCKER_INFO / info), "LIST": str(FIXTURES / "h100-idle" / "L.txt"),
           "REFUSE": refuse, "BENCHSTACK_INPUTS": json.dumps(INPUTS.__dict__)}
    return subprocess.run([sys.executable, "-m", "hostside", "gpu_runtime", "create"], env=env,
                          capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_the_step_passes_where_the_container_sees_the_hosts_gpus(tmp_path):
    proc = run_step(tmp_path, "nvidia-cdi.txt")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["seen"] == HOST_UUIDS and out["server_version"] == "29.7.2"


def test_the_step_refuses_a_docker_without_a_gpu_driver_in_one_last_line(tmp_path):
    proc = run_step(tmp_path, "runc-only-here.txt", refuse=NO_GPU_DRIVER)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("gpu_runtime: worker-a: a container of the serving image with --gpus "
                           "all failed (exit 125: docker: Error response from daemon: could not "
                           'select device driver "" with capabilities: [[gpu]].)')
    assert "install the NVIDIA Container Toolkit" in last
