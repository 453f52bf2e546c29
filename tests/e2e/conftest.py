"""The `local` stack under the real engine: a fresh copy of the project, driven by the built
`pulumi` CLI (its language host runs `__main__.py`, the command provider runs the host steps on
this machine's real Docker engine, registry mirror, proxy and Harbor). A destroy always runs
at the end, and the machine must then be as it was: daemon.json, docker0, the engine answering.
"""

from __future__ import annotations

import http.server
import json
import socket
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.audit.conftest import s3_env  # noqa: F401
from tests.conftest import CANARY_IMAGE, REGISTRY, docker
from tests.engine.conftest import Cli, Engine, copy_project, make_engine, ok, pulumi
from tests.env.leftovers import installed_configs

DAEMON_JSON = Path("/etc/docker/daemon.json")
STACK = "local"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def target_url() -> Iterator[str]:
    """A host-local HTTP server that a task container reaches only through the proxy bridge."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", _free_port()), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


@pytest.fixture
def canary_from_mirror(docker_engine) -> Iterator[None]:
    """Drop the local tag of the demo tasks' image so `up` must pull it through the mirror."""
    docker("image", "rm", CANARY_IMAGE, check=False)
    yield
    if docker("image", "inspect", CANARY_IMAGE, check=False).returncode != 0:
        docker("pull", f"{REGISTRY}/{CANARY_IMAGE}")
        docker("tag", f"{REGISTRY}/{CANARY_IMAGE}", CANARY_IMAGE)


def docker0_address() -> str:
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", "docker0"],
                         capture_output=True, text=True, check=True).stdout.split()
    return out[out.index("inet") + 1]


@pytest.fixture(scope="session")
def engine(tmp_path_factory) -> Engine:
    return make_engine(tmp_path_factory.mktemp("pulumi-home"))


@dataclass
class LocalStack:
    """The local stack of one project copy, and the CLI calls the tests make on it."""

    engine: Engine
    project: Path
    workspace: Path
    stack: str = STACK

    def cli(self, *args: str, timeout: float = 900, env: dict[str, str] | None = None) -> Cli:
        return pulumi(self.engine, self.project, *args, "--stack", self.stack, timeout=timeout,
                      env=env)

    def config(self, *args: str) -> None:
        ok(self.cli("config", "set", *args))

    # `--skip-preview`: the preview that `up` and `destroy` run first is one more start of the
    # language host and the program (about 3 s of CPU each, 25 ups a run), the plan that the
    # tests' own `preview` calls check. The commands a reader runs (`make up`, the README's) keep
    # it: tests/engine/test_cli.py runs them as they are.
    def up(self, *extra: str, env: dict[str, str] | None = None) -> Cli:
        return ok(self.cli("up", "--yes", "--skip-preview", "--json", *extra, env=env))

    def preview(self, *extra: str) -> Cli:
        return ok(self.cli("preview", "--json", *extra))

    def outputs(self) -> dict:
        return ok(self.cli("stack", "output", "--json")).json()

    def export(self) -> dict:
        return ok(self.cli("stack", "export")).json()

    def resources(self) -> list[dict]:
        return self.export()["deployment"].get("resources") or []

    def destroy(self) -> Cli:
        return ok(self.cli("destroy", "--yes", "--skip-preview", "--json"))


@pytest.fixture
def local(engine: Engine, tmp_path: Path, target_url: str, canary_from_mirror: None,
          harbor_bin: Path) -> Iterator[LocalStack]:
    """The shipped local stack, with only its workspace (a temp dir) and the proxy's check URL
    (a local server) set for the test; destroyed at the end whatever happened."""
    project = copy_project(tmp_path)
    stack = LocalStack(engine, project, tmp_path / "workspace")
    ok(pulumi(engine, project, "stack", "select", "--create", STACK))
    stack.config("benchstack:workspace", str(stack.workspace))
    stack.config("--path", "benchstack:proxy.check_url", target_url)
    installed = installed_configs(str(DAEMON_JSON))
    if installed:
        # Its destroy would put back the record's "before", not the file found here.
        pytest.fail(f"an earlier stack's daemon.json is still installed (record {installed[0]}): "
                    "python -m tests.env.leftovers --remove puts it back")
    daemon_before = DAEMON_JSON.read_bytes() if DAEMON_JSON.exists() else None
    docker0_before = docker0_address()
    try:
        yield stack
    finally:
        exported = stack.cli("stack", "export")
        if exported.returncode == 0 and exported.json()["deployment"].get("resources"):
            stack.destroy()
        # Whatever happened, the engine's config is as it was and the engine answers.
        if daemon_before is None:
            assert not DAEMON_JSON.exists(), "destroy left /etc/docker/daemon.json behind"
        else:
            assert DAEMON_JSON.read_bytes() == daemon_before
        docker("info")
        assert docker0_address() == docker0_before, "destroy left docker0 at another address"


def daemon_pools() -> list[dict]:
    return json.loads(DAEMON_JSON.read_text())["default-address-pools"]
