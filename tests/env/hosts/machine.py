"""What the two rehearsal hosts (hosts.sh) can leave on this machine, recorded before they start
and compared after they stop, so that the machine is left as it was found.

    machine.py snapshot FILE   record this machine (once: an existing FILE is kept)
    machine.py diff FILE       what differs from FILE now (one JSON line); exit 1 when anything

What the hosts can touch here, and why:
- containers, volumes and networks of this machine's engine named `benchstack-host*` (the hosts,
  their Docker data roots, their private network);
- links: the network's bridge (its fixed name) and the hosts' veth ends on it;
- iptables rules naming that bridge or the hosts' subnet (the engine adds them per network);
- cgroups: each host's engine puts its containers under `benchstack-host-<name>` of every
  hierarchy of this machine's /sys/fs/cgroup, which is mounted into the hosts;
- processes: the SSH forwards that put the registry mirror and the proxy on the hosts' loopback.

Inputs (environment): BENCHSTACK_HOSTS_BRIDGE, BENCHSTACK_HOSTS_SUBNET, BENCHSTACK_HOSTS_PREFIX
(hosts.sh sets them).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
TABLES = ("filter", "nat")
# The mark every forward of hosts.sh carries as its argv[0].
FORWARD_MARK = "benchstack-host-forward"


def run(*args: str) -> str:
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    return proc.stdout if proc.returncode == 0 else ""


def prefix() -> str:
    return os.environ.get("BENCHSTACK_HOSTS_PREFIX", "benchstack-host")


def engine_objects() -> dict[str, list[str]]:
    found = {}
    for kind, args in (("containers", ("ps", "-a", "--format", "{{.Names}}")),
                       ("volumes", ("volume", "ls", "--format", "{{.Name}}")),
                       ("networks", ("network", "ls", "--format", "{{.Name}}"))):
        found[kind] = sorted(n for n in run("docker", *args).split() if n.startswith(prefix()))
    return found


def bridge_links() -> list[str]:
    bridge = os.environ["BENCHSTACK_HOSTS_BRIDGE"]
    links = json.loads(run("ip", "-j", "link", "show") or "[]")
    return sorted(f"{link['ifname']}" for link in links
                  if link["ifname"] == bridge or link.get("master") == bridge)


def iptables_rules() -> list[str]:
    marks = (os.environ["BENCHSTACK_HOSTS_BRIDGE"], os.environ["BENCHSTACK_HOSTS_SUBNET"])
    rules = []
    for table in TABLES:
        for line in run("iptables", "-w", "5", "-t", table, "-S").splitlines():
            if any(mark in line for mark in marks):
                rules.append(f"{table}: {line}")
    return sorted(rules)


def cgroups() -> list[str]:
    if not CGROUP_ROOT.is_dir():
        return []
    return sorted(str(p) for p in CGROUP_ROOT.glob(f"*/{prefix()}-*") if p.is_dir())


def forwards() -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].decode(errors="replace").startswith(FORWARD_MARK):
            found.append(argv[0].decode(errors="replace"))
    return sorted(found)


def state() -> dict:
    return {**engine_objects(), "links": bridge_links(), "iptables": iptables_rules(),
            "cgroups": cgroups(), "processes": forwards()}


def diff(before: dict, now: dict) -> dict:
    """What is in `now` and was not in `before` (or went missing), per kind."""
    out = {}
    for kind, values in now.items():
        had = set(before.get(kind, []))
        added = sorted(set(values) - had)
        gone = sorted(had - set(values))
        if added or gone:
            out[kind] = {**({"left": added} if added else {}), **({"gone": gone} if gone else {})}
    return out


def main(argv: list[str]) -> int:
    verb, file = (argv[1], Path(argv[2])) if len(argv) == 3 else ("", Path())
    if verb == "snapshot":
        # Once: a record already there is the machine before the hosts (a start after a crash
        # keeps it, so the stop compares with the machine as first found).
        file.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError), file.open("x") as out:
            json.dump(state(), out, indent=1)
        return 0
    if verb == "diff" and file.is_file():
        found = diff(json.loads(file.read_text()), state())
        print(json.dumps(found, sort_keys=True))
        return 1 if found else 0
    print("usage: machine.py snapshot|diff FILE (a diff needs a snapshot)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
