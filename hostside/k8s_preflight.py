"""The pre-launch check of a Kubernetes namespace for Harbor's `ack` environment.

Harbor 0.21's `ack` runs each trial as a pod in one namespace: it creates the pod (privileged,
as root, with cpu/memory/ephemeral-storage requests), runs every command through the exec
stream, and deletes the pod. What would make such a job fail minutes or hours in is checked
here first, in this order, and the first failure is the step's one line, naming the key or the
task at fault and what to change:

1. the API answers with the kubeconfig's credentials (and they are not anonymous);
2. the namespace exists (not checked when the user may not read namespaces: step 5 shows it);
3. SelfSubjectAccessReview: the user may create, get and delete pods, get and create pods/exec
   (Harbor's Python client opens exec as a websocket GET, authorized as `get`: it fails with
   `create` alone on the test cluster; `create` is what kubectl, and an API server that checks
   websocket upgrades, ask for), list and watch pods and events (the k8s watcher, k8s_watch.py);
4. every image is under `registry` and its manifest is there (registry v2 API; https first,
   plain http for a loopback or insecure registry; anonymous token auth when the registry asks);
5. a probe pod shaped as Harbor's (restartPolicy Never, privileged, root, tiny requests, the
   probe image, label app=benchstack-preflight, deleted afterwards whatever happens) is
   admitted (ResourceQuota, PodSecurity), scheduled, pulls and runs `sh -c` with `command -v`
   for each of `need_tools` and, when `egress_url` is set, fetches it with whatever the image
   has (curl, wget, python3; none: a warning in the outputs, not a failure). The result is read
   from the pod's log (or its termination message) and exit code; a pod stuck Pending or
   failing its pull is reported in the cluster's own words (the FailedScheduling or Failed
   event, the quota's 403).

create and check: the same checks (nothing is left behind). Inputs: the kubeconfig (a secret,
its JSON text), namespace, registry, images ({image: [task names]}), probe_image, need_tools,
egress_url (or null), preflight_timeout_s (the probe pod's whole life, and every API
request's bound).
Outputs: api_version, user, namespace, images_checked, registry_scheme, probe_pod,
probe_seconds, tools_found ({tool: path}), egress (reached | untested | not asked),
egress_detail, warnings.
"""

from __future__ import annotations

import ipaddress
import json
import re
import secrets
import shlex
import signal
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from .k8s_kubeconfig import ApiError, Client, load
from .step import HostError, emit, log, verb

NAME = "k8s_preflight"
PROBE_LABEL = {"app": "benchstack-preflight"}
# The probe's requests: a pod this small is admitted wherever a trial's pod could be.
PROBE_REQUESTS = {"cpu": "10m", "memory": "16Mi", "ephemeral-storage": "16Mi"}
# What the probe prints before each result line (its log and its termination message).
MARK = "benchstack-probe"
POLL_S = 1.0
# A pod waiting for one of these reasons will not start by waiting longer.
PULL_FAILED = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
START_FAILED = ("CreateContainerConfigError", "CreateContainerError", "RunContainerError")
MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)

# (verb, resource, subresource): what the user must be allowed in the namespace, and why.
NEEDED = (
    ("create", "pods", "", "Harbor makes one pod per trial"),
    ("get", "pods", "", "Harbor waits for its pods"),
    ("delete", "pods", "", "Harbor deletes its pods"),
    ("create", "pods", "exec", "Harbor runs every command through exec"),
    ("get", "pods", "exec", "Harbor's client opens exec as a websocket GET"),
    ("list", "pods", "", "the k8s watcher records the pods"),
    ("watch", "pods", "", "the k8s watcher records the pods"),
    ("list", "events", "", "the k8s watcher records the events"),
    ("watch", "events", "", "the k8s watcher records the events"),
)


@dataclass(frozen=True)
class Inputs:
    # A secret (on standard input): the kubeconfig's JSON text.
    kubeconfig: str
    namespace: str
    # host[:port] the pods pull every image from.
    registry: str
    # {image: [task names that use it]}
    images: dict[str, list[str]]
    probe_image: str
    # Commands the task image must have (["tmux"] for terminus-2); may be empty.
    need_tools: list[str]
    # A URL the pods must reach, or None.
    egress_url: str | None
    preflight_timeout_s: int


def text_at(value: object, *keys: str) -> str:
    """The text at value[k1][k2]... of an API answer, "" where a step is missing."""
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def tasks_text(tasks: Sequence[str], most: int = 3) -> str:
    names = sorted(tasks)
    if not names:
        return "no task"
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return f"task{'s' if len(names) > 1 else ''} {', '.join(names[:most])}{more}"


def validate(inputs: Inputs) -> None:
    for key in ("namespace", "registry", "probe_image"):
        if not isinstance(getattr(inputs, key), str) or not getattr(inputs, key):
            raise HostError(f"{key} is empty: the component must pass it")
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", inputs.namespace) \
            or len(inputs.namespace) > 63:
        raise HostError(f"namespace {inputs.namespace!r} is not a Kubernetes namespace name "
                        "(lower-case letters, digits and '-', at most 63): fix namespace")
    if "/" in inputs.registry.strip("/") or "://" in inputs.registry:
        raise HostError(f"registry {inputs.registry!r} must be host[:port]: fix registry")
    if not isinstance(inputs.images, dict) or not all(
            isinstance(tasks, list) for tasks in inputs.images.values()):
        raise HostError("images must be a JSON object {image: [task names]}")
    if not isinstance(inputs.need_tools, list) or not all(
            isinstance(tool, str) and re.fullmatch(r"[A-Za-z0-9._+-]+", tool)
            for tool in inputs.need_tools):
        raise HostError(f"need_tools {inputs.need_tools!r} must be a list of command names")
    if inputs.egress_url is not None and not re.match(r"https?://[^\s'\"]+$", inputs.egress_url):
        raise HostError(f"egress_url {inputs.egress_url!r} is not an http(s) URL: fix egress_url")
    if not isinstance(inputs.preflight_timeout_s, int) or inputs.preflight_timeout_s < 10:
        raise HostError(f"preflight_timeout_s {inputs.preflight_timeout_s!r} must be a number "
                        "of seconds >= 10")


# --- 1-3: the API, the namespace, the user's rights -------------------------------------------


def api_check(client: Client) -> tuple[str, str]:
    """The server's version and the user it sees; fails when it does not answer or the
    credentials are refused or anonymous."""
    try:
        version = text_at(client.get("/version"), "gitVersion") or "?"
    except ApiError as exc:
        if exc.status != 401:
            raise
        raise HostError(f"the API at {client.base_url} refuses the kubeconfig's credentials "
                        f"({exc}): give the kubeconfig a valid token or client certificate"
                        ) from None
    except HostError as exc:
        raise HostError(f"the Kubernetes API does not answer ({exc}): check the kubeconfig's "
                        "server and that the cluster runs") from None
    try:
        review = client.post("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                             {"apiVersion": "authentication.k8s.io/v1",
                              "kind": "SelfSubjectReview"})
    except ApiError as exc:
        if exc.status == 404:  # a cluster older than 1.28 has no SelfSubjectReview
            return version, "?"
        if exc.status == 401:
            raise HostError(f"the API at {client.base_url} refuses the kubeconfig's "
                            f"credentials ({exc}): give the kubeconfig a valid token or "
                            "client certificate") from None
        raise
    user = text_at(review, "status", "userInfo", "username") or "?"
    if user == "system:anonymous":
        raise HostError(f"the API at {client.base_url} sees the kubeconfig's user as "
                        "system:anonymous: give the kubeconfig a valid token or client "
                        "certificate")
    return version, user


def namespace_check(client: Client, namespace: str) -> None:
    try:
        ns = client.get(f"/api/v1/namespaces/{namespace}")
    except ApiError as exc:
        if exc.status == 404:
            raise HostError(f"namespace {namespace} does not exist in the cluster: create it "
                            f"(kubectl create namespace {namespace}) or fix namespace") from None
        if exc.status == 403:  # a namespaced role cannot read namespaces: the probe pod will tell
            log(NAME, f"the user may not read namespace {namespace} itself (403): its "
                      "existence is shown by the probe pod")
            return
        raise
    if (ns.get("status") or {}).get("phase") == "Terminating":
        raise HostError(f"namespace {namespace} is being deleted: wait for it to go and create "
                        "it again, or choose another namespace")


def access_check(client: Client, namespace: str, user: str) -> None:
    denied = []
    for action, resource, sub, why in NEEDED:
        attributes = {"namespace": namespace, "verb": action, "resource": resource}
        if sub:
            attributes["subresource"] = sub
        review = client.post(
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
             "spec": {"resourceAttributes": attributes}},
        )
        if not (review.get("status") or {}).get("allowed"):
            denied.append((f"{action} {resource}{'/' + sub if sub else ''}", why))
    for what, why in denied[1:]:
        log(NAME, f"also denied: {what} ({why})")
    if denied:
        what, why = denied[0]
        more = f" (and {len(denied) - 1} more denied: {', '.join(d for d, _ in denied[1:])})" \
            if len(denied) > 1 else ""
        raise HostError(f"user {user} may not {what} in namespace {namespace} ({why}){more}: "
                        "grant it with a Role and RoleBinding in the namespace")


# --- 4: the images in the registry --------------------------------------------------------------


# The domain an image reference names for Docker Hub (the reference's normal form, never
# contacted: the lookup goes to `registry`, the nodes' mirror).
DOCKER_HUB = ("docker.io",)


def split_image(image: str, registry: str) -> tuple[str, str] | None:
    """(repository, tag or digest) of an image as the pods' nodes pull it from `registry`: an
    image named under it, or a Docker Hub image (`benchstack/minbase:bookworm`, Terminal-Bench's
    images) that the nodes pull through it as their mirror (`library/` for official images, as
    Hub itself). None for an image of another registry, which this one cannot serve."""
    prefix = registry.strip("/") + "/"
    if image.startswith(prefix):
        rest = image[len(prefix):]
    else:
        first, slash, remainder = image.partition("/")
        named_host = bool(slash) and ("." in first or ":" in first or first == "localhost")
        if named_host and first not in DOCKER_HUB:
            return None
        rest = remainder if named_host else image
        if "/" not in rest.partition("@")[0]:
            rest = f"library/{rest}"
    name, at, digest = rest.partition("@")
    if at:
        return name, digest
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        repo, _, tag = name.rpartition(":")
        return repo, tag
    return name, "latest"


def is_loopback(host: str) -> bool:
    name = host.rsplit(":", 1)[0].strip("[]") if host.count(":") <= 1 or host.startswith("[") \
        else host
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class Registry:
    """A registry's v2 API as the pods' runtime sees it: https first, plain http when https
    does not answer (a loopback or insecure registry); anonymous bearer tokens on demand."""

    def __init__(self, host: str, timeout: float):
        self.host = host
        self.timeout = timeout
        self.scheme = ""
        handlers: list[urllib.request.BaseHandler] = [
            urllib.request.HTTPSHandler(context=ssl.create_default_context())]
        if is_loopback(host):  # never through a proxy of the environment's
            handlers.append(urllib.request.ProxyHandler({}))
        self.opener = urllib.request.build_opener(*handlers)
        self.tokens: dict[str, str] = {}

    def _call(self, url: str, method: str = "GET", headers: Mapping[str, str] | None = None
              ) -> tuple[int, str, bytes]:
        """(status, the WWW-Authenticate challenge or "", the body's start)"""
        request = urllib.request.Request(url, method=method, headers=dict(headers or {}))
        try:
            with self.opener.open(request, timeout=self.timeout) as resp:
                return resp.status, "", resp.read(65536)
        except urllib.error.HTTPError as exc:
            body = exc.read(4096) if exc.fp is not None else b""
            return exc.code, exc.headers.get("WWW-Authenticate", "") or "", body

    def connect(self) -> str:
        """The scheme the registry answers on (its /v2/ answers 200 or 401)."""
        errors = []
        for scheme in ("https", "http"):
            try:
                status, _, _ = self._call(f"{scheme}://{self.host}/v2/")
            except (urllib.error.URLError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                errors.append(f"{scheme}: {reason}")
                continue
            if status in (200, 401):
                self.scheme = scheme
                return scheme
            errors.append(f"{scheme}: /v2/ answered {status}")
        raise HostError(f"registry {self.host} does not answer the registry API "
                        f"({'; '.join(errors)}): fix registry or start the registry")

    def _token(self, challenge: str, repo: str) -> str | None:
        """An anonymous pull token from a Bearer challenge's realm, None if there is none."""
        if not challenge.lower().startswith("bearer "):
            return None
        params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
        realm = params.get("realm")
        if not realm:
            return None
        query = f"scope={quote(f'repository:{repo}:pull')}"
        if params.get("service"):
            query += f"&service={quote(params['service'])}"
        try:
            status, _, body = self._call(f"{realm}{'&' if '?' in realm else '?'}{query}")
            value = json.loads(body) if status == 200 else {}
        except (urllib.error.URLError, OSError, ValueError):
            return None
        token = value.get("token") or value.get("access_token") if isinstance(value, dict) \
            else None
        return token if isinstance(token, str) else None

    def manifest(self, repo: str, ref: str) -> tuple[int, str]:
        """The HTTP status of the manifest (200: there) and what the registry said."""
        url = f"{self.scheme}://{self.host}/v2/{repo}/manifests/{ref}"
        headers = {"Accept": ", ".join(MANIFEST_TYPES)}
        for _ in range(2):
            if repo in self.tokens:
                headers["Authorization"] = f"Bearer {self.tokens[repo]}"
            try:
                status, challenge, body = self._call(url, "HEAD", headers)
                if status == 405:  # a registry without HEAD on manifests
                    status, challenge, body = self._call(url, "GET", headers)
            except (urllib.error.URLError, OSError) as exc:
                raise HostError(f"registry {self.host}: {url} did not answer "
                                f"({getattr(exc, 'reason', exc)}): check the registry") from None
            if status == 401 and repo not in self.tokens:
                token = self._token(challenge, repo)
                if token:
                    self.tokens[repo] = token
                    continue
            return status, body.decode(errors="replace").strip()[:200]
        return status, body.decode(errors="replace").strip()[:200]


def images_check(images: Mapping[str, list[str]], probe_image: str, registry: str,
                 timeout: float) -> str:
    """Every image (and the probe's) is under `registry` and there; returns the scheme."""
    wanted = {image: list(tasks) for image, tasks in images.items()}
    wanted.setdefault(probe_image, [])
    def who(image: str) -> str:
        tasks = wanted[image]
        return f"used by {tasks_text(tasks)}" if tasks else "probe_image"
    elsewhere = [image for image in sorted(wanted) if split_image(image, registry) is None]
    if elsewhere:
        image = elsewhere[0]
        more = f" (and {len(elsewhere) - 1} more images)" if len(elsewhere) > 1 else ""
        raise HostError(f"image {image} ({who(image)}) is neither under registry {registry}, "
                        f"the one the pods pull from, nor a Docker Hub image it mirrors{more}: "
                        f"push it to {registry} and name it {registry}/..., or fix registry")
    reg = Registry(registry.strip("/"), timeout)
    scheme = reg.connect()
    log(NAME, f"registry {registry} answers over {scheme}; checking {len(wanted)} images")
    missing = []
    for image in sorted(wanted):
        repo, ref = split_image(image, registry) or ("", "")
        status, said = reg.manifest(repo, ref)
        if status == 200:
            continue
        if status in (401, 403):
            raise HostError(f"registry {registry} refuses anonymous pulls of {repo} "
                            f"({status}{': ' + said if said else ''}), and the pods pull "
                            "without credentials: make the repository public to the cluster")
        if status != 404:
            raise HostError(f"registry {registry}: the manifest of {image} answered {status}"
                            f"{': ' + said if said else ''}: check the registry")
        missing.append(image)
    for image in missing[1:]:
        log(NAME, f"also missing: {image} ({who(image)})")
    if missing:
        image = missing[0]
        more = f" (and {len(missing) - 1} more missing images)" if len(missing) > 1 else ""
        raise HostError(f"image {image} ({who(image)}) is not in registry {registry} (no "
                        f"manifest for that tag){more}: push it there, or fix the task's "
                        "docker_image")
    return scheme


# --- 5: the probe pod ---------------------------------------------------------------------------


def probe_script(tools: Sequence[str], egress_url: str | None, egress_timeout: int) -> str:
    """The probe's `sh -c` program: one `benchstack-probe ...` line per result, on stdout and
    in /dev/termination-log; exit 0, 3 (a tool is missing), 4 (egress failed) or both's 7."""
    lines = [
        "rc=0; r=''",
        f'say() {{ echo "{MARK} $*"; r="${{r}}{MARK} $*\n"; }}',
        "say ran",  # the shell ran, whatever else is asked
    ]
    for tool in tools:
        t = shlex.quote(tool)
        lines.append(f'if p=$(command -v {t} 2>/dev/null); then say "tool-found {tool} $p"; '
                     f'else say "tool-missing {tool}"; rc=$((rc | 3)); fi')
    if egress_url is not None:
        u, t = shlex.quote(egress_url), str(egress_timeout)
        python = (
            "import sys, urllib.request, urllib.error\n"
            "try:\n"
            "    r = urllib.request.urlopen(sys.argv[1], timeout=float(sys.argv[2]))\n"
            "    print('HTTP', r.status)\n"
            "except urllib.error.HTTPError as e:\n"
            "    print('HTTP', e.code)\n"
            "except Exception as e:\n"
            "    print(type(e).__name__, e)\n"
            "    sys.exit(1)\n"
        )
        lines += [
            "one() { tr '\\n' ' ' | cut -c1-200; }",
            "if command -v curl >/dev/null 2>&1; then",
            f"  o=$(curl -sS -o /dev/null -m {t} -w '%{{http_code}}' {u} 2>&1) "
            "&& say \"egress reached curl HTTP $o\" "
            "|| { say \"egress failed curl $(printf '%s' \"$o\" | sed 's/^000//; s/000$//' "
            "| one)\"; rc=$((rc | 4)); }",
            "elif command -v wget >/dev/null 2>&1; then",
            "  tries=''; wget --version 2>/dev/null | grep -q 'GNU Wget' && tries='--tries=1'",
            f"  o=$(wget -S -O /dev/null -T {t} $tries {u} 2>&1)",
            "  s=$(printf '%s\\n' \"$o\" | grep -o 'HTTP/[0-9.]* [0-9][0-9][0-9]' | head -n 1)",
            "  if [ -n \"$s\" ]; then say \"egress reached wget $s\"; "
            "else say \"egress failed wget $(printf '%s' \"$o\" | tail -n 2 | one)\"; "
            "rc=$((rc | 4)); fi",
            "elif command -v python3 >/dev/null 2>&1; then",
            f"  o=$(python3 -c {shlex.quote(python)} {u} {t} 2>&1) "
            "&& say \"egress reached python3 $o\" "
            "|| { say \"egress failed python3 $(printf '%s' \"$o\" | tail -n 1 | one)\";"
            " rc=$((rc | 4)); }",
            "else",
            "  say 'egress untested none-of curl wget python3'",
            "fi",
        ]
    lines += ["printf '%s' \"$r\" > /dev/termination-log 2>/dev/null || true", "exit $rc"]
    return "\n".join(lines) + "\n"


def probe_pod(name: str, namespace: str, image: str, script: str, deadline_s: int) -> dict:
    """A pod shaped as Harbor ack's (privileged, root, requests without limits), tiny."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(PROBE_LABEL)},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            # A probe the step could not delete (SIGKILL) still ends.
            "activeDeadlineSeconds": deadline_s,
            "automountServiceAccountToken": False,
            "containers": [{
                "name": "probe",
                "image": image,
                "command": ["sh", "-c", script],
                "securityContext": {"privileged": True, "runAsUser": 0},
                "resources": {"requests": dict(PROBE_REQUESTS)},
            }],
        },
    }


@dataclass
class ProbeResult:
    found: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    # (reached | failed | untested, detail), or None when no egress was asked
    egress: tuple[str, str] | None = None
    lines: int = 0


def parse_probe(text: str) -> ProbeResult:
    result = ProbeResult()
    for line in text.splitlines():
        if not line.startswith(MARK + " "):
            continue
        words = line[len(MARK) + 1:].split(" ")
        result.lines += 1
        if words[0] == "tool-found" and len(words) >= 3:
            result.found[words[1]] = " ".join(words[2:])
        elif words[0] == "tool-missing" and len(words) >= 2:
            result.missing.append(words[1])
        elif words[0] == "egress" and len(words) >= 2:
            result.egress = (words[1], " ".join(words[2:]).strip())
    return result


def pod_events(client: Client, namespace: str, name: str) -> list[dict]:
    """The pod's events, oldest first ([] when they cannot be read)."""
    selector = quote(f"involvedObject.name={name},involvedObject.kind=Pod")
    try:
        items = client.get(f"/api/v1/namespaces/{namespace}/events?fieldSelector={selector}"
                           ).get("items") or []
    except HostError:
        return []

    def when(event: dict) -> str:
        return str(event.get("lastTimestamp") or event.get("eventTime")
                   or (event.get("metadata") or {}).get("creationTimestamp") or "")
    return sorted((e for e in items if isinstance(e, dict)), key=when)


def cluster_says(client: Client, namespace: str, name: str, fallback: str = "") -> str:
    """The newest Warning event of the pod as `Reason: message` (else the newest event, else
    `fallback`)."""
    events = pod_events(client, namespace, name)
    warnings = [e for e in events if e.get("type") == "Warning"]
    if not (warnings or events):
        return fallback
    pick = (warnings or events)[-1]
    return f"{text_at(pick, 'reason')}: {text_at(pick, 'message').strip()}"


def container_state(pod: dict) -> tuple[str, dict]:
    """(waiting | running | terminated | "", its details) of the probe container."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    state = (statuses[0].get("state") or {}) if statuses else {}
    for key in ("terminated", "running", "waiting"):
        if key in state:
            return key, state[key] or {}
    return "", {}


def refusal_hint(message: str) -> str:
    if "quota" in message:
        return "raise the namespace's ResourceQuota or free some of it"
    if "PodSecurity" in message:
        return ("Harbor's pods are privileged: label the namespace "
                "pod-security.kubernetes.io/enforce=privileged")
    if "LimitRange" in message or "maximum" in message or "minimum" in message:
        return "fix the namespace's LimitRange"
    return "fix the namespace's admission policy"


def wait_probe(client: Client, namespace: str, name: str, image: str, timeout_s: int
               ) -> tuple[dict, float]:
    """Poll the pod until it ends; fail at once when it cannot pull or start, and with the
    cluster's words when it is still not done after `timeout_s`."""
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    started = time.monotonic()
    said = ""
    while True:
        pod = client.get(path)
        status = pod.get("status") or {}
        phase = text_at(status, "phase") or "?"
        state, details = container_state(pod)
        reason = details.get("reason", "")
        now = f"{phase}{'/' + state if state else ''}{'/' + reason if reason else ''}"
        if now != said:
            log(NAME, f"probe pod {name}: {now} after {time.monotonic() - started:.0f}s")
            said = now
        if phase in ("Succeeded", "Failed"):
            return pod, time.monotonic() - started
        if state == "waiting" and reason in PULL_FAILED:
            words = cluster_says(client, namespace, name, details.get("message", ""))
            raise HostError(f"the probe pod cannot pull {image} ({reason}; the cluster says "
                            f"{words}): push the image to the registry the node pulls from, "
                            "or fix probe_image")
        if state == "waiting" and reason in START_FAILED:
            words = cluster_says(client, namespace, name, details.get("message", ""))
            raise HostError(f"the probe pod cannot start {image} ({reason}; the cluster says "
                            f"{words}): fix probe_image")
        waited = time.monotonic() - started
        if waited > timeout_s:
            conditions = {c.get("type"): c for c in status.get("conditions") or []}
            scheduled = conditions.get("PodScheduled") or {}
            if scheduled.get("status") == "False":
                words = cluster_says(client, namespace, name, scheduled.get("message", ""))
                raise HostError(f"the probe pod was not scheduled within {timeout_s}s (the "
                                f"cluster says {words}): free or add nodes, or raise "
                                "harbor.environment.kubernetes.preflight_timeout_s")
            words = cluster_says(client, namespace, name, details.get("message", ""))
            raise HostError(f"the probe pod is still {now} after {timeout_s}s (the cluster says "
                            f"{words or 'nothing'}): raise harbor.environment.kubernetes."
                            "preflight_timeout_s or look at the node")
        time.sleep(POLL_S)


def delete_pod(client: Client, namespace: str, name: str, wait_s: float = 20) -> None:
    """Delete the probe pod now and wait (bounded) for it to be gone; never raises."""
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    try:
        client.delete(path, {"apiVersion": "v1", "kind": "DeleteOptions",
                             "gracePeriodSeconds": 0})
    except ApiError as exc:
        if exc.status != 404:
            log(NAME, f"could not delete probe pod {name}: {exc}")
        return
    except HostError as exc:
        log(NAME, f"could not delete probe pod {name}: {exc}")
        return
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            client.get(path)
        except ApiError as exc:
            if exc.status == 404:
                return
        except HostError:
            return
        time.sleep(0.5)
    log(NAME, f"probe pod {name} is still being deleted after {wait_s:.0f}s")


def probe_output(client: Client, namespace: str, name: str, details: dict) -> str:
    """The probe's result lines: its log, else its termination message."""
    try:
        text = client.text(f"/api/v1/namespaces/{namespace}/pods/{name}/log?container=probe")
        if MARK in text:
            return text
    except HostError:
        pass
    return str(details.get("message") or "")


def probe_check(client: Client, inputs: Inputs) -> dict:
    ns, image = inputs.namespace, inputs.probe_image
    name = f"benchstack-preflight-{secrets.token_hex(4)}"
    egress_timeout = max(3, min(15, inputs.preflight_timeout_s // 4))
    script = probe_script(inputs.need_tools, inputs.egress_url, egress_timeout)
    pod = probe_pod(name, ns, image, script, inputs.preflight_timeout_s + 60)
    log(NAME, f"probe pod {name} ({image}) in namespace {ns}")
    try:
        client.post(f"/api/v1/namespaces/{ns}/pods", pod)
    except ApiError as exc:
        if exc.status == 404:
            raise HostError(f"namespace {ns} does not exist in the cluster (the probe pod "
                            f"could not be created there): create it or fix namespace") from None
        raise HostError(f"namespace {ns} refuses a pod shaped as Harbor's ({exc.status}: "
                        f"{exc.api_message}): {refusal_hint(exc.api_message)}") from None
    # From here on the pod exists: whatever happens (a failure, SIGTERM), it is deleted.
    previous = signal.getsignal(signal.SIGTERM)

    def stop(signum: int, frame: object) -> None:
        raise HostError("stopped by SIGTERM")
    signal.signal(signal.SIGTERM, stop)
    try:
        final, seconds = wait_probe(client, ns, name, image, inputs.preflight_timeout_s)
        state, details = container_state(final)
        text = probe_output(client, ns, name, details)
    finally:
        delete_pod(client, ns, name)
        signal.signal(signal.SIGTERM, previous)
    result = parse_probe(text)
    code = details.get("exitCode") if state == "terminated" else None
    status = final.get("status") or {}
    if result.lines == 0:
        why = [text for text in (text_at(details, "message"), text_at(status, "message"),
                                 text_at(details, "reason"), text_at(status, "reason")) if text]
        raise HostError(f"the probe pod ran {image} but printed no result (exit {code}, "
                        f"{why[0].strip()[:200] if why else 'no output'}): probe_image needs sh, "
                        "as Harbor's commands do")
    users = inputs.images.get(image) or []
    where = f"probe_image {image}" + (f" (used by {tasks_text(users)})" if users else "")
    problems = []
    if result.missing:
        problems.append(f"need_tools {', '.join(result.missing)} not found in {where} "
                        f"(command -v in the probe pod): install "
                        f"{'it' if len(result.missing) == 1 else 'them'} in the task images, "
                        "or run an agent that does not need "
                        f"{'it' if len(result.missing) == 1 else 'them'}")
    if result.egress is not None and result.egress[0] == "failed":
        problems.append(f"pods in namespace {ns} cannot reach egress_url {inputs.egress_url} "
                        f"({result.egress[1]}): open egress to it (NetworkPolicy, proxy, "
                        "firewall) or fix egress_url")
    for problem in problems[1:]:
        log(NAME, f"also: {problem}")
    if problems:
        raise HostError(problems[0])
    if code not in (0, None):
        raise HostError(f"the probe pod exited {code} in {where} ({details.get('reason')}): "
                        "look at the node")
    return {"name": name, "seconds": round(seconds, 1), "result": result}


# --- the step ---------------------------------------------------------------------------------


def preflight(inputs: Inputs) -> dict[str, Any]:
    validate(inputs)
    ns = inputs.namespace
    config = load(inputs.kubeconfig)
    client = Client(config, timeout=min(30, inputs.preflight_timeout_s))
    version, user = api_check(client)
    log(NAME, f"API {client.base_url} answers ({version}) for user {user}")
    namespace_check(client, ns)
    access_check(client, ns, user)
    log(NAME, f"user {user} may run Harbor's pods in namespace {ns}")
    scheme = images_check(inputs.images, inputs.probe_image, inputs.registry,
                          min(30, inputs.preflight_timeout_s))
    log(NAME, f"{len(inputs.images)} images are in registry {inputs.registry}")
    probe = probe_check(client, inputs)
    result: ProbeResult = probe["result"]
    warnings = []
    if inputs.egress_url is None:
        egress, detail = "not asked", ""
    elif result.egress is None or result.egress[0] == "untested":
        egress = "untested"
        detail = (f"could not test egress to {inputs.egress_url}: probe_image "
                  f"{inputs.probe_image} has none of curl, wget, python3")
        warnings.append(detail)
        log(NAME, f"warning: {detail}")
    else:
        egress, detail = "reached", f"{inputs.egress_url} with {result.egress[1]}"
    log(NAME, f"probe pod ran in {probe['seconds']}s: tools {sorted(result.found) or 'none'}, "
              f"egress {egress}")
    return {
        "api_version": version,
        "user": user,
        "namespace": ns,
        "images_checked": len(set(inputs.images) | {inputs.probe_image}),
        "registry_scheme": scheme,
        "probe_pod": probe["name"],
        "probe_seconds": probe["seconds"],
        "tools_found": result.found,
        "egress": egress,
        "egress_detail": detail,
        "warnings": warnings,
    }


@verb(Inputs)
def create(inputs: Inputs) -> None:
    emit(preflight(inputs))


# The same checks: nothing is left behind, so a check is a create.
check = create
