"""HarborJob dataset: the pinned task set on the Harbor host (seed: "Download and pin
Terminal-Bench 2.1").

create: either a git clone checked out at `commit` (in `clone_dir`, which the program names
after the repository and commit; an existing clone at that commit is reused), or a directory
already on the host (`dataset_path`). Every task dir gets its `environment/` dir (git drops
empty dirs, and Harbor does not recognise a task without one). The task count must be
`expected_tasks`, and the job's filters (`include`, `exclude`: task-name globs) must leave at
least one task. Outputs: dataset_path, task_count, selected_count, commit.

delete: removes the clone this stack made; a directory the user gave is never touched.
Outputs: removed ("" when nothing was).
"""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .step import HostError, child_env, emit, log, verb

NAME = "harbor_dataset"
CLONE_TIMEOUT_S = 1800


@dataclass(frozen=True)
class Inputs:
    dataset_path: str | None
    repo: str | None
    commit: str | None
    clone_dir: str | None
    tasks_subdir: str
    expected_tasks: int
    include: list[str]
    exclude: list[str]


@dataclass(frozen=True)
class DeleteInputs:
    clone_dir: str | None


def _git(*args: str, timeout: float | None = None,
         quiet: bool = False) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", *args], stdin=subprocess.DEVNULL, env=child_env(),
                              stdout=subprocess.PIPE if quiet else 2,
                              stderr=subprocess.DEVNULL if quiet else None,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(["git", *args], 124, "")


def head(clone: Path) -> str:
    if not (clone / ".git").exists():
        return ""
    done = _git("-C", str(clone), "rev-parse", "HEAD", quiet=True)
    return done.stdout.strip() if done.returncode == 0 else ""


def clone_at(git_url: str, commit: str, clone: Path) -> None:
    """`git_url` at `commit` in `clone`, through a `.partial` dir: a failure leaves nothing."""
    log(NAME, f"cloning {git_url} at {commit}")
    clone.parent.mkdir(parents=True, exist_ok=True)
    partial = clone.with_name(clone.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        if _git("clone", "-q", git_url, str(partial), timeout=CLONE_TIMEOUT_S).returncode != 0:
            raise HostError(f"git clone of {git_url} failed (see above): check dataset.repo and "
                            "the host's network")
        if _git("-C", str(partial), "-c", "advice.detachedHead=false", "checkout", "-q",
                "--detach", commit).returncode != 0:
            raise HostError(f"commit {commit} is not in {git_url}: check dataset.commit")
        shutil.rmtree(clone, ignore_errors=True)
        partial.rename(clone)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def task_tomls(tasks: Path) -> list[Path]:
    """`<task>/task.toml` files (plain files in plain dirs, as `find -type f` sees them)."""
    found = []
    for task in sorted(tasks.iterdir()):
        toml = task / "task.toml"
        if task.is_dir() and not task.is_symlink() and toml.is_file() and not toml.is_symlink():
            found.append(toml)
    return found


def selected(task: str, include: list[str], exclude: list[str]) -> bool:
    """The job's filters: task-name globs, matched as globs (not as files)."""
    keep = not include or any(fnmatch.fnmatchcase(task, glob) for glob in include)
    return keep and not any(fnmatch.fnmatchcase(task, glob) for glob in exclude)


def tasks_dir(inputs: Inputs) -> tuple[Path, str]:
    """The task dirs' directory on this host, and the commit checked out ("" for a path)."""
    if inputs.dataset_path:
        if inputs.repo:
            raise HostError("set dataset.path or dataset.repo, not both")
        path = inputs.dataset_path
        if not path.startswith("/"):
            raise HostError(f"dataset.path must be absolute (Harbor stores it verbatim): {path}")
        if not Path(path).is_dir():
            raise HostError(f"dataset.path={path} is not a directory on this host")
        return Path(path), ""
    if not inputs.repo:
        raise HostError("set dataset.path (a local task dir) or dataset.repo and dataset.commit")
    commit = inputs.commit or ""
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise HostError(f"dataset.commit must be a full 40-hex commit, got '{commit}'")
    if shutil.which("git") is None:
        raise HostError("git is not installed on this host: install git")
    if not inputs.clone_dir:
        raise HostError("clone_dir is empty: the component must pass it")
    clone = Path(inputs.clone_dir)
    if head(clone) != commit:
        clone_at(inputs.repo, commit, clone)
    got = head(clone)
    if got != commit:
        raise HostError(f"clone {clone} is at {got}, not {commit}: remove it and re-run")
    tasks = clone / inputs.tasks_subdir
    if not tasks.is_dir():
        raise HostError(f"dataset.tasks_subdir={inputs.tasks_subdir} does not exist in "
                        f"{inputs.repo} at {commit}: set dataset.tasks_subdir")
    return tasks, got


@verb(Inputs)
def create(inputs: Inputs) -> None:
    if inputs.expected_tasks < 1:
        raise HostError(f"expected_tasks must be a positive number, got '{inputs.expected_tasks}'")
    tasks, commit = tasks_dir(inputs)
    tomls = task_tomls(tasks)
    if len(tomls) != inputs.expected_tasks:
        raise HostError(f"{tasks} has {len(tomls)} tasks (task.toml files), expected "
                        f"{inputs.expected_tasks}: check the dataset pin or "
                        "dataset.expected_tasks")
    chosen = 0
    for toml in tomls:
        # Harbor only recognises a task dir that has environment/, even an empty one.
        (toml.parent / "environment").mkdir(exist_ok=True)
        chosen += selected(toml.parent.name, inputs.include, inputs.exclude)
    if not chosen:
        raise HostError(f"no task in {tasks} matches include='{' '.join(inputs.include)}' minus "
                        f"exclude='{' '.join(inputs.exclude)}': fix the job's task filters")
    log(NAME, f"{len(tomls)} tasks in {tasks}, {chosen} selected")
    emit({"dataset_path": str(tasks), "task_count": len(tomls), "selected_count": chosen,
          "commit": commit})


@verb(DeleteInputs)
def delete(inputs: DeleteInputs) -> None:
    removed = ""
    clone = Path(inputs.clone_dir) if inputs.clone_dir else None
    if clone is not None and (clone / ".git").is_dir():
        shutil.rmtree(clone)
        try:
            clone.parent.rmdir()
        except OSError:
            pass
        removed = str(clone)
    log(f"{NAME}.delete", f"removed {removed or 'nothing'}")
    emit({"removed": removed})
