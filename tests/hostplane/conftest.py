"""Fixtures of the host-plane tests: a throwaway second Docker engine, and how steps run in it.

The daemon-config tests restart an engine and rewrite its config file, which must never happen
to the main engine (other tests use it at the same time). So they get their own dockerd in its own
network namespace (own routes, own docker0), with its own config file, data root, exec root,
pidfile and socket. The step under test runs inside that namespace too, so its `ip route`
check sees the namespace's routes, and the routes other tests' networks add on the host cannot
make these tests flaky.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ScriptResult
from tests.hostplane.steps import run_step

HERE = Path(__file__).resolve().parent
ENGINE_HELPER = HERE / "testengine.sh"
# Keys the script must keep: bip also keeps the namespace's docker0 off the pools under test.
BASE_CONFIG = (
    '{\n  "bip": "10.213.0.1/24",\n  "labels": ["benchstack.test=1"],\n  "log-level": "info"\n}\n'
)
TINY_IMAGE = "bste/sleep:1"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def docker_gateway() -> str:
    """Address of the main engine's docker0: where the proxy bridge listens by default."""
    out = subprocess.run(
        ["ip", "-4", "-o", "addr", "show", "dev", "docker0"], capture_output=True, text=True
    ).stdout.split()
    if "inet" not in out:
        pytest.fail("docker0 has no IPv4 address: is the main Docker engine running?")
    return out[out.index("inet") + 1].split("/")[0]


@dataclass
class SecondEngine:
    """A second dockerd in network namespace `ns`; `env` points the docker CLI at it."""

    ns: str
    dir: Path
    run_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    # Started another way than the standard one (start_as): reset() starts it the standard way.
    by_hand: bool = False

    @property
    def config(self) -> Path:
        return self.dir / "daemon.json"

    @property
    def socket(self) -> str:
        return f"unix://{self.run_dir}/docker.sock"

    @property
    def restart_cmd(self) -> str:
        return (
            f"TE_NS={self.ns} TE_DIR={self.dir} TE_RUN={self.run_dir} "
            f"bash {ENGINE_HELPER} restart"
        )

    @property
    def stop_cmd(self) -> str:
        return self.restart_cmd.replace(" restart", " stop")

    def helper(self, action: str, **how: str) -> None:
        subprocess.run(["bash", str(ENGINE_HELPER), action], env={**self.env, **how}, check=True,
                       timeout=60)

    def start_as(self, **how: str) -> None:
        """Stopped, then started the way an operator may have started their engine:
        testengine.sh's TE_CWD, TE_BIN, TE_ARGS, TE_LOG."""
        self.helper("stop")
        self.helper("start", **how)
        self.by_hand = True
        self.wait_ready()

    def standard(self) -> None:
        """Started the standard way again, however a test left it (stopped, or by hand)."""
        self.helper("restart")
        self.by_hand = False
        self.wait_ready()

    def docker(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["docker", *args], env=self.env, capture_output=True, text=True, check=check,
            timeout=120,
        )

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.docker("info", "--format", "{{.ID}}", check=False).returncode == 0:
                return
            time.sleep(0.3)
        log = (self.dir / "dockerd.log").read_text()[-2000:]
        pytest.fail(f"test dockerd did not answer within {timeout}s; log tail:\n{log}")

    def pid(self) -> int:
        return int((self.run_dir / "dockerd.pid").read_text())

    def pools(self) -> list:
        out = self.docker("info", "--format", "{{json .DefaultAddressPools}}").stdout
        return json.loads(out) or []

    def reset(self, content: str | None = BASE_CONFIG) -> None:
        """Known state for a test: this config file (None = no file), engine running on it."""
        for cid in self.docker("ps", "-aq").stdout.split():
            self.docker("rm", "-f", cid, check=False)
        for net in self.docker("network", "ls", "--format", "{{.Name}}").stdout.split():
            if net not in ("bridge", "host", "none"):
                self.docker("network", "rm", net, check=False)
        for backup in self.dir.glob("daemon.json.*"):
            backup.unlink()
        current = self.config.read_text() if self.config.exists() else None
        if content is None:
            self.config.unlink(missing_ok=True)
        else:
            self.config.write_text(content)
        if current != content or self.pools() or self.by_hand:
            self.helper("restart")
            self.by_hand = False
        self.wait_ready()

    def docker0(self) -> str:
        """The namespace's docker0 address as `ip` shows it (a.b.c.d/n)."""
        out = subprocess.run(
            ["ip", "-n", self.ns, "-4", "-o", "addr", "show", "dev", "docker0"],
            capture_output=True, text=True, check=True,
        ).stdout.split()
        return out[out.index("inet") + 1]

    def pristine(self) -> None:
        """The engine as on a fresh machine: no config file, no stored networks, no docker0.

        A fresh engine's bridge has a Subnet but no Gateway in its IPAM config; an engine that
        ever ran with `bip` has both, which hid the unpinned docker0 from the other tests.
        """
        self.reset(BASE_CONFIG)
        self.helper("stop")
        self.config.unlink(missing_ok=True)
        (self.dir / "data" / "network" / "files" / "local-kv.db").unlink(missing_ok=True)
        subprocess.run(["ip", "-n", self.ns, "link", "del", "docker0"], check=False)
        self.helper("start")
        self.wait_ready()

    def step(self, verb: str, inputs: dict[str, Any], timeout: float = 300) -> ScriptResult:
        """Run the daemon_config step the way the seam does, inside the engine's namespace."""
        return run_step("daemon_config", verb, inputs, timeout=timeout,
                        wrap=["nsenter", f"--net=/run/netns/{self.ns}"])


def _tiny_image_tar(dest: Path) -> Path:
    """A rootfs holding only the host's sleep and its libraries: a container that can run."""
    root = dest / "rootfs"
    sleep = Path(shutil.which("sleep") or "/bin/sleep").resolve()
    files = [sleep]
    ldd = subprocess.run(["ldd", str(sleep)], capture_output=True, text=True, check=True).stdout
    for line in ldd.splitlines():
        parts = line.split()
        if "=>" in parts and len(parts) > 2 and parts[2].startswith("/"):
            files.append(Path(parts[2]))
        elif parts and parts[0].startswith("/"):
            files.append(Path(parts[0]))
    for f in files:
        target = root / ("bin/sleep" if f == sleep else str(f).lstrip("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f.resolve(), target)
    tar = dest / "tiny.tar"
    subprocess.run(["tar", "-C", str(root), "-cf", str(tar), "."], check=True)
    return tar


@contextmanager
def isolated_engine() -> Iterator[SecondEngine]:
    """A second engine's namespace and folders, not started; all of it removed after (the
    engine is stopped by its PID file first)."""
    ns = f"bste-{uuid.uuid4().hex[:8]}"
    te_dir = Path(tempfile.mkdtemp(prefix="bste-engine-"))
    run_dir = Path(tempfile.mkdtemp(prefix="bste.", dir="/run"))
    engine = SecondEngine(ns=ns, dir=te_dir, run_dir=run_dir)
    engine.env = {
        **os.environ,
        "TE_NS": ns, "TE_DIR": str(te_dir), "TE_RUN": str(run_dir), "DOCKER_HOST": engine.socket,
    }
    created_ns = False
    # `ip netns add` makes /run/netns (a mount of itself) when it is missing: undone after.
    netns_dir_before = Path("/run/netns").exists()
    try:
        subprocess.run(["ip", "netns", "add", ns], check=True)
        created_ns = True
        subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"], check=True)
        engine.config.write_text(BASE_CONFIG)
        yield engine
    finally:
        subprocess.run(["bash", str(ENGINE_HELPER), "stop"], env=engine.env, timeout=90)
        mounts = Path("/proc/mounts").read_text().splitlines()
        for mount in sorted((m.split()[1] for m in mounts), reverse=True):
            if mount.startswith((str(te_dir), str(run_dir))):
                subprocess.run(["umount", "-l", mount], check=False)
        if created_ns:
            subprocess.run(["ip", "netns", "del", ns], check=False)
        if not netns_dir_before and not any(Path("/run/netns").iterdir()):
            subprocess.run(["umount", "/run/netns"], check=False, capture_output=True)
            Path("/run/netns").rmdir()
        shutil.rmtree(te_dir, ignore_errors=True)
        shutil.rmtree(run_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def test_engine(docker_engine: None) -> Iterator[SecondEngine]:
    with isolated_engine() as engine:
        engine.helper("start")
        engine.wait_ready()
        tar = _tiny_image_tar(engine.dir / "image")
        engine.docker("import", str(tar), TINY_IMAGE)
        yield engine
