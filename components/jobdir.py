"""Harbor's job directory: where Harbor 0.21 puts each file, and what its states mean.

The one reader of that layout, for every part of benchstack that looks at a job: the progress
command (`components/progress.py`), the status probe and the launch on the Harbor host (this
file is shipped there and run with the host's python3: stdlib only, it imports nothing of the
project), and the audit (`audit/layout.py` takes its names from here; like `outputs.py`, this
module is a contract between the program and the audit, not a dependency on Pulumi).

    python3 jobdir.py status JOBS_DIR LOG_DIR JOB_NAME    # the status probe's JSON
    python3 jobdir.py never-ran JOB_DIR                   # trial dirs that never ran, one a line
    python3 jobdir.py reruns JOBS_DIR JOB_NAME            # the job's rerun jobs, oldest first

A job dir holds `config.json`, `result.json`, `lock.json`, `job.log` and one `<task>__<id>/`
dir per trial with its own `config.json`, `result.json`, `trial.log`, `exception.txt`,
`agent/` and `verifier/`. Readers never raise for a missing or half-written file.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

JOB_CONFIG = "config.json"
JOB_RESULT = "result.json"
JOB_LOCK = "lock.json"
JOB_LOG = "job.log"
TRIAL_CONFIG = "config.json"
TRIAL_RESULT = "result.json"
TRIAL_LOG = "trial.log"
TRIAL_EXCEPTION = "exception.txt"
# Harbor marks trials an interruption cancelled with this; resume runs them again.
CANCELLED = "CancelledError"
# A rerun of some of a job's tasks is the job `<job name><RERUN_INFIX><digest of its tasks>`
# (components/harbor_rerun.py).
RERUN_INFIX = "-rerun-"
# The phases a trial that ran at least its agent has; all None: it never ran.
PHASES = ("exception_info", "agent_execution", "verifier", "verifier_result")


def read_json(path: Path) -> dict | None:
    """The object in `path`, or None when it is missing, half-written or not an object."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def is_job_dir(job_dir: Path) -> bool:
    return (job_dir / JOB_RESULT).is_file() or (job_dir / JOB_CONFIG).is_file()


def finished(job_result: dict | None) -> bool:
    """Harbor writes `finished_at` when the job ends (a stopped job keeps it null)."""
    return job_result is not None and job_result.get("finished_at") is not None


def trial_results(job_dir: Path) -> list[tuple[Path, dict]]:
    """Every trial dir with a readable result.json, sorted by name."""
    found = []
    for path in sorted(job_dir.glob(f"*/{TRIAL_RESULT}")):
        result = read_json(path)
        if result is not None and "trial_name" in result:
            found.append((path.parent, result))
    return found


def never_ran(result: dict) -> bool:
    """A trial saved with no exception, no agent run and no verifier: Harbor 0.21 writes a trial
    that a SIGTERM cancels during its environment setup so, and `job resume` then skips it."""
    return all(result.get(key) is None for key in PHASES)


def status(jobs_dir: Path, log_dir: Path, job_name: str, proc: Path = Path("/proc")) -> dict:
    """The job's state for the status probe (see components/harbor_job.py): absent, running,
    finished or interrupted, with the launch token its trigger must hold."""
    job_dir = jobs_dir / job_name
    try:
        token = (log_dir / f"{job_name}.launch-token").read_text().strip()
    except OSError:
        token = ""
    try:
        pid_text = (log_dir / f"{job_name}.pid").read_text().split()[0]
        pid = int(pid_text) if pid_text.isdigit() else None
    except (OSError, IndexError):
        pid = None
    if not (job_dir / JOB_CONFIG).is_file() and not token:
        return {"state": "absent", "token": "start", "pid": pid}
    state = "interrupted"
    try:
        alive = pid is not None and job_name in (proc / str(pid) / "cmdline").read_bytes().decode(
            errors="replace")
    except OSError:
        alive = False
    if alive:
        state = "running"
    elif finished(read_json(job_dir / JOB_RESULT)):
        state = "finished"
    if state == "interrupted":
        # New for each interruption (the dead PID differs), so each one gets exactly one resume.
        digest = hashlib.sha256(f"{token}|{pid if pid is not None else ''}".encode()).hexdigest()
        token = f"resume-{digest[:12]}"
    return {"state": state, "token": token, "pid": pid}


def reruns(jobs_dir: Path, job_name: str) -> list[str]:
    """The job dirs of `job_name`'s reruns, oldest first (by when Harbor wrote their config)."""
    found = []
    for job_dir in jobs_dir.glob(f"{job_name}{RERUN_INFIX}*"):
        try:
            started = (job_dir / JOB_CONFIG).stat().st_mtime
        except OSError:
            continue
        found.append((started, job_dir.name, str(job_dir)))
    return [path for _, _, path in sorted(found)]


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[0] == "status":
        print(json.dumps(status(Path(argv[1]), Path(argv[2]), argv[3])))
        return 0
    if len(argv) == 2 and argv[0] == "never-ran":
        for trial_dir, result in trial_results(Path(argv[1])):
            if never_ran(result):
                print(trial_dir.name)
        return 0
    if len(argv) == 3 and argv[0] == "reruns":
        print(json.dumps({"job_dirs": reruns(Path(argv[1]), argv[2])}))
        return 0
    print("usage: jobdir.py status JOBS_DIR LOG_DIR JOB_NAME | never-ran JOB_DIR | "
          "reruns JOBS_DIR JOB_NAME", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
