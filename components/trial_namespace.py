"""TrialNamespace: where the trials run when they are pods (`harbor.environment.kind:
kubernetes`), declared on the user's cluster through pulumi-kubernetes.

Harbor 0.21.0's `ack` environment makes one pod per trial in a namespace it is given; it creates
nothing else. What the pods need from the cluster is declared here, children in dependency
order:

    provider (the stack's kubeconfig, a secret) -> namespace -> quota
                                                            -> pull secret (registry_username)
                                                            -> service account -> role -> binding

- the namespace is the job's: `pulumi destroy` deletes it, and with it every trial pod (the
  results are on the Harbor host and stay);
- the ResourceQuota caps what the trials request at once (Harbor's pods request each task's
  cpus/memory_mb), so a job cannot starve the rest of the cluster; a pod over it is refused at
  creation, which the audit reports as infra;
- the image pull secret, when the registry the pods pull from needs credentials;
- the Harbor controller's identity: a ServiceAccount allowed to do exactly what `ack` does in
  this namespace (pods: create, get, list, watch, delete; pods/exec; pods/log; events: read).
  The Harbor host gets a short-lived token for it at launch (TokenRequest), never the stack's
  kubeconfig, so Harbor cannot touch anything outside its namespace.

Outputs: namespace, service_account, pull_secret (or None).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.config import KubernetesConfig

SERVICE_ACCOUNT = "benchstack-harbor"
PULL_SECRET = "benchstack-registry"
# What Harbor's ack environment calls on the API (harbor/environments/ack.py), and what the
# stack's watcher and pre-launch probe read.
CONTROLLER_RULES = [
    {"apiGroups": [""], "resources": ["pods"],
     "verbs": ["create", "get", "list", "watch", "delete"]},
    {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create", "get"]},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews"],
     "verbs": ["create"]},
]


# A kubeconfig's references to files, and the keys that carry the same content inline.
FILE_KEYS = {"certificate-authority": "certificate-authority-data",
             "client-certificate": "client-certificate-data",
             "client-key": "client-key-data"}


def kubeconfig_json(text: str) -> str:
    """The stack's kubeconfig (YAML or JSON) as JSON with the files it names inlined: the Harbor
    host reads it with the stdlib and has none of this machine's files."""
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"benchstack:kubeconfig is not YAML: {exc}") from None
    if not isinstance(config, dict) or not config.get("clusters"):
        raise ValueError("benchstack:kubeconfig has no clusters: give the whole kubeconfig "
                         "file (`pulumi config set --secret benchstack:kubeconfig < FILE`)")
    for kind in ("clusters", "users"):
        for entry in config.get(kind) or []:
            body = entry.get(kind[:-1]) or {}
            for key, data_key in FILE_KEYS.items():
                path = body.pop(key, None)
                if path and not body.get(data_key):
                    if not Path(path).is_absolute():
                        raise ValueError(f"benchstack:kubeconfig: {kind[:-1]} "
                                         f"{entry.get('name')!r}: {key} {path!r} is relative; "
                                         "use an absolute path or the *-data form")
                    body[data_key] = base64.b64encode(Path(path).read_bytes()).decode()
    return json.dumps(config)


def docker_config_json(registry: str, username: str, password: str) -> str:
    """The `.dockerconfigjson` of a kubernetes.io/dockerconfigjson Secret."""
    auth = base64.b64encode(f"{username}:{password}".encode()).decode()
    host = registry.split("/", 1)[0]
    return json.dumps({"auths": {host: {"username": username, "password": password,
                                        "auth": auth}}})


@dataclass(frozen=True, kw_only=True)
class TrialNamespaceArgs:
    kubernetes: KubernetesConfig
    # The stack's secret `benchstack:kubeconfig`: the cluster and an identity that may create
    # namespaces, quotas and RBAC there.
    kubeconfig: pulumi.Input[str]
    registry_password: pulumi.Input[str] | None = None


class TrialNamespace(pulumi.ComponentResource):
    namespace: pulumi.Output[str]
    service_account: pulumi.Output[str]
    pull_secret: pulumi.Output[str | None]

    def __init__(self, name: str, args: TrialNamespaceArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("benchstack:components:TrialNamespace", name, None, opts)
        cfg = args.kubernetes
        child = pulumi.ResourceOptions(parent=self)
        provider = k8s.Provider(
            f"{name}-cluster",
            kubeconfig=pulumi.Output.secret(args.kubeconfig),
            opts=child,
        )
        on_cluster = pulumi.ResourceOptions(parent=self, provider=provider)
        labels = {"app.kubernetes.io/managed-by": "benchstack",
                  "benchstack/stack": pulumi.get_stack()}
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={"name": cfg.namespace, "labels": labels},
            opts=on_cluster,
        )
        in_namespace = pulumi.ResourceOptions(parent=self, provider=provider,
                                              depends_on=[namespace])
        meta = {"namespace": namespace.metadata.name, "labels": labels}
        hard = {"requests.cpu": cfg.quota.cpu, "requests.memory": cfg.quota.memory}
        if cfg.quota.pods is not None:
            hard["pods"] = str(cfg.quota.pods)
        quota = k8s.core.v1.ResourceQuota(
            f"{name}-quota",
            metadata={**meta, "name": "benchstack-trials"},
            spec={"hard": hard},
            opts=in_namespace,
        )
        pull_secret: k8s.core.v1.Secret | None = None
        if cfg.registry_username:
            if args.registry_password is None:
                raise ValueError("TrialNamespaceArgs.registry_password is required with "
                                 "kubernetes.registry_username")
            config_json = pulumi.Output.from_input(args.registry_password).apply(
                lambda password: docker_config_json(cfg.registry, cfg.registry_username or "",
                                                    password))
            pull_secret = k8s.core.v1.Secret(
                f"{name}-pull-secret",
                metadata={**meta, "name": PULL_SECRET},
                type="kubernetes.io/dockerconfigjson",
                # A secret already: it derives from the password secret.
                string_data={".dockerconfigjson": config_json},
                opts=in_namespace,
            )
        account = k8s.core.v1.ServiceAccount(
            f"{name}-harbor",
            metadata={**meta, "name": SERVICE_ACCOUNT},
            opts=in_namespace,
        )
        role = k8s.rbac.v1.Role(
            f"{name}-harbor-role",
            metadata={**meta, "name": SERVICE_ACCOUNT},
            rules=CONTROLLER_RULES,
            opts=in_namespace,
        )
        binding = k8s.rbac.v1.RoleBinding(
            f"{name}-harbor-binding",
            metadata={**meta, "name": SERVICE_ACCOUNT},
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                      "name": role.metadata.name},
            subjects=[{"kind": "ServiceAccount", "name": account.metadata.name,
                       "namespace": namespace.metadata.name}],
            opts=in_namespace,
        )
        # Ready for trials once the quota and the controller's rights exist.
        ready = pulumi.Output.all(quota.id, binding.id)
        self.namespace = ready.apply(lambda _: cfg.namespace)
        self.service_account = ready.apply(lambda _: SERVICE_ACCOUNT)
        self.pull_secret = (pull_secret.metadata.name if pull_secret is not None
                            else pulumi.Output.from_input(None))
        self.register_outputs({
            "namespace": self.namespace,
            "service_account": self.service_account,
            "pull_secret": self.pull_secret,
        })
