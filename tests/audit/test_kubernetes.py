"""Trials failed by the Kubernetes cluster they ran on (audit/judge/detectors/kubernetes.py),
judged on what the real cluster and Harbor 0.21.0's `ack` environment wrote
(tests/audit/captures/k8s/, made by tests/audit/make_k8s_captures.py on the test cluster).

Each case becomes a job dir in tmp: the captured job files and trial dir, and the two files the
stack's watcher writes beside them (audit/read/layout.py K8S_EVENTS, K8S_PODS), made from the
captured `kubectl get events -o json` (one event per line) and the pod's last watch delivery
(`{"type", "object"}`). Per case: the verdict is infra with the cluster's words as its first
evidence line, the pod and the reason named, and every proof is in the file it names. Without
the watcher's files, the quota refusal and Harbor's relay of a failed pull are still read from
the exception, and every other verdict is what it was before the cluster was read (the same as
with the Kubernetes pieces switched off). Then the join (the `session` label over the name, an
event by uid, another trial's pod, an earlier run's), the near misses (Harbor's own deletion, a
graded trial, the agent's own build under node pressure), the order against the rules, and the
dev set: not one of its verdicts changes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from unittest.mock import patch

import pytest

from audit.judge.context import JobContext
from audit.judge.detectors import CLUSTER, Detector
from audit.judge.detectors import kubernetes as KD
from audit.judge.verdict import Classification
from audit.output.render import render
from audit.pipeline import build_report
from audit.read import kubernetes as K
from audit.read import layout as L
from audit.read.evidence import TrialEvidence
from audit.read.layout import JobLayout
from audit.score.rows import TrialRow
from contracts import jobdir
from tests.audit import dev_set
from tests.audit.proof_check import quoted_in_file

CAPTURES = Path(__file__).with_name("captures") / "k8s"
INDEX = json.loads((CAPTURES / "index.json").read_text())
CASES = sorted(INDEX)

# case -> (signature, proof cause, where the first proof is, words it quotes, words it reads)
EXPECTED = {
    "quota_exceeded": (
        "k8s_quota_exceeded",
        "setup_failed",
        f"{L.TRIAL_EXCEPTION}:",
        ["is forbidden: exceeded quota: trial-quota", "limited: requests.memory=1Gi"],
        ["HTTP 403", "ResourceQuota trial-quota"],
    ),
    "unschedulable": (
        "k8s_pod_unschedulable",
        "setup_failed",
        f"../{L.K8S_EVENTS}:",
        ["0/1 nodes are available: 1 Insufficient cpu."],
        ["Warning FailedScheduling (default-scheduler), 3 times", "never scheduled"],
    ),
    "image_pull": (
        "k8s_image_pull_failed",
        "setup_failed",
        f"../{L.K8S_EVENTS}:",
        ['Failed to pull image "127.0.0.1:5000/benchstack/absent-image:latest"'],
        ["Warning Failed (kubelet), 2 times", "ErrImagePull", "never started"],
    ),
    "pod_evicted": (
        "k8s_pod_evicted",
        "environment_event",
        f"../{L.K8S_PODS}:",
        ["Eviction API: evicting"],
        ["DisruptionTarget EvictionByEvictionAPI at 00:28:46Z", "while the agent ran"],
    ),
    "pod_deleted": (
        "k8s_pod_deleted",
        "environment_event",
        f"../{L.K8S_PODS}:",
        ["deletionTimestamp: 2026-12-02T00:27:41Z"],
        ["deleted (grace 0 s) at 00:27:41Z", "while the agent ran"],
    ),
}


def captured_events(case: str) -> list[dict]:
    return json.loads((CAPTURES / case / "events.json").read_text())["items"]


def captured_pods(case: str) -> list[dict]:
    """The pod's last watch delivery, as the watcher writes one line of k8s-pods.jsonl."""
    path = CAPTURES / case / "pod.json"
    if not path.exists():
        return []
    kept = json.loads(path.read_text())
    return [{"type": kept["watch_event"], "object": kept["pod"]}]


def write_jsonl(path: Path, items: list[dict]) -> None:
    path.write_text("".join(json.dumps(item) + "\n" for item in items))


def make_job(
    tmp_path: Path,
    case: str,
    events: list[dict] | None = None,
    pods: list[dict] | None = None,
    watcher: bool = True,
) -> tuple[Path, str]:
    """A job dir of the captured case; the watcher's files from the capture unless given."""
    trial = INDEX[case]["trial_name"]
    job = tmp_path / f"k8s-{case.replace('_', '-')}"
    shutil.copytree(CAPTURES / case / "job", job)
    shutil.copytree(CAPTURES / case / "trial", job / trial)
    if watcher:
        write_jsonl(job / L.K8S_EVENTS, captured_events(case) if events is None else events)
        write_jsonl(job / L.K8S_PODS, captured_pods(case) if pods is None else pods)
    return job, trial


def audit(job: Path, without_cluster: bool = False) -> TrialRow:
    """The trial's row; `without_cluster`: with the cluster's detectors taken out (the verdict
    the audit gave before it read the cluster's account)."""
    with patch("audit.judge.classify.CLUSTER", [] if without_cluster else CLUSTER):
        (row,) = build_report(JobLayout.local(job)).trials
    return row


def line(p) -> str:
    """A proof as the evidence shows it (audit/judge/verdict.py Proof.__str__)."""
    return f"{p.where}: {p.quote} ({p.reading})"


def verdict(row: TrialRow) -> tuple:
    return row.category, row.signature, row.evidence, row.proof


def assert_proofs_are_in_their_files(job: Path, trial: str, row: TrialRow) -> None:
    assert row.proof, row.evidence
    for p in row.proof:
        assert quoted_in_file(job, trial, p.where, p.quote), p


# --- the captured cases -------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_harbors_pod_name_and_session_label_are_the_captured_pods(case):
    """The join is Harbor's naming (ack.py): checked against the pods the cluster reported."""
    trial = INDEX[case]["trial_name"]
    assert K.pod_name(trial) == INDEX[case]["pod"]
    for item in captured_pods(case):
        meta = item["object"]["metadata"]
        assert meta["name"] == K.pod_name(trial)
        assert meta["labels"]["session"] == jobdir.environment_session(trial) == f"{trial}__env"


@pytest.mark.parametrize("case", CASES)
def test_the_cluster_explains_the_trial_in_its_own_words(tmp_path, case):
    job, trial = make_job(tmp_path, case)
    report = build_report(JobLayout.local(job))
    (row,) = report.trials
    signature, cause, where, quoted, read = EXPECTED[case]
    assert (row.category, row.signature, row.phase) == ("infra", signature, "environment")
    first = row.proof[0]
    assert first.cause == cause
    assert first.where.startswith(where), first.where
    assert all(words in first.quote for words in quoted), first.quote
    assert all(words in first.reading for words in read), first.reading
    assert INDEX[case]["pod"] in first.reading
    # The cluster's words come first: the terminal table shows only the first line.
    assert row.evidence[0] == line(first)
    assert any(line.startswith("result.json: ") for line in row.evidence[1:]), row.evidence
    assert_proofs_are_in_their_files(job, trial, row)
    assert report.rerun, "an infra trial is listed for rerun"


@pytest.mark.parametrize("case", ["pod_evicted", "pod_deleted"])
def test_the_kubelet_stopping_the_container_is_quoted_beside_it(tmp_path, case):
    job, _ = make_job(tmp_path, case)
    row = audit(job)
    killing = row.proof[1]
    assert killing.where.startswith(f"../{L.K8S_EVENTS}:")
    assert killing.quote == "Stopping container main"
    assert killing.reading.startswith("Normal Killing (kubelet) at ")


@pytest.mark.parametrize("case", CASES)
def test_the_cluster_is_shown_in_the_table_and_the_html_report(tmp_path, case):
    job, _ = make_job(tmp_path, case)
    report = build_report(JobLayout.local(job))
    words = EXPECTED[case][3][0]
    table = " ".join(render(report, "table", width=400).split())
    assert words.replace('\\"', '"')[:40] in table.replace('\\"', '"')
    html = render(report, "html")
    assert INDEX[case]["pod"] in html and EXPECTED[case][0] in html


# --- without the watcher's files: the exception alone, else as before ---------------------------


@pytest.mark.parametrize("case", ["quota_exceeded", "image_pull"])
def test_without_the_watchers_files_the_exception_still_names_the_cluster(tmp_path, case):
    job, trial = make_job(tmp_path, case, watcher=False)
    row = audit(job)
    assert (row.category, row.signature) == ("infra", EXPECTED[case][0])
    assert_proofs_are_in_their_files(job, trial, row)
    if case == "quota_exceeded":
        assert "exceeded quota: trial-quota" in row.proof[0].quote
    else:
        assert row.proof[0].quote.startswith("RuntimeError: Failed to pull image: rpc error")
        assert row.evidence == [line(row.proof[0])]


@pytest.mark.parametrize("case", ["unschedulable", "pod_evicted", "pod_deleted"])
def test_without_the_watchers_files_the_verdict_is_what_it_was(tmp_path, case):
    job, _ = make_job(tmp_path, case, watcher=False)
    row = audit(job)
    assert not (row.signature or "").startswith("k8s_")
    assert verdict(row) == verdict(audit(job, without_cluster=True))


def test_the_dev_set_verdicts_do_not_change():
    """The dev set (docker jobs, no watcher's files): every verdict, its evidence and proof are
    what they are with the Kubernetes pieces switched off, and none is a Kubernetes one. The
    Kubernetes detectors are asked first and only there (audit/judge/classify.py): where none
    of them answers for any trial, switching them off leaves every verdict as it is, so one
    audit of the dev set that records their answers shows it (the dev set audited once, not
    twice)."""
    if not dev_set.LABELS.is_file():
        pytest.fail(f"the dev set is missing: {dev_set.DEV_SET} (test data, not optional)")
    answered: list[tuple[str, str, str]] = []

    def recorded(detector: Detector) -> Detector:
        def fn(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
            found = detector.fn(ev, ctx)
            if found is not None:
                answered.append((ev.trial_dir, detector.name, found.signature or ""))
            return found
        return Detector(fn, detector.name)

    with patch("audit.judge.classify.CLUSTER", [recorded(d) for d in CLUSTER]):
        rows = {f"{job}/{r.trial}": r for source in dev_set.REAL_SOURCES
                for job in dev_set.SOURCES[source].jobs()
                for r in build_report(JobLayout.local(job)).trials}
    assert rows
    assert answered == []
    assert not [k for k, r in rows.items() if (r.signature or "").startswith("k8s_")]


# --- the join -----------------------------------------------------------------------------------


def test_the_session_label_and_the_events_uid_join_a_pod_of_any_name(tmp_path):
    pods = captured_pods("pod_evicted")
    events = captured_events("pod_evicted")
    for item in pods:
        item["object"]["metadata"]["name"] = "renamed-by-an-override"
    for event in events:
        event["involvedObject"]["name"] = "renamed-by-an-override"
    job, _ = make_job(tmp_path, "pod_evicted", events=events, pods=pods)
    row = audit(job)
    assert row.signature == "k8s_pod_evicted"
    assert "pod renamed-by-an-override" in row.proof[0].reading
    assert row.proof[1].quote == "Stopping container main"


def test_events_alone_are_joined_by_the_pods_name(tmp_path):
    for case in ("unschedulable", "image_pull"):
        job, trial = make_job(tmp_path / case, case, pods=[])
        row = audit(job)
        assert row.signature == EXPECTED[case][0], (case, row.evidence)
        assert_proofs_are_in_their_files(job, trial, row)


@pytest.mark.parametrize(
    ("case", "where"),
    [
        ("unschedulable", "PodScheduled False, Unschedulable since 00:27:10Z"),
        ("pod_evicted", "DisruptionTarget EvictionByEvictionAPI"),
        ("pod_deleted", "deleted (grace 0 s)"),
    ],
)
def test_pod_versions_alone_are_enough(tmp_path, case, where):
    job, trial = make_job(tmp_path, case, events=[])
    row = audit(job)
    assert row.signature == EXPECTED[case][0]
    assert row.proof[0].where == f"../{L.K8S_PODS}:1"
    assert where in row.proof[0].reading
    assert_proofs_are_in_their_files(job, trial, row)


def test_another_trials_pod_is_not_this_trials(tmp_path):
    """The evicted case's pod and events beside the deleted case's: each trial keeps its own;
    and a pod of the same name for a trial whose name differs only in case is not this one's."""
    other = captured_pods("pod_evicted")[0]
    twin = json.loads(json.dumps(other))
    twin["object"]["metadata"].update(
        name=INDEX["pod_deleted"]["pod"],
        uid="00000000-0000-0000-0000-00000000beef",
        labels={"session": "cap-pod-deleted__qxdnalo__env"},  # the same pod name, lower-cased
        creationTimestamp="2026-12-02T00:27:37Z",  # while this trial ran
    )
    for cond in twin["object"]["status"]["conditions"]:
        cond["lastTransitionTime"] = "2026-12-02T00:27:39Z"
    job, trial = make_job(
        tmp_path,
        "pod_deleted",
        events=captured_events("pod_evicted") + captured_events("pod_deleted"),
        pods=[other, twin] + captured_pods("pod_deleted"),
    )
    row = audit(job)
    assert row.signature == "k8s_pod_deleted"
    assert all(INDEX["pod_deleted"]["pod"] in p.reading for p in row.proof)
    assert not any("evict" in line.lower() for line in row.evidence)
    assert_proofs_are_in_their_files(job, trial, row)


def test_a_pod_of_an_earlier_run_of_the_same_trial_is_not_this_runs(tmp_path):
    """A resumed or retried trial keeps its name: a pod made an hour before it started is not
    its pod, and its scheduling failures prove nothing about this run."""
    events = captured_events("unschedulable")
    pods = captured_pods("unschedulable")
    for event in events:
        event["eventTime"] = event["eventTime"].replace("T00:", "T23:").replace("-02T", "-01T")
        event.pop("series", None)
    pods[0]["object"]["metadata"]["creationTimestamp"] = "2026-12-01T23:27:10Z"
    job, _ = make_job(tmp_path, "unschedulable", events=events, pods=pods)
    assert verdict(audit(job)) == verdict(audit(job, without_cluster=True))


def test_a_repeated_event_is_read_from_its_last_delivery(tmp_path):
    events = captured_events("image_pull")
    pull = next(e for e in events if e["message"].startswith("Failed to pull image"))
    again = json.loads(json.dumps(pull)) | {"count": 5, "lastTimestamp": "2026-12-02T00:27:29Z"}
    events.append(again)
    job, trial = make_job(tmp_path, "image_pull", events=events)
    row = audit(job)
    assert row.proof[0].where == f"../{L.K8S_EVENTS}:{len(events)}"
    assert "5 times at 00:27:11Z-00:27:29Z" in row.proof[0].reading
    assert_proofs_are_in_their_files(job, trial, row)


def test_a_torn_last_line_is_skipped_and_said(tmp_path):
    job, _ = make_job(tmp_path, "pod_deleted")
    with (job / L.K8S_EVENTS).open("a") as fh:
        fh.write('{"kind": "Event", "involvedObj')
    row = audit(job)
    assert row.signature == "k8s_pod_deleted"
    assert f"../{L.K8S_EVENTS}: 1 unreadable lines skipped" in row.evidence


# --- near misses --------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["image_pull", "unschedulable"])
def test_harbors_own_deletion_after_the_exception_is_no_deletion_mid_trial(tmp_path, case):
    """The captured pods of these cases were deleted by Harbor itself, after the exception."""
    job, trial = make_job(tmp_path, case)
    assert captured_pods(case)[0]["object"]["metadata"]["deletionTimestamp"]
    ev = TrialEvidence.load(JobLayout.local(job), trial)
    assert KD.pod_deleted(ev, JobContext()) is None


@pytest.mark.parametrize("seconds_before_the_end", [0, 4])
def test_a_deletion_at_the_trials_end_within_the_clocks_margin_is_not_proof(
    tmp_path, seconds_before_the_end
):
    """The exception was raised at 00:28:37.67: a deletion asked for at 00:28:37 or 00:28:33
    can be Harbor's own, on another clock."""
    pods = captured_pods("pod_deleted")
    stamp = f"2026-12-02T00:28:{37 - seconds_before_the_end:02d}Z"
    pods[0]["object"]["metadata"]["deletionTimestamp"] = stamp
    events = [e for e in captured_events("pod_deleted") if e["reason"] != "Killing"]
    job, _ = make_job(tmp_path, "pod_deleted", events=events, pods=pods)
    assert verdict(audit(job)) == verdict(audit(job, without_cluster=True))


def test_a_graded_trial_keeps_its_grade(tmp_path):
    job, trial = make_job(tmp_path, "pod_deleted")
    result = json.loads((job / trial / L.TRIAL_RESULT).read_text())
    result["verifier_result"] = {"rewards": {"reward": 0.0}}
    result["exception_info"] = None
    (job / trial / L.TRIAL_RESULT).write_text(json.dumps(result))
    (job / trial / L.TRIAL_EXCEPTION).unlink()
    row = audit(job)
    # The captures ran Harbor's oracle: a graded 0 of its reference solution is the task's, and
    # the pod's deletion after grading excuses nothing.
    assert result["agent_info"]["name"] == "oracle"
    assert (row.category, row.signature) == ("insufficient_evidence", "oracle_solution_failed")
    assert row.proof == []


@pytest.mark.parametrize(
    ("reason", "signature"),
    [("TerminationByKubelet", "agent_build_memory_pressure"), ("EvictionByEvictionAPI", None)],
)
def test_the_kubelets_eviction_during_the_agents_own_unbounded_build(tmp_path, reason, signature):
    """Under node pressure the kubelet evicts the pod using most over its request: with the
    agent's own `make -j` running, that is the agent's doing, as an OOM kill would be. A drain
    (the Eviction API) is not, whatever the agent ran."""
    pods = captured_pods("pod_evicted")
    (cond,) = [
        c for c in pods[0]["object"]["status"]["conditions"] if c["type"] == "DisruptionTarget"
    ]
    cond["reason"] = reason
    job, trial = make_job(tmp_path, "pod_evicted", pods=pods)
    command = job / trial / "agent" / "command-1" / "command.txt"
    command.parent.mkdir(parents=True)
    command.write_text("make -j$(nproc)\n")
    row = audit(job)
    if signature:
        assert (row.category, row.signature) == ("agent_error", signature)
    else:
        assert (row.category, row.signature) == ("infra", "k8s_pod_evicted")


def test_the_cluster_comes_before_harbors_environment_start_timeout(tmp_path):
    """With a start timeout shorter than ack's own 300 s wait, Harbor reports an
    EnvironmentStartTimeoutError (trial.py `_start_agent_environment`), which the
    environment_start_failed rule reads; the cluster says why, and is read first."""
    job, trial = make_job(tmp_path, "unschedulable")
    message = "Environment start timed out after 120.0 seconds"
    result = json.loads((job / trial / L.TRIAL_RESULT).read_text())
    result["exception_info"].update(
        exception_type="EnvironmentStartTimeoutError", exception_message=message
    )
    (job / trial / L.TRIAL_RESULT).write_text(json.dumps(result))
    (job / trial / L.TRIAL_EXCEPTION).write_text(
        f"harbor.trial.errors.EnvironmentStartTimeoutError: {message}\n"
    )
    row = audit(job)
    assert row.signature == "k8s_pod_unschedulable"
    assert "Insufficient cpu" in row.evidence[0]
    assert audit(job, without_cluster=True).signature == "environment_start_failed"
