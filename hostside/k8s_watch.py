"""The k8s watcher: what the cluster says during a Harbor `ack` job, written beside Harbor's files.

While Harbor runs a job's trials as pods in a namespace, the watcher records, for the audit:

    <job_dir>/k8s-events.jsonl   one core/v1 Event per line, as the API's watch delivers it
                                 (managedFields dropped; listed ones get the kind and
                                 apiVersion a watch gives them)
    <job_dir>/k8s-pods.jsonl     one line per pod delivery: {"type": "ADDED" | "MODIFIED" |
                                 "DELETED", "object": <Pod, managedFields dropped>}

It lists first (events from before it started are kept; a pod listed is ADDED the first time it
is seen, MODIFIED after), then watches from the list's resourceVersion, reconnecting when a
watch ends or times out and listing again on 410 Gone. An object already written with the same
uid and resourceVersion is never written again (nor after a restart: the files are read back).
It writes nothing until Harbor has made the job dir (a dir made before Harbor would look like
another job to it); until then the lines wait in memory.

It ends by itself when the Harbor process it watches over (`until_pid`) is gone (checked in
/proc every second), after a last list, or on SIGTERM or SIGINT (the same last list). It must
never make Harbor fail: it runs detached in its own session, and every error goes to its log.

Entry points:

    start(kubeconfig_path, namespace, job_dir, until_pid, log_path) -> int
        (from a host module, e.g. the launch, once Harbor runs): spawns the watcher detached
        (setsid; stdin /dev/null, stdout and stderr appended to log_path), records its PID in
        `<job_dir>.k8s-watch.pid` beside the job dir, and returns the PID. Idempotent: a live
        watcher of the same job dir and the same until_pid is reused, its PID returned; one of
        the same job dir watching over another PID (a resume) is stopped and replaced. Raises
        HostError only when the watcher cannot be spawned.

    python3 -m hostside.k8s_watch run KUBECONFIG NAMESPACE JOB_DIR UNTIL_PID
        (what start spawns, with the package on PYTHONPATH): the watcher itself, in the
        foreground; exit 0 when it ended as above, 1 when its kubeconfig cannot be read.

KUBECONFIG is the path of the stack's JSON kubeconfig (k8s_kubeconfig.py), never its text: a
command line is readable by every user of the host.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import threading
import time
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

from contracts import jobdir

from .beside import alive, recorded, spawn, stop_on_signals
from .beside import stop as stop_watcher
from .k8s_kubeconfig import ApiError, Client, load
from .step import HostError

EVENTS_FILE = jobdir.K8S_EVENTS
PODS_FILE = jobdir.K8S_PODS
MODULE = "hostside.k8s_watch"
# How long one watch request lasts before the server ends it (and it is made again).
WATCH_S = 240
# A quiet connection is given up after this long (bookmarks arrive about once a minute).
READ_TIMEOUT_S = WATCH_S + 60
POLL_S = 1.0
MAX_BACKOFF_S = 30
LIST_PAGE = 500


def pid_file(job_dir: str) -> str:
    """Beside the job dir (never in it: Harbor owns it)."""
    return jobdir.k8s_watch_pid(os.path.abspath(job_dir))


def say(message: str) -> None:
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(f"{stamp} k8s_watch: {message}", flush=True)


# --- processes (beside.py: spawned detached, recorded beside the job dir) ----------------------


def watcher_of(job_dir: str) -> tuple[int, int] | None:
    """(PID, until_pid) of the live watcher recorded for `job_dir`."""
    return recorded(pid_file(job_dir), MODULE, job_dir)


def start(kubeconfig_path: str, namespace: str, job_dir: str, until_pid: int,
          log_path: str) -> int:
    """Spawn the watcher detached (see the module's doc); its PID."""
    job_dir = os.path.abspath(job_dir)
    running = watcher_of(job_dir)
    if running is not None:
        pid, watched = running
        if watched == until_pid:
            return pid
        stop_watcher(pid)
    return spawn(MODULE, [os.path.abspath(kubeconfig_path), namespace, job_dir, str(until_pid)],
                 pid_file(job_dir), log_path, f"k8s watcher for {job_dir}")


# --- what is written ---------------------------------------------------------------------------


def trimmed(obj: dict) -> dict:
    """The object without metadata.managedFields (the rest as delivered)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return obj


def identity(obj: dict) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("uid", "")), str(meta.get("resourceVersion", ""))


class Recorder:
    """The two files, written once the job dir exists; each (uid, resourceVersion) once."""

    def __init__(self, job_dir: str):
        self.job_dir = Path(job_dir)
        self.lock = threading.Lock()
        self.seen: dict[str, set[tuple[str, ...]]] = {EVENTS_FILE: set(), PODS_FILE: set()}
        self.pods_known: set[str] = set()
        self.pending: dict[str, list[bytes]] = {EVENTS_FILE: [], PODS_FILE: []}
        self.fds: dict[str, int] = {}
        self.written = {EVENTS_FILE: 0, PODS_FILE: 0}
        self.closed = False

    @staticmethod
    def pod_key(kind: str, obj: dict) -> tuple[str, ...]:
        # A deletion may carry the resourceVersion of the last change: it is its own line.
        return (*identity(obj), "deleted" if kind == "DELETED" else "")

    def _read_back(self) -> None:
        """What an earlier watcher of this job dir wrote (a resume) counts as seen."""
        for name in (EVENTS_FILE, PODS_FILE):
            try:
                text = (self.job_dir / name).read_text(errors="replace")
            except OSError:
                continue
            for line in text.splitlines():
                try:
                    value = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(value, dict):
                    continue
                if name == EVENTS_FILE:
                    self.seen[name].add(identity(value))
                elif isinstance(value.get("object"), dict):
                    self.seen[name].add(self.pod_key(str(value.get("type")), value["object"]))
                    self.pods_known.add(identity(value["object"])[0])

    def _open(self) -> bool:
        """Open the files once Harbor has made the job dir; False until then."""
        if self.fds:
            return True
        if not self.job_dir.is_dir():
            return False
        self._read_back()
        for name in (EVENTS_FILE, PODS_FILE):
            self.fds[name] = os.open(str(self.job_dir / name),
                                     os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            waiting, self.pending[name] = self.pending[name], []
            for line in waiting:
                self._write(name, line)
        return True

    def _write(self, name: str, line: bytes) -> None:
        # One write() per line, the file opened O_APPEND: lines never interleave.
        os.write(self.fds[name], line)
        self.written[name] += 1

    def _put(self, name: str, key: tuple[str, ...], value: dict) -> bool:
        if self.closed or key in self.seen[name]:
            return False
        line = (json.dumps(value, separators=(",", ":")) + "\n").encode()
        if self._open():
            # Keys read back from the files only now: look again.
            if key in self.seen[name]:
                return False
            self._write(name, line)
        else:
            self.pending[name].append(line)
        self.seen[name].add(key)
        return True

    def event(self, obj: dict) -> bool:
        with self.lock:
            return self._put(EVENTS_FILE, identity(obj), trimmed(obj))

    def pod(self, kind: str, obj: dict) -> bool:
        """A pod delivery; LISTED (from a list) is ADDED the first time the pod is seen (here
        or in the file read back), MODIFIED after."""
        with self.lock:
            if not self.closed:
                self._open()
            if kind == "LISTED":
                kind = "MODIFIED" if identity(obj)[0] in self.pods_known else "ADDED"
            done = self._put(PODS_FILE, self.pod_key(kind, obj),
                             {"type": kind, "object": trimmed(obj)})
            self.pods_known.add(identity(obj)[0])
            return done

    def flush(self) -> None:
        """Write what waited for the job dir, if it is there now."""
        with self.lock:
            if not self.closed:
                self._open()

    def close(self) -> dict[str, int]:
        with self.lock:
            if not self.closed:
                self._open()
            self.closed = True
            for fd in self.fds.values():
                os.close(fd)
            self.fds = {}
            left = {name: len(lines) for name, lines in self.pending.items() if lines}
            if left:
                say(f"the job dir {self.job_dir} never appeared: {left} lines not written")
            return dict(self.written)


# --- list and watch ----------------------------------------------------------------------------


class Resource:
    """One namespaced collection (events or pods) followed into the recorder."""

    def __init__(self, client: Client, recorder: Recorder, namespace: str, plural: str,
                 kind: str):
        self.client = client
        self.recorder = recorder
        self.path = f"/api/v1/namespaces/{namespace}/{plural}"
        self.plural = plural
        self.kind = kind
        # Where the watch goes on from, and how long it waits after a failure.
        self.version = ""
        self.backoff = 1.0

    def record(self, kind: str, obj: dict) -> None:
        if self.plural == "events":
            self.recorder.event(obj)
        else:
            self.recorder.pod(kind, obj)

    def list(self) -> str:
        """Record every object there now; the list's resourceVersion."""
        token = ""
        while True:
            page = self.client.get(f"{self.path}?limit={LIST_PAGE}"
                                   + (f"&continue={quote(token)}" if token else ""))
            for item in page.get("items") or []:
                if isinstance(item, dict):
                    # A watch delivers the kind and apiVersion; a list's items lack them.
                    self.record("LISTED", {"kind": self.kind, "apiVersion": "v1", **item})
            meta = page.get("metadata") or {}
            token = meta.get("continue") or ""
            if not token:
                return str(meta.get("resourceVersion") or "")

    def follow(self, stop: threading.Event) -> None:
        """List, then watch until `stop`; never raises (a daemon thread's whole life)."""
        self.version, self.backoff = "", 1.0
        while not stop.is_set():
            try:
                if not self.version:
                    self.version = self.list()
                    say(f"{self.plural}: listed at resourceVersion {self.version}")
                self._watch(stop)
            except ApiError as exc:
                if exc.status == 410:
                    say(f"{self.plural}: resourceVersion {self.version} is gone (410): "
                        "listing again")
                    self.version = ""
                    continue
                self._pause(stop, f"{self.plural}: {exc}; again in {self.backoff:.0f}s")
            except (HostError, OSError, http.client.HTTPException, ValueError) as exc:
                # A timeout or a broken connection: watch again from the same version.
                self._pause(stop, f"{self.plural}: the watch ended "
                                  f"({exc or type(exc).__name__}); again in {self.backoff:.0f}s")
            except Exception as exc:  # noqa: BLE001  # the watcher must outlive any surprise
                say(f"{self.plural}: unexpected {type(exc).__name__}: {exc}")
                stop.wait(MAX_BACKOFF_S)

    def _pause(self, stop: threading.Event, why: str = "") -> None:
        """Say why, wait the backoff (or until `stop`), and double it."""
        if why:
            say(why)
        stop.wait(self.backoff)
        self.backoff = min(self.backoff * 2, MAX_BACKOFF_S)

    def _watch(self, stop: threading.Event) -> None:
        """One watch from the version last seen, each delivery recorded, until it ends, says
        to list again, or `stop`."""
        query = (f"?watch=1&allowWatchBookmarks=true&timeoutSeconds={WATCH_S}"
                 f"&resourceVersion={quote(self.version)}")
        began, delivered = time.monotonic(), 0
        for delivery in self.client.stream(self.path + query, timeout=READ_TIMEOUT_S):
            if stop.is_set():
                return
            delivered += 1
            if not self._deliver(delivery, stop):
                return
        if not delivered and time.monotonic() - began < 1:
            # A server that ends every watch at once: not a busy loop.
            self._pause(stop)

    def _deliver(self, delivery: dict, stop: threading.Event) -> bool:
        """Record one delivery; False when the watch must start over from a new list."""
        kind = str(delivery.get("type", ""))
        obj = delivery.get("object")
        if not isinstance(obj, dict):
            return True
        if kind == "ERROR":
            if obj.get("code") == 410:
                say(f"{self.plural}: resourceVersion {self.version} is gone (410): listing "
                    "again")
            else:
                self._pause(stop, f"{self.plural}: the watch said {obj.get('message', obj)}")
            self.version = ""
            return False
        self.version = identity(obj)[1] or self.version
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            self.record(kind, obj)
        self.backoff = 1.0
        return True


def run(kubeconfig_path: str, namespace: str, job_dir: str, until_pid: int) -> int:
    say(f"watching namespace {namespace} for {job_dir} while PID {until_pid} lives")
    stop = stop_on_signals(say, "a last list")
    try:
        client = Client(load(kubeconfig_path))
    except HostError as exc:
        say(f"cannot use the kubeconfig: {exc}")
        return 1
    recorder = Recorder(job_dir)
    resources = [Resource(client, recorder, namespace, "events", "Event"),
                 Resource(client, recorder, namespace, "pods", "Pod")]
    threads = [threading.Thread(target=r.follow, args=(stop,), daemon=True, name=r.plural)
               for r in resources]
    for thread in threads:
        thread.start()
    while not stop.is_set():
        if not alive(until_pid):
            say(f"PID {until_pid} is gone: a last list, then exit")
            break
        recorder.flush()
        stop.wait(POLL_S)
    stop.set()
    last_list(resources)
    written = recorder.close()
    say(f"done: {written[EVENTS_FILE]} events and {written[PODS_FILE]} pod deliveries written")
    return 0


def last_list(resources: Iterable[Resource]) -> None:
    for resource in resources:
        try:
            resource.list()
        except Exception as exc:  # noqa: BLE001  # the last list is a bonus; exit anyway
            say(f"{resource.plural}: the last list failed: {exc}")


def main(argv: list[str]) -> int:
    if len(argv) != 5 or argv[0] != "run" or not argv[4].isdigit():
        print(f"usage: python3 -m {MODULE} run KUBECONFIG NAMESPACE JOB_DIR UNTIL_PID",
              file=sys.stderr)
        return 2
    return run(argv[1], argv[2], os.path.abspath(argv[3]), int(argv[4]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
