"""What an interrupted earlier test run left on this machine, before the stages that bring stacks
up (a stack's container of the same name makes its next `up` fail, and the failure hides the
test's own), whoever started it: an earlier run from another clone, deleted since, included.

    python -m tests.env.leftovers            list them; exit 1 if there are any
    python -m tests.env.leftovers --remove   remove them (CI: a machine that runs only the tests)

A leftover is:
- a container or network named like what the stacks and the tests create (`benchstack-...`), or
  a Harbor trial's compose project (`...__...`); the two-host rehearsal's hosts are stopped by
  their own script, which also puts back what they changed on this machine;
- a proxy bridge's loop (hostside/proxy_bridge.py, its marker on its command line), which holds
  the bridge port the next local stack needs;
- the host-plane tests' second engine (tests/hostplane/testengine.sh: a dockerd whose exec root
  is /run/bste.*), its network namespace (bste-*) and its folders (/tmp/bste-engine-*,
  /run/bste.*): an engine beside the machine's own, and the mounts and bridges it holds;
- a local stack's merged /etc/docker/daemon.json that no destroy put back (its record beside it,
  hostside/daemon_config.py's): the next stack's `up` takes the record's "before benchstack" for
  its own and its destroy restores that, not the file the run found. Removed by the product's
  own undo (the step's delete, which restarts the engine on the original).
Removal is for a machine that runs only the tests: on an operator's machine the same names may
be a live `local` stack, so there it only lists them. The machine's own peers (its Docker
engine, the registry, the proxy, sshd, the cluster) are not leftovers: the next run uses them,
wherever the run that started them was.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from components.seam.step import render_step
from hostside.daemon_json import record_path
from hostside.proxy_status import LOOP_MARKER
from tests.machine import ROOT

HOSTS_SCRIPT = ROOT / "tests" / "env" / "hosts" / "hosts.sh"
HOST_CONTAINER = "benchstack-host-"
BUILT_IN_NETWORKS = {"bridge", "host", "none"}
# The host-plane tests' second engine (tests/hostplane/conftest.py names them so).
ENGINE_RUN_PREFIX = "/run/bste."
ENGINE_DIR_PREFIX = str(Path(tempfile.gettempdir()) / "bste-engine-")
ENGINE_NS_PREFIX = "bste-"
STOP_WAIT_S = 30
# The machine's own engine's config, as the local stack's docker.daemon_json names it.
DAEMON_JSON = "/etc/docker/daemon.json"
UNDO_TIMEOUT_S = 300


def _names(*args: str) -> list[str]:
    out = subprocess.run(["docker", *args], capture_output=True, text=True, check=True).stdout
    return out.split()


def _ours(name: str) -> bool:
    return name.startswith("benchstack-") or "__" in name


def _argv(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _processes() -> dict[int, list[str]]:
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            argv = _argv(int(entry.name))
            if argv:
                found[int(entry.name)] = argv
    return found


def _is_test_engine(argv: list[str]) -> bool:
    return Path(argv[0]).name == "dockerd" and any(
        a.startswith(ENGINE_RUN_PREFIX) for a in argv)


def _is_bridge_loop(argv: list[str]) -> bool:
    return any(a.startswith(LOOP_MARKER + " ") for a in argv)


def second_engines() -> list[int]:
    return sorted(pid for pid, argv in _processes().items() if _is_test_engine(argv))


def bridge_loops() -> list[int]:
    return sorted(pid for pid, argv in _processes().items() if _is_bridge_loop(argv))


def engine_namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return sorted(line.split()[0] for line in out.splitlines()
                  if line.startswith(ENGINE_NS_PREFIX))


def engine_folders() -> list[str]:
    run = [str(p) for p in Path("/run").glob("bste.*")]
    tmp = [str(p) for p in Path(tempfile.gettempdir()).glob("bste-engine-*")]
    return sorted(run + tmp)


def installed_configs(daemon_json: str = DAEMON_JSON) -> list[str]:
    """The record of a stack's merged daemon.json still in place (none: nothing installed)."""
    record = record_path(daemon_json)
    return [record] if os.path.isfile(record) else []


def undo_config(record: str, docker_host: str = "", restart_command: str = "",
                wrap: Sequence[str] = ()) -> str | None:
    """Put back what the record says was there before benchstack, through the daemon_config
    step's own delete (the engine restarted on the original); None, or its one-line reason."""
    try:
        pools = json.loads(Path(record).read_text()).get("pools") or []
    except (OSError, ValueError, AttributeError) as exc:
        return f"cannot read the record {record}: {exc}"
    daemon_json = record.removesuffix(".benchstack.json")
    inputs = {"daemon_json": daemon_json, "address_pools": pools,
              "restart_command": restart_command, "allow_restart_with_running_containers": True,
              "proof_networks": 0, "docker_host": docker_host}
    command = render_step("daemon_config", "delete", inputs, str(ROOT))
    proc = subprocess.run([*wrap, "sh", "-c", command], capture_output=True, text=True,
                          timeout=UNDO_TIMEOUT_S, stdin=subprocess.DEVNULL)
    if proc.returncode == 0:
        return None
    return (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]


def leftovers() -> dict[str, list[str]]:
    return {
        "containers": [c for c in _names("ps", "-a", "--format", "{{.Names}}") if _ours(c)],
        "networks": [n for n in _names("network", "ls", "--format", "{{.Name}}")
                     if _ours(n) and n not in BUILT_IN_NETWORKS],
        "proxy bridges": [str(pid) for pid in bridge_loops()],
        "test engines": [str(pid) for pid in second_engines()],
        "test engine namespaces": engine_namespaces(),
        "test engine folders": engine_folders(),
        "installed daemon.json": installed_configs(),
    }


def stop_processes(pids: list[int]) -> None:
    """SIGTERM, up to STOP_WAIT_S for them to exit, then SIGKILL."""
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT_S
    while any(running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in pids:
        if running(pid):
            _signal(pid, signal.SIGKILL)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def running(pid: int) -> bool:
    """Alive and not a zombie (an orphan waits for PID 1 to reap it, which can take a while)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def remove_engine_state(namespaces: list[str], folders: list[str]) -> None:
    """Once their engines are stopped: the mounts under their folders, the folders, and their
    network namespaces (with the bridges and links inside them)."""
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    for mount in sorted(mounts, reverse=True):
        if mount.startswith(tuple(f + "/" for f in folders)):
            subprocess.run(["umount", "-l", mount], check=False, capture_output=True)
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
    for ns in namespaces:
        subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)


def remove_from_engine(found: dict[str, list[str]]) -> None:
    if any(c.startswith(HOST_CONTAINER) for c in found["containers"]):
        subprocess.run(["bash", str(HOSTS_SCRIPT), "stop"], check=False)
        found = leftovers()
    if found["containers"]:
        subprocess.run(["docker", "rm", "-f", *found["containers"]], capture_output=True,
                       check=False)
    if found["networks"]:
        subprocess.run(["docker", "network", "rm", *found["networks"]], capture_output=True,
                       check=False)


def remove(found: dict[str, list[str]]) -> None:
    stop_processes([int(pid) for pid in found["proxy bridges"] + found["test engines"]])
    remove_engine_state(found["test engine namespaces"], found["test engine folders"])
    remove_from_engine(found)
    for record in found["installed daemon.json"]:
        why = undo_config(record)
        if why:
            print(f"could not put back the daemon.json of {record}: {why}", file=sys.stderr)


def main(argv: list[str]) -> int:
    found = leftovers()
    if not any(found.values()):
        print("no leftovers of an earlier run")
        return 0
    listed = "; ".join(f"{kind}: {' '.join(names)}" for kind, names in found.items() if names)
    if "--remove" not in argv:
        print(f"an earlier run left {listed} (remove them, or run with --remove)", file=sys.stderr)
        return 1
    print(f"removing what an earlier run left: {listed}")
    remove(found)
    still = leftovers()
    if any(still.values()):
        print(f"could not remove: {still}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
