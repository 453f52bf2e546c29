"""The Kubernetes provider for real: the `pulumi-resource-kubernetes` that
setup/engine/build.sh built from the Go module proxy (`kubernetes-4.25.0`), driven by the
real CLI and language host with the `pulumi-kubernetes` SDK the project pins, against the real
one-node cluster of setup/k8s (the `k8s_cluster` fixture). A Namespace and a ConfigMap in
it are created through an explicit provider whose kubeconfig is a stack secret, read back with
kubectl, refreshed without a diff, changed (the Namespace's label in place; the ConfigMap's data
by replacement, the provider's default for a ConfigMap) and destroyed; kubectl then finds
neither, and the kubeconfig's credentials are nowhere in plain text in the state.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml

from tests.engine.conftest import Engine, changed, copy_project, ok, pulumi, set_config
from tests.k8s.cluster import Cluster

pytestmark = [pytest.mark.real, pytest.mark.k8s_provider, pytest.mark.no_docker]

STACK = "local"
CONFIG_MAP = "benchstack-probe"


@pytest.fixture
def cluster_stack(engine: Engine, tmp_path: Path, k8s_cluster: Cluster):
    project = copy_project(tmp_path, program="kubernetes")
    namespace = f"benchstack-test-{uuid.uuid4().hex[:8]}"

    def cli(*args: str, **kw):
        return pulumi(engine, project, *args, "--stack", STACK, **kw)

    ok(pulumi(engine, project, "stack", "select", "--create", STACK))
    ok(cli("config", "set", "test:namespace", namespace))
    ok(cli("config", "set", "test:label", "kubernetes-provider"))
    ok(cli("config", "set", "test:greeting", "hello"))
    set_config(engine, project, STACK, "--secret", "test:kubeconfig", "--",
               stdin=k8s_cluster.kubeconfig.read_text())
    try:
        yield cli, project, namespace
    finally:
        exported = cli("stack", "export")
        if exported.returncode == 0 and exported.json()["deployment"].get("resources"):
            cli("destroy", "--yes")
        k8s_cluster.kubectl_run("delete", "namespace", namespace, "--ignore-not-found",
                                "--wait=false", check=False)


def credentials(kubeconfig: Path) -> list[str]:
    """The secrets a kubeconfig carries: client keys and tokens (certificates are public)."""
    users = yaml.safe_load(kubeconfig.read_text()).get("users") or []
    found = [user["user"][key] for user in users for key in ("client-key-data", "token")
             if user.get("user", {}).get(key)]
    assert found, f"{kubeconfig} holds no client key or token"
    return found


def test_namespace_and_config_map_through_an_explicit_provider(
    cluster_stack, k8s_cluster: Cluster  # noqa: F811
) -> None:
    cli, project, namespace = cluster_stack
    cluster = k8s_cluster

    up = changed(ok(cli("up", "--yes", "--json")))
    assert up.get("namespace") == "create" and up.get("config-map") == "create", up
    outputs = ok(cli("stack", "output", "--json")).json()
    assert outputs["namespace"] == namespace and outputs["config_map"] == CONFIG_MAP

    # Read back with kubectl: what the provider created is what the program declared.
    ns = cluster.get("namespace", namespace)
    assert ns["status"]["phase"] == "Active"
    assert ns["metadata"]["uid"] == outputs["namespace_uid"]
    assert ns["metadata"]["labels"]["benchstack.test"] == "kubernetes-provider"
    cm = cluster.get("configmap", "-n", namespace, CONFIG_MAP)
    assert cm["data"] == {"greeting": "hello"}
    assert cm["metadata"]["uid"] == outputs["config_map_uid"]

    # The kubeconfig was a secret: its credentials are in no plain-text state or output.
    exported = ok(cli("stack", "export")).stdout
    state = "".join(p.read_text() for p in (project / ".pulumi-state").rglob("*.json"))
    for secret in credentials(cluster.kubeconfig):
        assert secret not in exported and secret not in state
        assert secret not in (project / f"Pulumi.{STACK}.yaml").read_text()

    # The provider reads the objects back as they are: no diff.
    ok(cli("refresh", "--yes"))
    ok(cli("preview", "--expect-no-changes"))

    # Update: the Namespace's label changes in place (same object), nothing else moves.
    ok(cli("config", "set", "test:label", "kubernetes-provider-updated"))
    plan = changed(ok(cli("preview", "--diff", "--json")))
    assert plan == {"namespace": "update"}, plan
    assert changed(ok(cli("up", "--yes", "--json"))) == plan
    ns = cluster.get("namespace", namespace)
    assert ns["metadata"]["labels"]["benchstack.test"] == "kubernetes-provider-updated"
    assert ns["metadata"]["uid"] == outputs["namespace_uid"]
    assert cluster.get("configmap", "-n", namespace, CONFIG_MAP)["metadata"]["uid"] == outputs[
        "config_map_uid"]

    # A ConfigMap's data is replaced, not patched (the provider's default: a new object, so
    # that what mounts it rolls); its name is fixed, so the old one goes first. The Namespace
    # stays.
    ok(cli("config", "set", "test:greeting", "bonjour"))
    plan = changed(ok(cli("preview", "--diff", "--json")))
    assert plan == {"config-map": "replace"}, plan
    assert changed(ok(cli("up", "--yes", "--json"))) == plan
    cm = cluster.get("configmap", "-n", namespace, CONFIG_MAP)
    assert cm["data"] == {"greeting": "bonjour"}
    replaced = ok(cli("stack", "output", "--json")).json()
    assert cm["metadata"]["uid"] == replaced["config_map_uid"] != outputs["config_map_uid"]
    assert cluster.get("namespace", namespace)["metadata"]["uid"] == outputs["namespace_uid"]

    # Delete: the provider waits for both to be gone, so kubectl finds neither at once.
    ok(cli("destroy", "--yes"))
    assert not ok(cli("stack", "export")).json()["deployment"].get("resources")
    assert cluster.absent("namespace", namespace)
    assert cluster.absent("configmap", "-n", namespace, CONFIG_MAP)
