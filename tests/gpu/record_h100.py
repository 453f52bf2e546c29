"""Record nvidia-smi on a real GPU machine and run the gpu_check step there (tests only).

Made for the device machine DEVELOPERS.md describes (one NVIDIA H100, PyTorch, nvidia-smi; no
Docker, no network); run through tests/gpu/record_h100.sh, which gives it $OUT. It writes at
most 8 files under OUT:

  idle/query-gpu.csv idle/query-compute-apps.csv idle/q.txt idle/L.txt   nvidia-smi, idle GPU
  busy/query-gpu.csv busy/query-compute-apps.csv busy/q.txt               while PyTorch holds it
  runs.json   the machine, the step's runs (idle: passes, timed; busy: refused naming the
              process; a layout asking for 2 GPUs of this 1: refused), the holder's PID

The commands are exactly hostside/nvidia_smi.py's, so the files are fixtures as they are: copy
idle/ and busy/ to tests/gpu/fixtures/h100-recorded-{idle,busy}/ with a PROVENANCE.md saying
where and when (runs.json has it); tests/gpu/test_replay.py then holds their CSV against the
projection of their -q. Docker is not on that machine: the step's two docker questions (the
serving image's CUDA version, the worker container's PIDs) are answered by a shim this script
puts first on PATH, saying the image is built on the CUDA PyTorch was built with, and that no
worker container runs; runs.json says so.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from hostside import nvidia_smi  # noqa: E402

IDLE_FILES = {"query-gpu.csv": nvidia_smi.QUERY_GPU, "query-compute-apps.csv":
              nvidia_smi.QUERY_APPS, "q.txt": nvidia_smi.QUERY_ALL, "L.txt": nvidia_smi.LIST}
BUSY_FILES = {k: v for k, v in IDLE_FILES.items() if k != "L.txt"}
TIMED_RUNS = 5
# The holder: a PyTorch allocation of most of GPU 0's free memory, held until killed.
HOLDER = """
import sys, time, torch
free, total = torch.cuda.mem_get_info(0)
held = torch.empty(int(free * 0.92), dtype=torch.uint8, device="cuda:0")
print(f"holding {held.numel() // 2**20} MiB of {total // 2**20} MiB", flush=True)
time.sleep(900)
"""
DOCKER_SHIM = """#!/bin/sh
# Docker is not on this machine: the serving image is said to be built on PyTorch's CUDA, and no
# worker container runs (record_h100.py).
case "$1 $2" in
  "image inspect") printf '{"Env":["CUDA_VERSION=%s"],"Labels":null}\\n' "$RECORD_IMAGE_CUDA" ;;
  *) echo "Error response from daemon: No such container: $2" >&2; exit 1 ;;
esac
"""


def record(directory: Path, files: dict[str, list[str]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, cmd in files.items():
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)
        (directory / name).write_text(proc.stdout)


def torch_cuda() -> str:
    proc = subprocess.run([sys.executable, "-c", "import torch; print(torch.version.cuda)"],
                          capture_output=True, text=True, timeout=300, check=True)
    return proc.stdout.strip()


def step(inputs: dict, env: dict[str, str]) -> dict:
    """One run of `python3 -m hostside gpu_check create` as the host seam runs it, timed."""
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "hostside", "gpu_check", "create"],
                          env={**env, "BENCHSTACK_INPUTS": json.dumps(inputs)}, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    wall = time.monotonic() - start
    lines = proc.stdout.strip().splitlines()
    return {"inputs": inputs, "rc": proc.returncode, "wall_s": round(wall, 3),
            "outputs": json.loads(lines[-1]) if proc.returncode == 0 and lines else None,
            "stderr": proc.stderr.strip().splitlines()[-12:]}


def layout(rows: list[nvidia_smi.GpuRow], needed: int) -> dict:
    """This machine as a stack would declare it (hosts[].gpus from its own first GPU)."""
    gb = rows[0].memory_total_mib * 2**20 / 1e9
    return {"host": platform.node() or "h100", "gpus": "all", "needed": needed,
            "needed_from": f"serving.tp_size x dp_size = {needed} x 1",
            "model": rows[0].name.replace("NVIDIA ", ""), "memory_gb": int(gb),
            "memory_key": "benchstack:hosts[0].gpus.memory_gb", "mem_fraction_static": 0.9,
            "image": "sha256:" + "0" * 64, "container": "benchstack-sglang-h100"}


def hold(env: dict[str, str]) -> tuple[subprocess.Popen, bool]:
    """The holder, once nvidia-smi sees its memory; and whether it lists the holder's PID (in a
    container without the host's PID namespace it may not: the check then says so)."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True,
                              env=env)
    line = holder.stdout.readline() if holder.stdout else ""
    if not line.startswith("holding"):
        holder.kill()
        raise SystemExit(f"the PyTorch holder did not start: {line!r}")
    for _ in range(60):
        apps = nvidia_smi.parse_apps(nvidia_smi.query(nvidia_smi.QUERY_APPS))
        gpu0 = nvidia_smi.parse_gpus(nvidia_smi.query(nvidia_smi.QUERY_GPU))[0]
        if any(a.pid == holder.pid for a in apps):
            return holder, True
        if gpu0.memory_used_mib > gpu0.memory_total_mib // 2:
            return holder, False
        time.sleep(0.5)
    holder.kill()
    raise SystemExit("nvidia-smi never showed the holder's memory")


def main(out: Path) -> int:
    shim = Path(tempfile.mkdtemp()) / "docker"
    shim.write_text(DOCKER_SHIM)
    shim.chmod(0o755)
    cuda = torch_cuda()
    env = {**os.environ, "PATH": f"{shim.parent}:{os.environ['PATH']}",
           "RECORD_IMAGE_CUDA": cuda, "PYTHONPATH": str(ROOT)}
    record(out / "idle", IDLE_FILES)
    rows = nvidia_smi.parse_gpus((out / "idle/query-gpu.csv").read_text())
    fits = layout(rows, needed=len(rows))
    idle = [step(fits, env) for _ in range(TIMED_RUNS)]
    two_on_one = step(layout(rows, needed=len(rows) + 1), env)
    holder, listed = hold(env)
    try:
        record(out / "busy", BUSY_FILES)
        busy = step(fits, env)
    finally:
        holder.kill()
        holder.wait(timeout=60)
    runs = {
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": platform.node(), "python": platform.python_version(),
        "torch_cuda": cuda, "holder_pid": holder.pid, "holder_listed_by_nvidia_smi": listed,
        "docker": "absent: a shim answered image inspect (CUDA_VERSION=torch's) and top (none)",
        "idle": idle, "idle_wall_s_median": statistics.median(r["wall_s"] for r in idle),
        "busy": busy, "two_gpus_on_one": two_on_one,
    }
    (out / "runs.json").write_text(json.dumps(runs, indent=2) + "\n")
    print(json.dumps({"idle_rc": [r["rc"] for r in idle], "busy_rc": busy["rc"],
                      "two_on_one_rc": two_on_one["rc"],
                      "idle_wall_s_median": runs["idle_wall_s_median"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else os.environ["OUT"])))
