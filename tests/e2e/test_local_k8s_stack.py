"""The local-k8s stack under the real engine: the demo tasks' trials as pods on the real test
cluster (setup/k8s), Harbor on this host. The built `pulumi` CLI declares the trials'
namespace, quota and the Harbor controller's rights through the built Kubernetes provider, the
command provider runs the host steps (Harbor's install, the controller's kubeconfig, the cluster
preflight, the launch with its watcher); the audit reads the job through the stack outputs; a
destroy deletes the namespace with its pods and keeps the results. Nothing of the Docker host's
plane is touched: no daemon.json, no container of the job on the Docker engine.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from contracts import jobdir
from contracts import outputs as keys
from tests.conftest import docker
from tests.e2e.conftest import DAEMON_JSON, LocalStack
from tests.e2e.test_local_stack import (
    assert_demo_scores,
    audit_json,
    interrupt_harbor,
    wait_for_job,
)
from tests.engine.conftest import Engine, changed, copy_project, ok, pulumi, set_config
from tests.engine.test_cli import ProcessWatch
from tests.k8s.cluster import Cluster

pytestmark = [pytest.mark.real, pytest.mark.k8s_provider]

STACK = "local-k8s"


def client_key(cluster: Cluster) -> bytes:
    """The admin kubeconfig's private key (base64 as the file holds it): the secret to watch."""
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    user = config["users"][0]["user"]
    if "client-key-data" in user:
        return user["client-key-data"].encode()[:64]
    return Path(user["client-key"]).read_bytes().splitlines()[1][:48]


def job_containers(workspace: Path) -> list[str]:
    """Containers on this machine's Docker engine of the stack's own trials (Harbor names them
    <trial>__env...): its trials are pods, so none. Other tests' trials may run beside it
    (tests/run.sh runs this file beside others): theirs are not counted."""
    trials = {p.parent.name.lower() for p in workspace.glob(f"{jobdir.JOBS_ROOM}/*/*/result.json")}
    names = docker("ps", "-a", "--format", "{{.Names}}").stdout.split()
    return [n for n in names if n.lower().split("__env")[0] in trials]


@pytest.fixture
def k8s_stack(engine: Engine, tmp_path: Path, k8s_cluster: Cluster,
              harbor_bin: Path) -> Iterator[tuple[LocalStack, str]]:
    """The shipped local-k8s stack with its workspace (a temp dir), a namespace of the test's
    own and the test cluster's admin kubeconfig as the secret; destroyed at the end."""
    project = copy_project(tmp_path)
    stack = LocalStack(engine, project, tmp_path / "workspace", stack=STACK)
    namespace = f"bs-e2e-{secrets.token_hex(3)}"
    ok(pulumi(engine, project, "stack", "select", "--create", STACK))
    stack.config("benchstack:workspace", str(stack.workspace))
    stack.config("--path", "benchstack:harbor.environment.kubernetes.namespace", namespace)
    set_config(engine, project, STACK, "--secret", "benchstack:kubeconfig",
               stdin=k8s_cluster.kubeconfig.read_text())
    daemon_before = DAEMON_JSON.read_bytes() if DAEMON_JSON.exists() else None
    try:
        yield stack, namespace
    finally:
        exported = stack.cli("stack", "export")
        if exported.returncode == 0 and exported.json()["deployment"].get("resources"):
            stack.destroy()
        k8s_cluster.kubectl_run("delete", "namespace", namespace, "--ignore-not-found",
                                "--wait=true", "--timeout=120s", check=False, timeout=180)
        # The Docker host's plane is not the stack's here: its daemon config as it was, and no
        # container of the stack's trials on its engine.
        assert (DAEMON_JSON.read_bytes() if DAEMON_JSON.exists() else None) == daemon_before
        assert job_containers(stack.workspace) == []


def pod_lines(job_dir: str) -> list[dict]:
    path = Path(job_dir) / "k8s-pods.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def event_lines(job_dir: str) -> list[dict]:
    path = Path(job_dir) / "k8s-events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_for_watcher(job_dir: str, timeout: float = 60) -> None:
    """The watcher ends by itself once Harbor has exited, after a last list."""
    pid_file = Path(f"{job_dir}.k8s-watch.pid")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(int(pid_file.read_text().split()[0]), 0)
        except (OSError, ValueError):
            return
        time.sleep(0.5)
    pytest.fail(f"the k8s watcher of {job_dir} still runs {timeout} s after Harbor exited")


def test_local_k8s_stack_up_audit_destroy(k8s_stack: tuple[LocalStack, str],
                                          k8s_cluster: Cluster, tmp_path: Path):
    stack, namespace = k8s_stack
    planned = stack.preview()
    assert "kubernetes:core/v1:Namespace" in planned.stdout
    assert k8s_cluster.absent("namespace", namespace), "preview created the namespace"

    # --- up: the namespace and its rights on the cluster, the job as pods --------------------
    key = client_key(k8s_cluster)
    with ProcessWatch([key]) as seen:
        first = stack.up()
    assert seen == [], seen
    assert set(changed(first).values()) == {"create"}
    outputs = stack.outputs()
    assert outputs[keys.TRIALS_ENVIRONMENT] == "kubernetes"
    assert outputs[keys.K8S_NAMESPACE] == namespace
    # A null output is left out of `stack output --json`.
    assert outputs.get(keys.TOOLS_DIR) is None and outputs[keys.IMAGES_READY] == 1
    quota = k8s_cluster.get("resourcequota", "benchstack-trials", "-n", namespace)
    assert quota["spec"]["hard"]["requests.cpu"] == "2"
    binding = k8s_cluster.get("rolebinding", "benchstack-harbor", "-n", namespace)
    assert binding["subjects"][0]["name"] == "benchstack-harbor"
    # Harbor acts as the namespace's ServiceAccount, never as the stack's admin identity.
    controller = json.loads(Path(stack.workspace / "configs" /
                                 f"{namespace}.kubeconfig.json").read_text())
    assert controller["users"][0]["user"].keys() == {"token"}
    assert controller["contexts"][0]["context"]["namespace"] == namespace

    job_dir = outputs[keys.JOB_DIR]
    wait_for_job(outputs)
    wait_for_watcher(job_dir)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    report = audit_json("--stack", STACK, "--project", str(stack.project),
                        env=stack.engine.env, cwd=elsewhere)
    assert_demo_scores(report, oracle=True)

    # Every trial ran as a pod on the cluster's node, and the cluster said so.
    trials = {p.name for p in Path(job_dir).iterdir() if (p / "result.json").is_file()}
    pods = pod_lines(job_dir)
    added = {line["object"]["metadata"]["labels"]["session"] for line in pods
             if line["type"] == "ADDED"}
    assert {t.lower().replace("_", "-") for t in trials} <= {
        s.lower().replace("_", "-").removesuffix("--env") for s in added}, (trials, added)
    assert {line["object"]["spec"].get("nodeName") for line in pods
            if line["type"] == "MODIFIED"} >= {"localhost"}
    reasons = {event["reason"] for event in event_lines(job_dir)}
    assert {"Scheduled", "Started"} <= reasons, reasons
    assert trials and job_containers(stack.workspace) == []

    state = "".join(p.read_text() for p in (stack.project / ".pulumi-state").rglob("*")
                    if p.is_file())
    assert key.decode() not in state, "the kubeconfig's key is in the state in plain text"
    stack.preview("--expect-no-changes")

    # --- destroy: the namespace (and any pod) goes, the results stay -----------------------
    stack.destroy()
    k8s_cluster.wait_for(f"namespace {namespace} deleted",
                         lambda: k8s_cluster.absent("namespace", namespace), timeout=180)
    assert (Path(job_dir) / "result.json").is_file()
    assert (Path(job_dir) / "k8s-events.jsonl").is_file()
    assert not (stack.workspace / "configs" / f"{namespace}.kubeconfig.json").exists()


def test_local_k8s_stack_sigterm_then_resume(k8s_stack: tuple[LocalStack, str],
                                             k8s_cluster: Cluster):
    stack, namespace = k8s_stack
    stack.up()
    outputs = stack.outputs()
    # Pods are deleted as the trials are cancelled: a slower wave than containers.
    interrupt_harbor(outputs, timeout=180)

    # The probe sees the interruption: the launch is replaced, and only the launch.
    assert changed(stack.preview()) == {"job-launch": "replace"}
    assert changed(stack.up()) == {"job-launch": "replace"}
    assert stack.outputs()[keys.JOB_DIR] == outputs[keys.JOB_DIR]
    wait_for_job(outputs)
    assert_demo_scores(audit_json(outputs[keys.JOB_DIR]), oracle=True)
    stack.preview("--expect-no-changes")
    stack.destroy()
    k8s_cluster.wait_for(f"namespace {namespace} deleted",
                         lambda: k8s_cluster.absent("namespace", namespace), timeout=180)
