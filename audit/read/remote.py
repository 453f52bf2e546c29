"""A job dir (or file) on a remote Harbor host, copied here over SSH so that `--stack` audits it
from the operator's machine (found by the two-host rehearsal: the audit of a stack whose Harbor
host is not this machine stopped at "not readable here").

The copy is contracts/job_copy.py's, the one the program's rerun audit makes too: one cache path
(`~/.cache/benchstack/jobs/<host>/<name>`), one completion mark. How the host is reached is the
stack's own answer (the `harbor_ssh` output, contracts/outputs.py: the target, the port and the
ssh options every SSH path of the stack uses, host-key policy included); the key comes from the
ssh agent or `hosts[].ssh_key_path` (among the options), as for the stack's Docker provider: the
stack's secret never leaves the stack. What the audit decides is when a copy is final: a job dir
whose job has finished (contracts/jobdir.py); an unfinished job's is made afresh at every call.
"""

from __future__ import annotations

from pathlib import Path

from contracts import job_copy, jobdir

RemoteError = job_copy.CopyError


def _finished(copy: Path) -> bool:
    return jobdir.finished(jobdir.read_json(copy / jobdir.JOB_RESULT))


def copy_here(host: str, access: dict, path: str) -> Path:
    """The local copy of `path` (a dir or a file) on the Harbor host `host`."""
    return job_copy.copy(host, access, path, final=_finished)
