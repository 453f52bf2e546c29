"""Regenerate `tests/audit/captures/k8s/`: what Harbor 0.21.0's ack environment writes, and what
the cluster reports, when a trial's pod cannot run or goes away, on the REAL test cluster
(setup/k8s/cluster.sh; started here when it is not running, and then stopped again).

Every case is a real `harbor run -e ack` with the oracle agent, one task, in a namespace of its
own that this script makes and deletes; nothing is written by hand:

  quota_exceeded  the namespace's ResourceQuota (requests.memory 1Gi) is smaller than the task's
                  request (memory_mb 2048, Terminal-Bench 2.1's usual): the pod is refused at
                  creation (HTTP 403)
  unschedulable   the task asks for 64 cpus on a 2-core node: the pod stays Pending
                  (FailedScheduling) until ack's own 300 s wait gives up
  image_pull      the task's docker_image is absent from the registry: ErrImagePull
  pod_evicted     the pod is evicted through the Eviction API (as `kubectl drain` does) while the
                  oracle's solve.sh runs
  pod_deleted     the pod is force-deleted (grace period 0) while the oracle's solve.sh runs

The tasks have Terminal-Bench 2.1's shape (cpus 1, memory_mb 2048, storage_mb 10240,
build_timeout_sec 600) and the test image from the loopback registry. For each case the script
keeps, under `<case>/`: the trial's result.json, exception.txt and trial.log (`trial/`), the
job's result.json and job.log (`job/`), the namespace's events (`kubectl get events -o json`,
managedFields dropped), the last state of the trial's pod the API reported (`pod.json`, from a
watch: its conditions say what no event does) and what Harbor printed; `index.json` sums up
each case (exception, the first line of its message, the event reasons, seconds). The
unschedulable case (it waits out ack's 300 s) runs beside the others, which run one after
another: about 6 minutes in all.

    .venv/bin/python tests/audit/make_k8s_captures.py [--only CASE ...]

Work files go to /tmp/benchstack-k8s-captures (fixed, so the paths in the captures are stable).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.conftest import HARBOR_VENV, REGISTRY  # noqa: E402
from tests.k8s.cluster import CLUSTER_SH, K8S_DIR, KUBECONFIG, TASKS  # noqa: E402

CAPTURES = Path(__file__).with_name("captures") / "k8s"
WORK = Path("/tmp/benchstack-k8s-captures")
KUBECTL = K8S_DIR / "current" / "bin" / "kubectl"
HARBOR = HARBOR_VENV / "bin" / "harbor"
# Terminal-Bench 2.1's usual sizes (89 of its task.toml files: storage_mb 10240, most cpus 1
# and memory_mb 2048, build_timeout_sec 600).
TB_ENVIRONMENT = {"cpus": 1, "memory_mb": 2048, "storage_mb": 10240, "build_timeout_sec": 600.0}
# The oracle's solve.sh of the mid-trial cases: a marker the script waits for, then a long sleep.
SLOW_SOLVE = """#!/bin/sh
set -e
mkdir -p /app
touch /tmp/solve-started
echo "solve.sh started; sleeping"
sleep 90
printf 'hello\\n' > /app/hello.txt
"""
HARBOR_TIMEOUT = 900


@dataclass(frozen=True)
class Case:
    name: str
    what: str
    environment: dict[str, Any]
    solve: str | None = None
    quota: dict[str, str] | None = None
    disrupt: str | None = None  # "evict" | "delete", once solve.sh runs


CASES = {
    c.name: c
    for c in (
        Case(
            "quota_exceeded",
            "the namespace's ResourceQuota is smaller than the pod's requests",
            TB_ENVIRONMENT,
            quota={"requests.cpu": "4", "requests.memory": "1Gi"},
        ),
        Case(
            "unschedulable",
            "the pod asks for more cpus than the node has (64 on 2)",
            TB_ENVIRONMENT | {"cpus": 64},
        ),
        Case(
            "image_pull",
            "the task's image is not in the registry",
            TB_ENVIRONMENT | {"docker_image": f"{REGISTRY}/benchstack/absent-image:latest"},
        ),
        Case(
            "pod_evicted",
            "the pod is evicted (Eviction API) while the agent runs",
            TB_ENVIRONMENT,
            solve=SLOW_SOLVE,
            disrupt="evict",
        ),
        Case(
            "pod_deleted",
            "the pod is force-deleted (grace 0) while the agent runs",
            TB_ENVIRONMENT,
            solve=SLOW_SOLVE,
            disrupt="delete",
        ),
    )
}


def kubectl(
    *args: str, check: bool = True, input: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(KUBECONFIG), *args],
        capture_output=True,
        text=True,
        input=input,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {proc.stderr.strip()}")
    return proc


def toml_value(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str) else str(value)


def make_task(case: Case, root: Path) -> Path:
    """tests/k8s/tasks/k8s-hello with the case's [environment] and solve.sh."""
    task = root / "tasks" / f"cap-{case.name.replace('_', '-')}"
    shutil.copytree(TASKS / "k8s-hello", task)
    environment = {"docker_image": f"{REGISTRY}/benchstack/minbase:bookworm"} | case.environment
    lines = [f"{key} = {toml_value(value)}" for key, value in environment.items()]
    (task / "task.toml").write_text(
        'schema_version = "1.4"\n\n[metadata]\ncategory = "k8s-capture"\n\n[environment]\n'
        + "\n".join(lines)
        + "\n\n[agent]\ntimeout_sec = 300.0\n\n[verifier]\ntimeout_sec = 60.0\n"
    )
    if case.solve:
        (task / "solution" / "solve.sh").write_text(case.solve)
    return task.parent


def pod_name(trial_name: str) -> str:
    return f"{trial_name}__env".lower().replace("_", "-")[:63]


def disrupt(case: Case, namespace: str, job_dir: Path, log: list[str]) -> None:
    """Once solve.sh runs in the trial's pod, evict or delete the pod."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        pods = json.loads(kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]
        for pod in pods:
            name = pod["metadata"]["name"]
            probe = kubectl(
                "-n", namespace, "exec", name, "--", "test", "-f", "/tmp/solve-started", check=False
            )
            if probe.returncode != 0:
                continue
            if case.disrupt == "evict":
                eviction = {
                    "apiVersion": "policy/v1",
                    "kind": "Eviction",
                    "metadata": {"name": name, "namespace": namespace},
                }
                kubectl(
                    "create",
                    "--raw",
                    f"/api/v1/namespaces/{namespace}/pods/{name}/eviction",
                    "-f",
                    "-",
                    input=json.dumps(eviction),
                )
            else:
                kubectl(
                    "-n",
                    namespace,
                    "delete",
                    "pod",
                    name,
                    "--grace-period=0",
                    "--force",
                    "--wait=false",
                )
            log.append(f"{case.disrupt} {namespace}/{name} at {time.strftime('%H:%M:%S')}")
            return
        time.sleep(1)
    log.append("solve.sh never started: nothing disrupted")


def run_case(case: Case, results: dict[str, dict]) -> None:
    work = WORK / case.name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    tasks = make_task(case, work)
    namespace = f"bs-cap-{case.name.replace('_', '-')}-{secrets.token_hex(2)}"
    kubectl("create", "namespace", namespace)
    try:
        deadline = time.monotonic() + 60
        while kubectl("-n", namespace, "get", "sa", "default", check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no default service account in {namespace}")
            time.sleep(0.5)
        if case.quota:
            kubectl(
                "apply",
                "-f",
                "-",
                input=json.dumps(
                    {
                        "apiVersion": "v1",
                        "kind": "ResourceQuota",
                        "metadata": {"name": "trial-quota", "namespace": namespace},
                        "spec": {"hard": case.quota},
                    }
                ),
            )
            while (
                not json.loads(
                    kubectl(
                        "-n", namespace, "get", "resourcequota", "trial-quota", "-o", "json"
                    ).stdout
                )
                .get("status", {})
                .get("used")
            ):
                time.sleep(0.5)
        jobs = work / "jobs"
        job_name = f"k8s-{case.name.replace('_', '-')}"
        env = {
            **os.environ,
            "HARBOR_TELEMETRY": "0",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
        notes: list[str] = []
        # Every version of the namespace's pods as the API sends them: the last one of the
        # trial's pod is kept (its conditions say what events do not, e.g. DisruptionTarget).
        watch_out = (work / "pods.watch").open("wb")
        watcher = subprocess.Popen(
            [str(KUBECTL), "--kubeconfig", str(KUBECONFIG), "-n", namespace, "get", "pods",
             "--watch", "--output-watch-events", "-o", "json"],
            stdout=watch_out, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        started = time.monotonic()
        with (work / "harbor.out").open("wb") as out:
            proc = subprocess.Popen(
                [str(HARBOR), "run", "-p", str(tasks), "-a", "oracle", "-e", "ack",
                 "--ek", f"namespace={namespace}", "--ek", f"kubeconfig={KUBECONFIG}",
                 "--job-name", job_name, "-o", str(jobs), "-n", "1", "-y"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                cwd=work,
            )  # fmt: skip
            if case.disrupt:
                disrupt(case, namespace, jobs / job_name, notes)
            returncode = proc.wait(timeout=HARBOR_TIMEOUT)
        seconds = round(time.monotonic() - started, 1)
        time.sleep(2)  # the watch's last events (the pod's deletion)
        watcher.terminate()
        watcher.wait(timeout=30)
        watch_out.close()
        events = json.loads(kubectl("get", "events", "-n", namespace, "-o", "json").stdout)
        results[case.name] = keep(
            case, jobs / job_name, work, events, returncode, seconds, namespace, notes
        )
    finally:
        kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def keep(
    case: Case,
    job_dir: Path,
    work: Path,
    events: dict,
    returncode: int,
    seconds: float,
    namespace: str,
    notes: list[str],
) -> dict:
    out = CAPTURES / case.name
    shutil.rmtree(out, ignore_errors=True)
    (out / "trial").mkdir(parents=True)
    (out / "job").mkdir()
    for item in events.get("items", []):
        item.get("metadata", {}).pop("managedFields", None)
    (out / "events.json").write_text(json.dumps(events, indent=1) + "\n")
    pod = last_pod(work / "pods.watch")
    if pod:
        (out / "pod.json").write_text(json.dumps(pod, indent=1) + "\n")
    for name in ("result.json", "job.log"):
        if (job_dir / name).exists():
            shutil.copy(job_dir / name, out / "job" / name)
    shutil.copy(work / "harbor.out", out / "harbor.out")
    trials = (
        [p for p in job_dir.iterdir() if p.is_dir() and "__" in p.name] if job_dir.is_dir() else []
    )
    summary: dict[str, Any] = {
        "what": case.what,
        "namespace": namespace,
        "harbor_exit": returncode,
        "seconds": seconds,
        "notes": notes,
    }
    if trials:
        trial = trials[0]
        for name in ("result.json", "exception.txt", "trial.log"):
            if (trial / name).exists():
                shutil.copy(trial / name, out / "trial" / name)
        result = json.loads((trial / "result.json").read_text())
        info = result.get("exception_info") or {}
        summary |= {
            "trial_name": result["trial_name"],
            "pod": pod_name(result["trial_name"]),
            "exception_type": info.get("exception_type"),
            "exception_message": (info.get("exception_message") or "").splitlines()[:1],
            "verifier_result": result.get("verifier_result"),
        }
    summary["event_reasons"] = sorted(
        {f"{e['type']}/{e['reason']}" for e in events.get("items", [])}
    )
    return summary


def last_pod(watch: Path) -> dict | None:
    """The last version of the (one) pod in a `kubectl get pods --watch --output-watch-events
    -o json` stream, with the watch event's type beside it; managedFields dropped."""
    text, decoder, at, last = watch.read_text(), json.JSONDecoder(), 0, None
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            return last
        try:
            event, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            return last  # a half-written last object (the watch was stopped)
        pod = event.get("object", {})
        pod.get("metadata", {}).pop("managedFields", None)
        last = {"watch_event": event.get("type"), "pod": pod}


def ensure_cluster() -> bool:
    """True when this script started the cluster (and so stops it at the end)."""
    if subprocess.run(["bash", str(CLUSTER_SH), "status"], capture_output=True).returncode == 0:
        return False
    proc = subprocess.run(
        ["bash", str(CLUSTER_SH), "start"], capture_output=True, text=True, timeout=900
    )
    if proc.returncode != 0:
        sys.exit(f"cluster.sh start failed: {proc.stderr.strip().splitlines()[-1:]}")
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", choices=sorted(CASES), help="cases to regenerate")
    args = parser.parse_args()
    names = args.only or sorted(CASES)
    started_here = ensure_cluster()
    results: dict[str, dict] = {}
    errors: dict[str, str] = {}
    try:

        def one(name: str) -> None:
            try:
                run_case(CASES[name], results)
            except Exception as exc:  # noqa: BLE001 - reported per case below
                errors[name] = f"{type(exc).__name__}: {exc}"

        # The long wait (unschedulable asks for nothing the node gives) runs beside the others;
        # those run one after another, so that no pod of one case waits for the node's 2 cpus
        # behind another's (a FailedScheduling that is not the case's own).
        background = [n for n in names if n == "unschedulable"]
        threads = [threading.Thread(target=one, args=(name,)) for name in background]
        for thread in threads:
            thread.start()
        for name in names:
            if name not in background:
                one(name)
        for thread in threads:
            thread.join()
    finally:
        if started_here:
            subprocess.run(["bash", str(CLUSTER_SH), "stop"], capture_output=True, timeout=300)
    index_path = CAPTURES / "index.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {}
    index.update(results)
    index_path.write_text(json.dumps(dict(sorted(index.items())), indent=1) + "\n")
    for name, summary in sorted(results.items()):
        print(
            f"{name}: {summary.get('exception_type')} {summary.get('exception_message')} "
            f"events={summary['event_reasons']} ({summary['seconds']} s)"
        )
    for name, error in errors.items():
        print(f"{name}: FAILED {error}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
