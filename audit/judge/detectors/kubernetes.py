"""A trial that failed because of the Kubernetes cluster it ran on, in the cluster's own words.

Harbor's Kubernetes environments (`ack`, `gke`) run each trial as a pod. When the cluster fails
the pod, Harbor's own words say little: "Pod not ready after 300 seconds", or an
AddTestsDirError once the pod is gone. The cluster says what happened, in the events and the pod
versions the stack's watcher wrote beside Harbor's files (audit/read/kubernetes.py). One
detector per failure kind, each infra only with the cluster's line quoted, the pod and the
reason named:

- `k8s_quota_exceeded`: the API server refused the pod (HTTP 403 "exceeded quota"). No pod, no
  event: the refusal is in Harbor's exception, which is read without the watcher's files too;
- `k8s_pod_unschedulable`: the pod was never scheduled (FailedScheduling, or its PodScheduled
  condition `Unschedulable`) and the trial ended ungraded;
- `k8s_image_pull_failed`: the kubelet could not pull the image (ErrImagePull,
  ImagePullBackOff) and the container never started; without the watcher's files, Harbor's
  own relay of it ("Failed to pull image: ...", raised only on those two reasons);
- `k8s_pod_evicted`: the pod was disrupted while the trial ran (its DisruptionTarget
  condition: the Eviction API, preemption, a taint, the kubelet under node pressure);
- `k8s_pod_deleted`: the pod was deleted while the trial ran. Harbor deletes its pod only
  after the trial's last step (trial.py `_finalize` after the exception is recorded), so a
  deletion asked for before the trial's last step ended, by more than the clocks can disagree,
  was not Harbor's.

A graded trial keeps its grade (the environment lasted to grade it). These detectors run
before the rules of rules.yaml: the cluster's account of a failure is more specific than
Harbor's words for it (an EnvironmentStartTimeoutError, a tmux session lost with its pod).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from audit.judge.context import JobContext
from audit.judge.detectors.common import etype
from audit.judge.detectors.environment import _own_build
from audit.judge.verdict import (
    Classification,
    Proof,
    exception_line,
    exception_quote,
    exception_where,
    excuse,
    short,
)
from audit.read import kubernetes as K
from audit.read import layout as L
from audit.read.evidence import TrialEvidence
from audit.read.models import PHASES, parse_time

# How far apart the cluster's clock (its timestamps, cut to the second) and Harbor's may be
# before a deletion "during" the trial could be Harbor's own at its end.
CLOCK_MARGIN = timedelta(seconds=5)

_DOCS = (
    "Harbor 0.21 harbor/environments/ack.py: pod name and `session` label from the session id "
    "`<trial>__env`, `_wait_for_pod_ready`, `stop()` deleting the pod (trial.py `_finalize`)"
)

_PHASE_WORDS = {
    "environment_setup": "while the environment started",
    "agent_setup": "during the agent's setup",
    "agent_execution": "while the agent ran",
    "verifier": "while the verifier ran",
}
# The API server's ResourceQuota admission, as Harbor's exception relays the 403 body.
_QUOTA = re.compile(r'(?:pods \\?"(?P<pod>[^"\\]+)\\?" )?is forbidden: exceeded quota: [^"\n]*')
# Harbor's relay of the kubelet's pull error (ack.py, gke.py; openshift.py names the pod).
_HARBOR_PULL = re.compile(r"^Failed to pull image(?: for pod \S+)?: \S")
_PULL_EVENT = re.compile(r"^(?:Failed to pull image|Error: (?:ErrImagePull|ImagePullBackOff)\b)")
_PULL_WAITING = ("ErrImagePull", "ImagePullBackOff")
# Disruptions the kubelet itself decides (node pressure): the agent's own memory may draw them.
_BY_KUBELET = ("TerminationByKubelet", "Evicted")

# The signatures of the cluster's own account (audit/judge/signatures.py).
QUOTA = "k8s_quota_exceeded"
UNSCHEDULABLE = "k8s_pod_unschedulable"
IMAGE_PULL = "k8s_image_pull_failed"
EVICTED = "k8s_pod_evicted"
DELETED = "k8s_pod_deleted"


def _cluster(ev: TrialEvidence, ctx: JobContext) -> K.Cluster:
    cluster = ctx.memo.get("kubernetes")
    if not isinstance(cluster, K.Cluster):
        cluster = K.read_cluster(ev.layout)
        ctx.memo["kubernetes"] = cluster
    return cluster


def _pods(ev: TrialEvidence, ctx: JobContext) -> list[K.PodView]:
    """The trial's pods, made while it ran; [] for a trial that is graded, a trial without its
    times, or a job without the watcher's files. A pod of the same name made before the trial
    started is an earlier run's (a resumed or retried trial keeps its name)."""
    if ev.result is None or ev.result.reward is not None:
        return []
    window = _window(ev)
    if window is None:
        return []
    cluster = _cluster(ev, ctx)
    if not cluster.present:
        return []
    started, last = window
    return [
        pod
        for pod in cluster.trial_pods(ev.result.trial_name or ev.trial_dir)
        if (born := pod.born()) is not None
        and started - CLOCK_MARGIN <= born <= last + CLOCK_MARGIN
    ]


def _verdict(
    ev: TrialEvidence,
    ctx: JobContext,
    signature: str,
    explanation: str,
    proof: list[Proof],
) -> Classification:
    """Infra, the cluster's lines first (the table shows the first), then Harbor's exception."""
    cluster = ctx.memo.get("kubernetes")
    skipped = [
        f"../{rel}: {n} unreadable lines skipped"
        for rel, n in (cluster.unreadable.items() if isinstance(cluster, K.Cluster) else [])
        if n > 0
    ]
    return excuse(
        "infra",
        signature,
        "environment",
        explanation,
        proof,
        lead=[str(p) for p in proof] + exception_line(ev),
        more=skipped,
    )


def quota_exceeded(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """The API server refused to create the trial's pod: the namespace's quota is full."""
    if ev.result is None or ev.result.reward is not None:
        return None
    chunks = sorted(ev.source("exception"), key=lambda c: c.file != L.TRIAL_EXCEPTION)
    for chunk in chunks:
        m = _QUOTA.search(chunk.text)
        if m is None:
            continue
        pod = m.group("pod")
        quota = m.group(0).split("exceeded quota: ", 1)[1].split(",", 1)[0]
        line = chunk.text.count("\n", 0, m.start()) + 1
        proof = Proof(
            "setup_failed",
            chunk.where(line),
            short(m.group(0)),
            f"the API server refused {f'pod {pod}' if pod else 'the pod'} (HTTP 403): "
            f"ResourceQuota {quota} has less left than the pod requests",
        )
        return _verdict(
            ev,
            ctx,
            QUOTA,
            "The Kubernetes API server refused to create the trial's pod (HTTP 403): the "
            "namespace's ResourceQuota has less left than the pod requests (the task's cpus, "
            "memory_mb, storage_mb). The model was never asked anything. Raise the quota, or "
            "lower n_concurrent_trials so that the pods of concurrent trials fit in it, and "
            "rerun.",
            [proof],
        )
    return None


def pod_unschedulable(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """The trial's pod was never scheduled, and the trial ended ungraded."""
    for pod in _pods(ev, ctx):
        if pod.scheduled():
            continue
        failed = [e for e in pod.events if e.reason == "FailedScheduling"]
        if failed:
            last = failed[-1]
            proof = Proof(
                "setup_failed",
                last.where,
                short(last.message),
                f"{K.said(failed)}, pod {pod.name}: never scheduled",
            )
        else:
            version = next(
                (
                    v
                    for v in reversed(pod.versions)
                    if (c := v.condition("PodScheduled")) is not None
                    and c.status == "False"
                    and c.reason == "Unschedulable"
                ),
                None,
            )
            if version is None:
                continue
            cond = version.condition("PodScheduled")
            assert cond is not None
            proof = Proof(
                "setup_failed",
                version.where,
                short(cond.message or f"reason: {cond.reason}"),
                f"PodScheduled False, Unschedulable since {K.clock(cond.at)}, pod {pod.name}: "
                "never scheduled",
            )
        return _verdict(
            ev,
            ctx,
            UNSCHEDULABLE,
            "The trial's pod was never scheduled: the scheduler found no node for it (its "
            "message says why: not enough cpu or memory, taints, node selectors), and Harbor "
            "gave up waiting for the pod. The model was never asked anything. If the task asks "
            "more than any node has (task.toml cpus, memory_mb), run it on larger nodes; if the "
            "nodes are only full, lower n_concurrent_trials or add nodes; then rerun.",
            [proof],
        )
    return None


def image_pull_failed(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """The kubelet could not pull the image and the container never started."""
    explanation = (
        "The kubelet could not pull the task's image into the trial's pod (ErrImagePull, "
        "ImagePullBackOff), so the container never started and the model was never asked "
        "anything. Check the image reference and that the cluster's nodes can pull it (the "
        "registry reachable from the nodes, an imagePullSecret, rate limits); pre-pull or "
        "mirror the task images, then rerun."
    )
    for pod in _pods(ev, ctx):
        if pod.started():
            continue
        pulls = [e for e in pod.events if _pull_failure(e)]
        if pulls:
            # The kubelet's "Failed to pull image ...: <why>" says most; else the first.
            event = next((e for e in pulls if e.message.startswith("Failed to pull")), pulls[0])
            reasons = sorted({e.message for e in pulls if e.message.startswith("Error: ")})
            proof = Proof(
                "setup_failed",
                event.where,
                short(event.message),
                f"{event.said()}, pod {pod.name}"
                + (f" ({', '.join(r.removeprefix('Error: ') for r in reasons)})" if reasons else "")
                + ": the container never started",
            )
            return _verdict(ev, ctx, IMAGE_PULL, explanation, [proof])
        for version in reversed(pod.versions):
            waiting = next((w for w in version.waiting if w[0] in _PULL_WAITING), None)
            if waiting is not None:
                proof = Proof(
                    "setup_failed",
                    version.where,
                    short(waiting[1] or f"reason: {waiting[0]}"),
                    f"container waiting: {waiting[0]}, pod {pod.name}: it never started",
                )
                return _verdict(ev, ctx, IMAGE_PULL, explanation, [proof])
    info = ev.result.exception_info if ev.result and ev.result.reward is None else None
    message = (info.exception_message or "") if info else ""
    if etype(ev) == "RuntimeError" and _HARBOR_PULL.match(message):
        proof = Proof(
            "setup_failed",
            exception_where(ev),
            exception_quote(ev),
            "Harbor's Kubernetes environment relays the kubelet's ErrImagePull/ImagePullBackOff",
        )
        # The proof is the exception line itself: shown once, with what it shows.
        return excuse("infra", IMAGE_PULL, "environment", explanation, [proof])
    return None


def _pull_failure(event: K.Event) -> bool:
    if event.reason == "BackOff":
        return event.message.startswith("Back-off pulling image")
    return event.reason == "Failed" and bool(_PULL_EVENT.match(event.message))


def pod_evicted(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """The trial's pod was disrupted (evicted, preempted, tainted away) while the trial ran."""
    for pod in _pods(ev, ctx):
        found = _disruption(pod)
        if found is None:
            continue
        proof, at, reason = found
        when = _while_it_ran(ev, at)
        if when is None:
            continue
        if reason in _BY_KUBELET and (own := _own_build(ev, ctx, str(proof))) is not None:
            return own
        proof = Proof(proof.cause, proof.where, proof.quote, f"{proof.reading} {when}")
        return _verdict(
            ev,
            ctx,
            EVICTED,
            "The cluster evicted the trial's pod while the trial ran (the Eviction API as a "
            "node drain uses it, preemption by a pod of higher priority, a node taint, the "
            "kubelet under node pressure), so the container was stopped under the agent or the "
            "verifier and the trial ended ungraded. Rerun it, and keep trial pods from being "
            "disrupted during a job (no drains, a PodDisruptionBudget, a priority class).",
            [proof, *_killing(pod, at)],
        )
    return None


def _disruption(pod: K.PodView) -> tuple[Proof, datetime, str] | None:
    """The first sign the pod was disrupted: (proof, when, reason)."""
    for version in pod.versions:
        cond = version.condition("DisruptionTarget")
        if cond is not None and cond.status == "True":
            at = cond.at or version.deletion_requested()
            if at is None:
                continue
            return (
                Proof(
                    "environment_event",
                    version.where,
                    short(cond.message or f"reason: {cond.reason}"),
                    f"DisruptionTarget {cond.reason} at {K.clock(at)}, pod {pod.name},",
                ),
                at,
                cond.reason,
            )
        if version.reason == "Evicted":
            at = version.deletion_requested() or next(
                (e.first for e in pod.events if e.reason == "Evicted" and e.first), None
            )
            if at is None:
                continue
            return (
                Proof(
                    "environment_event",
                    version.where,
                    short(version.message or "reason: Evicted"),
                    f"pod {pod.name} Evicted ({version.phase}) at {K.clock(at)},",
                ),
                at,
                "Evicted",
            )
    event = next((e for e in pod.events if e.reason == "Evicted" and e.first), None)
    if event is not None and event.first is not None:
        return (
            Proof(
                "environment_event",
                event.where,
                short(event.message),
                f"{event.said()}, pod {pod.name},",
            ),
            event.first,
            "Evicted",
        )
    return None


def pod_deleted(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """The trial's pod was deleted while the trial ran: not by Harbor, which deletes it last."""
    for pod in _pods(ev, ctx):
        version = next((v for v in pod.versions if v.deletion_requested() is not None), None)
        if version is None:
            continue
        at = version.deletion_requested()
        assert at is not None and version.deletion is not None
        when = _while_it_ran(ev, at)
        if when is None:
            continue
        proof = Proof(
            "environment_event",
            version.where,
            f"deletionTimestamp: {version.deletion}",
            f"pod {pod.name} deleted (grace {version.grace or 0} s) at {K.clock(at)}, {when}; "
            "Harbor deletes its pod only after the trial's last step",
        )
        return _verdict(
            ev,
            ctx,
            DELETED,
            "The trial's pod was deleted while the trial still ran, and not by Harbor (which "
            "deletes it only after the trial's last step): the container went away under the "
            "agent or the verifier and the trial ended ungraded. Find out who deleted it (the "
            "API server's audit log), keep it from happening during a job, and rerun.",
            [proof, *_killing(pod, at)],
        )
    return None


def _killing(pod: K.PodView, at: datetime) -> list[Proof]:
    """The kubelet stopping the container when the pod went away (its own words)."""
    event = next(
        (
            e
            for e in pod.events
            if e.reason == "Killing" and e.first and abs(e.first - at) <= CLOCK_MARGIN
        ),
        None,
    )
    if event is None:
        return []
    return [
        Proof(
            "environment_event",
            event.where,
            short(event.message),
            f"{event.said()}, pod {pod.name}",
        )
    ]


def _while_it_ran(ev: TrialEvidence, at: datetime) -> str | None:
    """How the moment `at` falls in the trial ("while the agent ran (00:27:40Z-00:27:46Z)"),
    or None unless it is after the trial started and before its last step ended, by more than
    CLOCK_MARGIN: Harbor's own deletion comes after the last step (and after the exception)."""
    window = _window(ev)
    if window is None or ev.result is None:
        return None
    started, last = window
    if not (started - CLOCK_MARGIN <= at and at + CLOCK_MARGIN < last):
        return None
    for phase in PHASES:
        span = getattr(ev.result, phase)
        if span is None:
            continue
        begin, end = _aware(span.started_at), _aware(span.finished_at)
        if begin and end and begin <= at <= end:
            return f"{_PHASE_WORDS[phase]} ({K.clock(begin)}-{K.clock(end)})"
    return f"while the trial ran (its last step ended at {K.clock(last)})"


def _window(ev: TrialEvidence) -> tuple[datetime, datetime] | None:
    """(when the trial started, when its last step ended or its exception was raised)."""
    result = ev.result
    if result is None:
        return None
    started = _aware(result.started_at)
    spans = [getattr(result, p) for p in PHASES if getattr(result, p) is not None]
    ends = [t for s in spans if (t := _aware(s.finished_at))]
    info = result.exception_info
    if info is not None and (raised := _aware(info.occurred_at)):
        ends.append(raised)
    if started is None or not ends:
        return None
    return started, max(ends)


def _aware(value: str | None) -> datetime | None:
    at = parse_time(value)
    return at if at is not None and at.tzinfo is not None else None
