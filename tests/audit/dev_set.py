"""The dev set and how the audit is scored against its expert, shared by the dev-set tests and
the generalization benchmark (benchmarks/bench_audit_generalization.py).

`../shared/data/real-jobs/` holds real Harbor job dirs from two public repositories (the
*sources*) and `expert-labels.json`, an expert's category for every non-passing trial and a
sample of passes. The data is read in place, never copied into the repository.

Scores per group of labelled trials: agreement with the expert, model failures excused (the
expert says agent_error or agent_timeout, the audit says infra, cancelled or verifier_timeout:
it would raise the adjusted score on a failure of the model), and the insufficient share.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from audit.output.report import TrialRow, build_report
from audit.read.layout import JobLayout
from tests.conftest import ROOT

DATA = ROOT.parent / "shared" / "data"
DEV_SET = DATA / "real-jobs"
LABELS = DEV_SET / "expert-labels.json"
MODEL_FAILURES = {"agent_error", "agent_timeout"}
EXCUSES = {"infra", "verifier_timeout", "cancelled"}


def job_dirs(root: Path = DEV_SET) -> list[Path]:
    return sorted(
        job for repo in root.iterdir() if repo.is_dir() for job in repo.iterdir() if job.is_dir()
    )


def labels() -> dict[str, dict[str, str]]:
    return json.loads(LABELS.read_text())


def source_of(job: Path) -> str:
    """The dev-set source a job comes from: the repository folder it is in."""
    return job.parent.name


def agent_of(job: Path) -> str:
    """The agent a job ran, from its config (`name`, else the import path's class)."""
    config = json.loads((job / "config.json").read_text())
    agents = config.get("agents") or [{}]
    agent = agents[0].get("name") or (agents[0].get("import_path") or "").rsplit(":", 1)[-1]
    return agent or "oracle"  # Harbor's default agent


_AUDITED: dict[tuple[Path, frozenset[str]], dict[str, TrialRow]] = {}


def audit_jobs(jobs: Iterable[Path], disabled: frozenset[str] = frozenset()) -> dict[str, TrialRow]:
    """The rows of every job's report, keyed `<source>/<job>/<trial>`. Each (job, disabled)
    is audited once per process: the dev-set tests and the evaluation share them (read-only)."""
    rows: dict[str, TrialRow] = {}
    for job in jobs:
        key = (job, disabled)
        if key not in _AUDITED:
            report = build_report(JobLayout.local(job), disabled=disabled)
            _AUDITED[key] = {f"{job.parent.name}/{job.name}/{r.trial}": r for r in report.trials}
        rows.update(_AUDITED[key])
    return rows


@dataclass
class Score:
    labelled: int = 0
    agree: int = 0
    excused: list[str] = field(default_factory=list)
    insufficient: int = 0
    disagreements: list[str] = field(default_factory=list)

    @property
    def agreement(self) -> float:
        return self.agree / self.labelled if self.labelled else 1.0

    @property
    def insufficient_share(self) -> float:
        return self.insufficient / self.labelled if self.labelled else 0.0

    def add(self, key: str, expert: dict[str, str], row: TrialRow | None) -> None:
        got = row.category if row else "not audited"
        self.labelled += 1
        if got == expert["category"]:
            self.agree += 1
        else:
            self.disagreements.append(
                f"{key}: expert {expert['category']}, audit {got} "
                f"({row.signature if row else '-'}) -- expert: {expert['why'][:110]}"
            )
        if expert["category"] in MODEL_FAILURES and got in EXCUSES:
            self.excused.append(f"{key}: {got} ({row.signature if row else '-'})")
        if got == "insufficient_evidence":
            self.insufficient += 1

    def merge(self, other: Score) -> None:
        self.labelled += other.labelled
        self.agree += other.agree
        self.excused += other.excused
        self.insufficient += other.insufficient
        self.disagreements += other.disagreements


@dataclass(frozen=True)
class Source:
    """One labelled source of the dev set: its job dirs and its expert's labels, keyed
    `<name>/<the job's path inside the source>/<trial>` (the keys of the labels files)."""

    name: str
    base: Path  # the folder the jobs' paths are relative to
    labels_file: Path
    synthetic: bool = False

    def jobs(self) -> list[Path]:
        """Every job dir under the source (a dir holding config.json and trial dirs)."""
        return sorted(p.parent for p in self.base.rglob("config.json") if _is_job(p.parent))

    def labels(self) -> dict[str, dict[str, str]]:
        raw = json.loads(self.labels_file.read_text())
        if self.synthetic:  # new-wording's expected.json is keyed by trial name alone
            (job,) = self.jobs()
            return {self.key(job, trial): label for trial, label in raw.items()}
        return {k: v for k, v in raw.items() if k.split("/", 1)[0] == self.name}

    def key(self, job: Path, trial: str) -> str:
        return f"{self.name}/{job.relative_to(self.base).as_posix()}/{trial}"


def _is_job(path: Path) -> bool:
    """A dir with config.json is a job's unless its parent has one too (then it is a trial's)."""
    return not (path.parent / "config.json").is_file()


def _sources() -> dict[str, Source]:
    out = {}
    for data in ("real-jobs", "real-jobs-2"):
        root = DATA / data
        for folder in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
            out[folder.name] = Source(folder.name, folder, root / "expert-labels.json")
    wording = DATA / "new-wording"
    out["new-wording"] = Source("new-wording", wording, wording / "expected.json", True)
    return out


SOURCES = _sources()
REAL_SOURCES = [name for name, s in SOURCES.items() if not s.synthetic]

_BY_SOURCE: dict[tuple[str, frozenset[str]], dict[str, TrialRow]] = {}


def audit_source(source: Source, disabled: frozenset[str] = frozenset()) -> dict[str, TrialRow]:
    """The rows of every job of a source, keyed as its labels. Audited once per process."""
    cache = (source.name, disabled)
    if cache not in _BY_SOURCE:
        rows = {}
        for job in source.jobs():
            report = build_report(JobLayout.local(job), disabled=disabled)
            rows.update({source.key(job, r.trial): r for r in report.trials})
        _BY_SOURCE[cache] = rows
    return _BY_SOURCE[cache]


def score(rows: dict[str, TrialRow], expert: dict[str, dict[str, str]], keys=None) -> Score:
    out = Score()
    for key in sorted(keys if keys is not None else expert):
        out.add(key, expert[key], rows.get(key))
    return out
