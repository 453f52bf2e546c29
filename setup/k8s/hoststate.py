"""What the k8s test cluster (cluster.sh) changes on the host, recorded before it starts and
undone after it stops, so that the host is left as it was found.

    hoststate.py snapshot FILE   record the host (once: an existing FILE is kept)
    hoststate.py restore FILE    after every cluster process has exited: unmount, remove links,
                                 network namespaces, iptables chains, cgroups, sysctls and paths
                                 the cluster made; prints what it undid as one JSON line
    hoststate.py diff FILE       what differs from FILE now (JSON), restricted to what the
                                 cluster could have touched; exit 1 when something differs

What the cluster can touch, and why:
- mounts: the kubelet's volumes (tmpfs, bind), containerd's snapshots (overlay) and shm, the
  pods' network namespaces (nsfs under /run/netns);
- links: its CNI bridge and the pods' veth ends;
- iptables: KUBE-*/CNI-* chains and the rules that jump to them (the kubelet runs with
  makeIPTablesUtilChains off, so none is expected: this is the safety net);
- sysctls the kubelet sets at start (vm.overcommit_memory, kernel.panic, ...);
- cgroups: the kubelet's kubepods hierarchy (cgroup v1: one per controller);
- paths the kubelet and CNI create at fixed places (/var/lib/kubelet/device-plugins,
  /var/log/containers, /var/lib/cni, /run/netns).

Inputs (environment): BENCHSTACK_K8S_BRIDGE (the CNI bridge's name), BENCHSTACK_K8S_OWNED
(colon-separated dirs the cluster owns: any mount under them is its own).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
# Fixed places the kubelet, containerd's CRI and the CNI plugins create whatever their config.
PATHS = (
    "/var/lib/kubelet",
    "/var/log/containers",
    "/var/log/pods",
    "/var/lib/cni",
    "/run/netns",
    "/etc/cni",
    "/opt/cni",
    "/etc/kubernetes",
    "/usr/libexec/kubernetes",
)
TABLES = ("filter", "nat", "mangle", "raw")
OUR_CHAIN = re.compile(r"^(KUBE-|CNI-)")
CGROUP_ROOT = Path("/sys/fs/cgroup")


def run(*args: str, check: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, check=check)


def bridge() -> str:
    return os.environ["BENCHSTACK_K8S_BRIDGE"]  # cluster.sh and the tests set it


def owned() -> list[str]:
    return [p.rstrip("/") for p in os.environ.get("BENCHSTACK_K8S_OWNED", "").split(":") if p]


def mounts() -> list[str]:
    """Mount points, in mount order (from /proc/self/mountinfo; octal escapes decoded)."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4]
        points.append(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), point))
    return points


def links() -> dict[str, dict]:
    out = run("ip", "-j", "link", "show", check=True).stdout
    return {
        link["ifname"]: {
            "master": link.get("master"),
            "flags": sorted(link.get("flags", [])),
            "address": link.get("address"),
        }
        for link in json.loads(out)
    }


def netns() -> list[str]:
    path = Path("/run/netns")
    return sorted(p.name for p in path.iterdir()) if path.is_dir() else []


def iptables_chains() -> dict[str, dict[str, list[str]]]:
    """Chains per family and table, from `iptables -S` (the backend the kubelet would use)."""
    chains: dict[str, dict[str, list[str]]] = {}
    for family, tool in (("ipv4", "iptables"), ("ipv6", "ip6tables")):
        if shutil.which(tool) is None:
            continue
        for table in TABLES:
            proc = run(tool, "-w", "5", "-t", table, "-S")
            if proc.returncode != 0:
                continue
            names = [
                line.split()[1]
                for line in proc.stdout.splitlines()
                if line.startswith(("-N ", "-P "))
            ]
            chains.setdefault(family, {})[table] = sorted(names)
    return chains


def sysctls() -> dict[str, str]:
    values = {}
    for key in SYSCTLS:
        path = Path("/proc/sys") / key
        if path.exists():
            values[key] = path.read_text().strip()
    return values


def cgroup_dirs() -> list[str]:
    """The kubelet's top-level cgroups (kubepods, under each v1 controller or the v2 root)."""
    found = []
    for path in [CGROUP_ROOT, *CGROUP_ROOT.iterdir()] if CGROUP_ROOT.is_dir() else []:
        candidate = path / "kubepods"
        if candidate.is_dir():
            found.append(str(candidate))
    return sorted(found)


def state() -> dict:
    return {
        "mounts": mounts(),
        "links": links(),
        "netns": netns(),
        "iptables": iptables_chains(),
        "sysctls": sysctls(),
        "paths": {p: os.path.lexists(p) for p in PATHS},
        "cgroups": cgroup_dirs(),
    }


def ours(point: str, before: set[str]) -> bool:
    """A mount the cluster made: under a dir it owns, or new under the kubelet/CNI places."""
    if any(point == d or point.startswith(d + "/") for d in owned()):
        return True
    if point in before:
        return False
    return point.startswith(("/run/netns/cni-", "/var/run/netns/cni-", "/var/lib/kubelet/"))


def unmount_ours(before: set[str]) -> list[str]:
    done = []
    for point in reversed(mounts()):
        if ours(point, before) and point not in done:
            if run("umount", point).returncode != 0:
                run("umount", "-l", point)
            done.append(point)
    return done


def remove_chains(snapshot: dict) -> list[str]:
    removed = []
    for family, tool in (("ipv4", "iptables"), ("ipv6", "ip6tables")):
        known = snapshot["iptables"].get(family, {})
        for table in TABLES:
            proc = run(tool, "-w", "5", "-t", table, "-S")
            if proc.returncode != 0:
                continue
            had = set(known.get(table, []))
            new = {line.split()[1] for line in proc.stdout.splitlines() if line.startswith("-N ")}
            targets = {c for c in new - had if OUR_CHAIN.match(c)}
            if not targets:
                continue
            # Rules (in any chain) that jump to one of them go first, then the chains.
            for line in proc.stdout.splitlines():
                words = line.split()
                if (
                    words[:1] == ["-A"]
                    and "-j" in words
                    and words[words.index("-j") + 1] in targets
                ):
                    run(tool, "-w", "5", "-t", table, "-D", *words[1:])
            for chain in sorted(targets):
                run(tool, "-w", "5", "-t", table, "-F", chain)
            for chain in sorted(targets):
                if run(tool, "-w", "5", "-t", table, "-X", chain).returncode == 0:
                    removed.append(f"{family}/{table}/{chain}")
    return removed


def remove_cgroup(path: Path) -> bool:
    """rmdir depth first (a cgroup dir is removed empty of children, its files stay virtual)."""
    for child in sorted((p for p in path.iterdir() if p.is_dir()), reverse=True):
        remove_cgroup(child)
    try:
        path.rmdir()
        return True
    except OSError:
        return False


def _remove_pod_netns(snapshot: dict) -> list[str]:
    """Network namespaces the pods left (containerd's cni-*)."""
    removed = []
    for name in netns():
        if name not in snapshot["netns"] and name.startswith("cni-"):
            path = Path("/run/netns") / name
            run("umount", str(path))
            path.unlink(missing_ok=True)
            removed.append(name)
    return removed


def _remove_links(snapshot: dict) -> list[str]:
    """The pods' veths and the cluster's bridge."""
    return [name for name, link in links().items()
            if name not in snapshot["links"] and (name == bridge() or link["master"] == bridge())
            and run("ip", "link", "delete", name).returncode == 0]


def _restore_sysctls(snapshot: dict) -> list[str]:
    restored = []
    for key, value in snapshot["sysctls"].items():
        path = Path("/proc/sys") / key
        if path.read_text().strip() != value:
            path.write_text(value + "\n")
            restored.append(f"{key}={value}")
    return restored


def _remove_paths(snapshot: dict) -> list[str]:
    removed = []
    for path, existed in snapshot["paths"].items():
        # Only when nothing is mounted below it any more (a busy mount would be lost).
        if not existed and os.path.lexists(path) and not any(
                p == path or p.startswith(path + "/") for p in mounts()):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def restore(file: Path) -> dict:
    snapshot = json.loads(file.read_text())
    done: dict[str, list] = {
        "unmounted": unmount_ours(set(snapshot["mounts"])),
        "netns": _remove_pod_netns(snapshot),
        "links": _remove_links(snapshot),
        "iptables": remove_chains(snapshot),
        "sysctls": _restore_sysctls(snapshot),
        "cgroups": [str(p) for p in map(Path, cgroup_dirs())
                    if str(p) not in snapshot["cgroups"] and remove_cgroup(p)],
        "paths": _remove_paths(snapshot),
    }
    return {k: v for k, v in done.items() if v}


def others_hold(path: str) -> bool:
    """A fixed place the cluster creates that someone else uses now: `ip netns add` makes
    /run/netns a mount of itself and puts its namespaces there (the cluster's are cni-*)."""
    if path != "/run/netns":
        return False
    return path in mounts() or any(not name.startswith("cni-") for name in netns())


def diff(file: Path) -> dict:
    """What the cluster could have left: new mounts of its kinds, its links, chains, sysctls,
    cgroups and paths. Links and mounts of others (a Docker container started meanwhile) do not
    count: the comparison is restricted to the kinds the cluster makes."""
    snapshot = json.loads(file.read_text())
    now = state()
    before_mounts = set(snapshot["mounts"])
    out: dict[str, object] = {}
    out["mounts"] = [p for p in now["mounts"] if p not in before_mounts and ours(p, before_mounts)]
    out["links"] = [
        n
        for n, link in now["links"].items()
        if n not in snapshot["links"] and (n == bridge() or link["master"] == bridge())
    ]
    out["links_gone"] = [
        n for n in snapshot["links"] if n not in now["links"] and not n.startswith(("veth", "br-"))
    ]
    out["netns"] = [n for n in now["netns"] if n not in snapshot["netns"] and n.startswith("cni-")]
    chains = []
    for family, tables in now["iptables"].items():
        for table, names in tables.items():
            had = set(snapshot["iptables"].get(family, {}).get(table, []))
            chains += [
                f"{family}/{table}/{c}" for c in names if c not in had and OUR_CHAIN.match(c)
            ]
    out["iptables"] = chains
    out["sysctls"] = {k: v for k, v in now["sysctls"].items() if snapshot["sysctls"].get(k) != v}
    out["cgroups"] = [c for c in now["cgroups"] if c not in snapshot["cgroups"]]
    out["paths"] = [p for p, e in now["paths"].items()
                    if e and not snapshot["paths"].get(p) and not others_hold(p)]
    return {k: v for k, v in out.items() if v}


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in ("snapshot", "restore", "diff"):
        print("usage: hoststate.py snapshot|restore|diff FILE", file=sys.stderr)
        return 2
    verb, file = argv[1], Path(argv[2])
    if verb == "snapshot":
        if not file.exists():
            file.parent.mkdir(parents=True, exist_ok=True)
            tmp = file.with_suffix(".tmp")
            tmp.write_text(json.dumps(state(), indent=1))
            tmp.replace(file)
        return 0
    if not file.exists():
        print(f"hoststate: no snapshot at {file}", file=sys.stderr)
        return 1
    if verb == "restore":
        print(json.dumps(restore(file)))
        return 0
    found = diff(file)
    print(json.dumps(found))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
