"""The two-host rehearsal's GPU plane: the rehearsal hosts (tests/env/hosts) have no GPU, so each
gets an `nvidia-smi` that replays recorded outputs (tests/gpu/nvidia_smi_replay.py, a stand-in:
installed by the test as the host's root, removed after, never shipped), and the stack file
declares their GPUs as an 8 x H100 host's (the fixtures' host). The stand-in workers still get
no GPU (serving.gpus null): the GPUs are checked, not given (components/gpu_plane.py), so the
runtime check's smoke container, which needs an NVIDIA runtime, is not declared here.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import yaml

from tests.conftest import ROOT
from tests.e2e.two_hosts import STACK, Hosts
from tests.gpu.fixtures import FIXTURES

DATA = "/usr/local/share/benchstack-nvidia-smi"
REPLAY = ROOT / "tests" / "gpu" / "nvidia_smi_replay.py"
# What the fixtures' host is, as hosts[].gpus declares it.
H100_HOST = {"count": 8, "model": "H100-80GB-HBM3", "memory_gb": 80}


def install(hosts: Hosts, name: str, scenario: str) -> None:
    """The replay as /usr/local/bin/nvidia-smi on host `name`, answering `scenario`; every
    fixture dir beside it, and an empty calls log the user bench may write."""
    container = hosts.container(name)
    hosts.on(name, f"rm -rf {DATA} && mkdir -p {DATA}")
    for source in sorted(p for p in FIXTURES.iterdir() if (p / "q.txt").is_file()):
        _copy(source, container, f"{DATA}/{source.name}")
    _copy(REPLAY, container, "/usr/local/bin/nvidia-smi")
    hosts.on(name, f"chmod 755 /usr/local/bin/nvidia-smi && chmod -R a+rX {DATA} && "
                   f": > {DATA}/calls.log && chmod 666 {DATA}/calls.log")
    use(hosts, name, scenario)


def _copy(source: Path, container: str, dest: str) -> None:
    subprocess.run(["docker", "cp", str(source), f"{container}:{dest}"], check=True,
                   capture_output=True, timeout=120)


def use(hosts: Hosts, name: str, scenario: str) -> None:
    """Host `name`'s GPUs from now on: the fixture dir `scenario`."""
    hosts.on(name, f"echo {shlex.quote(scenario)} > {DATA}/scenario")


def calls(hosts: Hosts, name: str) -> list[str]:
    """Every nvidia-smi call on host `name` since the replay was installed."""
    return hosts.on(name, f"cat {DATA}/calls.log").stdout.splitlines()


def remove(hosts: Hosts, name: str) -> None:
    hosts.on(name, f"rm -rf {DATA} /usr/local/bin/nvidia-smi")


def declare_gpus(project: Path, gpus: dict | None) -> None:
    """Every host's `gpus` in the project copy's stack file (None: none declared), as a user
    edits the file."""
    path = project / f"Pulumi.{STACK}.yaml"
    document = yaml.safe_load(path.read_text())
    for host in document["config"]["benchstack:hosts"]:
        if gpus is None:
            host.pop("gpus", None)
        else:
            host["gpus"] = dict(gpus)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
