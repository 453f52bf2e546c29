"""A test program run by the real engine in place of the project's `__main__.py`: one Namespace
and one ConfigMap in it, on a real cluster, through an explicit Kubernetes provider whose
kubeconfig is a secret (tests/engine/test_kubernetes_provider.py). Nothing falls back to the
default provider (the ambient KUBECONFIG): every resource names the explicit one.

Test config (namespace `test`): `kubeconfig` (secret: the kubeconfig's contents), `namespace`
(the Namespace's name), `label` (the Namespace's `benchstack.test` label: a change the provider
makes in place), `greeting` (the ConfigMap's one value: a change of a ConfigMap's data is a
replacement, the provider's default in 4.25.0 unless `enableConfigMapMutable`, a beta, is set).
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

test = pulumi.Config("test")

cluster = k8s.Provider("cluster", kubeconfig=test.require_secret("kubeconfig"))
on_cluster = pulumi.ResourceOptions(provider=cluster)

namespace = k8s.core.v1.Namespace(
    "namespace",
    metadata=k8s.meta.v1.ObjectMetaArgs(name=test.require("namespace"),
                                        labels={"benchstack.test": test.require("label")}),
    opts=on_cluster,
)
config_map = k8s.core.v1.ConfigMap(
    "config-map",
    metadata=k8s.meta.v1.ObjectMetaArgs(name="benchstack-probe", namespace=namespace.metadata.name),
    data={"greeting": test.require("greeting")},
    opts=on_cluster,
)

pulumi.export("namespace", namespace.metadata.name)
pulumi.export("namespace_uid", namespace.metadata.uid)
pulumi.export("config_map", config_map.metadata.name)
pulumi.export("config_map_uid", config_map.metadata.uid)
