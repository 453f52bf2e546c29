"""The a100 rehearsal's two hosts and its stack as the tests and the benchmark drive them.

The hosts are tests/env/hosts/hosts.sh's (worker-a 10.0.0.11, worker-b 10.0.0.12: containers of
this machine's engine, each with its own root filesystem, sshd and Docker engine). What the
stack knows of them is what a user's would: their addresses, the user `bench` and its key (a
Pulumi secret, and the same key in an ssh-agent for the Docker provider's ssh://). The tests
look at the hosts themselves (`Hosts.on`: a command in the host, as its root), never only at
the CLI's words.

Before `up`, the user's own preparation, as the seed's prerequisites have it: the checkpoint on
both hosts, the dataset (the demo tasks) on worker-b, copied over ssh as bench.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from components.config import load_stack_file
from tests.conftest import ROOT
from tests.engine.conftest import Cli, Engine, copy_project, ok, pulumi

HOSTS_SCRIPT = ROOT / "tests" / "env" / "hosts" / "hosts.sh"
STACK = "a100-rehearsal"
STACK_FILE = ROOT / f"Pulumi.{STACK}.yaml"
A, B = "worker-a", "worker-b"
# Where the a100 stack says the checkpoint is, and where the rehearsal keeps the demo tasks.
CONFIG = load_stack_file(STACK_FILE)
WORKSPACE = CONFIG.workspace
MODEL_PATH = CONFIG.model.path
DATASET_PATH = CONFIG.dataset.path or ""
WORKER_CONTAINER = {A: f"benchstack-sglang-{A}", B: f"benchstack-sglang-{B}"}
ROUTER_CONTAINER = "benchstack-sglang-router"


def hosts(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """tests/env/hosts/hosts.sh ARGS (the hosts' one script)."""
    return subprocess.run(["bash", str(HOSTS_SCRIPT), *args], capture_output=True, text=True,
                          timeout=timeout)


@dataclass
class Hosts:
    """The running hosts, as `hosts.sh status` describes them."""

    status: dict

    @classmethod
    def start(cls) -> Hosts:
        proc = hosts("start")
        if proc.returncode != 0:
            raise AssertionError(f"hosts.sh start failed: {proc.stderr[-3000:]}")
        return cls(json.loads(proc.stdout.strip().splitlines()[-1]))

    @property
    def key(self) -> Path:
        return Path(self.status["key"])

    def address(self, name: str) -> str:
        return next(h["address"] for h in self.status["hosts"] if h["name"] == name)

    def container(self, name: str) -> str:
        return next(h["container"] for h in self.status["hosts"] if h["name"] == name)

    def on(self, name: str, command: str, *, check: bool = True,
           timeout: float = 120) -> subprocess.CompletedProcess:
        """`command` (bash) in host `name`, as its root: how the tests look at a host."""
        proc = subprocess.run(["docker", "exec", self.container(name), "bash", "-c", command],
                              capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"on {name}: {command!r} failed ({proc.returncode}): "
                                 f"{proc.stderr[-2000:]}")
        return proc

    def docker(self, name: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """The host's own Docker engine."""
        return self.on(name, shlex.join(["docker", *args]), check=check)

    def json(self, name: str, command: str) -> object:
        return json.loads(self.on(name, command).stdout)

    def ssh_as_user(self, name: str, command: str, stdin: bytes | None = None) -> None:
        """`command` on host `name` as bench over ssh with the user's key (the user's path)."""
        argv = ["ssh", "-i", str(self.key), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
                "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                "-o", "LogLevel=ERROR", f"bench@{self.address(name)}", command]
        proc = subprocess.run(argv, input=stdin, capture_output=True, timeout=300)
        if proc.returncode != 0:
            raise AssertionError(f"ssh bench@{name} {command!r}: {proc.stderr.decode()[-2000:]}")

    def prepare(self) -> None:
        """The user's preparation before `up`: the checkpoint on both hosts, the dataset on
        worker-b (tar over ssh as bench, as one copies them to a rented server)."""
        for name, source, dest in ((A, ROOT / "demo" / "model", MODEL_PATH),
                                   (B, ROOT / "demo" / "model", MODEL_PATH),
                                   (B, ROOT / "demo" / "tasks", DATASET_PATH)):
            data = subprocess.run(["tar", "-C", str(source), "-c", "."], capture_output=True,
                                  check=True).stdout
            q = shlex.quote(dest)
            self.ssh_as_user(name, f"mkdir -p {q} && tar -C {q} -x", stdin=data)

    def snapshot(self, name: str) -> dict:
        """What destroy must give back: daemon.json (bytes, or None), docker0's address."""
        daemon = self.on(name, "cat /etc/docker/daemon.json", check=False)
        docker0 = self.on(name, "ip -4 -o addr show dev docker0").stdout.split()
        return {"daemon_json": daemon.stdout if daemon.returncode == 0 else None,
                "docker0": docker0[docker0.index("inet") + 1]}

    def processes(self, name: str) -> list[str]:
        """The stack's processes on the host (Harbor, the proxy bridge, a host step)."""
        lines = self.on(name, "ps -eo args").stdout.splitlines()
        marks = ("harbor run", "harbor job resume", "socat", "benchstack-proxy-bridge",
                 "-m hostside", "serving_sampler")
        return sorted(line for line in lines if any(m in line for m in marks))

    def containers(self, name: str) -> list[str]:
        return sorted(self.docker(name, "ps", "-a", "--format", "{{.Names}}").stdout.split())

    def worker_requests(self, name: str) -> list[dict]:
        """The stand-in worker's request log on host `name` (one JSON line per request)."""
        out = self.docker(name, "logs", WORKER_CONTAINER[name], check=False).stdout
        return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


@contextmanager
def ssh_agent(key: Path, where: Path) -> Iterator[dict[str, str]]:
    """An ssh-agent holding the user's key: what the Docker provider's ssh:// logs in with
    (pulumi-docker runs the local ssh, which takes no key material)."""
    sock = where / "agent.sock"
    proc = subprocess.run(["ssh-agent", "-a", str(sock), "-s"], capture_output=True, text=True,
                          check=True)
    pid = int(proc.stdout.split("SSH_AGENT_PID=")[1].split(";")[0])
    env = {"SSH_AUTH_SOCK": str(sock)}
    try:
        subprocess.run(["ssh-add", "-q", str(key)], env={**os.environ, **env}, check=True,
                       capture_output=True)
        yield env
    finally:
        os.kill(pid, signal.SIGTERM)


@contextmanager
def check_page(url: str) -> Iterator[str]:
    """The page the stack's proxy check fetches (proxy.check_url), served on this machine's
    loopback: only the upstream proxy, through the hosts' forward, can reach it."""
    host, port = url.split("//")[1].rstrip("/").split(":")

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer((host, int(port)), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Rehearsal:
    """The a100-rehearsal stack of one project copy, driven by the real CLI."""

    engine: Engine
    project: Path
    env: dict[str, str]
    timings: dict[str, float] = field(default_factory=dict)

    @classmethod
    def create(cls, engine: Engine, tmp: Path, hosts_: Hosts, env: dict[str, str]) -> Rehearsal:
        project = copy_project(tmp)
        stack = cls(engine, project, env)
        ok(stack.cli("stack", "select", "--create", STACK, stack_flag=False))
        # The key on standard input, as `pulumi config set --secret ... < key` takes it.
        ok(stack.cli("config", "set", "--secret", "benchstack:sshPrivateKey",
                     stdin=hosts_.key.read_text()))
        # The hosts' keys are recorded here, not in this machine's ~/.ssh/known_hosts.
        ok(stack.cli("config", "set", "--path", "benchstack:ssh.known_hosts",
                     str(tmp / "known_hosts")))
        return stack

    def cli(self, *args: str, timeout: float = 1200, stdin: str | None = None,
            stack_flag: bool = True) -> Cli:
        extra = ["--stack", STACK] if stack_flag else []
        return pulumi(self.engine, self.project, *args, *extra, timeout=timeout, stdin=stdin,
                      env=self.env)

    def timed(self, name: str, *args: str) -> Cli:
        start = time.monotonic()
        result = ok(self.cli(*args))
        self.timings[name] = time.monotonic() - start
        return result

    # Without the preview `up` and `destroy` run first, as the local stacks' (tests/e2e/conftest.py
    # says why).
    def up(self, name: str = "up") -> Cli:
        return self.timed(name, "up", "--yes", "--skip-preview", "--json")

    def preview(self, *extra: str) -> Cli:
        return ok(self.cli("preview", "--json", *extra))

    def destroy(self, name: str = "destroy") -> Cli:
        return self.timed(name, "destroy", "--yes", "--skip-preview", "--json")

    def outputs(self) -> dict:
        return ok(self.cli("stack", "output", "--json")).json()

    def resources(self) -> list[dict]:
        return ok(self.cli("stack", "export")).json()["deployment"].get("resources") or []
