"""Harbor 0.21.0 oracle trials on the test cluster (`-e ack`) against the Docker host (`-e docker`).

Both sides run the SAME tasks (a copy of tests/k8s/tasks: two oracle tasks on
127.0.0.1:5000/benchstack/minbase:bookworm, cpus 1, memory_mb 128, storage_mb 64) with the
same image, pulled beforehand on both sides (one warm-up trial per task each, not counted).

1. Side by side: the same N-trial job (`-k` attempts over the tasks) at the same `-n`, on the
   Docker engine and on the cluster, in ABBA rounds so drift on a shared machine hits both
   alike. Printed: wall seconds (the `harbor run` processes), mean/median per-trial environment
   setup (result.json `environment_setup.started_at` -> `finished_at`: compose up, or pod
   create -> Running -> the first execs), mean trial duration, mean teardown (the last
   phase's end -> the trial's end: compose down, or the pod's deletion), and cluster/docker
   ratios. The pods request what task.toml says (cpu 1, so at most 2 pods fit the 2-core
   node). Then `docker stop` of one container running what Harbor's prebuilt compose file runs
   as `main` (`sh -c "sleep infinity"`), timed: what the Docker side's teardown waits for.
2. Throughput on the cluster as `-n` grows (1, 2, 4, 8): N trials per point (at least 3 x -n,
   so the ramp up and down do not dominate), pods requesting --cpu-request (default 100m)
   through ack's `pod_overrides` (task.toml's cpus is an int in Harbor 0.21.0: no fractional
   cpus) so the scheduler is not what limits them. Printed: trials per minute over the trials'
   own span (first trial start -> last trial end; `harbor run`'s start-up excluded) and over the
   process's wall time, the speedup over the first point and per unit of -n, setup and trial
   times, the pods at once (Running / Unschedulable, from a kubectl watch), the host's CPU busy
   share, the step ratios, and where it saturates: the first step up in -n that turns under a
   quarter of its extra concurrency into extra trials/min (a doubling that gains < 25%).

The cluster: setup/k8s/cluster.sh, started if `status` fails and then stopped at the end
(left running otherwise); a namespace of this run's own, deleted at the end. Another session
(a pytest run's k8s_cluster fixture stops any running cluster first) may stop or restart it
under this run: the namespace is then gone, the run fails saying so, and a cluster that is no
longer the one it started is not stopped. Everything is on loopback; the Docker side's compose
projects are Harbor's own, removed by it.

    .venv/bin/python benchmarks/bench_k8s.py [--trials 16] [--pair-concurrency 2]
        [--concurrency 1,2,4,8] [--cpu-request 100m] [--rounds 2] [--quick]

Progress lines on stderr; the report, then one JSON line, on stdout. Exit 1 when a trial
fails (its exception or a reward other than 1.0) or the cluster goes away mid-run.
"""

from __future__ import annotations

import argparse
import json
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from contracts.jobdir import compose_project  # noqa: E402
from tests.conftest import HARBOR_VENV, docker  # noqa: E402
from tests.k8s.cluster import (  # noqa: E402
    IMAGE,
    K8S_DIR,
    KUBECONFIG,
    TASKS,
    Cluster,
    cluster_sh,
    last_line,
)
from tests.k8s.test_harbor_ack import harbor_env  # noqa: E402

HARBOR = HARBOR_VENV / "bin" / "harbor"
KUBECTL = K8S_DIR / "current" / "bin" / "kubectl"
JOB_TIMEOUT = 900
PHASES = ("environment_setup", "agent_setup", "agent_execution", "verifier")
# Saturated: a step up in -n that turns under a quarter of its extra concurrency into extra
# trials/min (a doubling that gains < 25%).
SATURATED = 0.25


def say(message: str) -> None:
    print(f"[bench_k8s] {message}", file=sys.stderr, flush=True)


def stamp(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of the whole host, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


@dataclass
class JobResult:
    side: str
    concurrency: int
    wall: float
    trials: list[dict]
    cpu_busy: float
    pods_running_max: int = 0
    pods_unschedulable_max: int = 0
    cpu_requests: set[str] = field(default_factory=set)
    round_spans: list[float] = field(default_factory=list)

    def phase(self, name: str) -> list[float]:
        return [stamp(t[name]["finished_at"]) - stamp(t[name]["started_at"]) for t in self.trials]

    @property
    def setup(self) -> list[float]:
        return self.phase("environment_setup")

    @property
    def durations(self) -> list[float]:
        return [stamp(t["finished_at"]) - stamp(t["started_at"]) for t in self.trials]

    @property
    def teardown(self) -> list[float]:
        """The end of the last phase that ran -> the trial's end: stopping the environment."""
        return [stamp(t["finished_at"]) - max(stamp(t[p]["finished_at"]) for p in PHASES if t[p])
                for t in self.trials]

    @property
    def span(self) -> float:
        """First trial start -> last trial end; the sum over the rounds of a merged side."""
        if self.round_spans:
            return sum(self.round_spans)
        return (max(stamp(t["finished_at"]) for t in self.trials)
                - min(stamp(t["started_at"]) for t in self.trials))


class PodWatch:
    """`kubectl get pods --watch` on the namespace while a job runs: the most pods Running, and
    the most the scheduler could not place (PodScheduled False, reason Unschedulable: no node
    has the cpu/memory they request left), at once; and the cpu requests they carried. One line
    per pod change, no polling."""

    COLUMNS = ("custom-columns=NAME:.metadata.name,PHASE:.status.phase,"
               "CPU:.spec.containers[0].resources.requests.cpu,DEL:.metadata.deletionTimestamp,"
               'UNSCHED:.status.conditions[?(@.reason=="Unschedulable")].reason')

    def __init__(self, cluster: Cluster, namespace: str, before: PodWatch | None = None) -> None:
        self.running = before.running if before else 0
        self.unschedulable = before.unschedulable if before else 0
        self.cpu_requests: set[str] = before.cpu_requests if before else set()
        self.state: dict[str, str] = before.state if before else {}
        self.proc = subprocess.Popen(
            [str(cluster.kubectl), "--kubeconfig", str(cluster.kubeconfig), "get", "pods",
             "-n", namespace, "--watch", "--no-headers", "-o", self.COLUMNS],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
            text=True)
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            parts = line.split()
            if len(parts) != 5:
                continue
            name, phase, cpu, deleting, unschedulable = parts
            self.cpu_requests.add(cpu)
            if deleting != "<none>":
                phase = "Terminating"
            elif phase == "Pending" and unschedulable == "Unschedulable":
                phase = "Unschedulable"
            self.state[name] = phase
            phases = list(self.state.values())
            self.running = max(self.running, phases.count("Running"))
            self.unschedulable = max(self.unschedulable, phases.count("Unschedulable"))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.thread.join(10)


def end(proc: subprocess.Popen) -> None:
    """A process still running is terminated, then killed after a minute."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Bench:
    def __init__(self, work: Path, cluster: Cluster, namespace: str) -> None:
        self.work = work
        self.cluster = cluster
        self.namespace = namespace
        self.tasks = work / "tasks"
        shutil.copytree(TASKS, self.tasks)
        envs = [tomllib.loads(p.read_text())["environment"]
                for p in sorted(self.tasks.glob("*/task.toml"))]
        self.n_tasks = len(envs)
        self.resources = "; ".join(sorted({
            f"cpus {e.get('cpus')}, memory_mb {e.get('memory_mb')}, storage_mb "
            f"{e.get('storage_mb')}" for e in envs}))
        self.jobs = work / "jobs"
        self.jobs.mkdir()
        self.count = 0

    def env_args(self, side: str, cpu_request: str | None) -> list[str]:
        if side == "docker":
            return ["-e", "docker"]
        args = ["-e", "ack", "--ek", f"namespace={self.namespace}",
                "--ek", f"kubeconfig={self.cluster.kubeconfig}"]
        if cpu_request:
            requests = {"requests": {"cpu": cpu_request}}
            overrides = {"spec": {"containers": [{"resources": requests}]}}
            args += ["--ek", f"pod_overrides={json.dumps(overrides, separators=(',', ':'))}"]
        return args

    def run(self, side: str, label: str, trials: int, concurrency: int,
            cpu_request: str | None = None) -> JobResult:
        """One `harbor run` of `trials` oracle trials (attempts over the tasks) at `-n
        concurrency`; progress every few seconds; every trial must get reward 1.0."""
        self.count += 1
        attempts = -(-trials // self.n_tasks)
        total = attempts * self.n_tasks
        name = f"bench-{self.count:02d}-{side}-n{concurrency}"
        log = self.work / f"{name}.harbor.log"
        job_dir = self.jobs / name
        argv = [str(HARBOR), "run", "-p", str(self.tasks), "-a", "oracle",
                *self.env_args(side, cpu_request), "-n", str(concurrency), "-k", str(attempts),
                "--job-name", name, "-o", str(self.jobs), "-y"]
        result = JobResult(side, concurrency, 0.0, [], 0.0)
        watch = PodWatch(self.cluster, self.namespace) if side == "ack" else None
        busy0, all0 = cpu_times()
        started = time.monotonic()
        with log.open("wb") as fh:
            proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=harbor_env(), cwd=self.work)
            try:
                watch = self.wait(proc, job_dir, watch, label, total, name, started)
                result.wall = time.monotonic() - started
                busy1, all1 = cpu_times()
                result.cpu_busy = (busy1 - busy0) / max(1, all1 - all0)
            finally:
                end(proc)
                if side == "docker":
                    self.remove_compose_leftovers(job_dir)
                if watch:
                    watch.stop()
                    result.pods_running_max = watch.running
                    result.pods_unschedulable_max = watch.unschedulable
                    result.cpu_requests = watch.cpu_requests
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        if proc.returncode != 0:
            self.check_cluster(side)
            raise SystemExit(f"bench_k8s: {name}: harbor exit {proc.returncode}\n{tail}")
        result.trials = self.passed_trials(job_dir, name, side)
        if len(result.trials) != total:
            raise SystemExit(f"bench_k8s: {name}: {len(result.trials)} trials of {total}\n{tail}")
        say(f"{label}: {total} trials in {result.wall:.1f} s "
            f"(setup median {statistics.median(result.setup):.2f} s)")
        return result

    def wait(self, proc: subprocess.Popen, job_dir: Path, watch: PodWatch | None, label: str,
             total: int, name: str, started: float) -> PodWatch | None:
        """Until harbor exits (at once: the wall time is not rounded), saying how many trials
        are done, the pod watch renewed when the apiserver ended it; the watch in use."""
        last_report, last_done = started, -1
        while True:
            try:
                proc.wait(1)
                return watch
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            done = len(list(job_dir.glob("*__*/result.json")))
            if watch and watch.proc.poll() is not None:
                # The watch ends when the apiserver does: is our cluster still there?
                self.check_cluster("ack")
                watch.stop()
                watch = PodWatch(self.cluster, self.namespace, watch)
            if now - started > JOB_TIMEOUT:
                raise SystemExit(f"bench_k8s: {name} not done in {JOB_TIMEOUT} s")
            if done != last_done and now - last_report >= 5 or now - last_report >= 20:
                say(f"{label}: {done}/{total} trials done, {now - started:.0f} s")
                last_report, last_done = now, done

    def passed_trials(self, job_dir: Path, name: str, side: str) -> list[dict]:
        """Every trial's result, each of which must have passed (reward 1.0, no exception)."""
        trials = []
        for path in sorted(job_dir.glob("*__*/result.json")):
            trial = json.loads(path.read_text())
            reward = ((trial.get("verifier_result") or {}).get("rewards") or {}).get("reward")
            if trial.get("exception_info") or reward != 1.0:
                self.check_cluster(side)
                info = trial.get("exception_info") or {}
                raise SystemExit(
                    f"bench_k8s: {name}: trial {trial['trial_name']} reward {reward}: "
                    f"{info.get('exception_type')}: {info.get('exception_message')}")
            trials.append(trial)
        return trials

    def check_cluster(self, side: str) -> None:
        if side == "ack" and not namespace_exists(self.cluster, self.namespace):
            raise SystemExit(f"bench_k8s: namespace {self.namespace} is gone: the cluster was "
                             "stopped or restarted under this run (another session's pytest "
                             "stops any running cluster first): run again later")

    def remove_compose_leftovers(self, job_dir: Path) -> None:
        """Harbor removes each trial's compose project; a killed run may leave some."""
        for trial in job_dir.glob("*__*"):
            label = f"label=com.docker.compose.project={compose_project(trial.name)}"
            ids = docker("ps", "-aq", "--filter", label, check=False).stdout.split()
            if ids:
                docker("rm", "-f", *ids, check=False)
            nets = docker("network", "ls", "-q", "--filter", label, check=False).stdout.split()
            if nets:
                docker("network", "rm", *nets, check=False)


def docker_stop_seconds() -> float:
    """`docker stop` (default timeout) of the command Harbor's docker-compose-prebuilt.yaml gives
    `main`: a PID 1 that does not die on SIGTERM waits out the timeout, then gets SIGKILL."""
    name = f"bench-k8s-stop-{secrets.token_hex(3)}"
    docker("run", "-d", "--name", name, "--network", "none", IMAGE, "sh", "-c", "sleep infinity")
    try:
        started = time.monotonic()
        docker("stop", name, timeout=120)
        return time.monotonic() - started
    finally:
        docker("rm", "-f", name, check=False)


def summary(r: JobResult) -> dict:
    return {"trials": len(r.trials), "concurrency": r.concurrency, "wall_s": round(r.wall, 2),
            "span_s": round(r.span, 2),
            "setup_mean_s": round(statistics.mean(r.setup), 3),
            "setup_median_s": round(statistics.median(r.setup), 3),
            "trial_mean_s": round(statistics.mean(r.durations), 3),
            "teardown_mean_s": round(statistics.mean(r.teardown), 3),
            "cpu_busy": round(r.cpu_busy, 3)}


def merged(side: str, jobs: list[JobResult]) -> JobResult:
    """Rounds of one side as one job: the walls add up, the trials pool."""
    out = JobResult(side, jobs[0].concurrency, sum(j.wall for j in jobs),
                    [t for j in jobs for t in j.trials],
                    statistics.mean(j.cpu_busy for j in jobs))
    out.pods_running_max = max(j.pods_running_max for j in jobs)
    out.pods_unschedulable_max = max(j.pods_unschedulable_max for j in jobs)
    out.cpu_requests = set().union(*(j.cpu_requests for j in jobs))
    out.round_spans = [j.span for j in jobs]
    return out


def side_by_side(bench: Bench, trials: int, concurrency: int, rounds: int) -> dict:
    per_round = -(-trials // rounds)
    order = ["docker", "ack", "ack", "docker"] * rounds
    runs: dict[str, list[JobResult]] = {"docker": [], "ack": []}
    for side in order[: 2 * rounds]:
        label = f"side by side {side} round {len(runs[side]) + 1}/{rounds} (-n {concurrency})"
        runs[side].append(bench.run(side, label, per_round, concurrency))
    d, k = merged("docker", runs["docker"]), merged("ack", runs["ack"])
    ds, ks = summary(d), summary(k)
    how = f"{rounds} ABBA rounds" if rounds > 1 else "one round each"
    print(f"1. the same oracle job on both sides: {ds['trials']} trials (-k over "
          f"{bench.n_tasks} tasks, {how}), -n {concurrency}")
    print(f"   cluster pods request what task.toml says ({bench.resources}): cpu "
          f"{','.join(sorted(k.cpu_requests)) or '?'} (at most {k.pods_running_max} Running at "
          f"once, {k.pods_unschedulable_max} Unschedulable)")
    print(f"   {'':22}{'wall s':>9}{'setup mean':>12}{'setup median':>14}{'trial mean':>12}"
          f"{'teardown mean':>15}")
    for name, s in (("docker (-e docker)", ds), ("cluster (-e ack)", ks)):
        print(f"   {name:22}{s['wall_s']:9.1f}{s['setup_mean_s']:11.2f}s"
              f"{s['setup_median_s']:13.2f}s{s['trial_mean_s']:11.2f}s"
              f"{s['teardown_mean_s']:14.2f}s")
    ratios = {key: round(ks[key] / ds[key], 2) for key in
              ("wall_s", "setup_mean_s", "setup_median_s", "trial_mean_s", "teardown_mean_s")}
    print(f"   cluster / docker:     {ratios['wall_s']:8.2f}x{ratios['setup_mean_s']:11.2f}x"
          f"{ratios['setup_median_s']:13.2f}x{ratios['trial_mean_s']:11.2f}x"
          f"{ratios['teardown_mean_s']:14.2f}x")
    print("   (teardown: the last phase's end -> the trial's end, i.e. compose down / pod delete)")
    stop = docker_stop_seconds()
    print(f"   `docker stop` of Harbor's prebuilt `main` (sh -c \"sleep infinity\" as PID 1): "
          f"{stop:.1f} s here; ack deletes its pods with grace period 0")
    return {"docker": ds, "cluster": ks, "cluster_over_docker": ratios,
            "docker_stop_s": round(stop, 2),
            "cluster_cpu_requests": sorted(k.cpu_requests)}


def throughput_curve(bench: Bench, trials: int, levels: list[int], cpu_request: str) -> dict:
    points = []
    for n in levels:
        # At least 3 waves of trials per point, so the ramp up and down do not dominate.
        points.append(bench.run("ack", f"throughput -n {n}", max(trials, 3 * n), n,
                                cpu_request=cpu_request))
    base = len(points[0].trials) / points[0].span
    seen = ",".join(sorted(set().union(*(p.cpu_requests for p in points)))) or "?"
    print(f"2. throughput on the cluster (one node, {subprocess.getoutput('nproc')} cores), pods "
          f"requesting cpu {seen} (--ek pod_overrides; the rest as task.toml)")
    print(f"   {'-n':>4}{'trials':>7}{'trials/min':>12}{'speedup':>9}{'per -n':>8}{'wall/min':>10}"
          f"{'setup med':>11}{'trial mean':>12}{'pods run/unsch':>16}{'host cpu':>10}")
    rows = []
    for r in points:
        tpm = len(r.trials) / r.span * 60
        speedup = len(r.trials) / r.span / base
        rows.append({**summary(r), "trials_per_min": round(tpm, 2),
                     "trials_per_min_wall": round(len(r.trials) / r.wall * 60, 2),
                     "speedup": round(speedup, 2),
                     "efficiency": round(speedup * levels[0] / r.concurrency, 2),
                     "pods_running_max": r.pods_running_max,
                     "pods_unschedulable_max": r.pods_unschedulable_max})
        row = rows[-1]
        print(f"   {r.concurrency:4d}{len(r.trials):7d}{tpm:12.1f}{speedup:8.2f}x"
              f"{row['efficiency']:8.2f}{row['trials_per_min_wall']:10.1f}"
              f"{statistics.median(r.setup):10.2f}s{statistics.mean(r.durations):11.2f}s"
              f"{r.pods_running_max:>10}/{r.pods_unschedulable_max:<5}{r.cpu_busy:9.0%}")
    print("   (trials/min over the trials' span, first start -> last end; wall/min over the "
          "`harbor run` process; per -n: speedup per unit of -n relative to the first point;"
          " host cpu: the whole machine's busy share during the job, other work included)")
    saturation = None
    for prev, row in zip(rows, rows[1:], strict=False):
        gain = row["trials_per_min"] / prev["trials_per_min"]
        more = row["concurrency"] / prev["concurrency"]
        print(f"   -n {row['concurrency']} / -n {prev['concurrency']}: trials/min {gain:.2f}x, "
              f"trial mean {row['trial_mean_s'] / prev['trial_mean_s']:.2f}x, setup median "
              f"{row['setup_median_s'] / prev['setup_median_s']:.2f}x")
        if saturation is None and gain - 1 < SATURATED * (more - 1):
            saturation = (prev["concurrency"], row["concurrency"], gain)
    if saturation is None:
        print(f"   no saturation up to -n {levels[-1]}: each step kept at least "
              f"{SATURATED:.0%} of its extra concurrency as extra trials/min")
    else:
        n, nxt, gain = saturation
        print(f"   saturates at -n {n}: -n {nxt} adds only {gain - 1:.0%} trials/min "
              f"(under {SATURATED:.0%} of its extra concurrency)")
    return {"cpu_request": cpu_request, "points": rows,
            "saturates_at": saturation[0] if saturation else None}


def ensure_cluster() -> tuple[Cluster, bool]:
    if cluster_sh("status", timeout=60).returncode == 0:
        say("the cluster is up: using it (left running at the end)")
        started_by_us = False
    else:
        say("the cluster is not running: cluster.sh start (stopped again at the end)")
        started_by_us = True
        t0 = time.monotonic()
        proc = cluster_sh("start")
        if proc.returncode != 0:
            raise SystemExit(f"bench_k8s: cluster.sh start: {last_line(proc.stderr)}")
        say(f"cluster started in {time.monotonic() - t0:.0f} s")
    status = cluster_sh("status", timeout=60)
    return Cluster(kubeconfig=KUBECONFIG, kubectl=KUBECTL, host_before=Path("/dev/null"),
                   start_seconds=0.0, status_line=last_line(status.stdout)), started_by_us


def namespace_exists(cluster: Cluster, namespace: str) -> bool:
    return cluster.kubectl_run("get", "namespace", namespace, check=False,
                               timeout=30).returncode == 0


def make_namespace(cluster: Cluster) -> str:
    name = f"bs-bench-{secrets.token_hex(3)}"
    cluster.kubectl_run("create", "namespace", name)
    cluster.wait_for(f"the default service account of {name}", lambda: cluster.kubectl_run(
        "-n", name, "get", "serviceaccount", "default", check=False).returncode == 0)
    return name


def check_prereqs() -> None:
    if not HARBOR.exists():
        raise SystemExit(f"bench_k8s: no Harbor at {HARBOR}: run `make setup`")
    proc = subprocess.run([str(HARBOR_VENV / "bin" / "python"), "-c", "import kubernetes"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"bench_k8s: no kubernetes client in {HARBOR_VENV}: "
                         "run `make setup`")
    for task in TASKS.iterdir():
        env = tomllib.loads((task / "task.toml").read_text())["environment"]
        if env.get("docker_image") != IMAGE:
            raise SystemExit(f"bench_k8s: {task.name} does not run {IMAGE}")
    if docker("pull", "-q", IMAGE, check=False, timeout=300).returncode != 0:
        raise SystemExit(f"bench_k8s: docker pull {IMAGE} failed: is the registry up?")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=16,
                        help="trials per job (rounded up to a multiple of the tasks; "
                        "a throughput point runs at least 3 x its -n)")
    parser.add_argument("--pair-concurrency", type=int, default=2,
                        help="-n of the side-by-side jobs")
    parser.add_argument("--concurrency", default="1,2,4,8",
                        help="the -n values of the throughput curve")
    parser.add_argument("--cpu-request", default="100m",
                        help="the pods' cpu request in the throughput curve")
    parser.add_argument("--rounds", type=int, default=2, help="ABBA rounds of the side by side")
    parser.add_argument("--quick", action="store_true",
                        help="8 trials, one round, -n 1,2,4: a smoke run of a few minutes")
    opts = parser.parse_args()
    if opts.quick:
        opts.trials, opts.rounds = min(opts.trials, 8), 1
        if opts.concurrency == "1,2,4,8":
            opts.concurrency = "1,2,4"
    levels = [int(x) for x in opts.concurrency.split(",") if x.strip()]
    check_prereqs()
    t0 = time.monotonic()
    cluster, started_by_us = ensure_cluster()
    namespace = None
    report: dict = {}
    try:
        namespace = make_namespace(cluster)
        say(f"namespace {namespace}; {cluster.status_line}")
        with tempfile.TemporaryDirectory(prefix="bench_k8s.") as tmp:
            bench = Bench(Path(tmp), cluster, namespace)
            # The image on both sides (containerd pulls it on the first pod), Harbor warmed.
            bench.run("docker", "warm-up docker", bench.n_tasks, bench.n_tasks)
            bench.run("ack", "warm-up cluster", bench.n_tasks, bench.n_tasks)
            print(f"Harbor 0.21.0 oracle trials, {bench.n_tasks} tasks of tests/k8s/tasks on "
                  f"{IMAGE}; host: {subprocess.getoutput('nproc')} cores")
            report["side_by_side"] = side_by_side(bench, opts.trials, opts.pair_concurrency,
                                                  opts.rounds)
            report["throughput"] = throughput_curve(bench, opts.trials, levels,
                                                    opts.cpu_request)
    finally:
        # Our namespace gone means another session stopped or restarted the cluster meanwhile:
        # what runs now (if anything) is theirs, and not ours to stop.
        ours = namespace_exists(cluster, namespace) if namespace else True
        if ours and namespace:
            cluster.kubectl_run("delete", "namespace", namespace, "--wait=true",
                                "--timeout=120s", check=False, timeout=180)
        if started_by_us and ours:
            say("cluster.sh stop (this run started it)")
            cluster_sh("stop", timeout=300)
        elif started_by_us:
            say("the cluster is not the one this run started: left as it is")
    total = time.monotonic() - t0
    how = "started and stopped by this run" if started_by_us else "already running"
    print(f"(whole run {total / 60:.1f} min; cluster {how})")
    print(json.dumps({**report, "run_s": round(total, 1)}))


if __name__ == "__main__":
    main()
