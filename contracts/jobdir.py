"""Harbor's job layout: where each file of a job is, and what its states mean. The one owner.

Everything that looks at a Harbor job asks this module: the steps on the Harbor host (the launch,
the stop, the preflight's saved config, the provenance) and their status probes, the program
(components/harbor_job.py, harbor_rerun.py, provenance.py: the paths it declares and exports),
the progress command (components/progress.py) and the audit (audit/read/layout.py,
audit/judge/job_state.py, audit/pipeline.py). So the paths (`results/`, `logs/`,
`<job>.pid`, `<job>.log`...), "finished", "running" (the PID check) and the per-trial files are
decided here alone (tests/unit/test_jobdir.py fails when another file spells them).

It is shipped to the hosts with the host package and also inlined whole into the status probes
(hostside/probes/harbor_status.sh, harbor_reruns.sh), which run it with the host's python3
before any code is copied there: so it is standard library only, imports nothing of the project
(not even the package's own step.py) and runs as a script:

    python3 jobdir.py status JOBS_DIR LOG_DIR JOB_NAME    # the status probe's JSON
    python3 jobdir.py reruns JOBS_DIR JOB_NAME            # the job's rerun jobs, oldest first

A workspace holds `results/` (Harbor's jobs dir) and `logs/` (each job's log, PID file, launch
token, resolved config and provenance manifest). A job dir holds `config.json`, `result.json`,
`lock.json`, `job.log` and one `<task>__<id>/` dir per trial with its own `config.json`,
`result.json`, `trial.log`, `exception.txt`, `agent/` and `verifier/`. Readers never raise for a
missing or half-written file.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# --- the workspace's rooms and each job's files beside its dir -----------------------------------

JOBS_ROOM = "results"
LOGS_ROOM = "logs"
# Trials a resume must run again are kept here, beside the jobs (never deleted).
ASIDE_ROOM = ".benchstack-interrupted"


def jobs_dir(workspace: str) -> str:
    """Harbor's jobs dir in a workspace: every job dir, the results."""
    return f"{workspace.rstrip('/')}/{JOBS_ROOM}"


def log_dir(workspace: str) -> str:
    """Where each job's log, PID file, launch token, resolved config and provenance go."""
    return f"{workspace.rstrip('/')}/{LOGS_ROOM}"


def job_dir(jobs: str, job_name: str) -> str:
    return f"{jobs}/{job_name}"


def job_log(logs: str, job_name: str) -> str:
    """Harbor's own output (never a pipe): the launch appends it here."""
    return f"{logs}/{job_name}.log"


def pid_file(logs: str, job_name: str) -> str:
    """The PID of the Harbor process running the job, as the launch recorded it."""
    return f"{logs}/{job_name}.pid"


def token_file(logs: str, job_name: str) -> str:
    """The launch token of the launch that started the recorded process (harbor_job.py)."""
    return f"{logs}/{job_name}.launch-token"


def resolved_config(logs: str, job_name: str) -> str:
    """The config Harbor resolved for the job, saved by the preflight (the provenance reads it)."""
    return f"{logs}/{job_name}.resolved-config.json"


def provenance_file(logs: str, job_name: str) -> str:
    return f"{logs}/{job_name}.provenance.json"


def aside_dir(jobs: str, job_name: str) -> str:
    return f"{jobs}/{ASIDE_ROOM}/{job_name}"


# --- Harbor's files in a job dir -----------------------------------------------------------------

JOB_CONFIG = "config.json"
JOB_RESULT = "result.json"
JOB_LOCK = "lock.json"
JOB_LOG = "job.log"
TRIAL_CONFIG = "config.json"
TRIAL_RESULT = "result.json"
TRIAL_LOG = "trial.log"
TRIAL_EXCEPTION = "exception.txt"
FINISHED_AT = "finished_at"
# Harbor marks trials an interruption cancelled with this; resume runs them again.
CANCELLED = "CancelledError"
# A rerun of some of a job's tasks is the job `<job name><RERUN_INFIX><digest of its tasks>`
# (components/harbor_rerun.py).
RERUN_INFIX = "-rerun-"
# The phases a trial that ran at least its agent has; all None: it never ran.
PHASES = ("exception_info", "agent_execution", "verifier", "verifier_result")
# Harbor 0.21.0 names a trial's Docker Compose project `<trial dir name, lowercased>__env`.
COMPOSE_SUFFIX = "__env"


def read_json(path: Path) -> dict | None:
    """The object in `path`, or None when it is missing, half-written or not an object."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def ended(finished_at: object) -> bool:
    """Whether a job whose result.json holds this `finished_at` has ended: Harbor writes it when
    the job ends; a running or stopped (interrupted) job keeps it null."""
    return finished_at is not None


def finished(job_result: Mapping[str, Any] | None) -> bool:
    """The job's result.json (read_json) says it has ended."""
    return job_result is not None and ended(job_result.get(FINISHED_AT))


def _stat(job_result: Mapping[str, Any] | None, key: str) -> int:
    value = ((job_result or {}).get("stats") or {}).get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def running_trials(job_result: Mapping[str, Any] | None) -> int:
    """The trials Harbor counts as running in the job's result.json."""
    return _stat(job_result, "n_running_trials")


def pending_trials(job_result: Mapping[str, Any] | None) -> int:
    return _stat(job_result, "n_pending_trials")


def started_since(path: Path, since: float) -> bool:
    """A trial has started (or the job has ended), per a result.json Harbor wrote at `since` (a
    time.time(), whole seconds count) or later: a resumed job has an old result.json."""
    result_path = path / JOB_RESULT
    try:
        written = int(result_path.stat().st_mtime)
    except OSError:
        return False
    if written < int(since):
        return False
    result = read_json(result_path)
    if result is None:
        return False
    return finished(result) or running_trials(result) > 0 or _stat(result,
                                                                   "n_completed_trials") > 0


def trial_dirs(path: Path) -> list[Path]:
    """Every directory in the job dir (a trial's, finalized or not), sorted by name."""
    try:
        return sorted(p for p in path.iterdir() if p.is_dir())
    except OSError:
        return []


def trial_results(path: Path) -> list[tuple[Path, dict]]:
    """Every trial dir with a readable result.json, sorted by name."""
    found = []
    for result_path in sorted(path.glob(f"*/{TRIAL_RESULT}")):
        result = read_json(result_path)
        if result is not None and "trial_name" in result:
            found.append((result_path.parent, result))
    return found


def never_ran(result: Mapping[str, Any]) -> bool:
    """A trial saved with no exception, no agent run and no verifier: Harbor 0.21 writes a trial
    that a SIGTERM cancels during its environment setup so, and `job resume` then skips it."""
    return all(result.get(key) is None for key in PHASES)


def compose_project(trial_dir_name: str) -> str:
    """The Docker Compose project of a trial (its containers and network carry it as a label)."""
    return f"{trial_dir_name.lower()}{COMPOSE_SUFFIX}"


# --- trials as pods (Harbor's ack environment) -----------------------------------------------
# What the cluster said during the job, written beside Harbor's files by the stack's watcher
# (k8s_watch.py) and read by the audit: Event objects, and pod watch deliveries.
K8S_EVENTS = "k8s-events.jsonl"
K8S_PODS = "k8s-pods.jsonl"


def environment_session(trial_dir_name: str) -> str:
    """Harbor's session id of a trial's environment (`<trial>__env`): the ack pod's `session`
    label; its name is this lower-cased, `_` made `-`, cut at 63 characters."""
    return f"{trial_dir_name}{COMPOSE_SUFFIX}"


def trial_pod(trial_dir_name: str) -> str:
    """The name of a trial's pod (Harbor 0.21.0's ack environment)."""
    return environment_session(trial_dir_name).lower().replace("_", "-")[:63]


def k8s_watch_pid(job_dir_path: str) -> str:
    """The watcher's PID file, beside the job dir (never inside: Harbor owns that)."""
    return f"{job_dir_path.rstrip('/')}.k8s-watch.pid"


# --- the serving plane's own record ---------------------------------------------------------
# What the stack's sampler (hostside/serving_sampler.py) writes beside Harbor's files while a job
# runs, read by the audit: one JSON line per read of the gateway's or a worker's metrics
# endpoint (its values, or why it could not be read), and a line each time the sampler starts.
SERVING_RECORD = "serving-metrics.jsonl"


def serving_sampler_pid(job_dir_path: str) -> str:
    """The sampler's PID file, beside the job dir (never inside: Harbor owns that)."""
    return f"{job_dir_path.rstrip('/')}.serving-sampler.pid"


def serving_sampler_log(logs: str, job_name: str) -> str:
    """The sampler's own log (what it could not do), beside the job's log."""
    return f"{logs}/{job_name}.serving-sampler.log"


# --- the Harbor process --------------------------------------------------------------------------


def recorded_pid(path: Path) -> int | None:
    """The PID in a PID file, or None when there is none (or no number)."""
    try:
        words = path.read_text().split()
    except OSError:
        return None
    return int(words[0]) if words and words[0].isdigit() and words[0].isascii() else None


def runs_job(pid: int | None, job_name: str, proc: Path = Path("/proc")) -> bool:
    """`pid` is alive and is Harbor running this job (a recycled PID is not: its command line
    must name the job)."""
    if pid is None:
        return False
    try:
        cmdline = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return False
    return job_name in cmdline.replace(b"\0", b" ").decode(errors="replace")


def harbor_pid(logs: Path, job_name: str, proc: Path = Path("/proc")) -> int | None:
    """The recorded PID of the job's Harbor process while it runs; None once it is gone."""
    pid = recorded_pid(Path(pid_file(str(logs), job_name)))
    return pid if runs_job(pid, job_name, proc) else None


# --- the status probe and the reruns -------------------------------------------------------------


def status(jobs: Path, logs: Path, job_name: str, proc: Path = Path("/proc")) -> dict:
    """The job's state for the status probe (see components/harbor_job.py): absent, running,
    finished or interrupted, with the launch token its trigger must hold."""
    path = Path(job_dir(str(jobs), job_name))
    try:
        token = Path(token_file(str(logs), job_name)).read_text().strip()
    except OSError:
        token = ""
    pid = recorded_pid(Path(pid_file(str(logs), job_name)))
    if not (path / JOB_CONFIG).is_file() and not token:
        return {"state": "absent", "token": "start", "pid": pid}
    state = "interrupted"
    if runs_job(pid, job_name, proc):
        state = "running"
    elif finished(read_json(path / JOB_RESULT)):
        state = "finished"
    if state == "interrupted":
        # New for each interruption (the dead PID differs), so each one gets exactly one resume.
        digest = hashlib.sha256(f"{token}|{pid if pid is not None else ''}".encode()).hexdigest()
        token = f"resume-{digest[:12]}"
    return {"state": state, "token": token, "pid": pid}


def reruns(jobs: Path, job_name: str) -> list[str]:
    """The job dirs of `job_name`'s reruns, oldest first (by when Harbor wrote their config)."""
    found = []
    for path in jobs.glob(f"{job_name}{RERUN_INFIX}*"):
        try:
            started = (path / JOB_CONFIG).stat().st_mtime
        except OSError:
            continue
        found.append((started, path.name, str(path)))
    return [path for _, _, path in sorted(found)]


# What the probes answer when they cannot tell (no job named yet, say).
UNKNOWN_STATUS = {"state": "unknown", "token": "start", "pid": None}


def main(argv: list[str]) -> int:
    """The probes' entry (they inline this file): one JSON object on stdout."""
    if len(argv) == 4 and argv[0] == "status":
        known = all(argv[1:])
        answer = status(Path(argv[1]), Path(argv[2]), argv[3]) if known else UNKNOWN_STATUS
        print(json.dumps(answer))
        return 0
    if len(argv) == 3 and argv[0] == "reruns":
        found = reruns(Path(argv[1]), argv[2]) if all(argv[1:]) else []
        print(json.dumps({"job_dirs": found}))
        return 0
    print("usage: jobdir.py status JOBS_DIR LOG_DIR JOB_NAME | reruns JOBS_DIR JOB_NAME",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
