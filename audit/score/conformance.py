"""Does the job follow the leaderboard's rules? Each way it differs, in words.

The Terminal-Bench leaderboard counts a run that ran every task of the dataset, at least five
attempts per task, with every timeout at the task's own value (all multipliers 1.0, no
override) and on the official dataset commit. A check the job's files cannot answer (no
config.json, no expected task count, no official commit given) is listed as unknown: the
job is then not shown to conform, rather than assumed to.
"""

from __future__ import annotations

from audit.read.models import TIMEOUT_MULTIPLIERS, DatasetConfig, JobConfig
from audit.score.scores import Out

MIN_ATTEMPTS = 5


class Conformance(Out):
    conforms: bool = False  # True only when every check was made and none differs
    differences: list[str] = []
    unknown: list[str] = []
    dataset: str | None = None  # what the job ran: path, or name@ref


def check(
    config: JobConfig | None,
    task_count: int,
    attempts_min: int | None,
    dataset_tasks: int | None = None,
    official_commit: str | None = None,
    provenance: dict | None = None,
) -> Conformance:
    """`task_count` distinct tasks ran, the fewest attempts of any being `attempts_min`."""
    diffs: list[str] = []
    unknown: list[str] = []
    dataset = config.datasets[0] if config and config.datasets else None
    prov_ds = (provenance or {}).get("dataset")
    prov_ds = prov_ds if isinstance(prov_ds, dict) else {}
    if dataset_tasks is None and isinstance(prov_ds.get("task_count"), int):
        dataset_tasks = prov_ds["task_count"]

    # Tasks: a filter in the config says so by itself; without one, compare with the dataset.
    of = f"the dataset's {dataset_tasks}" if dataset_tasks else "the dataset's"
    filtered = config is not None and (
        bool(config.tasks) or any(d.filtered() for d in config.datasets or [])
    )
    if filtered:
        diffs.append(f"task filter: {task_count} of {of} tasks")
    elif dataset_tasks is None:
        unknown.append(
            f"ran {task_count} distinct tasks; the dataset's task count is unknown "
            "(pass --dataset-tasks N)"
        )
    elif task_count != dataset_tasks:
        diffs.append(f"ran {task_count} of {of} tasks")

    if attempts_min is None:
        unknown.append("no trials, so no attempts per task")
    elif attempts_min < MIN_ATTEMPTS:
        plural = "attempt" if attempts_min == 1 else "attempts"
        diffs.append(f"{attempts_min} {plural} per task (leaderboard: at least {MIN_ATTEMPTS})")

    if config is None:
        unknown.append("no readable config.json: timeouts and dataset unknown")
    else:
        for key in TIMEOUT_MULTIPLIERS:
            value = getattr(config, key)
            if value is not None and value != 1.0:
                diffs.append(f"{key} {float(value)} (leaderboard: 1.0)")
        for i, agent in enumerate(config.agents or []):
            for key in ("override_timeout_sec", "override_setup_timeout_sec", "max_timeout_sec"):
                if (value := getattr(agent, key)) is not None:
                    diffs.append(f"agents[{i}].{key} {value:g} (leaderboard: the task's own)")
        if config.verifier is not None:
            for key in ("override_timeout_sec", "max_timeout_sec"):
                if (value := getattr(config.verifier, key)) is not None:
                    diffs.append(f"verifier.{key} {value:g} (leaderboard: the task's own)")

    used = _used_commit(dataset, prov_ds)
    if official_commit is None:
        unknown.append(
            f"dataset commit: used {used or 'unknown'}; the official one was not given "
            "(pass --official-dataset-commit SHA)"
        )
    elif used is None:
        unknown.append(
            f"dataset commit: the job does not record which one it used "
            f"(leaderboard: {official_commit})"
        )
    elif not _same_commit(used, official_commit):
        diffs.append(f"dataset commit {used} (leaderboard: {official_commit})")

    where = None
    if dataset is not None:
        where = dataset.path or (
            f"{dataset.name}@{dataset.ref or dataset.version}" if dataset.name else None
        )
    return Conformance(
        conforms=not diffs and not unknown, differences=diffs, unknown=unknown, dataset=where
    )


def _used_commit(dataset: DatasetConfig | None, prov_ds: dict) -> str | None:
    # The provenance manifest knows the git commit of a local dataset; the config knows a
    # registry dataset's ref.
    if isinstance(prov_ds.get("commit"), str) and prov_ds["commit"]:
        return prov_ds["commit"]
    if dataset is None:
        return None
    return dataset.commit or dataset.ref


def _same_commit(used: str, official: str) -> bool:
    a, b = used.strip().lower(), official.strip().lower()
    # A short SHA names the same commit as the full one it starts.
    return a == b or (min(len(a), len(b)) >= 7 and (a.startswith(b) or b.startswith(a)))


def line(c: Conformance) -> str:
    """The conformance as one line, for the headline of every format."""
    if c.conforms:
        return "conforms"
    parts = []
    if c.differences:
        parts.append("differs: " + "; ".join(c.differences))
    if c.unknown:
        parts.append("cannot tell: " + "; ".join(c.unknown))
    return " | ".join(parts)
