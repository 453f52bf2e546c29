"""HarborJob launch and stop: Harbor started detached, stopped gracefully.

create (seed: "Launch the 89-task 6x full run"): Harbor starts in its own session with its
output appended to the job's log file (never a pipe: see the seed's `harbor | tee` pitfall), its
PID and the launch token recorded beside the log, and the step returns once Harbor has started
its first trial. A job dir that already exists is resumed (`harbor job resume`, same config)
instead, after the trials a SIGTERM cancelled during their setup are set aside (Harbor 0.21
counts them as done). Idempotent: a live Harbor process for this job, or a finished job, is left
alone. Outputs: job_name, job_dir, job_log, pid_file, pid, mode (run | resume | running |
finished).

delete (the stop; seed: "Stop the experiment correctly"): SIGTERM to the recorded Harbor PID,
a wait with progress while Harbor cancels its trials and tears their containers down (bounded:
at least 30 s per wave of running trials, at least `stop_timeout_s`), then SIGKILL, and what is
left of THIS job's compose projects (containers, networks) is removed. Results (job dir, log)
are never deleted; everything being gone already is fine. Outputs: job_dir, signalled_pid,
exited, killed, removed_containers, removed_networks.

Where each file is, whether the job has finished and whether Harbor still runs it: jobdir.py.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import ClassVar

from contracts import harbor_profiles, jobdir

from . import k8s_watch, serving_sampler
from .harbor import compose_flags, harbor_env
from .step import HostError, emit, log, verb

NAME = "harbor_launch"
# How often the waits look again: a file read and a /proc read, so often enough that the
# launch and the stop return within a fifth of a second of Harbor's own step.
POLL_S = 0.2
# How often the stop's wait says it is still waiting.
REPORT_EVERY_S = 5
# A wave of trial teardowns after SIGTERM takes about this long.
WAVE_S = 30


@dataclass(frozen=True)
class Inputs:
    harbor_bin: str
    job_config: str
    compose_path: str
    job_name: str
    jobs_dir: str
    log_dir: str
    # A secret (on standard input): the key for the OpenAI-compatible endpoint.
    openai_api_key: str
    # Recorded beside the PID; the status probe compares it (components/harbor_job.py).
    launch_token: str
    start_timeout_s: int
    nofile: int
    # The preflight's result: only ties this run to it.
    resolved_sha256: str
    # Trials as pods: {"kubeconfig": path, "namespace": ns}; the cluster's events and pod
    # states are then written beside the job for the audit (k8s_watch.py). None on Docker.
    k8s_watch: dict | None
    # `harbor run`'s flags beside the config (0.26.0: the endpoint's --base-url, ...), as the
    # preflight checked them; a resume reads them back from the job's config.json.
    harbor_flags: list[str]
    # Its profile's resume command (contracts/harbor_profiles.py).
    harbor_version: str
    # The serving plane's record: {"targets": [{"source", "url"}], "interval_s", "max_bytes"};
    # a sampler beside Harbor reads the gateway's and the workers' metrics into the job dir
    # while it runs (serving_sampler.py). None: no record (no serving plane, or turned off).
    serving_record: dict | None


@dataclass(frozen=True)
class StopInputs:
    job_name: str
    jobs_dir: str
    log_dir: str
    # The size of a wave of teardowns.
    n_concurrent_trials: int
    stop_timeout_s: int

    # The stop of a launch made by an older release (step.read).
    RENAMED: ClassVar[dict[str, str]] = {"n_concurrent": "n_concurrent_trials"}


def _last_line(path: Path, limit: int = 300) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:limit] if lines else ""


def set_aside_cancelled_setups(jobs: str, job_name: str) -> None:
    """Harbor 0.21 writes a trial that a SIGTERM cancels during its setup as a result.json with
    no exception, no agent run and no verifier result, and `job resume` counts it as done: a
    silent 0. Such trials are moved beside the job (kept, never deleted) so the resume runs
    them."""
    aside = Path(jobdir.aside_dir(jobs, job_name))
    for trial, result in jobdir.trial_results(Path(jobdir.job_dir(jobs, job_name))):
        if not jobdir.never_ran(result):
            continue
        aside.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        trial.rename(aside / f"{trial.name}.{stamp}")
        log(NAME, f"set aside trial {trial.name} (cancelled during setup, never run): the "
            "resume runs it again")


def raise_nofile(nofile: int) -> None:
    """This step's open-files limit, soft and hard, as `ulimit -n` sets it: Harbor inherits it."""
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    except (ValueError, OSError):
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        raise HostError(f"cannot raise the open-files limit to {nofile} (hard limit {hard}): "
                        "raise the hard limit for this user or set harbor.nofile") from None


def watch_cluster(inputs: Inputs, job_dir: Path, pid: int) -> None:
    """The cluster's own account of the trials (events, pod states), kept while Harbor runs."""
    if not inputs.k8s_watch:
        return
    watcher = k8s_watch.start(
        inputs.k8s_watch["kubeconfig"], inputs.k8s_watch["namespace"], str(job_dir), pid,
        jobdir.job_log(inputs.log_dir, inputs.job_name) + ".k8s-watch.log",
    )
    log(NAME, f"watching namespace {inputs.k8s_watch['namespace']} (PID {watcher}): events "
        f"and pod states go to {job_dir}")


def record_serving(inputs: Inputs, job_dir: Path, pid: int) -> None:
    """The serving plane's own record (metrics of the gateway and workers), kept while Harbor
    runs; a resume starts it again, appending."""
    if not inputs.serving_record:
        return
    sampler = serving_sampler.start(
        str(job_dir), pid, inputs.serving_record,
        jobdir.serving_sampler_log(inputs.log_dir, inputs.job_name))
    log(NAME, f"sampling the serving plane every {inputs.serving_record['interval_s']}s "
        f"(PID {sampler}) into {job_dir / jobdir.SERVING_RECORD}")


@dataclass(frozen=True)
class JobFiles:
    """Where the launch keeps a job (jobdir.py's layout) and what it reports of it."""

    name: str
    job_dir: Path
    job_log: Path
    pid_file: Path
    token_file: Path

    @classmethod
    def of(cls, inputs: Inputs) -> JobFiles:
        name, jobs, logs = inputs.job_name, inputs.jobs_dir, inputs.log_dir
        return cls(name, Path(jobdir.job_dir(jobs, name)), Path(jobdir.job_log(logs, name)),
                   Path(jobdir.pid_file(logs, name)), Path(jobdir.token_file(logs, name)))

    def done(self, pid: int | None, mode: str) -> None:
        emit({"job_name": self.name, "job_dir": str(self.job_dir), "job_log": str(self.job_log),
              "pid_file": str(self.pid_file), "pid": pid, "mode": mode})


def _launch_profile(inputs: Inputs) -> harbor_profiles.HarborProfile:
    """The inputs a launch needs, and the Harbor version's profile; a HostError naming what is
    missing."""
    for key in ("harbor_bin", "job_config", "job_name", "jobs_dir", "log_dir"):
        if not getattr(inputs, key):
            raise HostError(f"{key} is empty: the component must pass it")
    if not os.access(inputs.harbor_bin, os.X_OK):
        raise HostError(f"harbor_bin={inputs.harbor_bin} is not executable: run the install "
                        "step first")
    try:
        profile = harbor_profiles.profile(inputs.harbor_version)
    except KeyError as exc:
        raise HostError(f"harbor_version: {exc.args[0]}") from None
    if not (Path(inputs.job_config).is_file()
            and (not inputs.compose_path or Path(inputs.compose_path).is_file())):
        raise HostError(f"config files missing ({inputs.job_config}, {inputs.compose_path}): "
                        "run the configs step first")
    return profile


def _left_alone(inputs: Inputs, files: JobFiles) -> bool:
    """A job Harbor already runs (its cluster watcher and serving sampler kept going), or one
    that has finished: reported, and left alone."""
    pid = jobdir.harbor_pid(Path(inputs.log_dir), files.name)
    if pid is not None:
        log(NAME, f"Harbor is already running job {files.name} (PID {pid})")
        watch_cluster(inputs, files.job_dir, pid)
        record_serving(inputs, files.job_dir, pid)
        files.token_file.write_text(inputs.launch_token + "\n")
        files.done(pid, "running")
        return True
    if jobdir.finished(jobdir.read_json(files.job_dir / jobdir.JOB_RESULT)):
        log(NAME, f"job {files.name} is finished; results in {files.job_dir}")
        files.token_file.write_text(inputs.launch_token + "\n")
        files.done(None, "finished")
        return True
    return False


def _harbor_argv(inputs: Inputs, profile: harbor_profiles.HarborProfile,
                 files: JobFiles) -> tuple[str, list[str]]:
    """(mode, argv): a job dir that exists is resumed, else the job is run."""
    if (files.job_dir / jobdir.JOB_CONFIG).is_file():
        # Resume re-reads config.json (same config) and re-runs cancelled and half-written trials.
        set_aside_cancelled_setups(inputs.jobs_dir, files.name)
        return "resume", [inputs.harbor_bin, *profile.resume_args, str(files.job_dir)]
    return "run", [inputs.harbor_bin, "run", "--config", inputs.job_config,
                   *compose_flags(inputs.compose_path), *inputs.harbor_flags,
                   "--job-name", files.name, "--jobs-dir", inputs.jobs_dir, "--yes"]


def _start_harbor(inputs: Inputs, files: JobFiles, mode: str,
                  argv: list[str]) -> subprocess.Popen:
    """Harbor started detached, its output appended to the job's log, its PID and the launch
    token recorded, the cluster watcher and the serving sampler beside it."""
    log(NAME, f"starting Harbor ({mode}) for job {files.name}; log: {files.job_log}")
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    with files.job_log.open("a") as header:
        header.write(f"\n=== {stamp}: harbor {mode} (benchstack launch) ===\n")
    files.pid_file.unlink(missing_ok=True)
    with files.job_log.open("ab") as out:
        # Its own session: neither this step's exit nor a terminal hang-up reaches it; the PID
        # recorded is Harbor's own, the one SIGTERM must go to.
        harbor = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            cwd=str(Path(inputs.jobs_dir).parent), start_new_session=True,
            env=harbor_env({"LITELLM_LOCAL_MODEL_COST_MAP": "True",
                            harbor_profiles.API_KEY_VAR: inputs.openai_api_key}),
        )
    files.pid_file.write_text(f"{harbor.pid}\n")
    files.token_file.write_text(inputs.launch_token + "\n")
    watch_cluster(inputs, files.job_dir, harbor.pid)
    record_serving(inputs, files.job_dir, harbor.pid)
    return harbor


def _wait_first_trial(harbor: subprocess.Popen, files: JobFiles, launched_at: float,
                      timeout_s: int) -> None:
    """Until Harbor has started a trial of this launch; a HostError if it exits or times out."""
    deadline = time.monotonic() + timeout_s
    while not jobdir.started_since(files.job_dir, launched_at):
        if harbor.poll() is not None:
            raise HostError(f"Harbor exited before starting a trial (last log line: "
                            f"{_last_line(files.job_log)}): see {files.job_log}")
        if time.monotonic() >= deadline:
            raise HostError(f"no trial started within {timeout_s}s (Harbor PID {harbor.pid} "
                            f"still running): see {files.job_log}; raise "
                            "harbor.start_timeout_s if images are slow to start")
        time.sleep(POLL_S)


@verb(Inputs)
def create(inputs: Inputs) -> None:
    profile = _launch_profile(inputs)
    files = JobFiles.of(inputs)
    Path(inputs.jobs_dir).mkdir(parents=True, exist_ok=True)
    Path(inputs.log_dir).mkdir(parents=True, exist_ok=True)
    if _left_alone(inputs, files):
        return
    mode, argv = _harbor_argv(inputs, profile, files)
    raise_nofile(inputs.nofile)
    launched_at = time.time()
    harbor = _start_harbor(inputs, files, mode, argv)
    _wait_first_trial(harbor, files, launched_at, inputs.start_timeout_s)
    log(NAME, f"Harbor PID {harbor.pid} has started job {files.name}")
    files.done(harbor.pid, mode)


def stop_bound(running: int, n_concurrent_trials: int, minimum: int) -> int:
    """Seconds to wait after SIGTERM: a wave of teardowns per `n_concurrent_trials` running
    trials."""
    waves = -(-max(running, 1) // n_concurrent_trials)
    return max(WAVE_S * waves, minimum)


def _docker_ids(*args: str) -> list[str]:
    try:
        done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return done.stdout.split() if done.returncode == 0 else []


def remove_leftovers(job_dir: Path) -> tuple[int, int]:
    """The containers and networks of this job's compose projects (derived from its trial dirs,
    so nothing of another job is touched): what a SIGKILL leaves behind."""
    containers = networks = 0
    for trial in jobdir.trial_dirs(job_dir):
        project = jobdir.compose_project(trial.name)
        label = f"label=com.docker.compose.project={project}"
        ids = _docker_ids("ps", "-aq", "--filter", label)
        if ids:
            subprocess.run(["docker", "rm", "-f", *ids], capture_output=True, timeout=300)
            containers += len(ids)
            log(f"{NAME}.stop", f"removed the containers of compose project {project}")
        nets = _docker_ids("network", "ls", "-q", "--filter", label)
        if nets:
            subprocess.run(["docker", "network", "rm", *nets], capture_output=True, timeout=300)
            networks += len(nets)
            log(f"{NAME}.stop", f"removed the network of compose project {project}")
    return containers, networks


def _check_stop_inputs(inputs: StopInputs) -> None:
    for key in ("job_name", "jobs_dir"):
        if not getattr(inputs, key):
            raise HostError(f"{key} is empty: the component must pass it")
    if inputs.n_concurrent_trials < 1:
        raise HostError("n_concurrent_trials must be a positive number, "
                        f"got '{inputs.n_concurrent_trials}'")
    if inputs.stop_timeout_s < 0:
        raise HostError(f"stop_timeout_s must be a number of seconds, got "
                        f"'{inputs.stop_timeout_s}'")


def _wait_or_kill(pid: int, name: str, bound: int) -> bool:
    """Until Harbor PID `pid` no longer runs job `name`, at most `bound` seconds (with progress),
    then SIGKILL. Whether it was killed."""
    step = f"{NAME}.stop"
    start = time.monotonic()
    report_at = REPORT_EVERY_S
    while jobdir.runs_job(pid, name):
        if int(time.monotonic() - start) >= bound:
            log(step, f"Harbor PID {pid} still running after {bound}s: SIGKILL, then "
                "removing its containers")
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
            return True
        time.sleep(POLL_S)
        waited = int(time.monotonic() - start)
        if waited >= report_at:
            report_at = waited + REPORT_EVERY_S
            log(step, f"waiting for Harbor PID {pid} to cancel its trials: {waited}s of "
                f"{bound}s")
    log(step, f"Harbor PID {pid} exited after {int(time.monotonic() - start)}s")
    return False


def _stop_harbor(inputs: StopInputs, pid: int, job_dir: Path) -> bool:
    """SIGTERM to Harbor, a wait bounded by its running trials, then SIGKILL. Whether it was
    killed."""
    running = jobdir.running_trials(jobdir.read_json(job_dir / jobdir.JOB_RESULT))
    bound = stop_bound(running, inputs.n_concurrent_trials, inputs.stop_timeout_s)
    log(f"{NAME}.stop", f"SIGTERM to Harbor PID {pid} ({running} trials running); waiting up "
        f"to {bound}s for its shutdown")
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass  # it ended on its own meanwhile: nothing to wait for
    return _wait_or_kill(pid, inputs.job_name, bound)


@verb(StopInputs)
def delete(inputs: StopInputs) -> None:
    step = f"{NAME}.stop"
    _check_stop_inputs(inputs)
    name = inputs.job_name
    job_dir = Path(jobdir.job_dir(inputs.jobs_dir, name))
    pid = jobdir.harbor_pid(Path(inputs.log_dir), name)
    killed = False
    if pid is not None:
        killed = _stop_harbor(inputs, pid, job_dir)
    else:
        log(step, f"no running Harbor process for job {name}")
    sampler = serving_sampler.stop(str(job_dir))
    if sampler is not None:
        log(step, f"stopped the serving sampler (PID {sampler}) after its last read")
    containers = networks = 0
    if job_dir.is_dir() and shutil.which("docker"):
        containers, networks = remove_leftovers(job_dir)
    emit({"job_dir": str(job_dir), "signalled_pid": pid, "exited": not killed,
          "killed": killed, "removed_containers": containers, "removed_networks": networks})
