"""The k8s tests' peer: a real one-node Kubernetes (setup/k8s/cluster.sh) started once per
session by the `k8s_cluster` fixture and stopped at its end. A cluster that cannot start fails
the tests, it never skips them.

The fixtures live here, in a plain module that tests/conftest.py imports, so that every test
directory (tests/k8s, tests/engine, tests/e2e) shares ONE session cluster: a session fixture
imported into two modules would be two fixtures, and the second would stop the first's cluster.

The fixture records the host (mounts, links, iptables chains, sysctls, cgroups: hoststate.py)
before the cluster starts, so a test can prove that `cluster.sh stop` leaves it as found. A
cluster left running by an earlier session is stopped first, for a true baseline.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import HARBOR_VENV, REGISTRY, ROOT
from tests.machine import setting

K8S_ENV = ROOT / "setup" / "k8s"
CLUSTER_SH = K8S_ENV / "cluster.sh"
HOSTSTATE = K8S_ENV / "hoststate.py"
K8S_DIR = Path(setting("K8S_DIR"))
KUBECONFIG = K8S_DIR / "admin.kubeconfig"
BRIDGE = setting("K8S_BRIDGE")
POD_SUBNET = setting("K8S_POD_SUBNET")
TASKS = Path(__file__).with_name("tasks")
IMAGE = f"{REGISTRY}/benchstack/minbase:bookworm"
# The Python client Harbor's ack environment imports (tests/env/setup.sh pins it in Harbor's venv).
KUBERNETES_CLIENT = "35.0.0"
# A cold start builds nothing (setup.sh built the binaries) but may import the pause image.
START_TIMEOUT = 600


def cluster_sh(verb: str, timeout: float = START_TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(CLUSTER_SH), verb], capture_output=True, text=True, timeout=timeout
    )


def last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


@dataclass(frozen=True)
class Cluster:
    """The running cluster: its admin kubeconfig and kubectl, and the host as it was before."""

    kubeconfig: Path
    kubectl: Path
    host_before: Path
    start_seconds: float
    status_line: str

    def kubectl_run(
        self, *args: str, check: bool = True, timeout: float = 60, input: str | None = None
    ) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            [str(self.kubectl), "--kubeconfig", str(self.kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc

    def get(self, *args: str) -> dict[str, Any]:
        return json.loads(self.kubectl_run("get", *args, "-o", "json").stdout)

    def apply(self, manifest: dict[str, Any]) -> None:
        self.kubectl_run("apply", "-f", "-", input=json.dumps(manifest))

    def wait_for(self, what: str, predicate, timeout: float = 120, interval: float = 0.5):
        """Poll `predicate()` until it returns a truthy value; fail naming `what`."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not within {timeout} s")
            time.sleep(interval)

    def absent(self, *args: str) -> bool:
        """`kubectl get ARGS` answers NotFound (any other failure fails the test)."""
        proc = self.kubectl_run("get", *args, check=False)
        if proc.returncode == 0:
            return False
        assert "NotFound" in proc.stderr, proc.stderr
        return True

    def events(self, namespace: str) -> list[dict[str, Any]]:
        return self.get("events", "-n", namespace)["items"]


def sleeper(name: str, namespace: str, image: str = IMAGE, **container: Any) -> dict[str, Any]:
    """A pod that sleeps (or runs `command=`) and is deleted at once when asked."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": image, "command": ["sleep", "infinity"],
                            **container}],
        },
    }


def hoststate(verb: str, file: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "BENCHSTACK_K8S_BRIDGE": BRIDGE}
    return subprocess.run(
        ["python3", str(HOSTSTATE), verb, str(file)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


@pytest.fixture(scope="session")
def k8s_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if not CLUSTER_SH.is_file():
        pytest.fail(f"{CLUSTER_SH} missing")
    # Whatever an earlier session left (a running cluster, or a dead one's bridge and sysctls
    # with its record of the host) is undone first: stop is idempotent, and the baseline below
    # must be the host before any cluster.
    stopped = cluster_sh("stop", timeout=300)
    if stopped.returncode != 0:
        pytest.fail(f"cluster.sh stop (of an earlier session's cluster): "
                    f"{last_line(stopped.stderr)}")
    before = tmp_path_factory.mktemp("k8s") / "host-before.json"
    snap = hoststate("snapshot", before)
    if snap.returncode != 0:
        pytest.fail(f"hoststate snapshot: {snap.stderr.strip()}")
    started = time.monotonic()
    proc = cluster_sh("start")
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        pytest.fail(f"cluster.sh start failed after {seconds:.0f} s: {last_line(proc.stderr)}")
    cluster = Cluster(
        kubeconfig=KUBECONFIG,
        kubectl=K8S_DIR / "current" / "bin" / "kubectl",
        host_before=before,
        start_seconds=seconds,
        status_line=last_line(proc.stdout),
    )
    try:
        yield cluster
    finally:
        cluster_sh("stop", timeout=300)


@pytest.fixture
def namespace(k8s_cluster: Cluster) -> Iterator[str]:
    """A namespace of the test's own, deleted (and waited for) after it."""
    name = f"bs-test-{secrets.token_hex(3)}"
    k8s_cluster.kubectl_run("create", "namespace", name)
    k8s_cluster.wait_for(
        f"the default service account of {name}",
        lambda: (
            k8s_cluster.kubectl_run(
                "-n", name, "get", "serviceaccount", "default", check=False
            ).returncode
            == 0
        ),
    )
    try:
        yield name
    finally:
        k8s_cluster.kubectl_run(
            "delete", "namespace", name, "--wait=true", "--timeout=120s", check=False, timeout=180
        )


@pytest.fixture(scope="session")
def harbor_with_k8s_client() -> Path:
    """Harbor 0.21.0's venv with the `kubernetes` client its ack environment imports."""
    harbor = HARBOR_VENV / "bin" / "harbor"
    if not harbor.exists():
        pytest.fail(f"Harbor 0.21.0 not installed at {HARBOR_VENV}: run `make setup`")
    proc = subprocess.run(
        [
            str(HARBOR_VENV / "bin" / "python"),
            "-c",
            "import kubernetes, harbor.environments.ack; print(kubernetes.__version__)",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if proc.returncode != 0 or proc.stdout.strip() != KUBERNETES_CLIENT:
        pytest.fail(
            f"kubernetes=={KUBERNETES_CLIENT} not importable in {HARBOR_VENV} "
            f"(got {proc.stdout.strip() or last_line(proc.stderr)}): run `make setup`"
        )
    return harbor
