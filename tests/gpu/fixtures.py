"""The recorded nvidia-smi and docker outputs (tests/gpu/fixtures: each dir's PROVENANCE.md says
where it comes from), and the edits the tests make to them, each named for what it derives."""

from __future__ import annotations

import re
from pathlib import Path

from hostside import gpu_check, nvidia_smi

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SCENARIOS = sorted(p.name for p in FIXTURES.iterdir() if (p / "q.txt").is_file())
DOCKER_INFO = FIXTURES / "docker-info"
# Docker's words when no driver can give a container GPUs (issue 36 quotes them).
NO_GPU_DRIVER = ('docker: Error response from daemon: could not select device driver "" with '
                 "capabilities: [[gpu]].\n")


def text(scenario: str, name: str) -> str:
    return (FIXTURES / scenario / name).read_text()


def reading(scenario: str, *, csv: str | None = None, q: str | None = None,
            image_cuda: str | None = "12.2", own_pids: frozenset[int] = frozenset()
            ) -> gpu_check.Reading:
    """What gpu_check reads on a host whose nvidia-smi printed `scenario`'s files (or the
    edited `csv` / `q` given)."""
    return gpu_check.Reading(
        rows=nvidia_smi.parse_gpus(csv if csv is not None else text(scenario, "query-gpu.csv")),
        apps=nvidia_smi.parse_apps(text(scenario, "query-compute-apps.csv")),
        report=nvidia_smi.parse_query(q if q is not None else text(scenario, "q.txt")),
        own_pids=set(own_pids), image_cuda=image_cuda,
    )


def csv_cell(csv: str, index: int, field: str, value: str) -> str:
    """The --query-gpu CSV with one cell of GPU `index` changed: the smallest edit that derives
    a MIG, compute-mode or ECC variant from a real output."""
    column = nvidia_smi.GPU_FIELDS.index(field)
    lines = csv.splitlines(keepends=True)
    cells = lines[index].rstrip("\n").split(", ")
    cells[column] = value
    lines[index] = ", ".join(cells) + "\n"
    return "".join(lines)


def q_value(q: str, bus: str, section: str, key: str, value: str) -> str:
    """The -q text with one `key` under `section` of the GPU at PCI `bus` changed (rows pending
    remapping, a remapping failure)."""
    start = q.index(f"GPU {bus}")
    end = q.find("\nGPU ", start + 1)
    end = len(q) if end == -1 else end
    block = q[start:end]
    at = block.index(f"    {section}\n")
    pattern = re.compile(rf"(\n\s+{re.escape(key)}\s+: )[^\n]*")
    edited = block[:at] + pattern.sub(rf"\g<1>{value}", block[at:], count=1)
    return q[:start] + edited + q[end:]
