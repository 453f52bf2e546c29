"""The k8s host modules: the pre-launch check of a namespace (hostside/k8s_preflight.py) run as
its step runs, and the watcher (hostside/k8s_watch.py) spawned as the launch spawns it, both
against the real one-node test cluster; the kubeconfig reading (hostside/k8s_kubeconfig.py), the
probe's result lines and the watcher's files without a cluster."""

from __future__ import annotations

import base64
import http.server
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from hostside import k8s_kubeconfig as kc
from hostside import k8s_preflight, k8s_watch
from hostside.step import HostError
from tests.conftest import REGISTRY, ScriptResult
from tests.hostplane.steps import run_step
from tests.k8s.cluster import BRIDGE, IMAGE, Cluster, sleeper

# bookworm + python3 (setup/serving_image.sh): an image that can fetch a URL.
PYTHON_IMAGE = f"{REGISTRY}/benchstack/sglang-standin:0.3.2"
TASKS = ["k8s-hello", "k8s-where"]


# --- helpers -----------------------------------------------------------------------------------


def json_kubeconfig(path: Path) -> dict[str, Any]:
    """A YAML kubeconfig as the stack writes it: JSON, file references inlined as *-data."""
    config = yaml.safe_load(path.read_text())
    for kind, key in (("clusters", "cluster"), ("users", "user")):
        for entry in config.get(kind) or []:
            inner = entry[key]
            for ref in ("certificate-authority", "client-certificate", "client-key"):
                if ref in inner:
                    data = (path.parent / inner.pop(ref)).read_bytes()
                    inner[f"{ref}-data"] = base64.b64encode(data).decode()
    return config


def preflight(kubeconfig: dict | str, namespace: str, verb: str = "create",
              **over: Any) -> ScriptResult:
    """The step as the component runs it: inputs as JSON, the kubeconfig on stdin."""
    inputs = {
        "namespace": namespace,
        "registry": REGISTRY,
        "images": {IMAGE: TASKS},
        "probe_image": IMAGE,
        "need_tools": [],
        "egress_url": None,
        "preflight_timeout_s": 90,
        **over,
    }
    text = kubeconfig if isinstance(kubeconfig, str) else json.dumps(kubeconfig)
    return run_step("k8s_preflight", verb, inputs, secrets={"kubeconfig": text}, timeout=300)


def probe_pods_left(cluster: Cluster, namespace: str) -> list[str]:
    pods = cluster.get("pods", "-n", namespace, "-l", "app=benchstack-preflight")["items"]
    return [p["metadata"]["name"] for p in pods]


def wait_ready(cluster: Cluster, namespace: str, pod: str) -> None:
    cluster.kubectl_run("-n", namespace, "wait", f"pod/{pod}", "--for=condition=Ready",
                        "--timeout=150s", timeout=180)


@pytest.fixture(scope="module")
def admin(k8s_cluster: Cluster) -> dict[str, Any]:
    return json_kubeconfig(k8s_cluster.kubeconfig)


# --- the preflight on the cluster --------------------------------------------------------------


def test_preflight_passes_on_a_good_namespace(
    k8s_cluster: Cluster, namespace: str, admin: dict
) -> None:
    res = preflight(admin, namespace, need_tools=["sh", "tar"],
                    egress_url="http://127.0.0.1:9/")
    assert res.returncode == 0, res.stderr
    out = res.outputs
    assert out["api_version"] == "v1.34.4"
    assert out["namespace"] == namespace
    assert out["images_checked"] == 1
    assert out["registry_scheme"] == "http"  # the loopback registry is plain HTTP
    assert out["tools_found"] == {"sh": "/usr/bin/sh", "tar": "/usr/bin/tar"}
    # minbase has none of curl, wget, python3: a warning, not a failure.
    assert out["egress"] == "untested"
    assert out["warnings"] == [
        f"could not test egress to http://127.0.0.1:9/: probe_image {IMAGE} has none of curl, "
        "wget, python3"]
    assert 0 < out["probe_seconds"] < 90
    assert out["probe_pod"].startswith("benchstack-preflight-")
    assert probe_pods_left(k8s_cluster, namespace) == []
    # Progress on stderr, with the probe's states.
    assert f"[k8s_preflight] probe pod {out['probe_pod']}: Succeeded" in res.stderr
    # The check verb is the same check.
    again = preflight(admin, namespace, verb="check")
    assert again.returncode == 0, again.stderr
    assert again.outputs["egress"] == "not asked" and again.outputs["tools_found"] == {}
    assert probe_pods_left(k8s_cluster, namespace) == []


def test_preflight_fails_naming_the_missing_image_and_its_tasks(
    k8s_cluster: Cluster, namespace: str, admin: dict
) -> None:
    missing = f"{REGISTRY}/benchstack/no-such-image:1.0"
    res = preflight(admin, namespace, images={IMAGE: ["k8s-hello"], missing: ["task-b", "task-a"]})
    assert res.returncode == 1
    assert res.reason == (
        f"k8s_preflight: image {missing} (used by tasks task-a, task-b) is not in registry "
        f"{REGISTRY} (no manifest for that tag): push it there, or fix the task's docker_image")
    # An image of another registry is named with its task before any registry call.
    res = preflight(admin, namespace, images={"ghcr.io/someone/debian:12": ["task-c"]})
    assert res.returncode == 1
    assert res.reason.startswith(
        f"k8s_preflight: image ghcr.io/someone/debian:12 (used by task task-c) is neither under "
        f"registry {REGISTRY}")
    # A Docker Hub image is looked up in the registry as the nodes' mirror of Hub.
    res = preflight(admin, namespace, images={"debian:12": ["task-d"]})
    assert res.returncode == 1
    assert res.reason == (
        f"k8s_preflight: image debian:12 (used by task task-d) is not in registry {REGISTRY} "
        "(no manifest for that tag): push it there, or fix the task's docker_image")
    assert probe_pods_left(k8s_cluster, namespace) == []


def test_preflight_fails_with_the_quotas_words(
    k8s_cluster: Cluster, namespace: str, admin: dict
) -> None:
    k8s_cluster.apply({
        "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": "tiny", "namespace": namespace},
        "spec": {"hard": {"requests.cpu": "5m"}},
    })
    # Admission uses the quota's status, which the quota controller fills in.
    k8s_cluster.wait_for("the quota's status", lambda: k8s_cluster.get(
        "resourcequota", "-n", namespace, "tiny").get("status", {}).get("hard"))
    res = preflight(admin, namespace)
    assert res.returncode == 1
    assert res.reason.startswith(
        f"k8s_preflight: namespace {namespace} refuses a pod shaped as Harbor's (403: pods "
        '"benchstack-preflight-')
    assert "exceeded quota: tiny, requested: requests.cpu=10m" in res.reason
    assert "limited: requests.cpu=5m" in res.reason
    assert res.reason.endswith("raise the namespace's ResourceQuota or free some of it")
    assert probe_pods_left(k8s_cluster, namespace) == []


def service_account_kubeconfig(cluster: Cluster, admin: dict, namespace: str,
                               with_exec: bool) -> dict:
    """A ServiceAccount whose Role grants what Harbor and the watcher need, with or without
    pods/exec (and never pods/log: the probe's result then comes from its termination message),
    and a kubeconfig with the token of its token Secret (the admin's cluster entry)."""
    rules = [
        {"apiGroups": [""], "resources": ["pods"],
         "verbs": ["create", "get", "delete", "list", "watch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["list", "watch"]},
    ]
    if with_exec:
        rules.append({"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create", "get"]})
    for manifest in (
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": "runner", "namespace": namespace}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "runner", "namespace": namespace}, "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "runner", "namespace": namespace},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "runner"},
         "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": namespace}]},
        {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
         "metadata": {"name": "runner-token", "namespace": namespace,
                      "annotations": {"kubernetes.io/service-account.name": "runner"}}},
    ):
        cluster.apply(manifest)
    token = cluster.wait_for("the token Secret's token", lambda: cluster.get(
        "secret", "-n", namespace, "runner-token").get("data", {}).get("token"))
    return {
        "apiVersion": "v1", "kind": "Config",
        "clusters": admin["clusters"],
        "users": [{"name": "runner", "user": {"token": base64.b64decode(token).decode()}}],
        "contexts": [{"name": "runner", "context": {
            "cluster": admin["clusters"][0]["name"], "user": "runner", "namespace": namespace}}],
        "current-context": "runner",
    }


def test_preflight_names_the_verb_a_service_account_lacks(
    k8s_cluster: Cluster, namespace: str, admin: dict
) -> None:
    config = service_account_kubeconfig(k8s_cluster, admin, namespace, with_exec=False)
    res = preflight(config, namespace)
    assert res.returncode == 1
    user = f"system:serviceaccount:{namespace}:runner"
    assert res.reason == (
        f"k8s_preflight: user {user} may not create pods/exec in namespace {namespace} (Harbor "
        "runs every command through exec) (and 1 more denied: get pods/exec): grant it with a "
        "Role and RoleBinding in the namespace")
    # The same account with exec passes; it may not read its namespace object, which the probe
    # pod stands in for.
    config = service_account_kubeconfig(k8s_cluster, admin, namespace, with_exec=True)
    res = preflight(config, namespace)
    assert res.returncode == 0, res.stderr
    assert res.outputs["user"] == user
    assert "may not read namespace" in res.stderr
    assert probe_pods_left(k8s_cluster, namespace) == []


def test_preflight_names_a_tool_the_task_image_lacks(
    k8s_cluster: Cluster, namespace: str, admin: dict
) -> None:
    res = preflight(admin, namespace, need_tools=["tmux", "sh"])
    assert res.returncode == 1
    assert res.reason == (
        f"k8s_preflight: need_tools tmux not found in probe_image {IMAGE} (used by tasks "
        "k8s-hello, k8s-where) (command -v in the probe pod): install it in the task images, "
        "or run an agent that does not need it")
    assert probe_pods_left(k8s_cluster, namespace) == []


@contextmanager
def pods_reach_each_other() -> Iterator[None]:
    """The test cluster's pods reach nothing, not even each other: the bridge's traffic goes
    through the host's FORWARD chain (br_netfilter), whose policy Docker sets to DROP. One rule
    for the cluster's own bridge, removed after."""
    rule = ["FORWARD", "-i", BRIDGE, "-o", BRIDGE, "-j", "ACCEPT"]
    subprocess.run(["iptables", "-w", "5", "-I", *rule], check=True, capture_output=True)
    try:
        yield
    finally:
        subprocess.run(["iptables", "-w", "5", "-D", *rule], check=True, capture_output=True)


def test_preflight_egress_from_the_pods(
    k8s_cluster: Cluster, namespace: str, admin: dict
) -> None:
    """With python3 in the image: a URL the pods reach (another pod's server: the test pods
    reach nothing else) passes, one they cannot reach fails naming egress_url."""
    k8s_cluster.apply(sleeper("web", namespace, PYTHON_IMAGE,
                              command=["python3", "-m", "http.server", "8080", "-d", "/etc"]))
    wait_ready(k8s_cluster, namespace, "web")
    ip = k8s_cluster.get("pod", "-n", namespace, "web")["status"]["podIP"]
    url = f"http://{ip}:8080/hostname"
    k8s_cluster.wait_for("the web pod's server", lambda: k8s_cluster.kubectl_run(
        "-n", namespace, "exec", "web", "--", "python3", "-c",
        f"import urllib.request; urllib.request.urlopen('{url}')", check=False).returncode == 0)
    images = {PYTHON_IMAGE: ["k8s-py"]}
    with pods_reach_each_other():
        res = preflight(admin, namespace, images=images, probe_image=PYTHON_IMAGE,
                        need_tools=["python3"], egress_url=url)
    assert res.returncode == 0, res.stderr
    assert res.outputs["egress"] == "reached"
    assert res.outputs["egress_detail"] == f"{url} with python3 HTTP 200"
    assert res.outputs["warnings"] == []
    # Nothing listens on the probe pod's own loopback.
    res = preflight(admin, namespace, images=images, probe_image=PYTHON_IMAGE,
                    egress_url="http://127.0.0.1:9/")
    assert res.returncode == 1
    assert res.reason == (
        f"k8s_preflight: pods in namespace {namespace} cannot reach egress_url "
        "http://127.0.0.1:9/ (python3 URLError <urlopen error [Errno 111] Connection refused>): "
        "open egress to it (NetworkPolicy, proxy, firewall) or fix egress_url")
    assert probe_pods_left(k8s_cluster, namespace) == []


def test_preflight_names_a_namespace_that_does_not_exist(
    k8s_cluster: Cluster, admin: dict
) -> None:
    res = preflight(admin, "bs-test-nowhere")
    assert res.returncode == 1
    assert res.reason == (
        "k8s_preflight: namespace bs-test-nowhere does not exist in the cluster: create it "
        "(kubectl create namespace bs-test-nowhere) or fix namespace")


# --- the watcher on the cluster ----------------------------------------------------------------


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def wait_gone(pid: int, timeout: float = 30) -> None:
    """Wait for the watcher (a child of this test process: reaped here) to exit."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return
        time.sleep(0.2)
    raise AssertionError(f"watcher {pid} still running after {timeout} s")


@pytest.fixture
def harbor_stand_in() -> Iterator[subprocess.Popen]:
    """A process the watcher watches over, as it watches over Harbor."""
    proc = subprocess.Popen(["sleep", "600"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_the_watcher_writes_the_pods_and_events_and_ends_with_harbor(
    k8s_cluster: Cluster, namespace: str, admin: dict, tmp_path: Path,
    harbor_stand_in: subprocess.Popen,
) -> None:
    kubeconfig = tmp_path / "kubeconfig.json"
    kubeconfig.write_text(json.dumps(admin))
    kubeconfig.chmod(0o600)
    job_dir = tmp_path / "results" / "job-1"
    log = tmp_path / "k8s-watch.log"
    # A pod from before the watcher: its events come from the first list.
    k8s_cluster.apply(sleeper("early", namespace))
    wait_ready(k8s_cluster, namespace, "early")

    pid = k8s_watch.start(str(kubeconfig), namespace, str(job_dir), harbor_stand_in.pid, str(log))
    try:
        assert Path(f"{job_dir}.k8s-watch.pid").read_text() == f"{pid}\n"
        # Idempotent: the live watcher of this job dir is reused.
        assert k8s_watch.start(str(kubeconfig), namespace, str(job_dir), harbor_stand_in.pid,
                               str(log)) == pid
        k8s_cluster.apply(sleeper("trial", namespace))
        wait_ready(k8s_cluster, namespace, "trial")
        # Harbor makes the job dir after its first trial started: nothing is lost meanwhile.
        assert not job_dir.exists()
        job_dir.mkdir(parents=True)
        k8s_cluster.kubectl_run("-n", namespace, "delete", "pod", "trial", "--grace-period=0",
                                "--wait=true", timeout=120)
        pods_file = job_dir / "k8s-pods.jsonl"
        k8s_cluster.wait_for("the trial pod's DELETED line", lambda: pods_file.exists() and any(
            d["type"] == "DELETED" and d["object"]["metadata"]["name"] == "trial"
            for d in lines(pods_file)), timeout=30)
    finally:
        harbor_stand_in.kill()
        harbor_stand_in.wait()
    wait_gone(pid)
    text = log.read_text()
    assert f"PID {harbor_stand_in.pid} is gone: a last list, then exit" in text, text
    assert "done:" in text

    deliveries = lines(job_dir / "k8s-pods.jsonl")
    trial = [d for d in deliveries if d["object"]["metadata"]["name"] == "trial"]
    types = [d["type"] for d in trial]
    assert types[0] == "ADDED" and types[-1] == "DELETED" and "MODIFIED" in types, types
    phases = {d["object"]["status"].get("phase") for d in trial}
    assert "Running" in phases, phases
    early = [d for d in deliveries if d["object"]["metadata"]["name"] == "early"]
    assert early and early[0]["type"] == "ADDED"
    keys = [(d["type"] == "DELETED", d["object"]["metadata"]["uid"],
             d["object"]["metadata"]["resourceVersion"]) for d in deliveries]
    assert len(keys) == len(set(keys)), "a pod delivery written twice"

    events = lines(job_dir / "k8s-events.jsonl")
    assert {e["kind"] for e in events} == {"Event"}
    assert {e["apiVersion"] for e in events} == {"v1"}
    for pod in ("early", "trial"):
        reasons = {e["reason"] for e in events if e["involvedObject"]["name"] == pod}
        assert {"Scheduled", "Pulled", "Started"} <= reasons, (pod, reasons)
    keys = [(e["metadata"]["uid"], e["metadata"]["resourceVersion"]) for e in events]
    assert len(keys) == len(set(keys)), "an event written twice"
    for value in (*events, *(d["object"] for d in deliveries)):
        assert "managedFields" not in value["metadata"]

    # A watcher started again for the job dir (a resume) lists the same objects: none is
    # written a second time.
    before = {name: (job_dir / name).read_text()
              for name in ("k8s-events.jsonl", "k8s-pods.jsonl")}
    second = subprocess.Popen(["sleep", "600"])
    try:
        pid2 = k8s_watch.start(str(kubeconfig), namespace, str(job_dir), second.pid, str(log))
        assert pid2 != pid
        k8s_cluster.wait_for("the second watcher's first lists", lambda: log.read_text().count(
            "listed at resourceVersion") >= 4, timeout=30)
        # SIGTERM ends it too, after a last list.
        os.kill(pid2, signal.SIGTERM)
        wait_gone(pid2)
    finally:
        second.kill()
        second.wait()
    assert "signal 15: a last list, then exit" in log.read_text()
    after = {name: (job_dir / name).read_text() for name in before}
    assert after["k8s-pods.jsonl"].startswith(before["k8s-pods.jsonl"])
    assert after["k8s-events.jsonl"].startswith(before["k8s-events.jsonl"])
    added = [json.loads(line) for line in
             after["k8s-events.jsonl"][len(before["k8s-events.jsonl"]):].splitlines()]
    old = {(e["metadata"]["uid"], e["metadata"]["resourceVersion"]) for e in events}
    assert not [e for e in added if (e["metadata"]["uid"], e["metadata"]["resourceVersion"])
                in old]


# --- without a cluster -------------------------------------------------------------------------


def kubeconfig(user: dict | None = None, **over: Any) -> dict:
    config = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "users": [{"name": "u", "user": user if user is not None else {"token": "s3cr3t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "ns"}}],
        "current-context": "x",
    }
    config.update(over)
    return config


@pytest.mark.parametrize(("config", "message"), [
    ("{not json", "kubeconfig (text): not JSON (line 1): the stack writes its kubeconfig as "
                  "JSON (convert a YAML one)"),
    ("", "kubeconfig is empty: pass its JSON text or the path of its JSON file"),
    (kubeconfig(**{"current-context": ""}),
     "kubeconfig (text): no current-context: set it to one of its contexts"),
    (kubeconfig(**{"current-context": "y"}),
     "kubeconfig (text): no context named 'y' (the current context refers to it): fix the "
     "kubeconfig"),
    (kubeconfig(clusters=[]),
     "kubeconfig (text): no cluster named 'c' (the current context refers to it): fix the "
     "kubeconfig"),
    (kubeconfig(clusters=[{"name": "c", "cluster": {"server": "127.0.0.1:6443"}}]),
     "kubeconfig (text): cluster 'c' has no https:// server (got '127.0.0.1:6443')"),
    (kubeconfig({"exec": {"command": "aws"}}),
     "kubeconfig (text): user 'u' authenticates with 'exec', which a host step cannot run: give "
     "it a token or a client certificate"),
    (kubeconfig({}),
     "kubeconfig (text): user 'u' has neither a token nor client-certificate-data/"
     "client-key-data: give it one"),
    (kubeconfig({"client-certificate-data": "QUJD"}),
     "kubeconfig (text): user 'u' has a client certificate without its key, or a key without "
     "its certificate"),
    (kubeconfig({"client-certificate-data": "not base64!", "client-key-data": "QUJD"}),
     "kubeconfig (text): client-certificate-data is not valid base64"),
    (kubeconfig(clusters=[{"name": "c", "cluster": {
        "server": "https://h", "certificate-authority-data": "%%%"}}]),
     "kubeconfig (text): certificate-authority-data is not valid base64"),
])
def test_kubeconfig_errors_name_what_to_fix(config: Any, message: str) -> None:
    text = config if isinstance(config, str) else json.dumps(config)
    with pytest.raises(HostError) as caught:
        kc.load(text)
    assert str(caught.value) == message
    assert "s3cr3t" not in str(caught.value)


def test_kubeconfig_from_a_file_or_text(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(kubeconfig()))
    for source in (str(path), path.read_text()):
        config = kc.load(source)
        assert (config.server, config.token, config.namespace, config.context) == (
            "https://127.0.0.1:6443", "s3cr3t", "ns", "x")
    with pytest.raises(HostError, match=r"kubeconfig /nowhere.json: cannot read it \(No such"):
        kc.load("/nowhere.json")
    path.write_text("apiVersion: v1\nkind: Config\n")
    with pytest.raises(HostError, match=f"kubeconfig {path}: not JSON"):
        kc.load(str(path))


def test_client_certificate_goes_through_temporary_files_that_are_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, crt = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(crt), "-days", "1", "-subj", "/CN=benchstack"],
                   check=True, capture_output=True)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    user = {"client-certificate-data": base64.b64encode(crt.read_bytes()).decode(),
            "client-key-data": base64.b64encode(key.read_bytes()).decode()}
    cluster = {"server": "https://127.0.0.1:6443",
               "certificate-authority-data": base64.b64encode(crt.read_bytes()).decode()}
    client = kc.Client(kc.load(json.dumps(kubeconfig(
        user, clusters=[{"name": "c", "cluster": cluster}]))))
    assert client.ssl is not None and list(scratch.iterdir()) == []
    # A key that does not match its certificate is refused in one line.
    other = tmp_path / "other.pem"
    subprocess.run(["openssl", "genrsa", "-out", str(other), "2048"], check=True,
                   capture_output=True)
    user["client-key-data"] = base64.b64encode(other.read_bytes()).decode()
    with pytest.raises(HostError, match="the client certificate and key cannot be loaded"):
        kc.Client(kc.load(json.dumps(kubeconfig(user, clusters=[{"name": "c",
                                                                 "cluster": cluster}]))))
    assert list(scratch.iterdir()) == []


class _Api(http.server.BaseHTTPRequestHandler):
    """A stand-in API: 403 with a Status for /forbidden, a watch stream for /watch."""

    def do_GET(self) -> None:  # noqa: N802
        if self.path.startswith("/forbidden"):
            body = json.dumps({"kind": "Status", "status": "Failure", "code": 403,
                               "message": 'pods is forbidden: User "u" cannot list resource '
                                          '"pods" in API group "" in the namespace "ns"'})
            self.send_response(403)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())
            return
        assert self.headers["Authorization"] == "Bearer s3cr3t"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for n in range(3):
            line = json.dumps({"type": "ADDED", "object": {"n": n}}).encode() + b"\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def api() -> Iterator[kc.Client]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = kubeconfig(clusters=[{"name": "c", "cluster": {
        "server": f"http://127.0.0.1:{server.server_address[1]}"}}])
    try:
        yield kc.Client(kc.load(json.dumps(config)))
    finally:
        server.shutdown()


def test_api_errors_name_the_request_and_the_apis_words(api: kc.Client) -> None:
    with pytest.raises(kc.ApiError) as caught:
        api.get("/forbidden/api/v1/namespaces/ns/pods")
    assert caught.value.status == 403
    assert str(caught.value) == (
        'GET /forbidden/api/v1/namespaces/ns/pods: 403 Forbidden: pods is forbidden: User "u" '
        'cannot list resource "pods" in API group "" in the namespace "ns"')
    assert [d["object"]["n"] for d in api.stream("/watch?watch=1")] == [0, 1, 2]
    gone = kc.Client(kc.load(json.dumps(kubeconfig(clusters=[{"name": "c", "cluster": {
        "server": "http://127.0.0.1:9"}}]))))
    with pytest.raises(HostError, match=r"GET /version: no answer from http://127.0.0.1:9 \("):
        gone.get("/version")


def test_probe_lines_and_image_names() -> None:
    result = k8s_preflight.parse_probe(
        "noise\nbenchstack-probe tool-found tmux /usr/bin/tmux\n"
        "benchstack-probe tool-missing git\n"
        "benchstack-probe egress failed curl curl: (7) Failed to connect\n")
    assert result.found == {"tmux": "/usr/bin/tmux"} and result.missing == ["git"]
    assert result.egress == ("failed", "curl curl: (7) Failed to connect")
    split = k8s_preflight.split_image
    assert split("r:5000/a/b:1", "r:5000") == ("a/b", "1")
    assert split("r:5000/a/b", "r:5000") == ("a/b", "latest")
    assert split("r:5000/a@sha256:ab", "r:5000") == ("a", "sha256:ab")
    assert split("other:5000/a:1", "r:5000") is None
    # Docker Hub images, through the registry as the nodes' mirror of Hub.
    assert split("benchstack/minbase:bookworm", "r:5000") == ("benchstack/minbase", "bookworm")
    assert split("debian:12", "r:5000") == ("library/debian", "12")
    assert split("docker.io/library/debian", "r:5000") == ("library/debian", "latest")
    assert split("ghcr.io/a/b:1", "r:5000") is None
    assert k8s_preflight.is_loopback("127.0.0.1:5000") and k8s_preflight.is_loopback("localhost")
    assert not k8s_preflight.is_loopback("registry.example:5000")


def test_the_recorder_waits_for_the_job_dir_and_writes_each_version_once(
    tmp_path: Path
) -> None:
    job_dir = tmp_path / "job"
    recorder = k8s_watch.Recorder(str(job_dir))
    event = {"kind": "Event", "metadata": {"uid": "e1", "resourceVersion": "5",
                                           "managedFields": [{"manager": "kubelet"}]}}
    pod = {"metadata": {"uid": "p1", "resourceVersion": "7"}}
    assert recorder.event(event) and not recorder.event(event)
    assert recorder.pod("LISTED", pod) and not recorder.pod("MODIFIED", pod)
    assert recorder.pod("DELETED", pod)  # the same version, deleted: its own line
    recorder.flush()
    assert not job_dir.exists()  # never made by the watcher
    job_dir.mkdir()
    recorder.flush()
    assert lines(job_dir / "k8s-events.jsonl") == [
        {"kind": "Event", "metadata": {"uid": "e1", "resourceVersion": "5"}}]
    assert [d["type"] for d in lines(job_dir / "k8s-pods.jsonl")] == ["ADDED", "DELETED"]
    assert recorder.close() == {"k8s-events.jsonl": 1, "k8s-pods.jsonl": 2}
    # A new watcher of the same job dir reads back what is written.
    again = k8s_watch.Recorder(str(job_dir))
    again.flush()
    assert not again.event(event) and not again.pod("LISTED", pod)
    assert again.pod("LISTED", {"metadata": {"uid": "p1", "resourceVersion": "9"}})
    again.close()
    assert [d["type"] for d in lines(job_dir / "k8s-pods.jsonl")] == [
        "ADDED", "DELETED", "MODIFIED"]
