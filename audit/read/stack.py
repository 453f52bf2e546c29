"""Find the job to audit from a Pulumi stack's outputs (`pulumi stack output --json`).

The key names come from `contracts/outputs.py`, the one contract shared with the Pulumi
program; this module never spells a key itself.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from contracts import outputs as K


class StackError(ValueError):
    """The stack outputs could not be read or do not name a job."""


@dataclass(frozen=True)
class StackJob:
    job_dir: str
    # {"score", "plus_minus", "convention"}; None when the stack gives none.
    reference: dict | None
    harbor_host: str | None
    rerun_job_dirs: list[str] = field(default_factory=list)  # oldest first
    provenance_path: str | None = None
    rerun_waiting: str | None = None  # why no rerun job exists yet, when the stack says
    # How to reach a remote Harbor host over SSH (target, port, options); None when local.
    harbor_ssh: dict | None = None


def read_stack_outputs(stack: str, project: Path = Path("."), timeout: float = 120) -> dict:
    """The stack's outputs, as `pulumi stack output --json` prints them for `project` (its
    Pulumi.yaml names the backend, so the audit can run from any directory)."""
    pulumi = shutil.which("pulumi")
    if pulumi is None:
        raise StackError(
            "the pulumi CLI is not on PATH: install it, or pass the job dir (or its s3:// URI) "
            "instead of --stack"
        )
    try:
        proc = subprocess.run(
            [pulumi, "--cwd", str(project), "stack", "output", "--json", "--stack", stack],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise StackError(
            f"`pulumi stack output --stack {stack}` took over {timeout:.0f} s"
        ) from exc
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        reason = lines[-1].strip() if lines else f"exit code {proc.returncode}"
        raise StackError(f"`pulumi stack output --stack {stack}` failed: {reason}")
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise StackError(
            f"`pulumi stack output --stack {stack}` did not print JSON: {exc}"
        ) from exc
    if not isinstance(data, dict):
        raise StackError(f"`pulumi stack output --stack {stack}` printed {type(data).__name__}")
    return data


def _reference(ref: object) -> dict | None:
    """The published score: an object with its convention, or a bare number (a stack deployed
    before conventions: the board's)."""
    if ref in (None, ""):
        return None
    if isinstance(ref, dict) and isinstance(ref.get("score"), int | float):
        return {"score": float(ref["score"]), "plus_minus": ref.get("plus_minus"),
                "convention": ref.get("convention")}
    try:
        return {"score": float(ref), "plus_minus": None, "convention": None}  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise StackError(f"stack output {K.REFERENCE_SCORE!r} is not a score: {ref!r}") from exc


def job_from_outputs(outputs: dict, stack: str) -> StackJob:
    job_dir = outputs.get(K.JOB_DIR)
    if not job_dir:
        jobs_dir, job_name = outputs.get(K.JOBS_DIR), outputs.get(K.JOB_NAME)
        if not (jobs_dir and job_name):
            raise StackError(
                f"stack {stack!r} has no {K.JOB_DIR!r} output and not both {K.JOBS_DIR!r} and "
                f"{K.JOB_NAME!r}: has the HarborJob been deployed (`pulumi up`)?"
            )
        job_dir = f"{str(jobs_dir).rstrip('/')}/{job_name}"
    reference = _reference(outputs.get(K.REFERENCE_SCORE))
    host = outputs.get(K.HARBOR_HOST)
    reruns = outputs.get(K.RERUN_JOB_DIRS)
    if reruns is None:
        reruns = []  # a stack deployed before reruns existed
    if not isinstance(reruns, list) or not all(isinstance(d, str) and d for d in reruns):
        raise StackError(f"stack output {K.RERUN_JOB_DIRS!r} is not a list of job dirs: {reruns!r}")
    provenance = outputs.get(K.PROVENANCE_PATH)
    waiting = outputs.get(K.RERUN_WAITING)
    ssh = outputs.get(K.HARBOR_SSH)
    if ssh is not None and not (
        isinstance(ssh, dict) and {"target", "port", "options"} <= ssh.keys()
    ):
        raise StackError(f"stack output {K.HARBOR_SSH!r} is not target, port and options: {ssh!r}")
    return StackJob(
        str(job_dir),
        reference,
        str(host) if host else None,
        rerun_job_dirs=list(reruns),
        provenance_path=str(provenance) if provenance else None,
        rerun_waiting=str(waiting) if waiting else None,
        harbor_ssh=ssh,
    )
