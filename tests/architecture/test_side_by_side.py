"""The two-host rehearsal runs beside the other real tests that never restart this machine's
Docker engine, and the one-node cluster's tests and those marked no_docker beside the local
stacks, which do (the cluster has a containerd of its own; none of them reaches a Docker engine:
tests/stages.py): each set's names, addresses and ports on this machine, listed here, are named
by no test beside it. What they do
share is read only: the registry mirror and the upstream proxy (hosts.sh forwards them onto each
host's own loopback; the cluster's containerd pulls from the registry) and, for the rehearsal,
the engine that runs the hosts, which no test beside it restarts (tests/conftest.py's
`engine_left_running`).
"""

from __future__ import annotations

import ipaddress
import re
import subprocess
from urllib.parse import urlsplit

from components.config import load_stack_file
from tests.conftest import ROOT
from tests.machine import setting

HOSTS_SH = (ROOT / "tests" / "env" / "hosts" / "hosts.sh").read_text()
REHEARSAL = load_stack_file(ROOT / "Pulumi.a100-rehearsal.yaml")
# The rehearsal's own files, and those that name its objects to remove or describe them.
ITS_OWN = ("tests/env/hosts/", "tests/e2e/test_two_hosts.py", "tests/e2e/two_hosts.py",
           "tests/e2e/gpu_plane.py", "tests/env/leftovers.py", "benchmarks/bench_two_hosts.py",
           "Pulumi.a100-rehearsal.yaml", "tests/architecture/test_side_by_side.py")
# What the tests beside it and the machine's peers are made of (tests/unit holds no real test;
# its texts are recorded outputs, never a network this machine has).
OTHERS = ("tests/", "setup/", "demo/", "Pulumi.local.yaml", "Pulumi.local-k8s.yaml")
CIDR = re.compile(r"\b(\d{1,3}(?:\.\d{1,3}){3}/\d{1,2})\b")


def assigned(name: str) -> str:
    found = re.search(rf"^(?:export )?{name}=(\S+)$", HOSTS_SH, re.M)
    assert found, f"hosts.sh no longer sets {name}"
    return found.group(1)


def its_names() -> dict[str, str]:
    return {"container prefix": assigned("PREFIX") + "-", "network": assigned("NETWORK"),
            "bridge": assigned("BENCHSTACK_HOSTS_BRIDGE")}


def its_subnet() -> ipaddress.IPv4Network:
    return ipaddress.IPv4Network(assigned("BENCHSTACK_HOSTS_SUBNET"))


def its_ports_here() -> set[int]:
    """The ports the rehearsal listens on in this machine's network namespace: the page its
    proxy check fetches. Its stack's own (router, workers, proxy bridge) are on its hosts."""
    return {urlsplit(REHEARSAL.proxy.check_url).port or 80}


def other_files(own: tuple[str, ...] = ITS_OWN) -> dict[str, str]:
    listed = subprocess.run(["git", "ls-files", *OTHERS], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.split()
    return {path: (ROOT / path).read_text(errors="replace") for path in listed
            if not path.startswith(own) and not path.startswith("tests/unit/")
            and path.endswith((".py", ".sh", ".yaml", ".env", ".json"))}


def test_its_names_are_named_by_no_test_beside_it() -> None:
    names = its_names()
    assert names == {"container prefix": "benchstack-host-", "network": "benchstack-hosts",
                     "bridge": "bshosts0"}
    users = {(path, kind) for path, text in other_files().items()
             for kind, name in names.items() if name in text}
    assert not users, sorted(users)


def test_its_subnet_overlaps_no_network_of_the_others() -> None:
    subnet = its_subnet()
    overlapping = {(path, cidr) for path, text in other_files().items()
                   for cidr in CIDR.findall(text)
                   if ipaddress.IPv4Network(cidr, strict=False).overlaps(subnet)}
    assert not overlapping, sorted(overlapping)


def test_its_stack_runs_on_its_hosts_and_its_port_here_is_its_own() -> None:
    subnet = its_subnet()
    addresses = {host.name: host.address for host in REHEARSAL.hosts}
    assert all(ipaddress.IPv4Address(a) in subnet for a in addresses.values()), addresses
    ports = its_ports_here()
    assert ports == {27892}
    users = {(path, port) for path, text in other_files().items() for port in ports
             if re.search(rf"(?<![\d.]){port}(?!\d)", text)}
    assert not users, sorted(users)


CLUSTER_SH = (ROOT / "setup" / "k8s" / "cluster.sh").read_text()
SETUP_DEFAULTS = (ROOT / "setup" / "defaults.env").read_text()
# The cluster's own files, those that set its values, and the fast tests that only read them (a
# kubeconfig or a capture of its outputs, never a listener): none runs beside the cluster.
CLUSTER_OWN = ("setup/k8s/", "setup/defaults.env", "tests/k8s/",
               "tests/e2e/test_local_k8s_stack.py", "tests/engine/test_kubernetes_provider.py",
               "Pulumi.local-k8s.yaml", "tests/audit/captures/k8s/", "tests/graph/",
               "tests/architecture/test_side_by_side.py")


def cluster_default(name: str) -> str:
    found = (re.search(rf"^{name}=(\S+)$", SETUP_DEFAULTS, re.M)
             or re.search(rf"\$\{{{name}:-([^}}]+)\}}", CLUSTER_SH))
    assert found, f"neither setup/defaults.env nor cluster.sh sets {name}"
    return found.group(1)


def cluster_ports() -> set[int]:
    """What the cluster listens on in this machine's namespace: the apiserver, etcd's clients and
    peers, the kubelet and its health check (the other components' secure ports are off)."""
    etcd = int(cluster_default("BENCHSTACK_K8S_ETCD_PORT"))
    kubelet = int(cluster_default("BENCHSTACK_K8S_KUBELET_PORT"))
    assert "--secure-port=0" in CLUSTER_SH
    return {int(cluster_default("BENCHSTACK_K8S_API_PORT")), etcd, etcd + 1, kubelet, kubelet - 2}


def test_the_clusters_ports_bridge_and_subnets_are_named_by_no_test_beside_it() -> None:
    ports = cluster_ports()
    assert ports == {16443, 12379, 12380, 10250, 10248}
    bridge = cluster_default("BENCHSTACK_K8S_BRIDGE")
    subnets = [ipaddress.IPv4Network(cluster_default(f"BENCHSTACK_K8S_{kind}_SUBNET"))
               for kind in ("POD", "SERVICE")]
    others = other_files(CLUSTER_OWN)
    users = {(path, port) for path, text in others.items() for port in ports
             if re.search(rf"(?<![\d.]){port}(?!\d)", text)}
    users |= {(path, bridge) for path, text in others.items() if bridge in text}
    users |= {(path, cidr) for path, text in others.items() for cidr in CIDR.findall(text)
              if any(ipaddress.IPv4Network(cidr, strict=False).overlaps(s) for s in subnets)}
    assert not users, sorted(users)


LOCAL = load_stack_file(ROOT / "Pulumi.local.yaml")
# The local stacks' own files: the stack file and the tests that bring it up.
LOCAL_OWN = ("Pulumi.local.yaml", "tests/e2e/conftest.py", "tests/e2e/test_local_stack.py",
             "tests/e2e/test_harbor_profiles.py", "tests/e2e/test_upgrade.py")
LOOPBACK = ("127.0.0.1", "localhost", "0.0.0.0")


def local_stack_ports() -> set[int]:
    """What a local stack listens on in this machine's namespace: its stand-in worker, its
    router and its proxy bridge (the registry and the upstream proxy are the machine's peers,
    which every test only reads)."""
    return {LOCAL.serving.port, LOCAL.router.port, LOCAL.proxy.bridge_port}


def no_docker_files() -> dict[str, str]:
    listed = subprocess.run(["git", "ls-files", "tests/"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.split()
    texts = {path: (ROOT / path).read_text() for path in listed if path.endswith(".py")}
    return {path: text for path, text in texts.items()
            if re.search(r"^pytestmark = .*\bno_docker\b", text, re.M)}


def ports_here(text: str, port: int) -> bool:
    """Whether `text` names `port` on this machine: not as another host's (a recorded read of
    a GPU worker, a made-up one's URL)."""
    for found in re.finditer(rf"(?<![\d.]){port}(?!\d)", text):
        host = re.search(r"([\w.-]+):$", text[max(0, found.start() - 64):found.start()])
        if host is None or host.group(1) in LOOPBACK:
            return True
    return False


def test_the_no_docker_tests_and_the_local_stacks_name_none_of_each_others_ports() -> None:
    ports = local_stack_ports()
    assert ports == {30001, 30000, 27891}
    beside = no_docker_files()
    assert "tests/hostplane/test_ssh_failures.py" in beside and len(beside) >= 10, sorted(beside)
    users = {(path, port) for path, text in beside.items() for port in ports
             if ports_here(text, port)}
    assert not users, sorted(users)
    # Theirs on this machine: free ports (the stand-ins, S3) and the test sshd's.
    sshd = int(setting("SSHD_PORT"))
    assert sshd == 22022
    users = {path for path in LOCAL_OWN if ports_here((ROOT / path).read_text(), sshd)}
    assert not users, sorted(users)
