"""ProxyBridge's host step (hostside/proxy_bridge.py) and its status probe, for real: socat on the
main engine's docker0 gateway, forwarding to tinyproxy on 127.0.0.1, and a canary container
fetching from a host-local HTTP server through it: container -> gateway:port (socat) ->
tinyproxy -> 127.0.0.1:target. Never a public address.

Each test uses its own name, state dir and free port; the shared tinyproxy is only read, the
"upstream down" test starts and kills a tinyproxy of its own.
"""

from __future__ import annotations

import hashlib
import http.server
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from components.config import ProxyConfig
from components.proxy_bridge import step_inputs
from components.seam.probe import render
from components.seam.ssh import parse_outputs
from tests.conftest import PROXY, ScriptResult, docker
from tests.hostplane.conftest import docker_gateway, free_port
from tests.hostplane.steps import run_step, step_command

pytestmark = pytest.mark.real


class _Target(http.server.BaseHTTPRequestHandler):
    paths: list[str]
    token: str

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        type(self).paths.append(self.path)
        body = f"benchstack-target {self.token}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@dataclass
class Target:
    url: str
    token: str
    paths: list[str]


@pytest.fixture
def target() -> Iterator[Target]:
    """A host-local HTTP server on 127.0.0.1: reachable by tinyproxy, not by containers."""
    token = uuid.uuid4().hex
    handler = type("Handler", (_Target,), {"paths": [], "token": token})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Target(f"http://127.0.0.1:{server.server_port}/{token}", token, handler.paths)
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Bridge:
    inputs: dict[str, Any]
    gateway: str
    port: int
    state: Path

    @property
    def name(self) -> str:
        return self.inputs["name"]

    def pid(self, suffix: str = "") -> int:
        return int((self.state / f"{self.name}.pid{suffix}").read_text())

    def create(self, **over: Any) -> ScriptResult:
        return run_step("proxy_bridge", "create", {**self.inputs, **over}, timeout=120)

    def delete(self) -> ScriptResult:
        return run_step("proxy_bridge", "delete", self.delete_inputs, timeout=60)

    @property
    def delete_inputs(self) -> dict[str, Any]:
        return {"name": self.name, "state_dir": self.inputs["state_dir"]}

    def status(self) -> dict:
        """The status probe's answer, rendered and run as the component's probe runs it."""
        probe = render("proxy_status.sh", {"STATE_DIR": str(self.state), "NAME": self.name,
                                           "BRIDGE_PORT": str(self.port)})
        proc = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr
        return parse_outputs(proc.stdout)


@pytest.fixture
def bridge(tmp_path: Path, docker_engine: None) -> Iterator[Bridge]:
    gateway = docker_gateway()
    # Free on every address (a wildcard bind), not only the gateway's: the bridge refuses a port
    # anybody listens on, and a port free on the gateway can be the S3 stand-in's on loopback.
    port = free_port("0.0.0.0")
    proxy = ProxyConfig(upstream=PROXY, bridge_port=port)
    inputs = {**step_inputs(proxy, str(tmp_path / "state"), "start", None),
              "name": f"bste-bridge-{uuid.uuid4().hex[:8]}"}
    b = Bridge(inputs, gateway, port, tmp_path / "state")
    try:
        yield b
    finally:
        b.delete()
        # Whatever the outcome, nothing of ours may keep listening.
        for line in subprocess.run(
            ["ss", "-ltnpH", f"sport = :{port}"], capture_output=True, text=True
        ).stdout.splitlines():
            for pid in re.findall(r"pid=(\d+)", line):
                if "socat" in line:
                    os.kill(int(pid), signal.SIGKILL)


def listeners(port: int) -> list[tuple[str, int]]:
    """(local address, pid) of every TCP listener on port."""
    out = subprocess.run(
        ["ss", "-ltnpH", f"sport = :{port}"], capture_output=True, text=True, check=True
    ).stdout
    found = []
    for line in out.splitlines():
        fields = line.split()
        pid = re.search(r"pid=(\d+)", line)
        found.append((fields[3], int(pid.group(1)) if pid else -1))
    return found


def fetch_through_bridge(image: str, port: int, url: str) -> str:
    """The full HTTP response a container gets for url via http_proxy (bash /dev/tcp)."""
    proxy = f"http://host.docker.internal:{port}"
    script = (
        'p=${http_proxy#http://}; exec 3<>"/dev/tcp/${p%:*}/${p##*:}"; '
        'printf "GET %s HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n" "$URL" >&3; timeout 20 cat <&3'
    )
    res = docker(
        "run", "--rm", "--add-host", "host.docker.internal:host-gateway",
        "-e", f"http_proxy={proxy}", "-e", f"URL={url}", "--entrypoint", "bash", image,
        "-c", script, check=False, timeout=60,
    )
    return res.stdout


def wait_for(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_bridge_end_to_end_idempotent_and_self_healing(
    bridge: Bridge, target: Target, canary_image: str
) -> None:
    check = {"check_image": canary_image, "check_url": target.url}
    res = bridge.create(**check)
    assert res.returncode == 0, res.stderr
    out = res.outputs
    assert out["proxy_url"] == f"http://host.docker.internal:{bridge.port}"
    assert out["bind_address"] == bridge.gateway and out["port"] == bridge.port
    assert out["supervisor"] == "loop" and out["started"] is True
    assert out["container_check"] is True
    assert out["pid_file"] == str(bridge.state / f"{bridge.name}.pid")
    assert Path(out["log_file"]).is_file()
    # The script's own container check really reached the target through the proxy.
    assert target.paths == [f"/{target.token}"]

    # Bound to the gateway address only, by socat.
    bound = listeners(bridge.port)
    assert [addr for addr, _ in bound] == [f"{bridge.gateway}:{bridge.port}"]
    socat_pid = bound[0][1]
    assert Path(f"/proc/{socat_pid}/comm").read_text().strip() == "socat"

    # An independent request from a container, with the body read back.
    reply = fetch_through_bridge(canary_image, bridge.port, target.url)
    assert reply.startswith("HTTP/1.") and f"benchstack-target {target.token}" in reply

    # Second run: nothing restarted.
    loop_pid = bridge.pid()
    again = bridge.create(**check)
    assert again.returncode == 0, again.stderr
    assert again.outputs["started"] is False
    assert bridge.pid() == loop_pid and listeners(bridge.port)[0][1] == socat_pid

    # socat killed: the loop brings it back, and requests flow again.
    os.kill(socat_pid, signal.SIGKILL)
    assert wait_for(lambda: [p for _, p in listeners(bridge.port)] not in ([], [socat_pid]))
    assert listeners(bridge.port)[0][0] == f"{bridge.gateway}:{bridge.port}"
    assert bridge.pid() == loop_pid
    reply = fetch_through_bridge(canary_image, bridge.port, target.url)
    assert f"benchstack-target {target.token}" in reply

    # Destroy stops loop and socat; a second destroy tolerates the bridge being gone.
    gone = bridge.delete()
    assert gone.returncode == 0, gone.stderr
    assert gone.outputs == {"stopped": True, "supervisor": "loop"}
    assert wait_for(lambda: not Path(f"/proc/{loop_pid}").exists())
    assert wait_for(lambda: listeners(bridge.port) == [])
    assert not list(bridge.state.glob(f"{bridge.name}.pid*"))
    twice = bridge.delete()
    assert twice.returncode == 0 and twice.outputs["stopped"] is False


def test_loop_survives_the_calling_session(bridge: Bridge) -> None:
    """Started on a terminal that then goes away (an SSH session ending), the bridge stays up."""
    command = step_command("proxy_bridge", "create", bridge.inputs)
    # `script` gives the run its own pty and session; closing it hangs up that session.
    res = subprocess.run(
        ["script", "-qec", command, "/dev/null"], capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    loop_pid = bridge.pid()
    time.sleep(1.0)
    assert Path(f"/proc/{loop_pid}").exists(), "the loop died with its session"
    assert [addr for addr, _ in listeners(bridge.port)] == [f"{bridge.gateway}:{bridge.port}"]


def test_upstream_proxy_down_starts_nothing(bridge: Bridge, tmp_path: Path) -> None:
    tinyproxy = shutil.which("tinyproxy")
    assert tinyproxy, "tinyproxy missing: run `make setup`"
    port = free_port()
    conf = tmp_path / "tinyproxy.conf"
    conf.write_text(
        f'Port {port}\nListen 127.0.0.1\nAllow 127.0.0.1\nPidFile "{tmp_path}/tp.pid"\n'
        f'LogFile "{tmp_path}/tp.log"\n'
    )
    proc = subprocess.Popen([tinyproxy, "-d", "-c", str(conf)], stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: bool(listeners(port))), "own tinyproxy did not start"
        upstream = f"127.0.0.1:{port}"
        up = bridge.create(upstream=upstream)  # proves this upstream works while it lives
        assert up.returncode == 0, up.stderr
        assert bridge.delete().outputs["stopped"] is True
    finally:
        proc.kill()
        proc.wait()
    assert wait_for(lambda: not listeners(port))

    res = bridge.create(upstream=upstream)
    assert res.returncode != 0
    assert res.reason == (
        f"proxy_bridge: upstream proxy 127.0.0.1:{port} does not answer HTTP: "
        "start it (or fix proxy.upstream) before the bridge"
    )
    assert listeners(bridge.port) == []
    assert not list(bridge.state.glob(f"{bridge.name}.*pid*"))


def test_bridge_port_already_taken(bridge: Bridge) -> None:
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    squatter.bind((bridge.gateway, bridge.port))
    squatter.listen()
    try:
        res = bridge.create()
        assert res.returncode != 0
        assert res.reason.startswith(f"proxy_bridge: port {bridge.port} is already taken (")
        assert f"{bridge.gateway}:{bridge.port} by " in res.reason
        assert f", pid {os.getpid()})" in res.reason
        assert "choose another proxy.bridge_port" in res.reason
        assert [pid for _, pid in listeners(bridge.port)] == [os.getpid()]
        assert not bridge.state.exists() or not list(bridge.state.glob("*.pid*"))
    finally:
        squatter.close()


def test_unreachable_target_stops_what_it_started(
    bridge: Bridge, canary_image: str
) -> None:
    """The container check fails (nothing listens at the target): the new bridge is removed."""
    dead = f"http://127.0.0.1:{free_port()}/"
    res = bridge.create(check_image=canary_image, check_url=dead)
    assert res.returncode != 0
    assert f"could not fetch {dead} through http://host.docker.internal:{bridge.port}" in res.reason
    assert res.reason.endswith(f"bridge stopped (log: {bridge.state}/{bridge.name}.log)")
    assert wait_for(lambda: listeners(bridge.port) == [])


def test_a_failed_replacement_starts_the_bridge_it_replaced_again(
    bridge: Bridge, canary_image: str
) -> None:
    """A create with other settings stops the running bridge first: when the new one cannot
    start (its port taken) or fails its check, the old one runs again, from /, with its token."""
    up = bridge.create()
    assert up.returncode == 0, up.stderr
    old_settings = (bridge.state / f"{bridge.name}.settings").read_text()
    token = (bridge.state / f"{bridge.name}.token").read_text()
    assert os.readlink(f"/proc/{bridge.pid()}/cwd") == "/"

    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    taken = free_port("0.0.0.0")
    squatter.bind((bridge.gateway, taken))
    squatter.listen()
    try:
        res = bridge.create(bridge_port=taken)
    finally:
        squatter.close()
    assert res.returncode != 0
    assert f"port {taken} is already taken (" in res.reason
    assert res.reason.endswith(f"; the bridge it replaced ({old_settings.strip()}) runs again")
    assert wait_for(lambda: [a for a, _ in listeners(bridge.port)] == [
        f"{bridge.gateway}:{bridge.port}"])
    assert bridge.status() == {"state": "running", "token": token.strip()}
    assert os.readlink(f"/proc/{bridge.pid()}/cwd") == "/"

    dead = f"http://127.0.0.1:{free_port()}/"
    other = free_port("0.0.0.0")
    res = bridge.create(bridge_port=other, check_image=canary_image, check_url=dead)
    assert res.returncode != 0
    assert f"could not fetch {dead}" in res.reason and "bridge stopped" in res.reason
    assert res.reason.endswith("runs again")
    assert listeners(other) == []
    assert wait_for(lambda: bool(listeners(bridge.port)))
    assert (bridge.state / f"{bridge.name}.settings").read_text() == old_settings


def test_the_step_returns_once_done(bridge: Bridge) -> None:
    """Called as the component runs it (`sh -c` of `bash -c '<exports>exec python3 -m hostside
    proxy_bridge create'`), with its output on pipes: the call returns once the step is done,
    because the loop holds none of the caller's pipes. (A loop that held them would keep the
    call from returning while it runs: past the bound, however fast the machine; the loop is
    shown running after the return.)"""
    try:
        proc = subprocess.run(
            ["sh", "-c", step_command("proxy_bridge", "create", bridge.inputs)],
            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the step did not return within 300 s: its loop holds the caller's pipes")
    assert proc.returncode == 0, proc.stderr
    out = parse_outputs(proc.stdout)
    assert out["started"] is True and out["bind_address"] == bridge.gateway
    assert [addr for addr, _ in listeners(bridge.port)] == [f"{bridge.gateway}:{bridge.port}"]
    gone = bridge.delete()
    assert gone.returncode == 0 and gone.outputs["stopped"] is True
    assert wait_for(lambda: listeners(bridge.port) == [])


def test_the_status_probe_follows_the_bridge(bridge: Bridge) -> None:
    """Read-only, at every preview: no bridge yet gives `start`; a running one the token its
    create recorded; one whose loop and socat were killed (a reboot) a repair token derived
    from it, which replaces the step at the next up."""
    assert bridge.status() == {"state": "absent", "token": "start"}
    res = bridge.create(token="tok-1")
    assert res.returncode == 0, res.stderr
    assert bridge.status() == {"state": "running", "token": "tok-1"}
    loop, socat = bridge.pid(), bridge.pid(".socat")
    os.kill(loop, signal.SIGKILL)
    os.kill(socat, signal.SIGKILL)
    assert wait_for(lambda: listeners(bridge.port) == [])
    repair = "repair-" + hashlib.sha256(b"tok-1").hexdigest()[:12]
    assert bridge.status() == {"state": "down", "token": repair}
    # The replacement: the old delete (nothing left to stop), then a create with the new token.
    assert bridge.delete().outputs["stopped"] is False
    again = bridge.create(token=repair)
    assert again.returncode == 0 and again.outputs["started"] is True, again.stderr
    assert bridge.status() == {"state": "running", "token": repair}
    settings = (bridge.state / f"{bridge.name}.settings").read_text()
    assert settings == f"{bridge.gateway}:{bridge.port} -> {PROXY} (loop)\n"
