"""The daemon.json merge with backup behind DockerDaemonConfig, run on the host.

Shipped like readiness.py: `daemon_config.sh` and `daemon_config.delete.sh` write this source
into a temporary directory and run it, as root, with the host's python3 (3.7 or later, stdlib
only; it imports nothing from the project). The scripts keep the steps that are shell (`docker
info`, `docker network`, `ip`, the engine restart, the proof networks); this file keeps the
rest: the pools' checks, the merge that keeps every other key, docker0's `bip` pin, which
original destroy restores, the record, the backups, and putting the original back.

A run's steps share a state directory (its `state.json`): every call is

    python3 daemon_json.py STATE_DIR STEP [options]

  create: init, plan, conflicts, install, check-engine, finish; put-back on any failure
  delete: unplan, undo, pin (then put-back), report

Protocol: stdout is the step's answer (words the script reads, or the outputs JSON); on a
failure the exit code is 1 and stdout is the one-line reason, which the script prints last,
after its rollback. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

POOLS_KEY = "default-address-pools"
ORIGINALS = ("file", "absent", "unchanged")
POOLS_SHAPE = 'a non-empty JSON list of {"base": "a.b.c.d/n", "size": n}'
# `ip route show table all` lines of these types are the host's own addresses, not routes.
ROUTE_SKIP = ("local ", "broadcast ", "multicast ", "anycast ")
ROUTE_TYPES = ("unicast", "unreachable", "blackhole", "prohibit", "throw")
_CIDR = re.compile(r"([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})(?:/([0-9]{1,2}))?")


class Failure(Exception):
    """A step that cannot go on; its message is the one line the user reads."""


def log(message: str) -> None:
    print(f"[daemon_json] {message}", file=sys.stderr, flush=True)


# --- addresses --------------------------------------------------------------------------------


def parse_cidr(text: str) -> tuple[int, int] | None:
    """(address, prefix length) of an IPv4 `a.b.c.d/n`, a bare address being a /32; None for
    anything else (IPv6, names, `default`)."""
    match = _CIDR.fullmatch(text)
    if not match:
        return None
    octets = [int(g) for g in match.groups()[:4]]
    length = int(match.group(5)) if match.group(5) is not None else 32
    if any(o > 255 for o in octets) or length > 32:
        return None
    address = (octets[0] << 24) | (octets[1] << 16) | (octets[2] << 8) | octets[3]
    return address, length


def span(address: int, length: int) -> tuple[int, int]:
    """First and last address of the network `address/length`."""
    mask = (0xFFFFFFFF << (32 - length)) & 0xFFFFFFFF
    return address & mask, (address & mask) | (~mask & 0xFFFFFFFF)


def ip_text(address: int) -> str:
    return ".".join(str((address >> shift) & 255) for shift in (24, 16, 8, 0))


def cidr_span(text: str) -> tuple[int, int] | None:
    parsed = parse_cidr(text)
    return span(*parsed) if parsed else None


def overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


# --- pools ------------------------------------------------------------------------------------


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def parse_pools(text: str, proof_networks: int) -> list[dict]:
    """ADDRESS_POOLS_JSON, checked: IPv4 CIDR bases without host bits, sizes that fit, room
    for the proof networks. Returns the pools as `[{"base", "size"}]`."""
    bad_shape = Failure(f"ADDRESS_POOLS_JSON must be {POOLS_SHAPE}, got: {text}")
    try:
        value = json.loads(text)
    except ValueError:
        raise bad_shape from None
    if not isinstance(value, list) or not value:
        raise bad_shape
    for pool in value:
        if not (isinstance(pool, dict) and set(pool) == {"base", "size"}
                and isinstance(pool["base"], str) and type(pool["size"]) is int):
            raise bad_shape
    capacity = 0
    for pool in value:
        base, size = pool["base"], pool["size"]
        parsed = parse_cidr(base)
        if parsed is None or "/" not in base:
            raise Failure(f"ADDRESS_POOLS_JSON base '{base}' is not an IPv4 CIDR "
                          "(IPv6 pools are not supported here)")
        address, length = parsed
        if not length <= size <= 30:
            raise Failure(f"ADDRESS_POOLS_JSON size {size} does not fit base {base}: "
                          f"use a size between /{length} and /30")
        start = span(address, length)[0]
        if start != address:
            raise Failure(f"ADDRESS_POOLS_JSON base {base} has host bits set: "
                          f"use {ip_text(start)}/{length}")
        capacity += 1 << (size - length)
    if capacity < proof_networks:
        raise Failure(f"ADDRESS_POOLS_JSON yields only {capacity} networks, fewer than "
                      f"PROOF_NETWORKS={proof_networks}: use a larger base or a smaller size")
    return [{"base": p["base"], "size": p["size"]} for p in value]


def as_pools(value: Any) -> Any:
    """A pools value reduced to `[{"base", "size"}]` for comparison (as `map({base, size})`);
    anything that is not a list of objects stays as it is, so it equals no real pools."""
    if value is None or value is False:
        return []
    if isinstance(value, list) and all(isinstance(p, dict) for p in value):
        return [{"base": p.get("base"), "size": p.get("size")} for p in value]
    return value


def lenient_pools(text: str) -> list[dict]:
    """ADDRESS_POOLS_JSON as the delete reads it: any list of objects (it compares, never
    installs)."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, list) or not all(isinstance(p, dict) for p in value):
        raise Failure(f"ADDRESS_POOLS_JSON is not a JSON list of {{base, size}}: {text}")
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
    parsed = parse_cidr(subnet) if "/" in subnet else None
    if parsed is None:
        return False
    inner = span(*parsed)
    for pool in pools:
        outer = cidr_span(pool["base"])
        if outer and parsed[1] == pool["size"] and outer[0] <= inner[0] and inner[1] <= outer[1]:
            return True
    return False


def conflicts(pools: Sequence[dict], routes: str, networks: Sequence[dict]) -> list[str]:
    """Every overlap of a pool with a host route (`ip -4 route show table all`) or a Docker
    network (`docker network inspect` of all of them)."""
    spans = [(p["base"], s) for p in pools for s in [cidr_span(p["base"])] if s is not None]
    found = []
    for line in routes.splitlines():
        fields = line.split()
        if not fields or line.startswith(ROUTE_SKIP):
            continue
        dest = fields[1] if fields[0] in ROUTE_TYPES and len(fields) > 1 else fields[0]
        dest_span = cidr_span(dest)
        if dest_span is None:  # `default`, or not IPv4
            continue
        found += [f"pool {base} overlaps host route '{line.rstrip()}'"
                  for base, pool_span in spans if overlaps(pool_span, dest_span)]
    for net in networks:
        for config in (net.get("IPAM") or {}).get("Config") or []:
            subnet = config.get("Subnet") or ""
            subnet_span = cidr_span(subnet)
            if subnet_span is None:
                continue
            found += [f"pool {base} overlaps Docker network '{net.get('Name', '')}' ({subnet})"
                      for base, pool_span in spans if overlaps(pool_span, subnet_span)]
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
    """The create's view of RECORD_FILE: None unless it is a record it can use."""
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
        raise Failure(f"RECORD_FILE={record_file} is not valid JSON: restore DAEMON_JSON from "
                      f"a backup in {backup_dir} by hand")
    return value


def unplan(pools: list[dict], original: str, backup: str, docker0: str, record: dict | None,
           daemon_json: str, current_text: str | None) -> Undo:
    """Whether the delete restores. Given ORIGINAL overrides the record; a record that names
    other pools (a later run replaced these), a file gone or holding other pools: no-op."""
    if not original:
        original = "unchanged"
        if record is not None:
            original = str(record.get("original") or "")
            if as_pools(record.get("pools") or []) != pools:
                return Undo("none", "the record names other pools (a later run replaced "
                            "these): nothing to undo", original, backup, docker0)
            backup = str(record.get("backup") or "")
            docker0 = str(record.get("docker0") or "")
    if original not in ORIGINALS:
        raise Failure(f"ORIGINAL='{original}' must be file, absent or unchanged")
    if original == "unchanged":
        return Undo("none", "the pools predate benchstack: nothing to undo", original, backup,
                    docker0)
    if current_text is None:
        return Undo("none", f"{daemon_json} is gone: nothing to undo", original, backup, docker0)
    current = load_object(current_text)
    if current is None:
        raise Failure(f"DAEMON_JSON={daemon_json} is not a JSON object any more: fix it by "
                      f"hand (backup: {backup or 'none'})")
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


# --- the host side: state, files --------------------------------------------------------------


@dataclass
class State:
    """What one run's steps share, in STATE_DIR/state.json."""

    daemon_json: str = ""
    record_file: str = ""
    backup_dir: str = ""
    pools: list = field(default_factory=list)
    proof_networks: int = 0
    original: str = ""
    backup: str = ""
    docker0: str = ""
    from_record: bool = False
    file_existed: bool = False
    need_write: bool = False
    need_restart: bool = False
    merged: dict = field(default_factory=dict)
    # put-back: the file to copy back over daemon_json ("" = remove it), while `installed`.
    installed: bool = False
    saved: str = ""

    @classmethod
    def load(cls, state_dir: str) -> State:
        path = os.path.join(state_dir, "state.json")
        if not os.path.exists(path):
            return cls()
        with open(path) as f:
            return cls(**json.load(f))

    def save(self, state_dir: str) -> None:
        path = os.path.join(state_dir, "state.json")
        with open(path + ".tmp", "w") as f:
            json.dump(asdict(self), f)
        os.replace(path + ".tmp", path)


def read_text(path: str) -> str | None:
    """A file's text; None when there is no file."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return None


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


def validate(path: str, dockerd: str, daemon_json: str, pools: list[dict]) -> None:
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
            raise Failure(f"DOCKERD={dockerd} did not answer within 60s: fix DOCKERD") from None
        if proc is not None:
            if proc.returncode != 0:
                lines = proc.stdout.decode(errors="replace").strip().splitlines() or [""]
                raise Failure(f"dockerd --validate rejects the merged config ({lines[-1]}): "
                              f"fix DAEMON_JSON={daemon_json}")
            return
    written = load_object(read_text(path) or "")
    if written is None or pools_in(written) != pools:
        raise Failure(f"merged config failed its JSON check: fix DAEMON_JSON={daemon_json}")


def put_back(state: State, state_dir: str) -> bool:
    """What was there before this run's change (its saved copy, or no file); False when
    nothing was changed."""
    if not state.installed:
        return False
    if state.saved:
        copy_exact(state.saved, state.daemon_json)
    elif os.path.lexists(state.daemon_json):
        os.unlink(state.daemon_json)
    state.installed = False
    state.save(state_dir)
    return True


# --- the steps --------------------------------------------------------------------------------


def step_init(state_dir: str, a: argparse.Namespace) -> str:
    if not re.fullmatch(r"[0-9]+", a.proof_networks):
        raise Failure(f"PROOF_NETWORKS='{a.proof_networks}' is not a number")
    proof = int(a.proof_networks)
    pools = parse_pools(a.pools, proof)
    State(daemon_json=a.daemon_json, record_file=a.record, backup_dir=a.backup_dir,
          pools=pools, proof_networks=proof).save(state_dir)
    return ""


def step_plan(state_dir: str, a: argparse.Namespace) -> str:
    state = State.load(state_dir)
    try:
        text = read_text(state.daemon_json)
    except OSError as exc:
        raise Failure(f"cannot read DAEMON_JSON={state.daemon_json} ({exc.strerror}): "
                      "run as root or allow sudo -n") from None
    current = None
    if text is not None:
        current = load_object(text)
        if current is None:
            try:
                json.loads(text)
                why = "not an object"
            except ValueError as exc:
                why = str(exc)
            raise Failure(f"DAEMON_JSON={state.daemon_json} is not a JSON object ({why}): "
                          "fix or move that file, then re-run")
    record_text = read_text(state.record_file) if os.path.isfile(state.record_file) else None
    record = parse_record(record_text) if record_text is not None else None
    p = plan(current, record, state.pools, engine_pools(a.engine_pools), a.docker0)
    state.original, state.backup, state.docker0 = p.original, p.backup, p.docker0
    state.from_record, state.file_existed = p.from_record, current is not None
    state.need_write, state.need_restart, state.merged = p.need_write, p.need_restart, p.merged
    state.save(state_dir)
    return f"{str(p.need_write).lower()} {str(p.need_restart).lower()}"


def step_conflicts(state_dir: str, a: argparse.Namespace) -> str:
    state = State.load(state_dir)
    routes = read_text(a.routes) or ""
    networks_text = (read_text(a.networks) or "").strip()
    try:
        networks = json.loads(networks_text) if networks_text else []
    except ValueError:
        raise Failure("`docker network inspect` gave no JSON: check the engine") from None
    found = conflicts(state.pools, routes, networks if isinstance(networks, list) else [])
    if found:
        raise Failure("; ".join(found)
                      + ": choose another base in ADDRESS_POOLS_JSON or remove what overlaps")
    return ""


def step_install(state_dir: str, a: argparse.Namespace) -> str:
    state = State.load(state_dir)
    path = state.daemon_json
    try:
        tmp = _temp_beside(path)
    except OSError:
        raise Failure(f"cannot write next to DAEMON_JSON={path}: run as root or allow "
                      "sudo -n") from None
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(render(state.merged))
        os.chmod(tmp, 0o644)
        # Validate before anything on the host changes.
        validate(tmp, a.dockerd, path, state.pools)
        try:
            os.makedirs(state.backup_dir, exist_ok=True)
        except OSError:
            raise Failure(f"cannot create BACKUP_DIR={state.backup_dir}") from None
        run_backup = ""
        if state.file_existed:
            run_backup = backup_path(path, state.backup_dir, time.time())
            try:
                copy_exact(path, run_backup)
            except OSError:
                raise Failure(f"cannot write the backup {run_backup}: check BACKUP_DIR") from None
            log(f"backed up {path} to {run_backup}")
        # First benchstack change: this run's backup is the original destroy restores.
        if not state.from_record and state.original == "file":
            state.backup = run_backup
        state.saved = run_backup
        os.replace(tmp, path)
        state.installed = True
        state.save(state_dir)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    log(f"installed merged {path}")
    return ""


def step_check_engine(state_dir: str, a: argparse.Namespace) -> str:
    state = State.load(state_dir)
    got = engine_pools(a.engine_pools)
    if got != state.pools:
        raise Failure(f"after the restart the engine reports default-address-pools "
                      f"{compact(got)}, not {compact(state.pools)}: is DAEMON_JSON the file "
                      "this engine reads? original restored")
    return ""


def step_finish(state_dir: str, a: argparse.Namespace) -> str:
    state = State.load(state_dir)
    if state.proof_networks > 0:
        for subnet in (a.first, a.last):
            if not in_pools(subnet, state.pools):
                raise Failure(f"proof network got {subnet}, which is not a /size subnet of "
                              f"ADDRESS_POOLS_JSON {compact(state.pools)}; original restored")
    record = state.record_file if state.from_record else ""
    if state.need_write:
        text = record_json(state.original, state.backup, state.daemon_json, state.pools,
                           state.docker0)
        try:
            write_file(state.record_file, text)
        except OSError:
            raise Failure(f"cannot write RECORD_FILE={state.record_file}; "
                          "original restored") from None
        record = state.record_file
    state.installed = False  # success: nothing to put back
    state.save(state_dir)
    return compact({
        "changed": state.need_write, "restarted": a.restarted == "true",
        "original": state.original, "backup": state.backup, "record": record,
        "daemon_json": state.daemon_json, "address_pools": state.pools,
        "first_subnet": a.first, "last_subnet": a.last, "proof_networks": state.proof_networks,
    })


def step_put_back(state_dir: str, a: argparse.Namespace) -> str:
    return "restored" if put_back(State.load(state_dir), state_dir) else "unchanged"


def step_unplan(state_dir: str, a: argparse.Namespace) -> str:
    pools = lenient_pools(a.pools)
    record = None
    if not a.original and os.path.isfile(a.record):
        record = parse_delete_record(read_text(a.record) or "", a.record, a.backup_dir)
    try:
        current_text = read_text(a.daemon_json)
    except OSError as exc:
        raise Failure(f"cannot read DAEMON_JSON={a.daemon_json} ({exc.strerror}): run as "
                      "root or allow sudo -n") from None
    undo = unplan(pools, a.original, a.backup, a.docker0, record, a.daemon_json, current_text)
    State(daemon_json=a.daemon_json, record_file=a.record, backup_dir=a.backup_dir,
          pools=pools, original=undo.original, backup=undo.backup,
          docker0=undo.docker0).save(state_dir)
    if undo.action == "none":
        log(undo.why)
        return "none"
    return f"restore {undo.docker0}".rstrip()


def step_undo(state_dir: str, a: argparse.Namespace) -> str:
    state = State.load(state_dir)
    path = state.daemon_json
    if state.original == "file" and state.backup and os.path.isfile(state.backup):
        copy_exact(state.backup, path)
        log(f"restored {path} from {state.backup}")
    else:
        if state.original == "file":
            log(f"backup '{state.backup}' is gone: removing only {POOLS_KEY}")
        rest = without_pools(load_object(read_text(path) or "") or {}, state.original)
        if rest is None:
            os.unlink(path)
            log(f"removed {path} (there was none before)")
        else:
            write_file(path, render(rest))
            log(f"removed {POOLS_KEY} from {path}")
    # The record is spent once the original is back, even if the restart after fails.
    if os.path.lexists(state.record_file):
        os.unlink(state.record_file)
    return ""


def step_pin(state_dir: str, a: argparse.Namespace) -> str:
    """docker0's pre-benchstack address as `bip`, for one restart; put-back undoes it."""
    state = State.load(state_dir)
    path = state.daemon_json
    text = read_text(path)
    state.saved = ""
    if text is not None:
        state.saved = os.path.join(state_dir, "pinned-from")
        copy_exact(path, state.saved)
    pinned = load_object(text or "{}") or {}
    pinned["bip"] = state.docker0
    state.installed = True
    state.save(state_dir)
    write_file(path, render(pinned))
    return ""


def step_report(state_dir: str, a: argparse.Namespace) -> str:
    state = State.load(state_dir)
    return compact({"restored": a.restored == "true", "restarted": a.restarted == "true",
                    "daemon_json": state.daemon_json, "original": state.original})


STEPS: dict[str, Callable[[str, argparse.Namespace], str]] = {
    "init": step_init, "plan": step_plan, "conflicts": step_conflicts,
    "install": step_install, "check-engine": step_check_engine, "finish": step_finish,
    "put-back": step_put_back, "unplan": step_unplan, "undo": step_undo, "pin": step_pin,
    "report": step_report,
}


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    top.add_argument("state_dir")
    sub = top.add_subparsers(dest="step", required=True)
    for name in STEPS:
        sub.add_parser(name)
    for name in ("init", "unplan"):
        sub.choices[name].add_argument("--daemon-json", required=True)
        sub.choices[name].add_argument("--record", required=True)
        sub.choices[name].add_argument("--backup-dir", required=True)
        sub.choices[name].add_argument("--pools", required=True)
    sub.choices["init"].add_argument("--proof-networks", required=True)
    for name in ("original", "backup", "docker0"):
        sub.choices["unplan"].add_argument(f"--{name}", default="")
    sub.choices["plan"].add_argument("--engine-pools", default="")
    sub.choices["plan"].add_argument("--docker0", default="")
    sub.choices["conflicts"].add_argument("--routes", required=True)
    sub.choices["conflicts"].add_argument("--networks", required=True)
    sub.choices["install"].add_argument("--dockerd", default="")
    sub.choices["check-engine"].add_argument("--engine-pools", default="")
    for name in ("finish", "report"):
        sub.choices[name].add_argument("--restarted", choices=("true", "false"), required=True)
    sub.choices["finish"].add_argument("--first", default="")
    sub.choices["finish"].add_argument("--last", default="")
    sub.choices["report"].add_argument("--restored", choices=("true", "false"), required=True)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        answer = STEPS[args.step](args.state_dir, args)
    except Failure as exc:
        print(exc, flush=True)
        return 1
    except OSError as exc:
        # A file step the checks did not foresee (a full disk, a read-only /etc): one line.
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"daemon_json.py {args.step}: {exc.strerror or exc}{where}", flush=True)
        return 1
    if answer:
        print(answer, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
