"""DockerDaemonConfig on the host: merge `default-address-pools` into the engine's daemon.json so
one host can hold many concurrent /24 trial networks (seed: "Prepare Docker network pools for
high-concurrency runs", "Docker network address-pool exhaustion").

create: check the pools overlap no host route and no Docker network; refuse a key that the engine's
own command line sets too (`--default-address-pool`: dockerd refuses a setting given both ways, so
the restart would fail), and pin no `bip` where `--bip` or `--bridge` places docker0 already;
refuse to restart while containers run (unless allowed); back up daemon.json (UTC timestamp);
validate the merged file; install it; restart; check the engine uses the pools; prove them by
creating `proof_networks` networks. Any failure after the install puts the original back and the
engine answering on it (dockerd_restart.Restarts.recover: an engine this step stopped is never left
stopped), or fails naming the command that starts it again: the host is left as it was found. A
second run with the same pools writes nothing and does not restart. The merged file also pins `bip`
to docker0's current address when it sets neither `bip` nor `bridge` (daemon_json.merge), and the
record beside daemon.json keeps the state from before benchstack (which file, its backup, docker0's
address) across re-runs and pool changes.

delete: undo what create did, from that record (so it needs only the create's inputs), and
restart under the same rule: a restart that fails puts daemon.json and the record back as they
were before the delete, and the engine answering on them. Where daemon.json no longer holds
these pools (restored already, changed since) or the record names other pools (a later run
replaced these), nothing is done: a second delete, or the delete of a replaced resource, is a
no-op. docker0 is then moved back where it was before benchstack if it moved.

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
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from . import daemon_json as dj
from . import dockerd_restart
from .step import INPUTS_VAR, HostError, emit, log, verb
from .step import run as _run

MODULE = "daemon_config"
PROOF_PREFIX = "benchstack-pool-proof"


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

    def pools(self) -> list:
        return dj.engine_pools(self("info", "--format", "{{json .DefaultAddressPools}}").stdout)

    def running(self) -> list[str]:
        return sorted(self("ps", "--format", "{{.Names}}").stdout.split())

    def stop_timeouts(self) -> list[int]:
        """Each running container's stop timeout (the engine's default where it sets none)."""
        ids = self("ps", "-q").stdout.split()
        if not ids:
            return []
        got = self("inspect", "--format", "{{.Config.StopTimeout}}", *ids).stdout.split()
        return [int(t) if t.isdigit() else dockerd_restart.CONTAINER_STOP_S for t in got]

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


def restarts_for(docker: Docker, inputs: Inputs) -> dockerd_restart.Restarts:
    """How this step restarts the engine, and how long a stopping engine gets: as long as its
    own shutdown may take (its running containers' stop timeouts, its `shutdown-timeout`)."""
    try:
        current = dj.read_config(inputs.daemon_json) or {}
    except HostError:
        current = {}
    shutdown = current.get("shutdown-timeout")
    bound = dockerd_restart.stop_bound(docker.stop_timeouts(),
                                       shutdown if type(shutdown) is int else None)
    try:
        return dockerd_restart.Restarts(inputs.restart_command, inputs.docker_host,
                                        docker.answers, bound)
    except (HostError, OSError) as exc:
        raise HostError(f"no way to restart the engine here: {exc}") from None


def refuse_to_stop(docker: Docker, inputs: Inputs) -> None:
    running = docker.running()
    if running and not inputs.allow_restart_with_running_containers:
        raise HostError(f"containers are running ({','.join(running)}): a restart would stop "
                        "them; stop them or set docker.allow_restart_with_running_containers")


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


def _failure(exc: Exception) -> HostError:
    return _file_errors(exc) if isinstance(exc, OSError) else HostError(str(exc))


def _with(failure: HostError, trouble: str | None) -> HostError:
    """The step's failure, and what putting the host back could not do: one line."""
    return HostError(f"{failure}; {trouble}") if trouble else failure


@dataclass(frozen=True)
class Creation:
    """What one create found, before it changes anything."""

    inputs: Inputs
    pools: list
    docker: Docker
    plan: dj.Plan
    file_existed: bool
    # None: the engine already runs on these pools.
    restarts: dockerd_restart.Restarts | None


def _prepare(inputs: Inputs) -> Creation:
    """Every check that can refuse the create, before anything on the host changes."""
    if type(inputs.proof_networks) is not int or inputs.proof_networks < 0:
        raise HostError(f"docker.proof_networks={inputs.proof_networks!r} is not a number")
    pools = dj.parse_pools(inputs.address_pools, inputs.proof_networks)
    docker = Docker(inputs.docker_host)
    docker.require()
    current = dj.read_config(inputs.daemon_json)
    engine = _engine_command_line(inputs.docker_host)
    # A --bip or --bridge on its command line places docker0 already: nothing to pin.
    docker0 = "" if engine and dj.flags_setting(engine.argv, ["bip"]) else docker.docker0()
    p = dj.plan(current, dj.read_record(dj.record_path(inputs.daemon_json)), pools,
                docker.pools(), docker0)
    if p.need_write and engine:
        _refuse_what_its_flags_set(engine, p.merged, current or {}, inputs.daemon_json)
    restarts = None
    if p.need_restart:
        # Overlaps with host routes and Docker networks (only while the pools are not in use).
        routes = _run(["ip", "-4", "route", "show", "table", "all"]).stdout
        found = dj.conflicts(pools, routes, docker.networks())
        if found:
            raise HostError("; ".join(found) + f": choose another base in {dj.POOLS_CONFIG} or "
                            "remove what overlaps")
        restarts = restarts_for(docker, inputs)
        refuse_to_stop(docker, inputs)
    return Creation(inputs, pools, docker, p, current is not None, restarts)


def _engine_command_line(docker_host: str) -> dockerd_restart.Dockerd | None:
    """The dockerd serving the step's socket, where this host's /proc shows it."""
    for pid in dockerd_restart.serving_pids(docker_host):
        try:
            return dockerd_restart.Dockerd.read(pid)
        except OSError:  # gone meanwhile: the restart's own checks name it
            return None
    return None


def _refuse_what_its_flags_set(engine: dockerd_restart.Dockerd, merged: dict, current: dict,
                               daemon_json: str) -> None:
    """A key this create would write that the engine's command line also sets: the engine would
    refuse to start on the merged file (now, or at its next restart), so nothing is changed."""
    written = [key for key, value in merged.items() if current.get(key) != value]
    clashes = dj.flags_setting(engine.argv, written)
    if clashes:
        key, flag = next(iter(clashes.items()))
        raise HostError(f"dockerd (pid {engine.pid}) is started with {flag}, and {daemon_json} "
                        f"would set {key} too: dockerd refuses a setting given both ways; "
                        f"remove {flag} from how the engine is started")


@verb(Inputs)
def create(inputs: Inputs) -> None:
    as_root(inputs, "create")
    creation = _prepare(inputs)
    change = dj.Change(inputs.daemon_json)
    try:
        outputs = _apply(creation, change)
    except (OSError, HostError) as exc:
        raise _with(_failure(exc), _roll_back(change, creation.restarts)) from None
    except BaseException:
        _roll_back(change, creation.restarts)
        raise
    emit(outputs)


def _apply(c: Creation, change: dj.Change) -> dict:
    """Install, restart, prove, record: any failure is rolled back by the caller."""
    p, pools, path = c.plan, c.pools, c.inputs.daemon_json
    backup = p.backup
    if p.need_write:
        run_backup = dj.install(change, p.merged, pools=pools, dockerd=shutil.which("dockerd"),
                                file_existed=c.file_existed)
        backup = p.backup_to_restore(run_backup)
    if c.restarts is not None:
        _restart_on(c.docker, c.restarts, pools)
    first, last = _prove(c.docker, c.inputs.proof_networks, pools)
    record = dj.record_path(path) if p.from_record else ""
    if p.need_write:
        try:
            record = dj.write_record(path, p, backup, pools)
        except OSError:
            raise HostError(f"cannot write the record {dj.record_path(path)}; original "
                            "restored") from None
    return {
        "changed": p.need_write, "restarted": c.restarts is not None, "original": p.original,
        "backup": backup, "record": record, "daemon_json": path, "address_pools": pools,
        "first_subnet": first, "last_subnet": last, "proof_networks": c.inputs.proof_networks,
    }


def _restart_on(docker: Docker, restarts: dockerd_restart.Restarts, pools: list) -> None:
    """The engine restarted on the merged config, and using its pools."""
    log(MODULE, f"restarting the engine ({restarts.how})")
    why = restarts.restart()
    if why:
        raise HostError(f"{why} with the merged config; original restored (see the engine log)")
    got = docker.pools()
    if got != pools:
        raise HostError(f"after the restart the engine reports default-address-pools "
                        f"{dj.compact(got)}, not {dj.compact(pools)}: is docker.daemon_json the "
                        "file this engine reads? original restored")


def _prove(docker: Docker, count: int, pools: list) -> tuple[str, str]:
    """The first and the last proof network's subnets ("" without proof networks)."""
    if count <= 0:
        return "", ""
    proof = Proof(docker)
    try:
        first, last = proof.run(count)
    finally:
        proof.remove()
    for subnet in (first, last):
        if not dj.in_pools(subnet, pools):
            raise HostError(f"proof network got {subnet}, which is not a /size subnet of "
                            f"{dj.POOLS_CONFIG} {dj.compact(pools)}; original restored")
    return first, last


def _roll_back(change: dj.Change, restarts: dockerd_restart.Restarts | None) -> str | None:
    """What was there when this run started (its backup, or no file), and the engine answering
    on it; what could not be done, in one line, or None."""
    trouble = []
    try:
        restored = change.put_back()
    except OSError as exc:
        restored = False
        trouble.append(f"could not put the original back ({exc.strerror}): copy it from the "
                       f"newest backup in {os.path.dirname(change.daemon_json)}")
    if restored:
        log(MODULE, f"restored the original {change.daemon_json}")
    if restarts is not None:
        why = restarts.recover(config_changed=restored)
        if why:
            trouble.append(why)
    return "; ".join(trouble) or None


def _kept(path: str, scratch: str, name: str) -> dj.Change:
    """`path` as it is now (a copy in `scratch`, or "absent"), for Change.put_back."""
    if not os.path.lexists(path):
        return dj.Change(path, saved="")
    copy = os.path.join(scratch, name)
    dj.copy_exact(path, copy)
    return dj.Change(path, saved=copy)


def _put_back(before: list[dj.Change], restarts: dockerd_restart.Restarts) -> str | None:
    """The files as they were before this delete, and the engine answering on them."""
    trouble = []
    for change in before:
        try:
            change.put_back()
        except OSError as exc:
            trouble.append(f"could not put {change.daemon_json} back ({exc.strerror})")
    if not trouble:
        log(MODULE, "put back the config as it was before this delete")
    why = restarts.recover()
    return "; ".join([*trouble, *([why] if why else [])]) or None


def _unplan(inputs: Inputs) -> dj.Undo:
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
    return dj.unplan(pools, record, path, current_text)


@verb(Inputs)
def delete(inputs: Inputs) -> None:
    as_root(inputs, "delete")
    undo = _unplan(inputs)
    path = inputs.daemon_json
    report = {"restored": False, "restarted": False, "daemon_json": path,
              "original": undo.original}
    if undo.action == "none":
        log(MODULE, undo.why)
        emit(report)
        return
    docker = Docker(inputs.docker_host)
    docker.require()
    restarts = restarts_for(docker, inputs)
    refuse_to_stop(docker, inputs)
    with tempfile.TemporaryDirectory(prefix="benchstack-undo-") as scratch:
        before = [_kept(path, scratch, "daemon.json"),
                  _kept(dj.record_path(path), scratch, "record")]
        try:
            _undo_and_restart(restarts, path, undo)
        except (OSError, HostError) as exc:
            raise _with(_failure(exc), _put_back(before, restarts)) from None
        except BaseException:
            _put_back(before, restarts)
            raise
    now = docker0_address()
    if undo.docker0 and now != undo.docker0:
        raise HostError(f"docker0 is at {now} after restoring {path}, not {undo.docker0}: "
                        f"set \"bip\": \"{undo.docker0}\" by hand")
    emit({**report, "restored": True, "restarted": True})


def _restart_after(restarts: dockerd_restart.Restarts, path: str) -> None:
    why = restarts.restart()
    if why:
        raise HostError(f"{why} after restoring {path}; put back as it was before this delete "
                        "(see the engine log)")


def _undo_and_restart(restarts: dockerd_restart.Restarts, path: str, undo: dj.Undo) -> None:
    dj.undo(path, undo.original, undo.backup)
    log(MODULE, f"restarting the engine ({restarts.how})")
    _restart_after(restarts, path)
    # docker0 back where it was before benchstack. The engine keeps the bridge subnet it last
    # used, so a docker0 that moved (a create from before the bip pin, or a hand restart) stays
    # moved unless one restart pins it back; the restored config then keeps it there.
    now = docker0_address()
    if not undo.docker0 or now == undo.docker0:
        return
    log(MODULE, f"docker0 is at {now}, not {undo.docker0} as before benchstack: pinning it back")
    change = dj.Change(path)
    with tempfile.TemporaryDirectory(prefix="benchstack-pin-") as scratch:
        try:
            dj.pin(change, undo.docker0, scratch)
            _restart_after(restarts, path)
        finally:
            # The pin is for one restart: the restored config goes back even if it failed.
            change.put_back()
    _restart_after(restarts, path)
