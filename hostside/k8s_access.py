"""HarborJob on Kubernetes: the Harbor controller's own kubeconfig, on the Harbor host.

Harbor's `ack` environment needs a kubeconfig file. It does not get the stack's (an identity
that may create namespaces and RBAC): this step asks the cluster for a token of the namespace's
ServiceAccount (TokenRequest; the account and its Role are the TrialNamespace component's) and
writes a kubeconfig with it, the stack's cluster entry and the namespace, as JSON (JSON is
YAML: Harbor's client reads it, and so does the stdlib of k8s_watch and k8s_preflight), mode
0600. So Harbor, the watcher and the pre-launch probe act with exactly the rights the trials
need, in the one namespace.

create: inputs kubeconfig (a secret, on stdin: the stack's kubeconfig as JSON, file references
inlined), namespace, service_account, out_path, token_seconds. Idempotent: a file holding a
token for the same account that is valid for at least half its lifetime is kept. Outputs:
kubeconfig (the path), service_account, namespace, expires.

delete: removes the file (a credential; no result lives in it). Outputs: removed.
"""

from __future__ import annotations

import base64
import json
import os
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from . import k8s_kubeconfig
from .step import HostError, emit, log, verb

NAME = "k8s_access"


@dataclass(frozen=True)
class Inputs:
    kubeconfig: str
    namespace: str
    service_account: str
    out_path: str
    token_seconds: int


@dataclass(frozen=True)
class DeleteInputs:
    out_path: str


def _expires_at(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


def still_valid(path: Path, inputs: Inputs) -> bool:
    """An earlier token for the same account, valid for at least half its lifetime more."""
    try:
        kept = json.loads(path.read_text())
        meta = kept["benchstack"]
        return (meta["service_account"] == inputs.service_account
                and meta["namespace"] == inputs.namespace
                and _expires_at(meta["expires"]) - time.time() > inputs.token_seconds / 2)
    except (OSError, ValueError, KeyError, TypeError):
        return False


def controller_kubeconfig(stack: k8s_kubeconfig.Kubeconfig, namespace: str, account: str,
                          token: str, expires: str) -> dict:
    cluster: dict = {"server": stack.server}
    if stack.ca_data:
        cluster["certificate-authority-data"] = base64.b64encode(stack.ca_data).decode()
    elif stack.ca_file:
        cluster["certificate-authority"] = stack.ca_file
    if stack.insecure:
        cluster["insecure-skip-tls-verify"] = True
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "cluster", "cluster": cluster}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {"cluster": "cluster", "user": account,
                                                   "namespace": namespace}}],
        "current-context": account,
        # Ignored by every client; read back by the next create.
        "benchstack": {"service_account": account, "namespace": namespace, "expires": expires},
    }


@verb(Inputs)
def create(inputs: Inputs) -> None:
    out = Path(inputs.out_path)
    outputs = {"kubeconfig": str(out), "service_account": inputs.service_account,
               "namespace": inputs.namespace}
    if still_valid(out, inputs):
        log(NAME, f"the controller kubeconfig {out} is still valid")
        emit({**outputs, "expires": json.loads(out.read_text())["benchstack"]["expires"]})
        return
    stack = k8s_kubeconfig.load(inputs.kubeconfig)
    client = k8s_kubeconfig.Client(stack)
    path = (f"/api/v1/namespaces/{inputs.namespace}/serviceaccounts/"
            f"{inputs.service_account}/token")
    answer = client.post(path, {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": inputs.token_seconds},
    })
    token = (answer.get("status") or {}).get("token")
    expires = (answer.get("status") or {}).get("expirationTimestamp", "")
    if not token:
        raise HostError(f"POST {path}: the cluster returned no token")
    config = controller_kubeconfig(stack, inputs.namespace, inputs.service_account, token,
                                   expires)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(config, f)
    tmp.replace(out)
    log(NAME, f"wrote {out}: ServiceAccount {inputs.service_account} of namespace "
        f"{inputs.namespace}, token valid until {expires}")
    emit({**outputs, "expires": expires})


@verb(DeleteInputs)
def delete(inputs: DeleteInputs) -> None:
    out = Path(inputs.out_path)
    removed = []
    if out.is_file():
        out.unlink()
        removed.append(str(out))
    emit({"removed": removed})
