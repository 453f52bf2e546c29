"""Live progress of a Harbor job: `python -m components.progress JOB_DIR [--once|--wait] [--json]`.

Reads only the job directory (seed: "Monitor progress"): the job `result.json` for the planned
trial count and the running/pending counters, and every trial's `result.json` for rewards and
errors (the job file does not carry per-trial results). Shows trials done/total, rewards so far,
errors by type, elapsed time and an estimate of the remaining time, and the score so far of the
finished trials in each convention the audit prints, each by its name and computed by the
audit's one registry (audit/score/conventions.py): `leaderboard` (the Terminal-Bench board's:
counted exception types, the mean over tasks of each task's mean reward), `harbor-0.21` (every
trial, no reward as 0) and `harbor-0.26` (valid rewards only: as a 0.26 result.json says or, for
0.21.0, as 0.26.0's error-policy table would).

- default: a live bar, refreshed until interrupted (Ctrl-C) or the job finishes;
- `--once`: one snapshot and exit; `--json`: the snapshot as one JSON object on stdout;
- `--wait`: keep polling until the job has `finished_at` (exit 0), or until `--timeout`
  (exit 2); with `--json` only the final snapshot is printed.
- `--pid-file FILE` (the launch's PID file): a job whose Harbor process is gone without
  `finished_at` is interrupted (`finished_at: null` alone does not say so): exit 3 instead of
  waiting forever.
- A finished job is final once the serving sampler beside it has ended too: it takes a last
  read after Harbor exits (hostside/serving_sampler.py), so `--wait` also waits for it (at most
  RECORD_GRACE_S), and an audit run next reads the whole record.

Exit 1 when JOB_DIR is not a Harbor job dir. Files being rewritten mid-read are skipped for
that refresh, not fatal.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.live import Live
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn
from rich.table import Table

from audit.score import conventions as conv
from contracts import harbor_profiles, jobdir


@dataclass
class Snapshot:
    job_dir: str
    job_name: str
    total: int
    done: int
    running: int
    pending: int
    cancelled: int
    errored: int
    rewards: dict[str, int] = field(default_factory=dict)
    # The finished trials' score so far, by convention name: {"score": percent or None,
    # "counted": trials it counts, "shown": the number as printed, its convention named}.
    scores: dict[str, dict] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    started_at: str | None = None
    finished_at: str | None = None
    elapsed_s: float | None = None
    eta_s: float | None = None

    @property
    def finished(self) -> bool:
        return jobdir.ended(self.finished_at)

    def as_json(self) -> dict:
        return asdict(self) | {"finished": self.finished}


# How long a finished job's serving sampler may take to end: Harbor exits some seconds after
# writing finished_at, then the sampler notices (every 0.5 s) and reads each endpoint once more
# (5 s timeout at most).
RECORD_GRACE_S = 60.0


def sampler_running(job_dir: Path) -> bool:
    """The job's serving sampler still runs (a recycled PID does not: the command line must name
    the job)."""
    pid_file = Path(jobdir.serving_sampler_pid(str(job_dir)))
    return jobdir.runs_job(jobdir.recorded_pid(pid_file), job_dir.resolve().name)


def _parse_time(value: str | None) -> datetime | None:
    """Harbor mixes naive local times (`started_at`) and UTC with a `Z` (hooks)."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.astimezone()


def _reward_key(value: float) -> str:
    return str(float(value))


def _reward(trial: dict) -> float | None:
    reward = ((trial.get("verifier_result") or {}).get("rewards") or {}).get("reward")
    return float(reward) if isinstance(reward, int | float) else None


def trial_facts(trial_dir: Path, trial: dict) -> conv.TrialFacts:
    """What the score conventions read of a finished trial's result.json."""
    info = trial.get("exception_info")
    agent = trial.get("agent_info") or {}
    model = agent.get("model_info") or {}
    reward = _reward(trial)
    return conv.TrialFacts(
        task=str(trial.get("task_name") or trial_dir.name.rsplit("__", 1)[0]),
        trial=trial_dir.name, reward=reward, reward_key=reward,
        exception_recorded=info is not None,
        exception=info.get("exception_type") if isinstance(info, dict) else None,
        reward_valid=harbor_profiles.reward_valid(trial), agent=agent.get("name"),
        agent_version=agent.get("version"),
        models=(f"{model.get('provider')}/{model['name']}",) if model.get("name") else ())


def scores_of(facts: list[conv.TrialFacts]) -> dict[str, dict]:
    """The score so far in each convention a report prints (the first row of each)."""
    out = {}
    for name in conv.printed(harbor_profiles.LEADERBOARD):
        result = conv.score_rows(conv.get(name), facts, facts)
        row = result.rows[0].raw if result.rows else None
        out[name] = {"score": row.score if row else None, "counted": row.counted if row else 0,
                     "shown": row.shown if row else f"no trial yet ({name})"}
    return out


def snapshot(job_dir: Path, now: datetime | None = None) -> Snapshot:
    """The job's progress now; raises FileNotFoundError if `job_dir` is not a job dir."""
    job = jobdir.read_json(job_dir / jobdir.JOB_RESULT)
    config = jobdir.read_json(job_dir / jobdir.JOB_CONFIG)
    if job is None and config is None:
        raise FileNotFoundError(f"{job_dir} has neither result.json nor config.json: not a job dir")
    job = job or {}
    lock = jobdir.read_json(job_dir / jobdir.JOB_LOCK) or {}
    total = int(job.get("n_total_trials") or len(lock.get("trials") or []))

    rewards: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    facts: list[conv.TrialFacts] = []
    cancelled = 0
    for trial_dir, trial in jobdir.trial_results(job_dir):
        exception = (trial.get("exception_info") or {}).get("exception_type")
        if exception == jobdir.CANCELLED or jobdir.never_ran(trial):
            cancelled += 1
            continue
        if exception:
            errors[exception] += 1
        reward = _reward(trial)
        rewards[_reward_key(reward) if reward is not None else "none"] += 1
        facts.append(trial_facts(trial_dir, trial))
    done = len(facts)

    started = _parse_time(job.get("started_at"))
    finished = _parse_time(job.get(jobdir.FINISHED_AT))
    now = now or datetime.now(UTC)
    elapsed = ((finished or now) - started).total_seconds() if started else None
    eta = None
    if finished:
        eta = 0.0
    elif elapsed is not None and done and total > done:
        eta = elapsed / done * (total - done)
    running = jobdir.running_trials(job)
    return Snapshot(
        job_dir=str(job_dir),
        job_name=(config or {}).get("job_name") or job_dir.name,
        total=max(total, done),
        done=done,
        running=running,
        pending=jobdir.pending_trials(job) or max(total - done - running, 0),
        cancelled=cancelled,
        errored=sum(errors.values()),
        rewards=dict(sorted(rewards.items())),
        scores=scores_of(facts),
        errors=dict(errors.most_common()),
        started_at=job.get("started_at"),
        finished_at=job.get(jobdir.FINISHED_AT),
        elapsed_s=round(elapsed, 1) if elapsed is not None else None,
        eta_s=round(eta, 1) if eta is not None else None,
    )


def harbor_alive(pid_file: Path, job_name: str) -> bool:
    """The recorded PID is alive and is Harbor running this job (not a recycled PID)."""
    return jobdir.runs_job(jobdir.recorded_pid(pid_file), job_name)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def render(snap: Snapshot) -> Table:
    """The live view: a bar and two small tables (rewards, errors)."""
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn("{task.completed}/{task.total} trials"),
    )
    bar.add_task(snap.job_name, total=max(snap.total, 1), completed=snap.done)
    grid = Table.grid(padding=(0, 2))
    grid.add_row(bar)
    state = "finished" if snap.finished else f"running {snap.running}, pending {snap.pending}"
    grid.add_row(
        f"{state} | elapsed {_duration(snap.elapsed_s)} | "
        f"remaining ~{_duration(snap.eta_s)}"
    )
    for score in snap.scores.values():
        grid.add_row(f"score    {score['shown']}")
    rewards = ", ".join(f"{k}: {v}" for k, v in snap.rewards.items()) or "none yet"
    grid.add_row(f"rewards  {rewards}")
    errors = ", ".join(f"{k}: {v}" for k, v in snap.errors.items()) or "none"
    grid.add_row(f"errors   {errors}")
    if snap.cancelled:
        grid.add_row(f"cancelled (re-run on resume): {snap.cancelled}")
    return grid


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m components.progress", description=__doc__)
    parser.add_argument("job_dir", type=Path, help="the Harbor job directory (JOBS_DIR/JOB_NAME)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", help="print one snapshot and exit")
    mode.add_argument("--wait", action="store_true", help="poll until the job finishes")
    parser.add_argument("--json", action="store_true", help="print the snapshot as JSON")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes")
    parser.add_argument("--timeout", type=float, default=None, help="give up --wait after this")
    parser.add_argument("--pid-file", type=Path, default=None, help="the launch's PID file")
    return parser


@dataclass
class _Watch:
    """A live view of the job until it finishes, --timeout passes, Harbor is gone or Ctrl-C."""

    args: argparse.Namespace
    snap: Snapshot
    timed_out: bool = False
    interrupted: bool = False
    deadline: float = 0.0

    def poll(self) -> Snapshot:
        try:
            return snapshot(self.args.job_dir)
        except FileNotFoundError:
            return self.snap  # the dir is being rewritten: keep the last view

    def gone(self) -> bool:
        return (self.args.pid_file is not None
                and not harbor_alive(self.args.pid_file, self.snap.job_name))

    def step(self, live: Live) -> bool:
        """One refresh; False once the watch is over."""
        if self.args.timeout and time.monotonic() >= self.deadline:
            self.timed_out = True
            return False
        time.sleep(self.args.interval)
        self.snap = self.poll()
        live.update(render(self.snap))
        if not self.snap.finished and self.gone():
            # Harbor writes finished_at and then exits: read once more before judging.
            self.snap = self.poll()
            live.update(render(self.snap))
            self.interrupted = not self.snap.finished
            return False
        return not self.snap.finished

    def run(self, console: Console) -> None:
        self.deadline = time.monotonic() + (self.args.timeout or 0)
        with Live(render(self.snap), console=console, refresh_per_second=4,
                  transient=self.args.json) as live:
            try:
                while not self.snap.finished and self.step(live):
                    pass
                if self.snap.finished:
                    grace = time.monotonic() + RECORD_GRACE_S
                    while sampler_running(self.args.job_dir) and time.monotonic() < grace:
                        time.sleep(0.2)
            except KeyboardInterrupt:
                pass


def _verdict(watch: _Watch) -> int:
    if watch.args.json:
        print(json.dumps(watch.snap.as_json()))
    if watch.interrupted:
        print("progress: Harbor is not running and the job is unfinished (interrupted): "
              "`pulumi up` resumes it", file=sys.stderr)
        return 3
    if watch.timed_out:
        print(f"progress: job not finished after {watch.args.timeout:.0f}s", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        snap = snapshot(args.job_dir)
    except FileNotFoundError as error:
        print(f"progress: {error}", file=sys.stderr)
        return 1
    console = Console(stderr=args.json)
    if args.json and not args.wait:
        print(json.dumps(snap.as_json()))
        return 0
    if args.once:
        console.print(render(snap))
        return 0
    watch = _Watch(args, snap)
    watch.run(console)
    return _verdict(watch)


if __name__ == "__main__":
    sys.exit(main())
