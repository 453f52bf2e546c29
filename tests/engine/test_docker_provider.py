"""The Docker provider for real: a test stack of serving containers (the stand-in worker image,
the real router) created, read back, updated and deleted by the real engine and the Docker
provider built from ../shared/vendor, through the unix socket (host `local`) and through
ssh:// to the loopback sshd (host `loop`) with the stack's host-key policy (accept-new: the first
contact records the key, which every SSH path then requires). The program is the project's
components on those two hosts (tests/engine/programs/serving.py); `docker inspect` is compared
with what the components declared.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from components.config import load_stack_file
from components.sglang_worker import STACK_BYTES, SGLangWorkerArgs, serve_argv
from tests.conftest import ROOT, SSHD_DIR, SSHD_PORT, docker
from tests.engine.conftest import Engine, changed, copy_project, ok, pulumi, set_config

pytestmark = pytest.mark.real

STACK = "local"  # the serving sections come from the local stack's file
IMAGE = "127.0.0.1:5000/benchstack/sglang-standin:0.3.2"
CONTAINERS = {"local": "benchstack-test-sglang-local", "loop": "benchstack-test-sglang-loop",
              "router": "benchstack-test-sglang-router"}


@pytest.fixture
def serving(engine: Engine, tmp_path: Path, docker_engine: None):
    key = SSHD_DIR / "id_ed25519"
    if not key.is_file():
        pytest.fail(f"no test sshd under {SSHD_DIR}: run `make setup`")
    project = copy_project(tmp_path, program="serving")
    known_hosts = tmp_path / "known_hosts"

    def cli(*args: str, **kw):
        return pulumi(engine, project, *args, "--stack", STACK, **kw)

    ok(pulumi(engine, project, "stack", "select", "--create", STACK))
    settings = {"workspace": tmp_path / "local-ws", "loopWorkspace": tmp_path / "loop-ws",
                "knownHosts": known_hosts, "keyPath": key, "loopPort": SSHD_PORT}
    for name, value in settings.items():
        ok(cli("config", "set", f"test:{name}", str(value)))
    set_config(engine, project, STACK, "--secret", "test:sshKey", "--", stdin=key.read_text())
    try:
        yield cli, project, tmp_path, known_hosts
    finally:
        exported = cli("stack", "export")
        if exported.returncode == 0 and exported.json()["deployment"].get("resources"):
            ok(cli("destroy", "--yes"))
        for name in CONTAINERS.values():
            docker("rm", "-f", name, check=False)


def inspect(name: str) -> dict:
    return json.loads(docker("inspect", name).stdout)[0]


def declared_worker(project: Path, host: str, port: int, max_running: int) -> list[str]:
    cfg = load_stack_file(ROOT / "Pulumi.local.yaml")
    args = SGLangWorkerArgs(
        host=None,  # type: ignore[arg-type]  # serve_argv reads the layout only
        serving=cfg.serving.model_copy(update={"max_running_requests": max_running}),
        model=cfg.model.model_copy(update={"path": str(project / cfg.model.path)}),
        bind_host="127.0.0.1", port=port, container_name=CONTAINERS[host])
    return serve_argv(args)


def test_serving_containers_on_the_socket_and_over_ssh(serving):
    cli, project, tmp_path, known_hosts = serving
    up = changed(ok(cli("up", "--yes", "--json")))
    for host in ("local", "loop"):
        assert up[f"{host}-sglang-container"] == "create"
        assert up[f"{host}-sglang-ready"] == "create"
    assert up["router-container"] == "create"

    # accept-new: the first contact recorded the sshd's own key, and only that one.
    host_key = " ".join((SSHD_DIR / "host_ed25519.pub").read_text().split()[:2])
    recorded = [line.split(None, 1)[1].strip() for line in known_hosts.read_text().splitlines()]
    assert recorded and set(recorded) == {host_key}

    # Read back: what the provider created is what the components declared.
    image_id = docker("image", "inspect", "--format", "{{.Id}}", IMAGE).stdout.strip()
    for host, port in (("local", 30011), ("loop", 30012)):
        info = inspect(CONTAINERS[host])
        assert info["State"]["Running"] and info["Image"] == image_id
        assert info["Config"]["Cmd"] == declared_worker(project, host, port, 4)
        assert info["Config"]["Labels"]["benchstack.run-token"] == "start"
        assert {u["Name"]: u["Hard"] for u in info["HostConfig"]["Ulimits"]} == {
            "memlock": 8388608, "stack": STACK_BYTES}
        assert info["HostConfig"]["NetworkMode"] == "host"
    router = inspect(CONTAINERS["router"])
    rcmd = router["Config"]["Cmd"]
    assert rcmd[rcmd.index("--worker-urls") + 1: rcmd.index("--worker-urls") + 3] == [
        "http://127.0.0.1:30011", "http://127.0.0.1:30012"]
    outputs = ok(cli("stack", "output", "--json")).json()
    assert outputs["worker_urls"] == ["http://127.0.0.1:30011", "http://127.0.0.1:30012"]
    assert [i["dp_size"] for i in outputs["server_info"]] == [2, 2]
    models = httpx.get(f"{outputs['router_url']}/v1/models", timeout=10).json()
    assert [m["id"] for m in models["data"]] == ["benchstack/stand-in"]
    # The Docker provider's refresh reads both containers back as they are: no diff.
    ok(cli("refresh", "--yes"))
    ok(cli("preview", "--expect-no-changes"))

    # Update: one flag of the worker reached over ssh: exactly that worker is replaced and
    # proven ready again; the router's worker list is the same, so the router stays.
    ok(cli("config", "set", "test:loopMaxRunning", "3"))
    plan = changed(ok(cli("preview", "--diff", "--json")))
    assert plan == {"loop-sglang-container": "replace", "loop-sglang-ready": "replace"}, plan
    assert changed(ok(cli("up", "--yes", "--json"))) == plan
    assert inspect(CONTAINERS["loop"])["Config"]["Cmd"] == declared_worker(
        project, "loop", 30012, 3)
    ok(cli("preview", "--expect-no-changes"))

    # Delete: every container goes (the router first: it depends on the workers).
    ok(cli("destroy", "--yes"))
    names = docker("ps", "-a", "--format", "{{.Names}}").stdout.split()
    assert not set(CONTAINERS.values()) & set(names)
    assert not (tmp_path / "local-ws" / ".benchstack").exists()
    assert not (tmp_path / "loop-ws" / ".benchstack").exists()
