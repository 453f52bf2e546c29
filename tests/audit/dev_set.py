"""The dev set and how the audit is scored against its experts, shared by the dev-set tests and
the generalization benchmark (benchmarks/bench_audit_generalization.py).

Nine real sources, job dirs written by Harbor on other people's machines, each with an expert's
label for every non-passing trial and a sample of passes:
- `../shared/data/real-jobs/` (`expert-labels.json`): gemma-harness-tb2, glm5-openclaw-tb20;
- `../shared/data/real-jobs-2/` (its own `expert-labels.json`): captaindpt-kill-terminalbench,
  singhh5050-tbench-eval;
- `../shared/data/real-jobs-3/` (its own `expert-labels.json`, a `<source>.SOURCE.txt` each):
  argus, hive-swarm-hub, lore-hex, anode, stella;
and a synthetic one, `../shared/data/new-wording/` (40 trials worded as other tools word their
failures, `expected.json`). The data is read in place, never copied into the repository.

Scores per group of labelled trials: agreement with the expert, model failures excused (the
expert says agent_error or agent_timeout, the audit says infra, cancelled or verifier_timeout:
it would raise the adjusted score on a failure of the model), and the insufficient share (of
the labelled non-passes). Beside them, a trivial baseline that reads a trial's reward and
exception type alone; the *hard* trials are the labelled non-passes it gets wrong.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from audit.pipeline import build_report
from audit.read import readings
from audit.read.layout import JobLayout
from audit.score.rows import TrialRow
from tests.conftest import SHARED

DATA = SHARED / "data"
DEV_SET = DATA / "real-jobs"
LABELS = DEV_SET / "expert-labels.json"
MODEL_FAILURES = {"agent_error", "agent_timeout"}
EXCUSES = {"infra", "verifier_timeout", "cancelled"}


@dataclass(frozen=True)
class Source:
    """One labelled source of the dev set: its job dirs and its expert's labels, keyed
    `<name>/<the job's path inside the source>/<trial>` (the keys of the labels files)."""

    name: str
    base: Path  # the folder the jobs' paths are relative to
    labels_file: Path
    synthetic: bool = False

    def jobs(self) -> list[Path]:
        """Every job dir under the source: those holding a labelled trial (a job dir may keep no
        config.json of its own: anode's keeps only result.json), and every other dir holding
        config.json whose parent holds none and is no job already (a trial's)."""
        found = {p.parent for p in self.base.rglob("config.json") if _is_job(p.parent)}
        if self.synthetic:
            return sorted(found)
        labelled = {self.trial_dir(key).parent for key in self._raw_labels()}
        return sorted(labelled | {job for job in found if job.parent not in labelled})

    def _raw_labels(self) -> dict[str, dict[str, str]]:
        raw = json.loads(self.labels_file.read_text())
        if self.synthetic:
            return raw
        return {k: v for k, v in raw.items() if k.split("/", 1)[0] == self.name}

    def labels(self) -> dict[str, dict[str, str]]:
        raw = self._raw_labels()
        if self.synthetic:  # new-wording's expected.json is keyed by trial name alone
            (job,) = self.jobs()
            return {self.key(job, trial): label for trial, label in raw.items()}
        return raw

    def key(self, job: Path, trial: str) -> str:
        return f"{self.name}/{job.relative_to(self.base).as_posix()}/{trial}"

    def trial_dir(self, key: str) -> Path:
        return self.base / key.split("/", 1)[1]


def _is_job(path: Path) -> bool:
    """A dir with config.json is a job's unless its parent has one too (then it is a trial's)."""
    return not (path.parent / "config.json").is_file()


def _sources() -> dict[str, Source]:
    out = {}
    for data in ("real-jobs", "real-jobs-2", "real-jobs-3"):
        root = DATA / data
        for folder in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
            out[folder.name] = Source(folder.name, folder, root / "expert-labels.json")
    wording = DATA / "new-wording"
    out["new-wording"] = Source("new-wording", wording, wording / "expected.json", True)
    return out


SOURCES = _sources()
REAL_SOURCES = [name for name, s in SOURCES.items() if not s.synthetic]

_BY_SOURCE: dict[tuple[str, bool], dict[str, TrialRow]] = {}


def audit_source(source: Source, held_out: bool = False) -> dict[str, TrialRow]:
    """The rows of every job of a source, keyed as its labels. Audited once per process (the
    dev-set tests and the benchmark share them, read-only). `held_out`: with the readings first
    met in this source switched off (audit/read/readings.py), the leave-one-source-out view."""
    key = (source.name, held_out)
    if key not in _BY_SOURCE:
        off = readings.met_in(source.name) if held_out else frozenset()
        rows = {}
        with readings.switched_off(off):
            for job in source.jobs():
                report = build_report(JobLayout.local(job))
                rows.update({source.key(job, r.trial): r for r in report.trials})
        _BY_SOURCE[key] = rows
    return _BY_SOURCE[key]


def logged(source: Source) -> set[str]:
    """The labelled trials whose agent left a log of its own (the audit's evidence families)."""
    rows = audit_source(source)
    return {k for k in source.labels() if k in rows and "agent_log" in rows[k].evidence_families}


def agent_of(job: Path) -> str:
    """The agent a job ran, from its config (`name`, else the import path's class)."""
    config = json.loads((job / "config.json").read_text())
    agents = config.get("agents") or [{}]
    agent = agents[0].get("name") or (agents[0].get("import_path") or "").rsplit(":", 1)[-1]
    return agent or "oracle"  # Harbor's default agent


# --- the trivial baseline: a trial's reward and exception type, nothing else -----------------
# Exception types that name a model endpoint's or the environment's failure by themselves.
_OUTSIDE_TYPES = {
    "APIConnectionError",
    "APITimeoutError",
    "Timeout",
    "RateLimitError",
    "ServiceUnavailableError",
    "InternalServerError",
    "BadGatewayError",
    "AuthenticationError",
    "PermissionDeniedError",
    "ApiUsageLimitError",
    "EnvironmentStartTimeoutError",
    "AgentSetupTimeoutError",
}


def trivial(trial_dir: Path) -> str:
    """What a rule reading only result.json's reward and exception type would say."""
    try:
        result = json.loads((trial_dir / "result.json").read_text())
    except (OSError, ValueError):
        return "cancelled"  # Harbor writes result.json for every trial that ends
    info = result.get("exception_info") or {}
    etype = info.get("exception_type")
    rewards = (result.get("verifier_result") or {}).get("rewards") or {}
    reward = rewards.get("reward", next(iter(rewards.values()), None) if rewards else None)
    if etype in ("CancelledError", "KeyboardInterrupt"):
        return "cancelled"
    if etype == "AgentTimeoutError":
        return "agent_timeout"
    if reward is not None and reward >= 1:
        return "passed"
    if etype == "VerifierTimeoutError":
        return "verifier_timeout"
    if etype in _OUTSIDE_TYPES:
        return "infra"
    return "agent_error"


def trivial_verdicts(source: Source) -> dict[str, str]:
    return {key: trivial(source.trial_dir(key)) for key in source.labels()}


def hard(source: Source) -> list[str]:
    """The labelled non-passes the trivial baseline gets wrong."""
    verdicts = trivial_verdicts(source)
    return sorted(
        k
        for k, label in source.labels().items()
        if label["category"] != "passed" and verdicts[k] != label["category"]
    )


@dataclass
class Score:
    labelled: int = 0
    agree: int = 0
    excused: list[str] = field(default_factory=list)
    insufficient: int = 0
    non_passes: int = 0
    disagreements: list[str] = field(default_factory=list)
    # Of the non-passes whose agent left a log of its own: how many, how many the audit left
    # insufficient, and of those how many the expert decided (where the audit says less than the
    # expert could).
    logged: int = 0
    logged_insufficient: int = 0
    logged_undecided: int = 0

    @property
    def agreement(self) -> float:
        return self.agree / self.labelled if self.labelled else 1.0

    @property
    def insufficient_share(self) -> float:
        """Of the labelled non-passes (what an audit of a failing run leaves unexplained)."""
        return self.insufficient / self.non_passes if self.non_passes else 0.0

    @property
    def logged_share(self) -> float:
        """Insufficient, of the non-passes whose agent left a log (the issue's bar)."""
        return self.logged_insufficient / self.logged if self.logged else 0.0

    @property
    def undecided_share(self) -> float:
        """Insufficient where the expert decided, of the non-passes whose agent left a log."""
        return self.logged_undecided / self.logged if self.logged else 0.0

    def add(
        self,
        key: str,
        expert: dict[str, str],
        got: str,
        signature: str | None,
        has_log: bool = False,
    ) -> None:
        self.labelled += 1
        non_pass = expert["category"] != "passed"
        self.non_passes += non_pass
        if got == expert["category"]:
            self.agree += 1
        else:
            self.disagreements.append(
                f"{key}: expert {expert['category']}, audit {got} ({signature or '-'}) "
                f"-- expert: {expert['why'][:110]}"
            )
        if expert["category"] in MODEL_FAILURES and got in EXCUSES:
            self.excused.append(f"{key}: {got} ({signature or '-'})")
        insufficient = got == "insufficient_evidence" and non_pass
        self.insufficient += insufficient
        if non_pass and has_log:
            self.logged += 1
            self.logged_insufficient += insufficient
            self.logged_undecided += insufficient and expert["category"] != got

    def plus(self, other: Score) -> Score:
        """The two scores' counts summed (disagreements and excuses listed together)."""
        return Score(
            self.labelled + other.labelled,
            self.agree + other.agree,
            self.excused + other.excused,
            self.insufficient + other.insufficient,
            self.non_passes + other.non_passes,
            self.disagreements + other.disagreements,
            self.logged + other.logged,
            self.logged_insufficient + other.logged_insufficient,
            self.logged_undecided + other.logged_undecided,
        )


def score(
    rows: dict[str, TrialRow],
    expert: dict[str, dict[str, str]],
    keys=None,
    logs: set[str] | None = None,
) -> Score:
    out = Score()
    for key in sorted(keys if keys is not None else expert):
        row = rows.get(key)
        got = row.category if row else "not audited"
        out.add(key, expert[key], got, row and row.signature, key in (logs or set()))
    return out


def score_verdicts(
    verdicts: dict[str, str],
    expert: dict[str, dict[str, str]],
    keys=None,
    signatures: dict[str, str | None] | None = None,
    logs: set[str] | None = None,
) -> Score:
    """The same figures for verdicts given as categories (the baseline, a recorded audit)."""
    out = Score()
    for key in sorted(keys if keys is not None else expert):
        sig = (signatures or {}).get(key)
        out.add(key, expert[key], verdicts.get(key, "not audited"), sig, key in (logs or set()))
    return out
