#!/usr/bin/env python3
"""A stand-in `nvidia-smi` for hosts without GPUs (tests only, never shipped): it replays the
recorded outputs of one fixture dir (tests/gpu/fixtures/<scenario>) for exactly the commands
hostside/gpu_check.py and gpu_runtime.py run, and refuses any other with exit 2, so a changed
query cannot pass on a stale recording.

Installed as `nvidia-smi` on PATH (the rehearsal hosts: tests/e2e/gpu_plane.py; the unit tests:
a temporary dir). The scenario: $NVIDIA_SMI_REPLAY_SCENARIO, else the one word in
<data>/scenario, where <data> is $NVIDIA_SMI_REPLAY_DIR, else /usr/local/share/
benchstack-nvidia-smi (one fixture dir per scenario under it). Each call is appended to
<data>/calls.log where that file exists. Standard library only, any python3 >= 3.9.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# hostside/nvidia_smi.py's GPU_FIELDS and APP_FIELDS (tests/gpu/test_replay.py holds them
# equal): the fixtures' CSV files answer exactly these queries.
GPU_FIELDS = (
    "index", "uuid", "name", "pci.bus_id", "memory.total", "memory.used", "driver_version",
    "mig.mode.current", "compute_mode", "ecc.mode.current",
    "ecc.errors.uncorrected.volatile.total", "retired_pages.pending",
)
APP_FIELDS = ("gpu_uuid", "pid", "used_memory", "process_name")
FORMAT = "--format=csv,noheader,nounits"
DEFAULT_DIR = "/usr/local/share/benchstack-nvidia-smi"
ANSWERS = {
    (f"--query-gpu={','.join(GPU_FIELDS)}", FORMAT): "query-gpu.csv",
    (f"--query-compute-apps={','.join(APP_FIELDS)}", FORMAT): "query-compute-apps.csv",
    ("-q",): "q.txt",
    ("-L",): "L.txt",
}


def scenario_dir() -> Path:
    data = Path(os.environ.get("NVIDIA_SMI_REPLAY_DIR") or DEFAULT_DIR)
    name = os.environ.get("NVIDIA_SMI_REPLAY_SCENARIO")
    if not name:
        name = (data / "scenario").read_text().strip()
    return data / name


def note_call(argv: list[str]) -> None:
    """Each call appended to <data>/calls.log where that file exists (the e2e reads it: a
    preview must run none)."""
    calls = Path(os.environ.get("NVIDIA_SMI_REPLAY_DIR") or DEFAULT_DIR) / "calls.log"
    if calls.is_file():
        with calls.open("a") as log:
            log.write(" ".join(argv) + "\n")


def main(argv: list[str]) -> int:
    note_call(argv)
    answer = ANSWERS.get(tuple(argv))
    if answer is None:
        print(f"nvidia-smi replay: no recording for {' '.join(argv) or '(no arguments)'}",
              file=sys.stderr)
        return 2
    try:
        text = (scenario_dir() / answer).read_text()
    except OSError as exc:
        print(f"nvidia-smi replay: {exc}", file=sys.stderr)
        return 9
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
