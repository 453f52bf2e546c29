"""What nvidia-smi's CSV queries and `-L` print, projected from its `-q` text (tests only).

The published outputs this project could find (tests/gpu/fixtures/*/PROVENANCE.md) are `-q` texts;
no published CSV asks the exact fields gpu_check asks. So the fixtures' CSV and `-L` files are
this projection of their `-q` (field by field, as nvidia-smi's own help describes each CSV field),
written by `python -m tests.gpu.projection DIR`. tests/gpu/test_replay.py holds every fixture
dir's files equal to the projection of its q.txt: on the dirs recorded on a real H100
(h100-recorded-*, all outputs from the same host), it compares the projection with nvidia-smi's
own CSV and `-L`, and they agree.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hostside import nvidia_smi

NA = "[N/A]"
# The uncorrectable volatile counters whose sum is `ecc.errors.uncorrected.volatile.total`
# (the names differ between GPU generations: SRAM is split into parity and SEC-DED on Hopper).
UNCORRECTED = ("SRAM Uncorrectable", "SRAM Uncorrectable Parity", "SRAM Uncorrectable SEC-DED",
               "DRAM Uncorrectable")


def _mib(text: str | None) -> str:
    return NA if not text or text == "N/A" else text.split()[0]


def _plain(text: str | None) -> str:
    return NA if text in (None, "", "N/A") else str(text)


def _uncorrected(gpu: dict) -> str:
    found = [gpu.get(("ECC Errors", "Volatile", key)) for key in UNCORRECTED]
    counts = [int(v) for v in found if v not in (None, "N/A")]
    return str(sum(counts)) if counts else NA


def gpu_rows(q_text: str) -> list[list[str]]:
    """The --query-gpu cells of every GPU, in nvidia_smi.GPU_FIELDS order."""
    report = nvidia_smi.parse_query(q_text)
    rows = []
    for index, (bus, gpu) in enumerate(report.gpus.items()):
        rows.append([
            str(index), gpu[("GPU UUID",)], gpu[("Product Name",)], bus,
            _mib(gpu.get(("FB Memory Usage", "Total"))),
            _mib(gpu.get(("FB Memory Usage", "Used"))),
            report.driver_version or NA,
            _plain(gpu.get(("MIG Mode", "Current"))),
            _plain(gpu.get(("Compute Mode",))),
            _plain(gpu.get(("ECC Mode", "Current"))),
            _uncorrected(gpu),
            _plain(gpu.get(("Retired Pages", "Pending Page Blacklist"))),
        ])
    return rows


def query_gpu(q_text: str) -> str:
    return "".join(", ".join(row) + "\n" for row in gpu_rows(q_text))


def processes(q_text: str) -> list[tuple[str, str, str, str]]:
    """(GPU UUID, PID, MiB, process name) of every process -q lists, in its order."""
    found = []
    uuid = ""
    current: dict[str, str] = {}
    for line in q_text.splitlines():
        key, _, val = (part.strip() for part in line.partition(" : "))
        if key == "GPU UUID":
            uuid = val
        elif key == "Process ID":
            current = {"pid": val}
        elif key == "Name" and "pid" in current:
            current["name"] = val
        elif key == "Used GPU Memory" and "pid" in current:
            found.append((uuid, current["pid"], _mib(val), current.get("name", "")))
            current = {}
    return found


def query_compute_apps(q_text: str) -> str:
    return "".join(", ".join(p) + "\n" for p in processes(q_text))


def gpu_list(q_text: str) -> str:
    return "".join(f"GPU {row[0]}: {row[2]} (UUID: {row[1]})\n" for row in gpu_rows(q_text))


PROJECTIONS = {"query-gpu.csv": query_gpu, "query-compute-apps.csv": query_compute_apps,
               "L.txt": gpu_list}


def write(directory: Path) -> None:
    """DIR/q.txt's projections beside it."""
    q_text = (directory / "q.txt").read_text()
    for name, project in PROJECTIONS.items():
        (directory / name).write_text(project(q_text))


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        write(Path(arg))
