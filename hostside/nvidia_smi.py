"""What `nvidia-smi` says about this host's GPUs, read the three ways the GPU checks use.

- `--query-gpu=GPU_FIELDS --format=csv,noheader,nounits`: one line per GPU (index, UUID, model,
  PCI bus, memory, driver, MIG, compute mode, ECC, pending retired pages);
- `--query-compute-apps=APP_FIELDS --format=csv,noheader,nounits`: one line per process holding
  GPU memory (the GPU's UUID, PID, MiB, process name);
- `-q`: the fields no CSV query has (the driver's CUDA version; row remapping on A100/H100:
  remaps pending a reset, remapping failures);
- `-L`: the GPUs as a container sees them (gpu_runtime.py's smoke container).

Parsing only; no verb of its own (gpu_check.py and gpu_runtime.py run it). Every function takes
the text a command printed, so the tests feed it recorded outputs (tests/gpu/fixtures).
nvidia-smi prints `[N/A]` or `[Not Supported]` where a GPU has no value: read as None.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field

from .step import HostError, run

# The order is the CSV's column order: GpuRow's fields, one to one.
GPU_FIELDS = (
    "index", "uuid", "name", "pci.bus_id", "memory.total", "memory.used", "driver_version",
    "mig.mode.current", "compute_mode", "ecc.mode.current",
    "ecc.errors.uncorrected.volatile.total", "retired_pages.pending",
)
# The process name last: it is the one field that may hold a comma.
APP_FIELDS = ("gpu_uuid", "pid", "used_memory", "process_name")
QUERY_GPU = ["nvidia-smi", f"--query-gpu={','.join(GPU_FIELDS)}",
             "--format=csv,noheader,nounits"]
QUERY_APPS = ["nvidia-smi", f"--query-compute-apps={','.join(APP_FIELDS)}",
              "--format=csv,noheader,nounits"]
QUERY_ALL = ["nvidia-smi", "-q"]
LIST = ["nvidia-smi", "-L"]
TIMEOUT_S = 60


@dataclass(frozen=True)
class GpuRow:
    """One GPU as --query-gpu reports it (memory in MiB)."""

    index: int
    uuid: str
    name: str
    pci_bus_id: str
    memory_total_mib: int
    memory_used_mib: int
    driver_version: str
    mig_mode: str | None
    compute_mode: str | None
    ecc_mode: str | None
    ecc_uncorrected_volatile: int | None
    retired_pages_pending: str | None


@dataclass(frozen=True)
class App:
    """A process holding GPU memory (--query-compute-apps)."""

    gpu_uuid: str
    pid: int
    used_mib: int | None
    name: str


@dataclass
class Report:
    """What `-q` adds: the driver's CUDA version, and per GPU (by PCI bus id) its sections as
    (section, key) -> value, e.g. ("Remapped Rows", "Pending") -> "No"."""

    cuda_version: str | None = None
    driver_version: str | None = None
    gpus: dict[str, dict[tuple[str, ...], str]] = field(default_factory=dict)


def value(text: str) -> str | None:
    """A CSV cell, None where the GPU has no value ([N/A], [Not Supported], N/A)."""
    text = text.strip()
    if not text or text.startswith("[") or text in ("N/A", "Not Supported"):
        return None
    return text


def number(text: str) -> int | None:
    cell = value(text)
    try:
        return int(float(cell)) if cell is not None else None
    except ValueError:
        return None


def _cells(line: str, count: int, what: str) -> list[str]:
    cells = [c.strip() for c in line.split(",", count - 1)]
    if len(cells) != count:
        raise HostError(f"nvidia-smi {what} printed {line.strip()!r}, not {count} columns: "
                        "this driver's nvidia-smi answers the query differently")
    return cells


def parse_gpus(text: str) -> list[GpuRow]:
    """The --query-gpu CSV (QUERY_GPU's fields, in order)."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        c = _cells(line, len(GPU_FIELDS), "--query-gpu")
        index, total, used = number(c[0]), number(c[4]), number(c[5])
        if index is None or total is None:
            raise HostError(f"nvidia-smi --query-gpu printed {line.strip()!r}: no index or "
                            "memory.total")
        rows.append(GpuRow(
            index=index, uuid=c[1], name=c[2], pci_bus_id=c[3], memory_total_mib=total,
            memory_used_mib=used or 0, driver_version=c[6], mig_mode=value(c[7]),
            compute_mode=value(c[8]), ecc_mode=value(c[9]),
            ecc_uncorrected_volatile=number(c[10]), retired_pages_pending=value(c[11]),
        ))
    return sorted(rows, key=lambda r: r.index)


def parse_apps(text: str) -> list[App]:
    """The --query-compute-apps CSV (APP_FIELDS, in order); empty when no process holds one."""
    apps = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("No running"):
            continue
        c = _cells(line, len(APP_FIELDS), "--query-compute-apps")
        pid = number(c[1])
        if pid is None:
            continue
        apps.append(App(gpu_uuid=c[0], pid=pid, used_mib=number(c[2]), name=c[3]))
    return apps


KEY_VALUE = re.compile(r"^(\s*)(\S.*?)\s+:\s?(.*)$")
GPU_HEADER = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")


def _depth(indent: str) -> int:
    # -q indents each section by four spaces under its GPU.
    return max(0, len(indent) // 4 - 1)


def parse_query(text: str) -> Report:
    """The `nvidia-smi -q` text: its top fields and each GPU's (section, ..., key) values."""
    report = Report()
    current: dict[tuple[str, ...], str] | None = None
    path: list[str] = []
    for line in text.splitlines():
        header = GPU_HEADER.match(line)
        if header:
            current = report.gpus.setdefault(bus_key(header.group(1)), {})
            path = []
            continue
        match = KEY_VALUE.match(line)
        if current is None:
            if match and match.group(2) == "CUDA Version":
                report.cuda_version = match.group(3).strip()
            elif match and match.group(2) == "Driver Version":
                report.driver_version = match.group(3).strip()
            continue
        if not line.strip():
            continue
        indent = line[: len(line) - len(line.lstrip())]
        depth = _depth(indent)
        del path[depth:]
        if match:
            current[(*path, match.group(2))] = match.group(3).strip()
        else:
            path.append(line.strip())
    return report


def bus_key(pci_bus_id: str) -> str:
    """A PCI bus id as -q's GPU headers write it (an 8-digit domain, upper case)."""
    parts = pci_bus_id.strip().upper().split(":")
    if len(parts) == 3:
        parts[0] = parts[0].zfill(8)
    return ":".join(parts)


LIST_LINE = re.compile(r"^GPU (\d+): (.*?) \(UUID: (GPU-[0-9A-Fa-f-]+)\)\s*$")


def parse_list(text: str) -> list[tuple[int, str, str]]:
    """`nvidia-smi -L`: (index, model, UUID) of each whole GPU (MIG devices are left out)."""
    found = []
    for line in text.splitlines():
        match = LIST_LINE.match(line.strip())
        if match:
            found.append((int(match.group(1)), match.group(2), match.group(3)))
    return found


def query(cmd: list[str]) -> str:
    """What nvidia-smi prints for `cmd` on this host; a missing or failing one is a HostError
    saying why (a host without the driver, a driver that lost its GPUs)."""
    if shutil.which(cmd[0]) is None:
        raise HostError(f"{cmd[0]} is not on this host's PATH: the NVIDIA driver is not "
                        "installed (or not for this user)")
    proc = run(cmd, timeout=TIMEOUT_S)
    if proc.returncode != 0:
        said = (proc.stdout + proc.stderr).strip().splitlines() or ["no output"]
        raise HostError(f"`{' '.join(cmd[:2])}` failed (exit {proc.returncode}): {said[0][:300]}")
    return proc.stdout


def selected(rows: list[GpuRow], gpus: str) -> list[GpuRow]:
    """The GPUs a container started with Docker's `--gpus <gpus>` gets: `all`, a count (the first
    N), or `device=` a list of indices or UUIDs (quoted or not, as `docker run` takes it)."""
    spec = gpus.strip().strip("'\"")
    if spec == "all":
        return list(rows)
    if spec.isdigit():
        return list(rows[: int(spec)])
    devices = spec.partition("device=")[2] if "device=" in spec else spec
    wanted = {d.strip() for d in devices.split(",") if d.strip()}
    return [r for r in rows if str(r.index) in wanted or r.uuid in wanted]
