"""The daemon.json side of DockerDaemonConfig (hostside/daemon_config.py runs it, as root).

What is pure logic: the pools' checks (IPv4 CIDR arithmetic by `ipaddress`), their overlaps with
host routes and Docker networks, the merge that keeps every other key, docker0's `bip` pin,
which original destroy restores, and what the delete does. What touches files: reading
daemon.json and the record, the validated install with its backup, putting the original back,
the pin of one restart. The engine side (docker, ip, the restart, the proof networks) is
daemon_config.py's.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .step import HostError, log

POOLS_KEY = "default-address-pools"
POOLS_SHAPE = 'a non-empty list of {"base": "a.b.c.d/n", "size": n}'
# The config key the user changes, named in every reason about the pools.
POOLS_CONFIG = "docker.address_pools"
# `ip route show table all` lines of these types are the host's own addresses, not routes.
ROUTE_SKIP = ("local ", "broadcast ", "multicast ", "anycast ")
ROUTE_TYPES = ("unicast", "unreachable", "blackhole", "prohibit", "throw")
MODULE = "daemon_config"


# --- addresses --------------------------------------------------------------------------------


def ipv4_network(text: str, *, bare: bool = True) -> ipaddress.IPv4Network | None:
    """The IPv4 network `a.b.c.d/n` names (host bits allowed; with `bare`, an address alone is
    a /32); None for anything else: IPv6, names, `default`, a netmask after the slash."""
    _, slash, length = text.partition("/")
    if (slash and not (length.isascii() and length.isdigit())) or (not slash and not bare):
        return None
    try:
        return ipaddress.IPv4Network(text, strict=False)
    except ValueError:
        return None


# --- pools ------------------------------------------------------------------------------------


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def parse_pools(value: Any, proof_networks: int) -> list[dict]:
    """The pools to install, checked: IPv4 CIDR bases without host bits, sizes that fit, room
    for the proof networks. Returns them as `[{"base", "size"}]`."""
    bad_shape = HostError(f"{POOLS_CONFIG} must be {POOLS_SHAPE}, got: {compact(value)}")
    if not isinstance(value, list) or not value:
        raise bad_shape
    for pool in value:
        if not (isinstance(pool, dict) and set(pool) == {"base", "size"}
                and isinstance(pool["base"], str) and type(pool["size"]) is int):
            raise bad_shape
    capacity = 0
    for pool in value:
        base, size = pool["base"], pool["size"]
        network = ipv4_network(base, bare=False)
        if network is None:
            raise HostError(f"{POOLS_CONFIG} base '{base}' is not an IPv4 CIDR "
                            "(IPv6 pools are not supported here)")
        if not network.prefixlen <= size <= 30:
            raise HostError(f"{POOLS_CONFIG} size {size} does not fit base {base}: "
                            f"use a size between /{network.prefixlen} and /30")
        if str(network.network_address) != base.partition("/")[0]:
            raise HostError(f"{POOLS_CONFIG} base {base} has host bits set: use {network}")
        capacity += 1 << (size - network.prefixlen)
    if capacity < proof_networks:
        raise HostError(f"{POOLS_CONFIG} yields only {capacity} networks, fewer than "
                        f"docker.proof_networks={proof_networks}: use a larger base or a "
                        "smaller size")
    return [{"base": p["base"], "size": p["size"]} for p in value]


def as_pools(value: Any) -> Any:
    """A pools value reduced to `[{"base", "size"}]` for comparison; anything that is not a list
    of objects stays as it is, so it equals no real pools."""
    if value is None or value is False:
        return []
    if isinstance(value, list) and all(isinstance(p, dict) for p in value):
        return [{"base": p.get("base"), "size": p.get("size")} for p in value]
    return value


def lenient_pools(value: Any) -> list[dict]:
    """The pools as the delete reads them: any list of objects (it compares, never installs)."""
    if not isinstance(value, list) or not all(isinstance(p, dict) for p in value):
        raise HostError(f"{POOLS_CONFIG} is not a list of {{base, size}}: {compact(value)}")
    return as_pools(value)


def pools_in(config: dict) -> Any:
    """The pools a daemon.json holds, comparable with `parse_pools`' result."""
    return as_pools(config.get(POOLS_KEY))


def engine_pools(info: str) -> list:
    """The pools the engine uses, from `docker info --format '{{json .DefaultAddressPools}}'`."""
    try:
        value = json.loads(info)
    except ValueError:
        return []
    if not isinstance(value, list) or not all(isinstance(p, dict) for p in value):
        return []
    return [{"base": p.get("Base"), "size": p.get("Size")} for p in value]


def in_pools(subnet: str, pools: Sequence[dict]) -> bool:
    """Whether `subnet` is one of the /size networks the pools hand out."""
    network = ipv4_network(subnet, bare=False)
    if network is None:
        return False
    for pool in pools:
        base = ipv4_network(str(pool["base"]))
        if base is not None and network.prefixlen == pool["size"] and network.subnet_of(base):
            return True
    return False


def conflicts(pools: Sequence[dict], routes: str, networks: Sequence[dict]) -> list[str]:
    """Every overlap of a pool with a host route (`ip -4 route show table all`) or a Docker
    network (`docker network inspect` of all of them)."""
    bases = [(p["base"], n) for p in pools for n in [ipv4_network(p["base"])] if n is not None]
    found = []
    for line in routes.splitlines():
        fields = line.split()
        if not fields or line.startswith(ROUTE_SKIP):
            continue
        dest = fields[1] if fields[0] in ROUTE_TYPES and len(fields) > 1 else fields[0]
        route = ipv4_network(dest)
        if route is None:  # `default`, or not IPv4
            continue
        found += [f"pool {base} overlaps host route '{line.rstrip()}'"
                  for base, pool in bases if pool.overlaps(route)]
    for net in networks:
        for config in (net.get("IPAM") or {}).get("Config") or []:
            subnet = config.get("Subnet") or ""
            used = ipv4_network(subnet)
            if used is None:
                continue
            found += [f"pool {base} overlaps Docker network '{net.get('Name', '')}' ({subnet})"
                      for base, pool in bases if pool.overlaps(used)]
    return found


# --- the merge, the record, which original --------------------------------------------------


def merge(current: dict, pools: list[dict], docker0: str) -> dict:
    """`current` with the pools set and every other key kept. Without `bip`, a restart with new
    pools moves docker0 into the first pool subnet, and the engine keeps it there even after the
    pools are gone: docker0 is pinned where it is now, unless the config already places it
    (`bip`) or names another bridge (`bridge`, which takes no `bip`)."""
    merged = dict(current)
    merged[POOLS_KEY] = pools
    if docker0 and "bip" not in current and "bridge" not in current:
        merged["bip"] = docker0
    return merged


# The flags of dockerd's command line that set what a daemon.json key sets: dockerd refuses to
# start when a setting is given both ways (and takes no `bip` beside a `bridge`).
FLAGS_OF_KEY = {POOLS_KEY: ("--default-address-pool",), "bip": ("--bip", "--bridge", "-b")}


def flags_setting(argv: Sequence[str], keys: Sequence[str]) -> dict[str, str]:
    """key -> the flag of the command line `argv` (dockerd's, argv[0] first) that sets it too."""
    given = {arg.split("=", 1)[0] for arg in argv[1:] if arg.startswith("-")}
    return {key: flag for key in keys for flag in FLAGS_OF_KEY.get(key, ()) if flag in given}


def render(config: dict) -> str:
    """daemon.json text as jq writes it: two-space indents, a final newline."""
    return json.dumps(config, indent=2, ensure_ascii=False) + "\n"


@dataclass(frozen=True)
class Record:
    """What destroy restores, kept on the host: the state from before benchstack."""

    original: str  # "file" | "absent"
    backup: str
    pools: Any
    docker0: str


def parse_record(text: str) -> Record | None:
    """The create's view of the record: None unless it is a record it can use."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict) or value.get("original") not in ("file", "absent"):
        return None
    return Record(original=value["original"], backup=str(value.get("backup") or ""),
                  pools=as_pools(value.get("pools") or []),
                  docker0=str(value.get("docker0") or ""))


def record_json(original: str, backup: str, daemon_json: str, pools: list[dict],
                docker0: str) -> str:
    return render({"original": original, "backup": backup, "daemon_json": daemon_json,
                   "pools": pools, "docker0": docker0})


@dataclass(frozen=True)
class Plan:
    need_write: bool
    need_restart: bool
    # The state before benchstack, which destroy restores: "file" | "absent" | "unchanged".
    original: str
    backup: str  # the original's backup as the record names it ("" until this run makes one)
    from_record: bool
    docker0: str  # docker0's address from before benchstack, for the record
    merged: dict

    def backup_to_restore(self, run_backup: str) -> str:
        """The backup destroy restores, once this run backed up the file as `run_backup`: the
        record's, or at benchstack's first change, this run's."""
        return run_backup if not self.from_record and self.original == "file" else self.backup


def plan(current: dict | None, record: Record | None, pools: list[dict],
         running_pools: list, docker0: str) -> Plan:
    """What this run does. The pre-benchstack original comes from the record while the file
    still holds the pools the record says benchstack set (a re-run, or a run that replaces
    them); otherwise the current file is the original."""
    config = current if current is not None else {}
    file_pools = pools_in(config)
    original = "file" if current is not None else "absent"
    backup = ""
    from_record = record is not None and record.pools == file_pools
    if record is not None and from_record:
        original, backup, docker0_before = record.original, record.backup, record.docker0
    else:
        docker0_before = docker0
    merged = merge(config, pools, docker0)
    if file_pools != pools:
        return Plan(True, True, original, backup, from_record, docker0_before, merged)
    return Plan(need_write=False, need_restart=running_pools != pools,
                original=original if from_record else "unchanged", backup=backup,
                from_record=from_record, docker0=docker0_before, merged=merged)


def backup_path(daemon_json: str, backup_dir: str, now: float,
                exists: Callable[[str], bool] = os.path.lexists) -> str:
    """`<dir>/<name>.backup-<UTC timestamp>`, then `.1`, `.2`... when that is taken; `now` in
    seconds since the epoch."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    base = os.path.join(backup_dir, f"{os.path.basename(daemon_json)}.backup-{stamp}")
    path, n = base, 1
    while exists(path):
        path, n = f"{base}.{n}", n + 1
    return path


@dataclass(frozen=True)
class Undo:
    """What the delete does: "none" (with why, for the log) or "restore"."""

    action: str
    why: str
    original: str
    backup: str
    docker0: str


def parse_delete_record(text: str, record_file: str, backup_dir: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict) or not isinstance(value.get("pools") or [], list):
        raise HostError(f"the record {record_file} is not valid JSON: restore "
                        f"docker.daemon_json from a backup in {backup_dir} by hand")
    return value


def unplan(pools: list[dict], record: dict | None, daemon_json: str,
           current_text: str | None) -> Undo:
    """Whether the delete restores. No record: the pools predate benchstack; a record that names
    other pools (a later run replaced these), a file gone or holding other pools: no-op."""
    if record is None:
        return Undo("none", "the pools predate benchstack: nothing to undo", "unchanged", "", "")
    original = str(record.get("original") or "")
    if as_pools(record.get("pools") or []) != pools:
        return Undo("none", "the record names other pools (a later run replaced these): "
                    "nothing to undo", original, "", "")
    backup = str(record.get("backup") or "")
    docker0 = str(record.get("docker0") or "")
    if original not in ("file", "absent"):
        raise HostError(f"the record's original '{original}' must be file or absent: restore "
                        f"{daemon_json} by hand (backup: {backup or 'none'})")
    if current_text is None:
        return Undo("none", f"{daemon_json} is gone: nothing to undo", original, backup, docker0)
    current = load_object(current_text)
    if current is None:
        raise HostError(f"docker.daemon_json={daemon_json} is not a JSON object any more: fix "
                        f"it by hand (backup: {backup or 'none'})")
    if pools_in(current) != pools:
        return Undo("none", f"{daemon_json} does not hold the pools benchstack set: left alone",
                    original, backup, docker0)
    return Undo("restore", "", original, backup, docker0)


def without_pools(current: dict, original: str) -> dict | None:
    """The config with benchstack's keys dropped (the backup being gone); None: remove the
    file. With no daemon.json before, a `bip` can only be the docker0 pin the create added."""
    rest = {k: v for k, v in current.items() if k != POOLS_KEY}
    if original == "absent":
        rest.pop("bip", None)
        if not rest:
            return None
    return rest


def load_object(text: str) -> dict | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


# --- files ------------------------------------------------------------------------------------


def record_path(daemon_json: str) -> str:
    """Where the record lives: beside daemon.json, so the delete needs no create outputs."""
    return os.path.join(os.path.dirname(daemon_json), os.path.basename(daemon_json)
                        + ".benchstack.json")


def read_text(path: str) -> str | None:
    """A file's text; None when there is no file."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return None


def read_config(path: str) -> dict | None:
    """daemon.json as a dict; None when there is none."""
    try:
        text = read_text(path)
    except OSError as exc:
        raise HostError(f"cannot read docker.daemon_json={path} ({exc.strerror}): run as root "
                        "or allow sudo -n") from None
    if text is None:
        return None
    current = load_object(text)
    if current is None:
        try:
            json.loads(text)
            why = "not an object"
        except ValueError as exc:
            why = str(exc)
        raise HostError(f"docker.daemon_json={path} is not a JSON object ({why}): fix or move "
                        "that file, then re-run")
    return current


def write_record(daemon_json: str, p: Plan, backup: str, pools: list[dict]) -> str:
    """The record of what destroy restores, beside daemon.json; its path."""
    path = record_path(daemon_json)
    write_file(path, record_json(p.original, backup, daemon_json, pools, p.docker0))
    return path


def read_record(path: str) -> Record | None:
    text = read_text(path) if os.path.isfile(path) else None
    return parse_record(text) if text is not None else None


def _temp_beside(path: str) -> str:
    # Next to the target, so the final os.replace is atomic (same filesystem).
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".benchstack.",
                               dir=os.path.dirname(path) or ".")
    os.close(fd)
    return tmp


def write_file(path: str, text: str, mode: int = 0o644) -> None:
    tmp = _temp_beside(path)
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def copy_exact(src: str, dst: str) -> None:
    """`src` over `dst` byte for byte, with its mode, times and (as root) owner, atomically."""
    tmp = _temp_beside(dst)
    try:
        shutil.copy2(src, tmp)
        if os.geteuid() == 0:
            st = os.stat(src)
            os.chown(tmp, st.st_uid, st.st_gid)
        os.replace(tmp, dst)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def validate(path: str, dockerd: str | None, daemon_json: str, pools: list[dict]) -> None:
    """`dockerd --validate` on the candidate where this engine has it; else the JSON and the
    key benchstack owns."""
    if dockerd:
        try:
            help_text = subprocess.run([dockerd, "--help"], stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, timeout=60).stdout
            proc = None
            if b"--validate" in help_text:
                proc = subprocess.run([dockerd, "--validate", "--config-file", path],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      timeout=60)
        except subprocess.TimeoutExpired:
            raise HostError(f"{dockerd} --help did not answer within 60s") from None
        if proc is not None:
            if proc.returncode != 0:
                lines = proc.stdout.decode(errors="replace").strip().splitlines() or [""]
                raise HostError(f"dockerd --validate rejects the merged config ({lines[-1]}): "
                                f"fix docker.daemon_json={daemon_json}")
            return
    written = load_object(read_text(path) or "")
    if written is None or pools_in(written) != pools:
        raise HostError(f"merged config failed its JSON check: fix "
                        f"docker.daemon_json={daemon_json}")


@dataclass
class Change:
    """daemon.json as this run changed it, so that a failure can put it back: `saved` is the
    copy to put back ("" = there was no file), None while nothing was changed."""

    daemon_json: str
    saved: str | None = None

    def put_back(self) -> bool:
        """What was there before this run's change; False when nothing was changed."""
        if self.saved is None:
            return False
        if self.saved:
            copy_exact(self.saved, self.daemon_json)
        elif os.path.lexists(self.daemon_json):
            os.unlink(self.daemon_json)
        self.saved = None
        return True


def install(change: Change, merged: dict, *, pools: list[dict], dockerd: str | None,
            file_existed: bool) -> str:
    """The merged config, validated, then the current file backed up, then installed; the
    backup's path ("" when there was no file)."""
    path = change.daemon_json
    backup_dir = os.path.dirname(path)
    try:
        tmp = _temp_beside(path)
    except OSError:
        raise HostError(f"cannot write next to docker.daemon_json={path}: run as root or allow "
                        "sudo -n") from None
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(render(merged))
        os.chmod(tmp, 0o644)
        # Validate before anything on the host changes.
        validate(tmp, dockerd, path, pools)
        backup = ""
        if file_existed:
            backup = backup_path(path, backup_dir, time.time())
            try:
                copy_exact(path, backup)
            except OSError:
                raise HostError(f"cannot write the backup {backup}") from None
            log(MODULE, f"backed up {path} to {backup}")
        os.replace(tmp, path)
        change.saved = backup
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    log(MODULE, f"installed merged {path}")
    return backup


def undo(daemon_json: str, original: str, backup: str) -> None:
    """The backup put back (or benchstack's keys dropped), and the record removed: it is spent
    once the original is back (the delete puts both back where its restart fails)."""
    if original == "file" and backup and os.path.isfile(backup):
        copy_exact(backup, daemon_json)
        log(MODULE, f"restored {daemon_json} from {backup}")
    else:
        if original == "file":
            log(MODULE, f"backup '{backup}' is gone: removing only {POOLS_KEY}")
        rest = without_pools(load_object(read_text(daemon_json) or "") or {}, original)
        if rest is None:
            os.unlink(daemon_json)
            log(MODULE, f"removed {daemon_json} (there was none before)")
        else:
            write_file(daemon_json, render(rest))
            log(MODULE, f"removed {POOLS_KEY} from {daemon_json}")
    record = record_path(daemon_json)
    if os.path.lexists(record):
        os.unlink(record)


def pin(change: Change, docker0: str, scratch: str) -> None:
    """docker0's pre-benchstack address as `bip`, for one restart; `change.put_back` undoes it.
    `scratch`: a private directory for the copy of the file as it was."""
    path = change.daemon_json
    text = read_text(path)
    saved = ""
    if text is not None:
        saved = os.path.join(scratch, "pinned-from")
        copy_exact(path, saved)
    pinned = load_object(text or "{}") or {}
    pinned["bip"] = docker0
    change.saved = saved
    write_file(path, render(pinned))
