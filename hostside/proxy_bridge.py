"""ProxyBridge on the host: expose the host's loopback HTTP proxy on the Docker bridge gateway
with a supervised socat, so task containers reach it as host.docker.internal:BRIDGE_PORT (seed:
"Prepare task-container networking").

Supervision survives the SSH session and restarts socat when it dies: a systemd unit where
systemd runs the host, otherwise a small restart loop (LOOP, bash) in a session of its own, with
every descriptor redirected so it holds none of the caller's pipes. Its command line carries a
marker (proxy_status.py) so that a recycled PID is never taken for it.

create is idempotent: an identical, healthy bridge is only checked again (and left as it is if
the check fails past the bridge, at the upstream or the target); one of ours with other
settings is replaced, and started again (its loop's command line, from /) when its replacement
fails; anybody else's listener on the port is an error. The loop runs from /, never from the
folder the step was started in (a checkout that may be deleted). Nothing is started while
the upstream proxy does not answer HTTP, and a bridge that fails its check is stopped again.
The check: the listener is bound to the gateway address only (never 0.0.0.0: the proxy must not
be opened to the network) and, with `check_image` and `check_url`, a container fetches that URL
through it. The create records `token` for the status probe (proxy_status.py).

delete stops the bridge, tolerating one that is gone already; it never touches a process that is
not ours (PIDs are checked, not trusted).

Outputs: create: proxy_url, bind_address, port, upstream, supervisor (systemd | loop), pid_file
("" under systemd), log_file, unit ("" for the loop), started (false when an identical bridge
was already running), container_check; delete: stopped, supervisor.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

from .beside import alive
from .proxy_status import LOOP_MARKER, Files, cmdline, listeners, loop_pid, pid_in, unit_active
from .proxy_status import read as read_state
from .step import HostError, emit, log, verb
from .step import run as _run

MODULE = "proxy_bridge"
# The network whose gateway the bridge binds: containers reach it as host.docker.internal through
# `host-gateway`, which is the address of docker0, the `bridge` network's interface.
DOCKER_NETWORK = "bridge"
# How long socat and its supervising loop get to come up: seconds on an idle host, more on one
# busy pulling images or loading weights, where a tighter bound fails a bridge that is fine.
STARTUP_S = 30
NAME_PATTERN = re.compile(r"[A-Za-z0-9_.-]+")
# $0 is the marker, then the name, the pid file and socat's arguments (proxy_status.Files).
LOOP = """
pid_file=$2; shift 2
child=""
trap '[ -n "$child" ] && kill -TERM "$child" 2>/dev/null; exit 0' TERM INT HUP
echo $$ >"$pid_file"
while :; do
  socat "$@" & child=$!
  echo "$child" >"$pid_file.socat"
  wait "$child" && rc=0 || rc=$?
  echo "$(date -u +%FT%TZ) socat exited ($rc); restarting in 1 s" >&2
  sleep 1
done"""
# Run in the check container, which may have no HTTP client: bash's /dev/tcp speaks HTTP/1.0 to
# the proxy, exactly what http_proxy users do (absolute-form request line).
CONTAINER_FETCH = """
p=${http_proxy#http://}; exec 3<>"/dev/tcp/${p%:*}/${p##*:}"
printf "GET %s HTTP/1.0\\r\\nHost: %s\\r\\nConnection: close\\r\\n\\r\\n" \\
  "$CHECK_URL" "$CHECK_HOST" >&3
IFS= read -r -t 20 line <&3; echo "$line"
"""


@dataclass(frozen=True)
class Inputs:
    name: str
    # Recorded once the bridge is up, for the status probe (components/proxy_bridge.py).
    token: str
    upstream: str
    bridge_port: int
    state_dir: str
    # None: the gateway of Docker's `bridge` network.
    bind_address: str | None
    # An image with bash whose container fetches `check_url` through the bridge; None: skipped.
    check_image: str | None
    check_url: str | None


@dataclass(frozen=True)
class DeleteInputs:
    name: str
    state_dir: str




def as_root(cmd: list[str]) -> list[str]:
    return cmd if os.geteuid() == 0 else ["sudo", "-n", *cmd]


def supervisor() -> str:
    return "systemd" if os.path.isdir("/run/systemd/system") else "loop"


def check_name(name: str) -> None:
    if not NAME_PATTERN.fullmatch(name):
        raise HostError(f"name '{name}' may hold only letters, digits, '.', '_' and '-'")


def http_status(host: str, port: int, target: str = "/") -> str | None:
    """The status code a proxy answers a GET with; None when it does not speak HTTP."""
    request = f"GET {target} HTTP/1.0\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    try:
        with socket.create_connection((host, port), timeout=15) as conn:
            conn.sendall(request.encode())
            line = conn.makefile("rb").readline(512)
    except OSError:
        return None
    match = re.match(rb"HTTP/1\.[01] ([0-9]{3})", line)
    return match.group(1).decode() if match else None


def host_addresses() -> list[str]:
    """This host's IPv4 addresses (`ip -4 -o addr show`), with the interface of each."""
    out = _run(["ip", "-4", "-o", "addr", "show"]).stdout
    found = []
    for line in out.splitlines():
        fields = line.split()
        if "inet" in fields[:-1]:
            found.append(fields[fields.index("inet") + 1].split("/")[0] + " " + fields[1])
    return found


def gateway() -> str:
    """The gateway of DOCKER_NETWORK. Engines often leave the default bridge's IPAM gateway
    empty: then the bridge interface's own address is the gateway (docker0, or br-<id>)."""
    proc = _run(["docker", "network", "inspect", DOCKER_NETWORK])
    try:
        network = json.loads(proc.stdout)[0] if proc.returncode == 0 else None
    except (ValueError, IndexError):
        network = None
    if not isinstance(network, dict):
        raise HostError(f"cannot inspect Docker network '{DOCKER_NETWORK}': is the engine up? "
                        "(or set proxy.bind_address)")
    for config in (network.get("IPAM") or {}).get("Config") or []:
        address = (config or {}).get("Gateway") or ""
        if re.fullmatch(r"[0-9.]+", address):
            return address
    ifname = (network.get("Options") or {}).get("com.docker.network.bridge.name") \
        or "br-" + str(network.get("Id", ""))[:12]
    for entry in host_addresses():
        address, dev = entry.split()
        if dev == ifname:
            return address
    raise HostError(f"no gateway address found for Docker network '{DOCKER_NETWORK}' (interface "
                    f"{ifname}): set proxy.bind_address")


def bind_address(given: str | None) -> str:
    address = given or gateway()
    try:
        valid = isinstance(ipaddress.ip_address(address), ipaddress.IPv4Address)
    except ValueError:
        valid = False
    if not valid:
        raise HostError(f"proxy.bind_address='{address}' is not an IPv4 address")
    if address == "0.0.0.0":
        raise HostError("proxy.bind_address=0.0.0.0 would expose the proxy on every interface: "
                        "use the bridge gateway")
    if address not in [entry.split()[0] for entry in host_addresses()]:
        raise HostError(f"proxy.bind_address={address} is not an address of this host: check "
                        "proxy.bind_address")
    return address


class Bridge:
    """One bridge: its files, settings and supervisor."""

    def __init__(self, inputs: Inputs, bind: str, upstream: tuple[str, int]) -> None:
        self.inputs = inputs
        self.files = Files(inputs.state_dir, inputs.name)
        self.bind = bind
        self.port = inputs.bridge_port
        self.upstream = upstream
        self.supervisor = supervisor()
        self.settings = f"{bind}:{self.port} -> {inputs.upstream} ({self.supervisor})"
        self.socat_args = ["-d", "-d", f"TCP-LISTEN:{self.port},bind={bind},reuseaddr,fork",
                           f"TCP:{inputs.upstream}"]
        self.proxy_url = f"http://host.docker.internal:{self.port}"
        self.container_check = False

    def running(self) -> bool:
        if self.supervisor == "systemd":
            return unit_active(self.files.unit)
        return loop_pid(self.files) is not None

    def running_same(self) -> bool:
        return self.running() and read_state(self.files.settings) == self.settings

    def problem(self) -> str | None:
        """What is wrong with the running bridge: its listener is not bound to the gateway
        address only, or (with a check image) a container does not get through; None: fine."""
        self.container_check = False
        if not _within(STARTUP_S, lambda: bool(listeners(self.port))):
            return f"socat is not listening on port {self.port} after {STARTUP_S} s"
        bound = sorted({line.split()[3] for line in listeners(self.port)})
        if bound != [f"{self.bind}:{self.port}"]:
            return (f"listener on port {self.port} is bound to '{' '.join(bound)}', expected "
                    f"only {self.bind}:{self.port}")
        image, url = self.inputs.check_image, self.inputs.check_url
        if image and url:
            host_port = url.split("://", 1)[-1].split("/", 1)[0]
            env = [f"{key}={self.proxy_url}" for key in
                   ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY")]
            try:
                proc = _run(["docker", "run", "--rm", "--network", DOCKER_NETWORK,
                             "--add-host", "host.docker.internal:host-gateway",
                             *[arg for e in env for arg in ("-e", e)],
                             "-e", f"CHECK_URL={url}", "-e", f"CHECK_HOST={host_port}",
                             "--entrypoint", "bash", image, "-c", CONTAINER_FETCH],
                            timeout=60)
                out = proc.stdout + proc.stderr
            except HostError:
                out = "no answer within 60s"
            if not re.search(r"HTTP/1\.[01] [23][0-9][0-9]", out):
                got = (out.strip().splitlines() or [""])[-1].replace("\r", "")
                return (f"a container of {image} could not fetch {url} through "
                        f"{self.proxy_url} (got: {got})")
            self.container_check = True
        return None

    def start(self) -> None:
        try:
            os.makedirs(self.inputs.state_dir, exist_ok=True)
        except OSError:
            raise HostError(f"cannot create state_dir={self.inputs.state_dir}: choose a "
                            "writable state_dir") from None
        if self.supervisor == "systemd":
            self._start_unit()
        else:
            start_loop(self.files, ["bash", "-c", LOOP, f"{LOOP_MARKER} {self.inputs.name}",
                                    self.inputs.name, self.files.pid, *self.socat_args])
        with open(self.files.settings, "w") as f:
            f.write(self.settings + "\n")

    def _start_unit(self) -> None:
        unit = self.files.unit
        text = (
            "[Unit]\n"
            f"Description=benchstack proxy bridge {self.settings}\n"
            "After=network-online.target docker.service\n\n"
            "[Service]\n"
            f"ExecStart={shutil.which('socat')} {' '.join(self.socat_args)}\n"
            "Restart=always\nRestartSec=1\n"
            f"StandardOutput=append:{self.files.log}\nStandardError=append:{self.files.log}\n\n"
            "[Install]\nWantedBy=multi-user.target\n"
        )
        wrote = _run(as_root(["tee", f"/etc/systemd/system/{unit}"]), input=text)
        if wrote.returncode != 0:
            raise HostError(f"cannot write /etc/systemd/system/{unit}: run as root or allow "
                            "sudo -n")
        _run(as_root(["systemctl", "daemon-reload"]))
        if _run(as_root(["systemctl", "enable", "--now", unit])).returncode != 0:
            stop(self.files, self.supervisor)
            raise HostError(f"systemctl could not start {unit}: see journalctl -u {unit}")

    def record_token(self) -> None:
        with open(self.files.token, "w") as f:
            f.write(self.inputs.token + "\n")

    def outputs(self, started: bool) -> dict:
        systemd = self.supervisor == "systemd"
        return {"proxy_url": self.proxy_url, "bind_address": self.bind, "port": self.port,
                "upstream": self.inputs.upstream, "supervisor": self.supervisor,
                "pid_file": "" if systemd else self.files.pid, "log_file": self.files.log,
                "unit": self.files.unit if systemd else "", "started": started,
                "container_check": self.container_check}


def start_loop(files: Files, argv: list[str]) -> bool:
    """The supervising loop `argv`, detached; whether it runs (its pid file names it). A session
    of its own, every descriptor redirected and from /: it outlives this (SSH) session, holds
    none of the caller's pipes, and no folder it was started from (a checkout) is kept in use."""
    with open(files.log, "ab") as out:
        subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                         start_new_session=True, cwd="/")
    return _within(STARTUP_S, lambda: loop_pid(files) is not None)


@dataclass(frozen=True)
class Previous:
    """A bridge of ours that a create replaces (its loop's command line and settings), so that
    a replacement that fails can start it again: the host is left as it was found."""

    argv: list[str]
    settings: str

    @classmethod
    def read(cls, files: Files, how: str) -> Previous | None:
        """The running loop's; None under systemd (its unit is rewritten by the create) or when
        none runs."""
        loop = loop_pid(files) if how == "loop" else None
        if loop is None:
            return None
        try:
            with open(f"/proc/{loop}/cmdline", "rb") as f:
                argv = [a.decode() for a in f.read().split(b"\0") if a]
        except OSError:
            return None
        return cls(argv, read_state(files.settings) or "")

    def bring_back(self, files: Files) -> str:
        """Start it again; what happened, for the step's one-line failure."""
        if start_loop(files, self.argv):
            with open(files.settings, "w") as f:
                f.write(self.settings + "\n")
            return f"the bridge it replaced ({self.settings}) runs again"
        return (f"the bridge it replaced ({self.settings}) did not start again: start it with: "
                f"cd / && {shlex.join(self.argv)}")


def stop(files: Files, how: str) -> bool:
    """Stop the bridge `files` name: its unit, or its loop and the loop's socat (a socat orphaned
    by a SIGKILLed loop is still ours if its arguments are). Whether something was running."""
    stopped = False
    if how == "systemd":
        path = f"/etc/systemd/system/{files.unit}"
        if os.path.isfile(path):
            stopped = unit_active(files.unit)
            _run(as_root(["systemctl", "disable", "--now", files.unit]))
            _run(as_root(["rm", "-f", path]))
            _run(as_root(["systemctl", "daemon-reload"]))
    else:
        loop = loop_pid(files)
        if loop is not None:
            log(MODULE, f"stopping loop {loop}")
            _signal(loop, signal.SIGTERM)
            if not _gone(loop, 5.0):
                _signal(loop, signal.SIGKILL)
            stopped = True
        child = pid_in(files.socat_pid)
        listen = (read_state(files.settings) or "").split(" ->")[0]
        if child is not None and listen and "socat" in cmdline(child):
            address, _, port = listen.rpartition(":")
            if f"TCP-LISTEN:{port},bind={address}" in cmdline(child):
                _signal(child, signal.SIGTERM)
                stopped = True
    for path in (files.pid, files.socat_pid, files.settings):
        if os.path.lexists(path):
            os.unlink(path)
    return stopped


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _gone(pid: int, seconds: float) -> bool:
    # beside.alive: a loop this step stopped stays a zombie until reaped, and is gone.
    return _within(seconds, lambda: not alive(pid))


def _within(seconds: float, holds: Callable[[], bool]) -> bool:
    """Whether `holds` comes true before a deadline, polled every 0.1 s."""
    deadline = time.monotonic() + seconds
    while not holds():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def refuse_taken(port: int) -> None:
    taken = listeners(port, processes=True)
    if taken:
        address = taken[0].split()[3]
        # ss names the process as users:(("NAME",pid=N,fd=M)); NAME may hold spaces.
        user = re.search(r'users:\(\("(.*?)",pid=(\d+)', taken[0])
        who = f"{address} by {user.group(1)}, pid {user.group(2)}" if user else address
        raise HostError(f"port {port} is already taken ({who}): stop that listener or choose "
                        "another proxy.bridge_port")


def replace(bridge: Bridge) -> None:
    """Start `bridge` where no other listener holds its port, and check it; stopped again when
    the check fails."""
    refuse_taken(bridge.port)
    bridge.start()
    problem = bridge.problem()
    if problem is not None:
        stop(bridge.files, bridge.supervisor)
        raise HostError(f"{problem}; bridge stopped (log: {bridge.files.log})")


def checked(inputs: Inputs) -> Bridge:
    """The bridge the inputs describe, refused before anything runs where they cannot work."""
    check_name(inputs.name)
    if type(inputs.bridge_port) is not int or not 0 < inputs.bridge_port < 65536:
        raise HostError(f"proxy.bridge_port={inputs.bridge_port!r} is not a TCP port")
    up_host, _, up_port = inputs.upstream.rpartition(":")
    if not up_host or not up_port.isdigit():
        raise HostError(f"proxy.upstream='{inputs.upstream}' must be host:port")
    for tool, package in (("socat", "socat"), ("ss", "iproute2"), ("ip", "iproute2")):
        if shutil.which(tool) is None:
            raise HostError(f"{tool} not found on this host: install {package}")
    if inputs.check_image and not inputs.check_url:
        raise HostError("check_image is set but check_url is empty: give the URL the container "
                        "must fetch")
    return Bridge(inputs, bind_address(inputs.bind_address), (up_host, int(up_port)))


@verb(Inputs)
def create(inputs: Inputs) -> None:
    bridge = checked(inputs)
    if bridge.running_same():
        problem = bridge.problem()
        if problem is None:
            log(MODULE, f"bridge {bridge.settings} already running: nothing started")
            bridge.record_token()
            emit(bridge.outputs(started=False))
            return
        # A healthy listener that cannot carry a request points past the bridge (upstream,
        # target): restarting socat would not help, so the running bridge is left as it was.
        if problem.startswith("a container of "):
            raise HostError(f"{problem} (the running bridge was left as it was)")
        log(MODULE, f"running bridge fails its check ({problem}): restarting it")

    # Upstream first: nothing is started when the proxy behind the bridge is dead.
    status = http_status(*bridge.upstream)
    if status is None:
        raise HostError(f"upstream proxy {inputs.upstream} does not answer HTTP: start it (or "
                        "fix proxy.upstream) before the bridge")
    log(MODULE, f"upstream {inputs.upstream} answers (HTTP {status})")

    # A bridge of ours with other settings is replaced (a socat its loop left behind too), and
    # started again if its replacement fails; anybody else's listener is an error.
    previous = Previous.read(bridge.files, bridge.supervisor)
    stop(bridge.files, bridge.supervisor)
    try:
        replace(bridge)
    except HostError as exc:
        if previous is None:
            raise
        raise HostError(f"{exc}; {previous.bring_back(bridge.files)}") from None
    log(MODULE, f"bridge {bridge.settings} up (log: {bridge.files.log})")
    bridge.record_token()
    emit(bridge.outputs(started=True))


@verb(DeleteInputs)
def delete(inputs: DeleteInputs) -> None:
    check_name(inputs.name)
    files = Files(inputs.state_dir, inputs.name)
    how = supervisor()
    stopped = stop(files, how)
    if os.path.lexists(files.token):
        os.unlink(files.token)
    log(MODULE, f"bridge {inputs.name} {'stopped' if stopped else 'was not running'}")
    emit({"stopped": stopped, "supervisor": how})
