"""Harbor 0.21.0's generic Kubernetes environment (`harbor run -e ack`) on the real test cluster:
the oracle agent runs this directory's tasks (tests/k8s/tasks: the demo task's shape plus the
cpus, memory_mb and storage_mb that ack turns into pod requests, and the environment/Dockerfile
it requires) as pods in a namespace the test made, and every trial gets reward 1.0."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from tests.k8s.cluster import TASKS, Cluster


def harbor_env() -> dict[str, str]:
    # Nothing of the cluster goes through a proxy: it is all on loopback.
    return {
        **os.environ,
        "HARBOR_TELEMETRY": "0",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }


def run_ack_job(
    harbor: Path,
    cluster: Cluster,
    namespace: str,
    tasks: Path,
    jobs: Path,
    job_name: str,
    *extra: str,
    timeout: float = 600,
) -> subprocess.CompletedProcess:
    """`harbor run -e ack` as an operator would type it; stdout and stderr go to a log file."""
    log = jobs.parent / f"{job_name}.harbor.log"
    jobs.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as fh:
        proc = subprocess.run(
            [str(harbor), "run", "-p", str(tasks), "-a", "oracle", "-e", "ack",
             "--ek", f"namespace={namespace}", "--ek", f"kubeconfig={cluster.kubeconfig}",
             "--job-name", job_name, "-o", str(jobs), "-y", *extra],
            stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=harbor_env(),
            timeout=timeout, cwd=jobs.parent,
        )  # fmt: skip
    return subprocess.CompletedProcess(proc.args, proc.returncode, log.read_text(), "")


def pod_name(trial_name: str) -> str:
    """The pod Harbor's ack environment makes for a trial: its session id `<trial>__env`,
    lower-cased, `_` to `-`, at most 63 characters."""
    return f"{trial_name}__env".lower().replace("_", "-")[:63]


def test_oracle_runs_the_tasks_as_pods_with_reward_1(
    k8s_cluster: Cluster, namespace: str, harbor_with_k8s_client: Path, tmp_path: Path
) -> None:
    tasks = tmp_path / "tasks"
    shutil.copytree(TASKS, tasks)
    jobs = tmp_path / "jobs"
    proc = run_ack_job(
        harbor_with_k8s_client, k8s_cluster, namespace, tasks, jobs, "ack-oracle", "-n", "2"
    )
    assert proc.returncode == 0, proc.stdout[-3000:]

    job_dir = jobs / "ack-oracle"
    job = json.loads((job_dir / "result.json").read_text())
    assert job["finished_at"]
    assert job["stats"]["n_errored_trials"] == 0
    trials = {}
    for path in job_dir.glob("*__*/result.json"):
        result = json.loads(path.read_text())
        trials[result["task_name"]] = result | {"_dir": path.parent}
    assert set(trials) == {"k8s-hello", "k8s-where"}
    for name, trial in trials.items():
        assert trial["exception_info"] is None, (name, trial["exception_info"])
        assert trial["verifier_result"]["rewards"]["reward"] == 1.0, name
        assert trial["config"]["environment"]["type"] == "ack"

    # The oracle ran inside the trial's pod: process 1 is ack's `sleep infinity`, and the
    # hostname is the pod's name, derived from the trial name.
    where = trials["k8s-where"]
    oracle = (where["_dir"] / "agent" / "oracle.txt").read_text().split()
    assert oracle[:2] == ["sleep", pod_name(where["trial_name"])], oracle

    # The cluster saw both pods scheduled, pulled from the local registry and started, in the
    # test's namespace; with --delete (the default) none is left.
    pods = {pod_name(t["trial_name"]) for t in trials.values()}
    events = k8s_cluster.events(namespace)
    for pod in pods:
        reasons = {e["reason"] for e in events if e["involvedObject"].get("name") == pod}
        assert {"Scheduled", "Started"} <= reasons, (pod, reasons)
    assert k8s_cluster.get("pods", "-n", namespace)["items"] == []
    # Two trials at once (-n 2): each began before the other ended, pods included (what keeps
    # the job short, shown by the trials' own times, not a stopwatch on this machine's speed).
    began = max(t["started_at"] for t in trials.values())
    ended = min(t["finished_at"] for t in trials.values())
    assert began < ended, {n: (t["started_at"], t["finished_at"]) for n, t in trials.items()}
