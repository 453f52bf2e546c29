"""The one call of the audit CLI from the program: which tasks of a finished job to rerun.

The audit is its own program (`python -m audit JOB_DIR --format json`); the program only runs it,
here, at program time (every `up` and `preview`, read-only), on a finished job's directory: the
job dir itself on the local host, a copy made once over the seam's ssh for a remote one (a
finished job does not change; contracts/job_copy.py, the copy the audit's `--stack` makes too).
Its JSON report's `rerun` list is the answer.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pulumi

from components.seam.host import Host
from components.seam.ssh import read_dir_here

PROJECT_DIR = Path(__file__).resolve().parents[2]


def audit_command(job_dir: str) -> str:
    """The audit CLI's JSON report of a job dir here."""
    return (
        f"set -euo pipefail; cd {shlex.quote(str(PROJECT_DIR))}; "
        f"{shlex.quote(sys.executable)} -m audit {shlex.quote(job_dir)} --format json || "
        f"{{ echo 'harbor.reruns.from_audit: the audit of {job_dir} failed (see above)' >&2; "
        "exit 1; }"
    )


def rerun_list(report_json: str) -> list[str] | None:
    """The `rerun` list of the audit's JSON report; None for no report (nothing audited)."""
    report = json.loads(report_json or "{}")
    tasks = report.get("rerun") if isinstance(report, dict) else None
    return [str(t) for t in tasks] if isinstance(tasks, list) else None


def tasks_to_rerun(
    host: Host, finished_job_dir: pulumi.Input[str]
) -> pulumi.Output[list[str] | None]:
    """The tasks the audit of the finished job at `finished_job_dir` on `host` lists for rerun
    (infra or cancelled); None while there is no finished job ("")."""
    stdout = read_dir_here(host, finished_job_dir, then=audit_command)
    return stdout.apply(rerun_list)
