"""The cluster's own account of a job's pods: what the stack's watcher wrote beside Harbor's files.

During a job on Kubernetes the stack writes two files into the job dir (audit/read/layout.py):
`k8s-events.jsonl`, one core/v1 Event per line as the API's watch delivers it (a repeated event
comes again with a higher count: the last delivery per `metadata.uid` is kept), and
`k8s-pods.jsonl`, one `{"type": ADDED|MODIFIED|DELETED, "object": <Pod>}` per delivery.

A trial's pod is found the way Harbor 0.21 makes it (harbor/environments/ack.py; gke.py the
same): its `session` label is the session id `<trial_name>__env` verbatim, and its name is that
id lower-cased, `_` turned into `-`, cut to 63 characters. The label is the join key: it keeps
the trial name's case, so two trials whose names differ only in case cannot be confused. A pod
without the label is matched by name. A separate verifier environment's pod
(`<trial_name>__verifier__<key>`) is the trial's too. An event names its pod by
`involvedObject.uid`, joined to the pods the watch delivered, or, for a pod the watch never
delivered, by name.

Only what the detectors need (audit/judge/detectors/kubernetes.py) is kept of each line, with the
line it came from, so a proof can name `../k8s-events.jsonl:N` and quote the cluster's words
from there. Nothing here raises: a line that is not JSON of the expected shape is counted and
skipped (a watcher stopped mid-write leaves a torn last line).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from audit.read import layout as L
from audit.read.models import parse_time
from contracts import jobdir

# The watcher's files are read whole, not as head + tail (layout.MAX_READ): the middle of a long
# job is as much the job as its ends. Past this, the middle is cut and its lines counted as
# unreadable.
READ_LIMIT = 512 * 1024 * 1024
_VERIFIER_SESSION = "__verifier__"
_NEVER = datetime.max.replace(tzinfo=UTC)


def pod_name(trial: str) -> str:
    """The name Harbor 0.21's ack (and gke) environment gives a trial's pod."""
    return jobdir.trial_pod(trial)


def _time(value: object) -> datetime | None:
    parsed = parse_time(value) if isinstance(value, str) else None
    return parsed if parsed is not None and parsed.tzinfo is not None else None


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class Event:
    """One event about a pod, from its last delivery in k8s-events.jsonl."""

    line: int
    pod: str  # involvedObject.name
    pod_uid: str | None
    type: str  # Normal | Warning
    reason: str
    message: str
    count: int
    first: datetime | None
    last: datetime | None
    component: str  # who reported it: default-scheduler, kubelet, ...

    @property
    def where(self) -> str:
        return f"../{L.K8S_EVENTS}:{self.line}"

    def said(self) -> str:
        return said([self])


def said(events: list[Event]) -> str:
    """What events of one reason say beside their message, for a proof's reading:
    `Warning FailedScheduling (default-scheduler), 3 times 00:27:10Z-00:27:41Z`."""
    last = events[-1]
    who = f" ({last.component})" if last.component else ""
    total = sum(e.count for e in events)
    times = f", {total} times" if total > 1 else ""
    firsts = [t for e in events if (t := e.first or e.last)]
    lasts = [t for e in events if (t := e.last or e.first)]
    when = clock(min(firsts)) if firsts else ""
    if firsts and lasts and max(lasts) != min(firsts):
        when = f"{when}-{clock(max(lasts))}"
    return f"{last.type} {last.reason}{who}{times}" + (f" at {when}" if when else "")


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str
    at: datetime | None  # lastTransitionTime


@dataclass(frozen=True)
class PodVersion:
    """One version of a pod, as one line of k8s-pods.jsonl delivered it."""

    line: int
    watch: str  # ADDED | MODIFIED | DELETED
    name: str
    uid: str
    session: str | None
    node: str | None
    phase: str | None
    reason: str | None  # status.reason (`Evicted` after a kubelet eviction)
    message: str | None
    created: datetime | None  # metadata.creationTimestamp
    deletion: str | None  # metadata.deletionTimestamp, as written
    grace: int | None  # metadata.deletionGracePeriodSeconds
    conditions: tuple[Condition, ...] = ()
    waiting: tuple[tuple[str, str], ...] = ()  # (reason, message) of each waiting container
    started: bool = False  # a container ran (running or terminated)

    @property
    def where(self) -> str:
        return f"../{L.K8S_PODS}:{self.line}"

    def condition(self, kind: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == kind), None)

    def deletion_requested(self) -> datetime | None:
        """When the deletion was asked for: deletionTimestamp less the grace period."""
        at = _time(self.deletion)
        return at - timedelta(seconds=self.grace or 0) if at is not None else None


@dataclass
class PodView:
    """One pod of a trial: the versions the watch delivered and the events about it."""

    name: str
    uid: str | None
    versions: list[PodVersion] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)

    def born(self) -> datetime | None:
        """When the pod was made (or, for a pod the watch never delivered, its first event)."""
        made = next((v.created for v in self.versions if v.created), None)
        return made or next((t for e in self.events if (t := e.first or e.last)), None)

    def scheduled(self) -> bool:
        return any(e.reason == "Scheduled" for e in self.events) or any(
            v.node or ((c := v.condition("PodScheduled")) is not None and c.status == "True")
            for v in self.versions
        )

    def started(self) -> bool:
        return any(e.reason == "Started" for e in self.events) or any(
            v.started for v in self.versions
        )


@dataclass
class Cluster:
    """What the two files say, indexed for the join with trials."""

    present: bool = False
    events: list[Event] = field(default_factory=list)
    pods: dict[str, list[PodVersion]] = field(default_factory=dict)  # by uid, in line order
    unreadable: dict[str, int] = field(default_factory=dict)  # file -> lines skipped
    _by_trial: dict[str, list[str]] = field(default_factory=dict, repr=False)
    _unlabelled: dict[str, list[str]] = field(default_factory=dict, repr=False)  # name -> uids
    _events_by_uid: dict[str, list[Event]] = field(default_factory=dict, repr=False)
    _events_by_name: dict[str, list[Event]] = field(default_factory=dict, repr=False)

    def trial_pods(self, trial: str) -> list[PodView]:
        """The trial's pods (its environment's, a separate verifier's), with their events."""
        uids = list(self._by_trial.get(trial, []))
        uids += self._unlabelled.get(pod_name(trial), [])
        views = [
            PodView(
                self.pods[uid][-1].name,
                uid,
                self.pods[uid],
                list(self._events_by_uid.get(uid, [])),
            )
            for uid in dict.fromkeys(uids)
        ]
        # Events about a pod of the trial's name the watch never delivered (or without a uid).
        unseen: dict[str | None, list[Event]] = {}
        for event in self._events_by_name.get(pod_name(trial), []):
            if event.pod_uid is None or event.pod_uid not in self.pods:
                unseen.setdefault(event.pod_uid, []).append(event)
        views += [PodView(events[0].pod, uid, [], events) for uid, events in unseen.items()]
        for view in views:
            view.events.sort(key=lambda e: (e.first or e.last or _NEVER, e.line))
        return views


def read_cluster(layout: L.JobLayout) -> Cluster:
    """The job's k8s-events.jsonl and k8s-pods.jsonl; `present` is False without either."""
    cluster = Cluster()
    events_text = _read(layout, L.K8S_EVENTS, cluster)
    pods_text = _read(layout, L.K8S_PODS, cluster)
    if events_text is not None:
        _load_events(events_text, cluster)
    if pods_text is not None:
        _load_pods(pods_text, cluster)
    _index(cluster)
    return cluster


def _read(layout: L.JobLayout, rel: str, cluster: Cluster) -> str | None:
    try:
        text = layout.read_text(rel, READ_LIMIT)
    except OSError:
        cluster.unreadable[rel] = -1
        return None
    if text is not None:
        cluster.present = True
    return text


def _lines(text: str, rel: str, cluster: Cluster):
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            data = json.loads(raw)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            cluster.unreadable[rel] = cluster.unreadable.get(rel, 0) + 1
            continue
        yield number, data


def _load_events(text: str, cluster: Cluster) -> None:
    last: dict[object, Event] = {}
    for number, data in _lines(text, L.K8S_EVENTS, cluster):
        involved = _dict(data.get("involvedObject"))
        if involved.get("kind") != "Pod" or not _str(involved.get("name")):
            continue
        series = _dict(data.get("series"))
        source = _dict(data.get("source"))
        first = _time(data.get("firstTimestamp")) or _time(data.get("eventTime"))
        latest = _time(data.get("lastTimestamp")) or _time(series.get("lastObservedTime")) or first
        count = data.get("count") or series.get("count") or 1
        uid = _dict(data.get("metadata")).get("uid") or f"line {number}"
        # A repeated event is delivered again: the last delivery is its latest count and time.
        last[uid] = Event(
            number,
            involved["name"],
            _str(involved.get("uid")) or None,
            _str(data.get("type")),
            _str(data.get("reason")),
            _str(data.get("message")),
            count if isinstance(count, int) else 1,
            first,
            latest,
            _str(source.get("component"))
            or _str(data.get("reportingComponent"))
            or _str(data.get("reportingController")),
        )
    cluster.events = sorted(last.values(), key=lambda e: e.line)


def _load_pods(text: str, cluster: Cluster) -> None:
    for number, data in _lines(text, L.K8S_PODS, cluster):
        watch = data.get("type")
        pod = _dict(data.get("object"))
        meta = _dict(pod.get("metadata"))
        uid, name = _str(meta.get("uid")), _str(meta.get("name"))
        if watch not in ("ADDED", "MODIFIED", "DELETED") or not uid or not name:
            continue  # a BOOKMARK, an ERROR Status, or not a pod
        status = _dict(pod.get("status"))
        grace = meta.get("deletionGracePeriodSeconds")
        containers = [
            _dict(c)
            for key in ("initContainerStatuses", "containerStatuses")
            for c in status.get(key) or []
        ]
        states = [_dict(c.get("state")) for c in containers]
        cluster.pods.setdefault(uid, []).append(
            PodVersion(
                number,
                watch,
                name,
                uid,
                _str(_dict(meta.get("labels")).get("session")) or None,
                _str(_dict(pod.get("spec")).get("nodeName")) or None,
                _str(status.get("phase")) or None,
                _str(status.get("reason")) or None,
                _str(status.get("message")) or None,
                _time(meta.get("creationTimestamp")),
                _str(meta.get("deletionTimestamp")) or None,
                grace if isinstance(grace, int) else None,
                tuple(
                    Condition(
                        _str(c.get("type")),
                        _str(c.get("status")),
                        _str(c.get("reason")),
                        _str(c.get("message")),
                        _time(c.get("lastTransitionTime")),
                    )
                    for c in map(_dict, status.get("conditions") or [])
                ),
                tuple(
                    (_str(w.get("reason")), _str(w.get("message")))
                    for s in states
                    if (w := _dict(s.get("waiting")))
                ),
                any(s.get("running") or s.get("terminated") for s in states),
            )
        )


def _index(cluster: Cluster) -> None:
    for uid, versions in cluster.pods.items():
        session = next((v.session for v in reversed(versions) if v.session), None)
        if session is None:
            cluster._unlabelled.setdefault(versions[-1].name, []).append(uid)
        elif session.endswith(jobdir.COMPOSE_SUFFIX):
            cluster._by_trial.setdefault(session[: -len(jobdir.COMPOSE_SUFFIX)], []).append(uid)
        elif _VERIFIER_SESSION in session:
            trial = session.split(_VERIFIER_SESSION, 1)[0]
            cluster._by_trial.setdefault(trial, []).append(uid)
    for event in cluster.events:
        if event.pod_uid:
            cluster._events_by_uid.setdefault(event.pod_uid, []).append(event)
        cluster._events_by_name.setdefault(event.pod, []).append(event)


def clock(at: datetime | None) -> str:
    """`00:27:41Z`: the time of day the audit quotes (the date is the trial's)."""
    return at.strftime("%H:%M:%SZ") if at is not None else ""
