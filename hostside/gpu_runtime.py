"""The container runtime of a GPU host, checked before its SGLang worker starts
(SGLangWorker's `-gpu-runtime`, after `-gpu-check`).

create: reads `docker info` (the NVIDIA runtime among its Runtimes, NVIDIA CDI devices among its
Discovered Devices), then runs a smoke container of the serving image itself with the worker's
`--gpus` and user and `nvidia-smi -L` as its command: the GPUs it lists must be the GPUs
gpu_check found for the worker (`uuids`), the same UUIDs. A Docker that cannot give GPUs to a
container (`could not select device driver "" with capabilities: [[gpu]]`) fails here, in
seconds, naming what docker info lacks, not minutes later as the worker's provider error.

The smoke container is named, runs with --rm and is removed first should an interrupted run have
left it: the host keeps nothing of it. Outputs: runtimes, default_runtime, cdi_devices, seen
(the UUIDs the container listed), server_version.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import nvidia_smi
from .step import HostError, emit, log, run, verb

NAME = "gpu_runtime"
SMOKE_TIMEOUT_S = 300
TOOLKIT_HINT = ("install the NVIDIA Container Toolkit and register it with Docker "
                "(nvidia-ctk runtime configure --runtime=docker), then restart Docker")


@dataclass(frozen=True)
class Inputs:
    host: str
    image: str
    gpus: str
    user: str
    # The UUIDs of the GPUs the worker must see (gpu_check's outputs).
    uuids: list[str]
    container: str


@dataclass
class DockerInfo:
    """What `docker info` (its text form) says about GPUs."""

    server_version: str | None = None
    runtimes: list[str] = field(default_factory=list)
    default_runtime: str | None = None
    cdi_spec_dirs: list[str] = field(default_factory=list)
    cdi_devices: list[str] = field(default_factory=list)

    @property
    def nvidia_runtime(self) -> bool:
        return any("nvidia" in r for r in self.runtimes)

    @property
    def nvidia_cdi(self) -> bool:
        return any(d.startswith("nvidia.com/gpu") for d in self.cdi_devices)

    def describe(self) -> str:
        cdi = (f"CDI devices {', '.join(self.cdi_devices)}" if self.cdi_devices
               else "no CDI devices")
        return f"Runtimes: {' '.join(self.runtimes) or 'none'}; {cdi}"


LINE = re.compile(r"^( *)([^:]+):\s*(.*)$")
LISTS = {"CDI spec directories": "cdi_spec_dirs", "Discovered Devices": "cdi_devices"}


def parse_info(text: str) -> DockerInfo:
    """The `docker info` text: its server's runtimes and CDI devices (older engines print the
    same keys without the Client/Server sections)."""
    info = DockerInfo()
    listing: tuple[str, int] | None = None  # the list being read, and its header's indent
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip())
        if listing and line.strip() and indent > listing[1]:
            item = line.strip()
            getattr(info, listing[0]).append(item[len("cdi:"):].strip()
                                             if item.startswith("cdi:") else item)
            continue
        match = LINE.match(line)
        key, val = (match.group(2).strip(), match.group(3).strip()) if match else ("", "")
        listing = (LISTS[key], indent) if key in LISTS and not val else None
        if key == "Runtimes":
            info.runtimes = val.split()
        elif key == "Default Runtime":
            info.default_runtime = val
        elif key == "Server Version":
            info.server_version = val
    return info


def docker_info() -> DockerInfo:
    proc = run(["docker", "info"], timeout=60)
    if proc.returncode != 0 or "Server" not in proc.stdout and "Runtimes" not in proc.stdout:
        said = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise HostError(f"`docker info` failed ({said[:200]}): is this user in the docker group?")
    return parse_info(proc.stdout)


def smoke_argv(inputs: Inputs) -> list[str]:
    return ["docker", "run", "--rm", "--name", inputs.container, "--gpus", inputs.gpus,
            "--user", inputs.user, "--entrypoint", "nvidia-smi", inputs.image, "-L"]


def smoke(inputs: Inputs) -> tuple[int, str]:
    """The smoke container's exit code and what it printed (a leftover one removed first)."""
    run(["docker", "rm", "-f", inputs.container], timeout=60)
    proc = run(smoke_argv(inputs), timeout=SMOKE_TIMEOUT_S)
    return proc.returncode, proc.stdout + proc.stderr


def problems_of(inputs: Inputs, info: DockerInfo, code: int, output: str) -> list[str]:
    where = f"{inputs.host}: a container of the serving image with --gpus {inputs.gpus}"
    if code != 0:
        said = [x.strip() for x in output.strip().splitlines() if x.strip()] or ["no output"]
        hint = "" if info.nvidia_runtime or info.nvidia_cdi else (
            f"; docker info lists no NVIDIA runtime and no NVIDIA CDI device ({info.describe()}):"
            f" {TOOLKIT_HINT}")
        return [f"{where} failed (exit {code}: {said[-1][:300]}){hint}"]
    seen = [uuid for _, _, uuid in nvidia_smi.parse_list(output)]
    if sorted(seen) == sorted(inputs.uuids):
        return []
    missing = sorted(set(inputs.uuids) - set(seen))
    extra = sorted(set(seen) - set(inputs.uuids))
    return [f"{where} sees {len(seen)} GPU(s), the host's nvidia-smi {len(inputs.uuids)} for the"
            f" worker" + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; not the host's {', '.join(extra)}" if extra else "")]


@verb(Inputs)
def create(inputs: Inputs) -> None:
    if not inputs.uuids:
        raise HostError("uuids is empty: the component must pass gpu_check's GPUs")
    info = docker_info()
    log(NAME, f"{inputs.host}: Docker {info.server_version}, {info.describe()}")
    code, output = smoke(inputs)
    problems = problems_of(inputs, info, code, output)
    if problems:
        raise HostError(" | ".join(problems))
    seen = [uuid for _, _, uuid in nvidia_smi.parse_list(output)]
    log(NAME, f"{inputs.host}: the worker's container sees the host's {len(seen)} GPU(s)")
    emit({"server_version": info.server_version, "runtimes": info.runtimes,
          "default_runtime": info.default_runtime, "cdi_devices": info.cdi_devices,
          "seen": seen})
