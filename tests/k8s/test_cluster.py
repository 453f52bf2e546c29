"""The test cluster itself (setup/k8s/cluster.sh): a Ready node of the built version, pods
from the local registry that run and take `kubectl exec`, ResourceQuota admission and the
controllers behind it, the pods' own bridge, and a stop that leaves the host as it was found."""

from __future__ import annotations

import io
import ipaddress
import json
import re
import subprocess
import tarfile

import pytest

from tests.conftest import docker
from tests.k8s.cluster import (
    BRIDGE,
    IMAGE,
    POD_SUBNET,
    Cluster,
    cluster_sh,
    hoststate,
    last_line,
    sleeper,
)


def test_node_ready_at_the_built_version(k8s_cluster: Cluster) -> None:
    node = k8s_cluster.get("node", "localhost")
    ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert ready["Ready"] == "True", node["status"]["conditions"]
    info = node["status"]["nodeInfo"]
    assert info["kubeletVersion"] == "v1.34.4"
    assert info["containerRuntimeVersion"].startswith("containerd://")
    assert info["operatingSystem"] == "linux"
    # The apiserver reaches the kubelet by name (it refuses a loopback node IP).
    assert {"type": "Hostname", "address": "localhost"} in node["status"]["addresses"]
    assert cluster_sh("status", timeout=60).returncode == 0
    assert "node localhost Ready" in k8s_cluster.status_line


def test_pod_from_the_local_registry_runs_and_takes_exec(
    k8s_cluster: Cluster, namespace: str
) -> None:
    k8s_cluster.apply(sleeper("minbase", namespace))
    k8s_cluster.kubectl_run(
        "-n",
        namespace,
        "wait",
        "pod/minbase",
        "--for=condition=Ready",
        "--timeout=120s",
        timeout=150,
    )
    pod = k8s_cluster.get("pod", "-n", namespace, "minbase")
    status = pod["status"]["containerStatuses"][0]
    # Pulled from the plain-HTTP registry on loopback by the cluster's own containerd.
    assert status["image"] == IMAGE
    assert status["imageID"].startswith(f"{IMAGE.rsplit(':', 1)[0]}@sha256:")
    assert ipaddress.ip_address(pod["status"]["podIP"]) in ipaddress.ip_network(POD_SUBNET)

    proc = k8s_cluster.kubectl_run(
        "-n",
        namespace,
        "exec",
        "minbase",
        "--",
        "sh",
        "-c",
        "cat /etc/debian_version; hostname; echo $((6*7))",
    )
    version, hostname, answer = proc.stdout.split()
    assert version.startswith("12.")
    assert hostname == "minbase"
    assert answer == "42"
    # A tar archive on stdin through the exec stream, as Harbor uploads files.
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        data = b"hello over exec\n"
        info = tarfile.TarInfo("hello.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    proc = subprocess.run(
        [
            str(k8s_cluster.kubectl),
            "--kubeconfig",
            str(k8s_cluster.kubeconfig),
            "-n",
            namespace,
            "exec",
            "-i",
            "minbase",
            "--",
            "sh",
            "-c",
            "tar -x -C /tmp && cat /tmp/hello.txt",
        ],
        input=archive.getvalue(),
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"hello over exec\n"

    reasons = {
        e["reason"]
        for e in k8s_cluster.events(namespace)
        if e["involvedObject"].get("name") == "minbase"
    }
    assert {"Scheduled", "Pulled", "Created", "Started"} <= reasons, reasons


def test_pods_are_on_the_clusters_own_bridge(k8s_cluster: Cluster, namespace: str) -> None:
    k8s_cluster.apply(sleeper("net", namespace))
    k8s_cluster.kubectl_run(
        "-n", namespace, "wait", "pod/net", "--for=condition=Ready", "--timeout=120s", timeout=150
    )
    links = json.loads(
        subprocess.run(
            ["ip", "-j", "addr", "show"], capture_output=True, text=True, check=True
        ).stdout
    )
    by_name = {link["ifname"]: link for link in links}
    assert BRIDGE in by_name
    # No gateway address on it: the host routes nothing to the pods, and docker0 is not used.
    assert [a for a in by_name[BRIDGE].get("addr_info", []) if a["family"] == "inet"] == []
    # The pod's own link: the host end of its eth0 (the index in its iflink) hangs on the
    # cluster's bridge, not on docker0 (whose members are containers of other tests, if any).
    peer = k8s_cluster.kubectl_run(
        "-n", namespace, "exec", "net", "--", "cat", "/sys/class/net/eth0/iflink"
    ).stdout.strip()
    host_end = [link for link in links if str(link["ifindex"]) == peer]
    assert [link.get("master") for link in host_end] == [BRIDGE], (peer, host_end)
    chains = subprocess.run(["iptables-save"], capture_output=True, text=True, check=True).stdout
    assert ":KUBE-" not in chains and ":CNI-" not in chains


def test_resource_quota_is_enforced(k8s_cluster: Cluster, namespace: str) -> None:
    k8s_cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "small", "namespace": namespace},
            "spec": {"hard": {"pods": "1", "requests.cpu": "500m", "requests.memory": "256Mi"}},
        }
    )
    # The quota controller (controller-manager) fills in status.used; admission waits for it.
    k8s_cluster.wait_for(
        "quota status",
        lambda: (
            k8s_cluster.get("resourcequota", "-n", namespace, "small").get("status", {}).get("used")
        ),
    )
    pod = sleeper("big", namespace, resources={"requests": {"cpu": "1", "memory": "128Mi"}})
    proc = k8s_cluster.kubectl_run("apply", "-f", "-", input=json.dumps(pod), check=False)
    assert proc.returncode != 0
    assert "exceeded quota: small" in proc.stderr and "requests.cpu" in proc.stderr, proc.stderr


def test_namespace_deletion_removes_its_pods(k8s_cluster: Cluster) -> None:
    name = "bs-test-gone"
    k8s_cluster.kubectl_run("create", "namespace", name)
    k8s_cluster.wait_for(
        "service account",
        lambda: (
            k8s_cluster.kubectl_run(
                "-n", name, "get", "serviceaccount", "default", check=False
            ).returncode
            == 0
        ),
    )
    k8s_cluster.apply(sleeper("doomed", name))
    k8s_cluster.kubectl_run(
        "-n", name, "wait", "pod/doomed", "--for=condition=Ready", "--timeout=120s", timeout=150
    )
    # kubectl's own bound: past 120 s it fails, naming what it waited for.
    k8s_cluster.kubectl_run(
        "delete", "namespace", name, "--wait=true", "--timeout=120s", timeout=150
    )
    assert k8s_cluster.kubectl_run("get", "namespace", name, check=False).returncode != 0


# Docker's containers, docker0 and its rules compared whole: tests/run.sh runs it alone.
@pytest.mark.quiet_docker
def test_stop_leaves_the_host_as_found_and_start_again(k8s_cluster: Cluster) -> None:
    """Stop, compare the host with the record made before the session's start, start again
    (later tests still have their cluster)."""
    docker0_before = _link("docker0")
    docker_rules_before = _docker_rules()
    docker_info_before = docker("info", "--format", "{{.ID}} {{.Containers}}").stdout

    # No stopwatch on the stop and the start: cluster_sh's timeouts bound a hang (how long they
    # take on a loaded machine is no claim of this test).
    stopped = cluster_sh("stop", timeout=300)
    try:
        assert stopped.returncode == 0, last_line(stopped.stderr)
        diff = hoststate("diff", k8s_cluster.host_before)
        assert diff.returncode == 0, f"the host differs after stop: {diff.stdout}"
        assert json.loads(diff.stdout) == {}
        assert BRIDGE not in _link_names()
        assert _link("docker0") == docker0_before
        assert _docker_rules() == docker_rules_before
        assert docker("info", "--format", "{{.ID}} {{.Containers}}").stdout == docker_info_before
        assert cluster_sh("status", timeout=60).returncode != 0
    finally:
        # Later tests still need their cluster, whatever the assertions above said.
        restarted = cluster_sh("start")
    assert restarted.returncode == 0, last_line(restarted.stderr)
    assert cluster_sh("status", timeout=60).returncode == 0


def _link_names() -> set[str]:
    out = subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True, check=True)
    return {link["ifname"] for link in json.loads(out.stdout)}


def _link(name: str) -> dict:
    out = subprocess.run(
        ["ip", "-j", "addr", "show", name], capture_output=True, text=True, check=True
    )
    link = json.loads(out.stdout)[0]
    # Counters and timers change by themselves; what the cluster could change stays.
    return {k: link.get(k) for k in ("ifname", "flags", "mtu", "operstate", "address")} | {
        "addr": sorted(f"{a['local']}/{a['prefixlen']}" for a in link.get("addr_info", []))
    }


def _docker_rules() -> list[str]:
    """The Docker engine's iptables rules (its chains and those naming docker0), no counters."""
    out = subprocess.run(["iptables-save"], capture_output=True, text=True, check=True).stdout
    return sorted(
        re.sub(r"\[\d+:\d+\]", "", line)
        for line in out.splitlines()
        if ("DOCKER" in line or "docker0" in line) and not line.startswith("#")
    )
