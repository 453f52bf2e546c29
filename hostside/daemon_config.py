"""DockerDaemonConfig on the host: merge `default-address-pools` into the engine's daemon.json so
one host can hold many concurrent /24 trial networks (seed: "Prepare Docker network pools for
high-concurrency runs", "Docker network address-pool exhaustion").

create: check the pools overlap no host route and no Docker network; refuse to restart while
containers run (unless allowed); back up daemon.json (UTC timestamp); validate the merged file;
install it; restart; check the engine uses the pools; prove them by creating `proof_networks`
networks. Any failure after the install puts the original back (and restarts again): the host
is left as it was found. A second run with the same pools writes nothing and does not restart.
The merged file also pins `bip` to docker0's current address when it sets neither `bip` nor
`bridge` (daemon_json.merge), and the record beside daemon.json keeps the state from before
benchstack (which file, its backup, docker0's address) across re-runs and pool changes.

delete: undo what create did, from that record (so it needs only the create's inputs), and
restart under the same rule. Where daemon.json no longer holds these pools (restored already,
changed since) or the record names other pools (a later run replaced these), nothing is done:
a second delete, or the delete of a replaced resource, is a no-op. docker0 is then moved back
where it was before benchstack if it moved.

Both need root for daemon.json and the restart: not root, the step runs itself again under
`sudo -n`. The engine is restarted with `restart_command` (run with bash), or as
dockerd_restart.py finds it is run here.

Outputs: create: changed, restarted, original ("file" | "absent" | "unchanged": what destroy
restores), backup, record, daemon_json, address_pools, first_subnet, last_subnet,
proof_networks; delete: restored, restarted, daemon_json, original.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from . import daemon_json as dj
from . import dockerd_restart
from .step import INPUTS_VAR, HostError, emit, log, verb
from .step import run as _run

MODULE = "daemon_config"
PROOF_PREFIX = "benchstack-pool-proof"
# Seconds the engine has to answer after a restart.
READY_TIMEOUT = 90


@dataclass(frozen=True)
class Inputs:
    daemon_json: str
    address_pools: list
    # "": dockerd_restart.py decides (systemd, init.d, or the running dockerd restarted).
    restart_command: str
    allow_restart_with_running_containers: bool
    proof_networks: int
    # "": the docker CLI's own default endpoint.
    docker_host: str

    # The delete of a config merged by an older release (step.read).
    RENAMED: ClassVar[dict[str, str]] = {
        "allow_restart_with_running": "allow_restart_with_running_containers"}




class Docker:
    """The engine through its CLI."""

    def __init__(self, host: str) -> None:
        if shutil.which("docker") is None:
            raise HostError("docker CLI not found on this host: install Docker")
        self.host = host
        self.cli = ["docker", *(["-H", host] if host else [])]

    def __call__(self, *args: str) -> subprocess.CompletedProcess:
        return _run([*self.cli, *args])

    def answers(self) -> bool:
        try:
            return self("info", "--format", "{{.ID}}").returncode == 0
        except HostError:  # no answer in time
            return False

    def require(self) -> None:
        if not self.answers():
            where = self.host or "the default socket"
            raise HostError(f"Docker engine not answering at {where}: start it")

    def wait(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.answers():
                return True
            time.sleep(0.5)
        return False

    def pools(self) -> list:
        return dj.engine_pools(self("info", "--format", "{{json .DefaultAddressPools}}").stdout)

    def running(self) -> list[str]:
        return sorted(self("ps", "--format", "{{.Names}}").stdout.split())

    def networks(self) -> list[dict]:
        ids = self("network", "ls", "-q").stdout.split()
        if not ids:
            return []
        # A network removed between the two calls fails the inspect; the others are still listed.
        text = self("network", "inspect", *ids).stdout.strip()
        try:
            value = json.loads(text) if text else []
        except ValueError:
            raise HostError("`docker network inspect` gave no JSON: check the engine") from None
        return value if isinstance(value, list) else []

    def docker0(self) -> str:
        """docker0's address, for the `bip` pin: only the engine's own docker0 (an engine
        started with `--bridge` takes no `bip`). `ip` is the truth: a fresh engine's bridge
        IPAM has a Subnet but no Gateway."""
        name = self("network", "inspect", "bridge", "--format",
                    '{{index .Options "com.docker.network.bridge.name"}}')
        return docker0_address() if name.returncode == 0 and name.stdout.strip() == "docker0" \
            else ""


def docker0_address() -> str:
    """docker0's IPv4 address as `ip` shows it (a.b.c.d/n), "" when it has none."""
    fields = _run(["ip", "-4", "-o", "addr", "show", "dev", "docker0"]).stdout.split()
    return fields[fields.index("inet") + 1] if "inet" in fields[:-1] else ""


def as_root(inputs: Inputs, verb: str) -> None:
    """Go on as root: daemon.json, its backups and the restart need it. Not root, the same step
    runs again under passwordless `sudo -n`, its inputs on its command line (they hold no
    secret)."""
    if os.geteuid() == 0:
        return
    try:
        allowed = _run(["sudo", "-n", "true"], timeout=30).returncode == 0
    except (OSError, HostError):
        allowed = False
    if not allowed:
        raise HostError("this needs root for docker.daemon_json and the restart: run as root "
                        "or allow passwordless sudo")
    code = str(Path(__file__).resolve().parent.parent)
    values = json.dumps(dataclasses.asdict(inputs), sort_keys=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvp("sudo", ["sudo", "-n", "env", f"PYTHONPATH={code}", f"{INPUTS_VAR}={values}",
                       sys.executable, "-m", "hostside", MODULE, verb])


def restart_how(inputs: Inputs) -> str:
    if inputs.restart_command:
        return f"'{inputs.restart_command}'"
    try:
        return dockerd_restart.plan()
    except (HostError, OSError) as exc:
        raise HostError(f"no way to restart the engine here: {exc}") from None


def refuse_to_stop(docker: Docker, inputs: Inputs) -> None:
    running = docker.running()
    if running and not inputs.allow_restart_with_running_containers:
        raise HostError(f"containers are running ({','.join(running)}): a restart would stop "
                        "them; stop them or set docker.allow_restart_with_running_containers")


def restart_engine(docker: Docker, inputs: Inputs) -> str | None:
    """Restart the engine and wait for it; None, or why it failed (the command itself, or no
    answer after it)."""
    if inputs.restart_command:
        proc = subprocess.run(["bash", "-c", inputs.restart_command], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              errors="replace")
        if proc.returncode != 0:
            last = (proc.stdout.strip().splitlines() or [""])[-1]
            return f"'{inputs.restart_command}' failed (exit {proc.returncode}): {last}"
    else:
        try:
            log(MODULE, dockerd_restart.restart())
        except (HostError, OSError) as exc:
            return str(exc)
    if not docker.wait(READY_TIMEOUT):
        return f"the engine did not answer within {READY_TIMEOUT}s of its restart"
    return None


class Proof:
    """Networks created from the pools (then removed) to prove they hand out subnets."""

    def __init__(self, docker: Docker) -> None:
        self.docker = docker
        self.tag = f"{PROOF_PREFIX}-{os.getpid()}-"

    def run(self, count: int) -> tuple[str, str]:
        """The first and the last network's subnets."""
        log(MODULE, f"proving the pools with {count} networks")
        for i in range(1, count + 1):
            made = self.docker("network", "create", f"{self.tag}{i}")
            if made.returncode != 0:
                raise HostError(
                    f"network {i} of {count} could not be created ({made.stderr.strip()}): the "
                    "pools are exhausted or clash; free networks or enlarge "
                    f"{dj.POOLS_CONFIG}")
        subnet = "{{(index .IPAM.Config 0).Subnet}}"
        first = self.docker("network", "inspect", f"{self.tag}1", "--format", subnet)
        last = self.docker("network", "inspect", f"{self.tag}{count}", "--format", subnet)
        log(MODULE, f"pools proven: first {first.stdout.strip()}, last {last.stdout.strip()}")
        return first.stdout.strip(), last.stdout.strip()

    def remove(self) -> None:
        names = self.docker("network", "ls", "--filter", f"name={self.tag}", "--format",
                            "{{.Name}}").stdout.split()
        ours = [n for n in names if n.startswith(self.tag)]
        if ours:
            self.docker("network", "rm", *ours)


def _file_errors(exc: OSError) -> HostError:
    # A file step the checks did not foresee (a full disk, a read-only /etc): one line.
    where = f" ({exc.filename})" if exc.filename else ""
    return HostError(f"{exc.strerror or exc}{where}")


@verb(Inputs)
def create(inputs: Inputs) -> None:
    as_root(inputs, "create")
    if type(inputs.proof_networks) is not int or inputs.proof_networks < 0:
        raise HostError(f"docker.proof_networks={inputs.proof_networks!r} is not a number")
    pools = dj.parse_pools(inputs.address_pools, inputs.proof_networks)
    docker = Docker(inputs.docker_host)
    docker.require()
    path = inputs.daemon_json
    current = dj.read_config(path)
    p = dj.plan(current, dj.read_record(dj.record_path(path)), pools, docker.pools(),
                docker.docker0())
    how = _may_restart(inputs, docker, pools) if p.need_restart else ""
    change = dj.Change(path)
    try:
        done = _merge_restart_prove(inputs, p, change, docker, pools, how,
                                    file_existed=current is not None)
    except OSError as exc:
        _roll_back(change, docker, inputs)
        raise _file_errors(exc) from None
    except BaseException:
        _roll_back(change, docker, inputs)
        raise
    emit({
        "changed": p.need_write, "restarted": done["restarted"], "original": p.original,
        "backup": done["backup"], "record": done["record"], "daemon_json": path,
        "address_pools": pools, "first_subnet": done["first_subnet"],
        "last_subnet": done["last_subnet"], "proof_networks": inputs.proof_networks,
    })


def _may_restart(inputs: Inputs, docker: Docker, pools: list[dict]) -> str:
    """Before a restart: the pools overlap no host route and no Docker network (checked only
    while they are not in use), and no container would be stopped (unless allowed). How the
    engine will be restarted."""
    routes = _run(["ip", "-4", "route", "show", "table", "all"]).stdout
    found = dj.conflicts(pools, routes, docker.networks())
    if found:
        raise HostError("; ".join(found) + f": choose another base in {dj.POOLS_CONFIG} or "
                        "remove what overlaps")
    how = restart_how(inputs)
    refuse_to_stop(docker, inputs)
    return how


def _merge_restart_prove(inputs: Inputs, p: dj.Plan, change: dj.Change, docker: Docker,
                         pools: list[dict], how: str, *, file_existed: bool) -> dict:
    """The plan carried out: the merged file installed (its backup kept), the engine restarted
    on it, the pools proven, the record written. What the outputs report of it."""
    backup = p.backup
    if p.need_write:
        run_backup = dj.install(change, p.merged, pools=pools, dockerd=shutil.which("dockerd"),
                                file_existed=file_existed)
        backup = p.backup_to_restore(run_backup)
    if p.need_restart:
        _restart_on(docker, inputs, pools, how)
    first, last = _prove(docker, inputs.proof_networks, pools)
    record = dj.record_path(inputs.daemon_json) if p.from_record else ""
    if p.need_write:
        try:
            record = dj.write_record(inputs.daemon_json, p, backup, pools)
        except OSError:
            raise HostError(f"cannot write the record {dj.record_path(inputs.daemon_json)}; "
                            "original restored") from None
    return {"restarted": p.need_restart, "backup": backup, "record": record,
            "first_subnet": first, "last_subnet": last}


def _restart_on(docker: Docker, inputs: Inputs, pools: list[dict], how: str) -> None:
    """The engine restarted on the merged file, and using exactly its pools."""
    log(MODULE, f"restarting the engine ({how})")
    why = restart_engine(docker, inputs)
    if why:
        raise HostError(f"{why} with the merged config; original restored (see the engine log)")
    got = docker.pools()
    if got != pools:
        raise HostError(f"after the restart the engine reports default-address-pools "
                        f"{dj.compact(got)}, not {dj.compact(pools)}: is docker.daemon_json the "
                        "file this engine reads? original restored")


def _prove(docker: Docker, networks: int, pools: list[dict]) -> tuple[str, str]:
    """The first and last subnets of `networks` proof networks, each inside the pools."""
    if networks <= 0:
        return "", ""
    proof = Proof(docker)
    try:
        first, last = proof.run(networks)
    finally:
        proof.remove()
    for subnet in (first, last):
        if not dj.in_pools(subnet, pools):
            raise HostError(f"proof network got {subnet}, which is not a /size subnet of "
                            f"{dj.POOLS_CONFIG} {dj.compact(pools)}; original restored")
    return first, last


def _roll_back(change: dj.Change, docker: Docker, inputs: Inputs) -> None:
    """What was there when this run started (its backup, or no file), and a restart."""
    try:
        restored = change.put_back()
    except OSError as exc:
        log(MODULE, f"could not put the original back ({exc}): copy it from the newest backup "
            f"in {os.path.dirname(change.daemon_json)}")
        return
    if not restored:
        return
    log(MODULE, f"restored the original {change.daemon_json}")
    why = restart_engine(docker, inputs)
    if why:
        log(MODULE, f"the engine did not come back after restoring {change.daemon_json} "
            f"({why}): restart it by hand")


@verb(Inputs)
def delete(inputs: Inputs) -> None:
    as_root(inputs, "delete")
    pools = dj.lenient_pools(inputs.address_pools)
    path = inputs.daemon_json
    record_file = dj.record_path(path)
    record = None
    if os.path.isfile(record_file):
        record = dj.parse_delete_record(dj.read_text(record_file) or "", record_file,
                                        os.path.dirname(path))
    try:
        current_text = dj.read_text(path)
    except OSError as exc:
        raise HostError(f"cannot read docker.daemon_json={path} ({exc.strerror}): run as root or "
                        "allow sudo -n") from None
    undo = dj.unplan(pools, record, path, current_text)
    report = {"restored": False, "restarted": False, "daemon_json": path,
              "original": undo.original}
    if undo.action == "none":
        log(MODULE, undo.why)
        emit(report)
        return

    docker = Docker(inputs.docker_host)
    docker.require()
    how = restart_how(inputs)
    refuse_to_stop(docker, inputs)
    try:
        dj.undo(path, undo.original, undo.backup)
    except OSError as exc:
        raise _file_errors(exc) from None
    log(MODULE, f"restarting the engine ({how})")

    def restart() -> None:
        why = restart_engine(docker, inputs)
        if why:
            raise HostError(f"{why} after restoring {path}: restart the engine by hand (see "
                            "the engine log)")

    restart()
    # docker0 back where it was before benchstack. The engine keeps the bridge subnet it last
    # used, so a docker0 that moved (a create from before the bip pin, or a hand restart) stays
    # moved unless one restart pins it back; the restored config then keeps it there.
    now = docker0_address()
    if undo.docker0 and now != undo.docker0:
        log(MODULE, f"docker0 is at {now}, not {undo.docker0} as before benchstack: pinning "
            "it back")
        change = dj.Change(path)
        with tempfile.TemporaryDirectory(prefix="benchstack-pin-") as scratch:
            try:
                dj.pin(change, undo.docker0, scratch)
                restart()
            finally:
                # The pin is for one restart: the restored config goes back even if it failed.
                change.put_back()
        restart()
        now = docker0_address()
        if now != undo.docker0:
            raise HostError(f"docker0 is at {now} after restoring {path}, not {undo.docker0}: "
                            f"set \"bip\": \"{undo.docker0}\" by hand")
    emit({**report, "restored": True, "restarted": True})
