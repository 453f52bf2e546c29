"""The GPUs of a host, checked against its layout before its SGLang worker starts
(SGLangWorker's `-gpu-check`). Read-only: it changes nothing on the host.

create: reads nvidia-smi (nvidia_smi.py: the CSV queries, and `-q` for the driver's CUDA version
and row remapping) and the serving image's CUDA version (`docker image inspect`), and refuses,
one line per problem naming the host and the GPU index, all problems at once:
- fewer GPUs than the worker needs (tp_size x dp_size) among those Docker's `--gpus` gives it;
- a model other than the layout's fit check assumed (`hosts[].gpus.model`), or less memory
  than it assumed (`hosts[].gpus.memory_gb`);
- memory held by other processes (each named: PID, process, MiB) above what
  `mem_fraction_static` leaves free (SGLang takes that fraction of the whole GPU at start and
  dies minutes into loading when it is not there);
- MIG mode on (SGLang needs whole GPUs), a compute mode other than Default (SGLang's ranks and
  NCCL open several contexts on a GPU);
- uncorrected ECC errors since the driver loaded, retired pages pending a reboot, rows pending
  remapping (A100/H100: a GPU reset) or a remapping failure;
- a driver whose CUDA major version is older than the serving image's (its CUDA_VERSION, or its
  com.nvidia.cuda.version label; a newer minor version runs under CUDA's minor version
  compatibility, and is only logged).
The worker container's own processes (a worker already running when the check runs again) are
its own, not another's. Outputs what it read (GPU UUIDs, models, memory, driver, CUDA): the
provenance says which GPUs produced the score.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from . import nvidia_smi
from .nvidia_smi import App, GpuRow
from .step import HostError, emit, log, run, verb

NAME = "gpu_check"
MIB = 1024 * 1024
CUDA_LABEL = "com.nvidia.cuda.version"
# Memory in use that no listed process accounts for, past which the refusal says so (the driver's
# own few MiB, and the rounding of each process's figure, stay below it).
UNLISTED_MIB = 1024


@dataclass(frozen=True)
class Inputs:
    host: str
    # Docker's `--gpus` for the worker (serving.gpus): which GPUs the worker will see.
    gpus: str
    # tp_size x dp_size, and the layout's words for it (for the messages).
    needed: int
    needed_from: str
    # What the layout's fit check assumed (hosts[].gpus), None where the host declares none.
    model: str | None
    memory_gb: float | None
    memory_key: str | None
    mem_fraction_static: float
    # The serving image as the worker runs it (its id), and the worker's container name.
    image: str
    container: str


@dataclass(frozen=True)
class Reading:
    """Everything the check read on the host."""

    rows: list[GpuRow]
    apps: list[App]
    report: nvidia_smi.Report
    own_pids: set[int]
    image_cuda: str | None


def _version(text: str | None) -> tuple[int, ...] | None:
    try:
        return tuple(int(p) for p in (text or "").split(".")[:2]) or None
    except ValueError:
        return None


def image_cuda(config: dict[str, Any]) -> str | None:
    """The CUDA version an image is built on: its CUDA_VERSION (NVIDIA's CUDA images), else its
    com.nvidia.cuda.version label; None for an image that says neither (a CPU image)."""
    for entry in config.get("Env") or []:
        key, _, val = str(entry).partition("=")
        if key == "CUDA_VERSION" and val:
            return val
    return (config.get("Labels") or {}).get(CUDA_LABEL) or None


def read_image_config(image: str) -> dict[str, Any]:
    proc = run(["docker", "image", "inspect", "--format", "{{json .Config}}", image], timeout=60)
    if proc.returncode != 0:
        said = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise HostError(f"cannot read the serving image {image} on this host ({said[:200]})")
    try:
        config = json.loads(proc.stdout or "{}")
    except ValueError:
        raise HostError(f"docker image inspect {image} printed no JSON") from None
    return config if isinstance(config, dict) else {}


def container_pids(container: str) -> set[int]:
    """The host PIDs of a running container's processes (none when it does not run)."""
    proc = run(["docker", "top", container, "-eo", "pid"], timeout=60)
    if proc.returncode != 0:
        return set()
    return {int(x) for x in proc.stdout.split() if x.isdigit()}


def read_host(inputs: Inputs) -> Reading:
    rows = nvidia_smi.parse_gpus(nvidia_smi.query(nvidia_smi.QUERY_GPU))
    apps = nvidia_smi.parse_apps(nvidia_smi.query(nvidia_smi.QUERY_APPS))
    report = nvidia_smi.parse_query(nvidia_smi.query(nvidia_smi.QUERY_ALL))
    return Reading(rows=rows, apps=apps, report=report,
                   own_pids=container_pids(inputs.container),
                   image_cuda=image_cuda(read_image_config(inputs.image)))


def _normal(text: str) -> str:
    return "".join(ch for ch in text.lower().replace("nvidia", "") if ch.isalnum())


def count_problems(inputs: Inputs, rows: list[GpuRow], seen: list[GpuRow]) -> list[str]:
    if len(seen) >= inputs.needed:
        return []
    listed = ", ".join(str(r.index) for r in seen) or "none"
    return [f"{inputs.host}: the worker would see {len(seen)} GPU(s) (index {listed} of the "
            f"host's {len(rows)}, Docker --gpus {inputs.gpus}), the layout needs "
            f"{inputs.needed} ({inputs.needed_from})"]


def fit_problems(inputs: Inputs, gpu: GpuRow) -> list[str]:
    """The GPU against what the layout's fit check assumed (hosts[].gpus)."""
    where = f"{inputs.host} GPU {gpu.index}"
    problems = []
    if inputs.model and _normal(inputs.model) not in _normal(gpu.name):
        problems.append(f"{where}: is a {gpu.name}, the layout declares {inputs.model} "
                        f"({inputs.memory_key or 'hosts[].gpus'} beside it)")
    gb = gpu.memory_total_mib * MIB / 1e9
    if inputs.memory_gb and gb < inputs.memory_gb:
        problems.append(f"{where}: has {gpu.memory_total_mib} MiB ({gb:.1f} GB), below the "
                        f"{inputs.memory_gb:g} GB the fit check assumed ({inputs.memory_key})")
    return problems


def memory_problems(inputs: Inputs, gpu: GpuRow, apps: list[App], own: set[int]) -> list[str]:
    """Memory other processes hold on the GPU against what mem_fraction_static leaves."""
    mine = [a for a in apps if a.gpu_uuid == gpu.uuid and a.pid in own]
    others = [a for a in apps if a.gpu_uuid == gpu.uuid and a.pid not in own]
    held = gpu.memory_used_mib - sum(a.used_mib or 0 for a in mine)
    leaves = int(gpu.memory_total_mib * (1 - inputs.mem_fraction_static))
    if held <= leaves:
        return []
    named = "; ".join(f"PID {a.pid} {a.name} {a.used_mib if a.used_mib is not None else '?'} MiB"
                      for a in others)
    unlisted = held - sum(a.used_mib or 0 for a in others)
    if unlisted > UNLISTED_MIB or not named:
        named += ("; " if named else "") + (f"{unlisted} MiB by processes nvidia-smi does not "
                                            "list (another container or PID namespace)")
    return [f"{inputs.host} GPU {gpu.index}: {held} MiB held by other processes ({named}), "
            f"above the {leaves} MiB mem_fraction_static {inputs.mem_fraction_static:g} leaves "
            f"of {gpu.memory_total_mib} MiB: stop them, or lower serving.mem_fraction_static"]


def mode_problems(inputs: Inputs, gpu: GpuRow) -> list[str]:
    where = f"{inputs.host} GPU {gpu.index}"
    problems = []
    if gpu.mig_mode == "Enabled":
        problems.append(f"{where}: MIG mode is enabled; SGLang needs whole GPUs (nvidia-smi -i "
                        f"{gpu.index} -mig 0, then reset the GPU)")
    if gpu.compute_mode not in (None, "Default"):
        problems.append(f"{where}: compute mode is {gpu.compute_mode}; SGLang's ranks and NCCL "
                        f"open several contexts per GPU (nvidia-smi -i {gpu.index} -c DEFAULT)")
    return problems


def health_problems(inputs: Inputs, gpu: GpuRow, report: nvidia_smi.Report) -> list[str]:
    """Uncorrected ECC errors, pages pending retirement, rows pending remapping."""
    where = f"{inputs.host} GPU {gpu.index}"
    problems = []
    if gpu.ecc_uncorrected_volatile:
        problems.append(f"{where}: {gpu.ecc_uncorrected_volatile} uncorrected ECC error(s) since "
                        "the driver loaded: drain the GPU and reset it, or replace it")
    if gpu.retired_pages_pending == "Yes":
        problems.append(f"{where}: retired pages are pending: reboot the host (or reset the GPU) "
                        "to retire them")
    sections = report.gpus.get(nvidia_smi.bus_key(gpu.pci_bus_id), {})
    if sections.get(("Remapped Rows", "Pending")) == "Yes":
        problems.append(f"{where}: rows are pending remapping after uncorrectable memory errors: "
                        "reset the GPU first")
    if sections.get(("Remapped Rows", "Remapping Failure Occurred")) == "Yes":
        problems.append(f"{where}: row remapping failed: the GPU needs replacing")
    return problems


def cuda_problems(inputs: Inputs, report: nvidia_smi.Report, image: str | None) -> list[str]:
    """The image's CUDA against the driver's: a newer major version cannot run (PyTorch: "The
    NVIDIA driver on your system is too old"); a newer minor one of the same major runs under
    CUDA's minor version compatibility, so it is only logged (and the smoke container, through
    the NVIDIA toolkit's own requirement check, still has the last word)."""
    driver, wanted = _version(report.cuda_version), _version(image)
    if driver is None or wanted is None or driver >= wanted:
        return []
    if wanted[0] == driver[0]:
        log(NAME, f"{inputs.host}: the serving image's CUDA {image} is newer than the driver's "
                  f"{report.cuda_version}: it runs under CUDA minor version compatibility")
        return []
    return [f"{inputs.host}: its driver {report.driver_version} supports CUDA "
            f"{report.cuda_version}, an older major version than the serving image's CUDA "
            f"{image} ({inputs.image[:19]}): update the driver, or use an image built for CUDA "
            f"{driver[0]}"]


def problems_of(inputs: Inputs, reading: Reading) -> list[str]:
    """Every problem of the host's GPUs for this layout, one line each."""
    seen = nvidia_smi.selected(reading.rows, inputs.gpus)
    found = count_problems(inputs, reading.rows, seen)
    for gpu in seen:
        found += fit_problems(inputs, gpu)
        found += memory_problems(inputs, gpu, reading.apps, reading.own_pids)
        found += mode_problems(inputs, gpu)
        found += health_problems(inputs, gpu, reading.report)
    return found + cuda_problems(inputs, reading.report, reading.image_cuda)


def facts(inputs: Inputs, reading: Reading) -> dict[str, Any]:
    """What the provenance keeps: which GPUs, driver and CUDA the worker runs on."""
    seen = nvidia_smi.selected(reading.rows, inputs.gpus)
    return {
        "host": inputs.host,
        "driver_version": reading.report.driver_version or (
            reading.rows[0].driver_version if reading.rows else None),
        "cuda_version": reading.report.cuda_version,
        "image_cuda_version": reading.image_cuda,
        "gpus": [{"index": g.index, "uuid": g.uuid, "name": g.name,
                  "memory_total_mib": g.memory_total_mib, "pci_bus_id": g.pci_bus_id}
                 for g in seen],
        "host_gpus": len(reading.rows),
        "processes": [{"gpu_uuid": a.gpu_uuid, "pid": a.pid, "name": a.name,
                       "used_mib": a.used_mib, "own": a.pid in reading.own_pids}
                      for a in reading.apps],
    }


def check(inputs: Inputs, reading: Reading) -> dict[str, Any]:
    """The outputs, or HostError listing every problem (each also logged on its own line)."""
    problems = problems_of(inputs, reading)
    for problem in problems:
        log(NAME, problem)
    if problems:
        raise HostError(f"{len(problems)} problem(s) with {inputs.host}'s GPUs, its worker is "
                        "not started: " + " | ".join(problems))
    return facts(inputs, reading)


@verb(Inputs)
def create(inputs: Inputs) -> None:
    start = time.monotonic()
    reading = read_host(inputs)
    outputs = check(inputs, reading)
    outputs["seconds"] = round(time.monotonic() - start, 2)
    log(NAME, f"{inputs.host}: {len(outputs['gpus'])} GPU(s) fit the layout "
              f"({outputs['gpus'][0]['name'] if outputs['gpus'] else 'none'}, driver "
              f"{outputs['driver_version']}, CUDA {outputs['cuda_version']}) in "
              f"{outputs['seconds']}s")
    emit(outputs)
