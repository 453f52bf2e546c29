"""Where a trial's time went: environment setup, waiting on the model, running commands,
verification, from the trial's own record.

- setup: Harbor's `environment_setup` and `agent_setup` spans (result.json);
- verification: its `verifier` span;
- waiting on the model: the agent's own record of its model calls. Terminus-2 keeps each
  answered call's duration in order (`agent_result.metadata.api_request_times_msec`) and how many
  episodes it began (`n_episodes`); an episode begun whose call never returned (one more episode
  than durations) was waiting on the model when the agent's time ran out, from the moment its
  previous step was written (`agent/trajectory.json`: Terminus-2 writes a step after its call and
  its commands, so a step's timestamp is when the next call was sent);
- running commands: the rest of the agent's execution.

`windows`: when each call waited, as epoch seconds, read from the trajectory's step times (the
call `k` starts at the `k`-th step: the first prompt, then each agent step), only when asked
(the detectors and timeouts ask; a passing trial costs its result.json alone). An agent whose
record keeps no call durations gives no split of its execution (`model_s` None, `source` says
so).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from audit.read import layout as L
from audit.read.models import TrialResult, parse_time

TERMINUS = "agent_result.metadata.api_request_times_msec"


@dataclass(frozen=True)
class TrialTime:
    setup_s: float | None
    model_s: float | None
    commands_s: float | None
    verification_s: float | None
    agent_s: float | None
    agent_start: float | None  # epoch seconds of the agent's execution
    agent_end: float | None
    calls: int
    waiting_at_end: bool  # the agent's time ran out while a model call was unanswered
    source: str
    windows: tuple[tuple[float, float], ...] = ()

    @property
    def model_share(self) -> float | None:
        if self.model_s is None or not self.agent_s:
            return None
        return min(1.0, self.model_s / self.agent_s)


def epoch(value: str | None) -> float | None:
    """An aware timestamp as epoch seconds (None: absent, naive or not a time)."""
    at = parse_time(value)
    return at.timestamp() if at is not None and at.tzinfo is not None else None


def _span(result: TrialResult, *phases: str) -> float | None:
    seconds = [s for p in phases if (span := getattr(result, p)) and (s := span.seconds())
               is not None]
    return sum(seconds) if seconds else None


def _durations(result: TrialResult) -> tuple[list[float] | None, int | None]:
    meta = result.agent_result.metadata if result.agent_result else None
    times = meta.api_request_times_msec if meta else None
    if not isinstance(times, list) or not all(isinstance(t, int | float) for t in times):
        return None, None
    episodes = meta.n_episodes if meta else None
    return [float(t) / 1000 for t in times], episodes if isinstance(episodes, int) else None


def step_times(trajectory: object) -> list[float]:
    """The send time of each model call: the first step's time, then each agent step's."""
    steps = trajectory.get("steps") if isinstance(trajectory, dict) else None
    if not isinstance(steps, list):
        return []
    out: list[float] = []
    for step in steps:
        if not isinstance(step, dict):
            continue
        at = epoch(step.get("timestamp")) if isinstance(step.get("timestamp"), str) else None
        if at is None:
            continue
        if not out or step.get("source") == "agent":
            out.append(at)
    return out


def trial_time(result: TrialResult | None, trajectory: object = None,
               want_windows: bool = False) -> TrialTime | None:
    """The split of one trial's time; `trajectory` (its parsed agent/trajectory.json, or a
    function that reads it) is read for the call windows when asked, or when the agent was
    waiting at the end: a trial that finished costs its result.json alone."""
    if result is None:
        return None
    agent = result.agent_execution
    start = epoch(agent.started_at) if agent else None
    end = epoch(agent.finished_at) if agent else None
    agent_s = agent.seconds() if agent else None
    base: dict[str, Any] = {"setup_s": _span(result, "environment_setup", "agent_setup"),
                            "verification_s": _span(result, "verifier"), "agent_s": agent_s,
                            "agent_start": start, "agent_end": end}
    durations, episodes = _durations(result)
    if durations is None:
        return TrialTime(**base, model_s=None, commands_s=None, calls=0, waiting_at_end=False,
                         source="the agent's record keeps no model-call times")
    waiting = episodes is not None and episodes == len(durations) + 1
    windows: list[tuple[float, float]] = []
    model = sum(durations)
    source = TERMINUS
    if want_windows or waiting:
        sends = step_times(trajectory() if callable(trajectory) else trajectory)
        for k, seconds in enumerate(durations):
            if k < len(sends):
                windows.append((sends[k], sends[k] + seconds))
        if waiting and len(sends) > len(durations) and end is not None:
            windows.append((sends[len(durations)], end))
            model += max(0.0, end - sends[len(durations)])
            source = f"{TERMINUS} and {L.AGENT_TRAJECTORY}'s step times"
        elif waiting:
            source = f"{TERMINUS} (the unanswered last call's start is not recorded)"
    model_s = min(model, agent_s) if agent_s is not None else model
    return TrialTime(**base, model_s=round(model_s, 3),
                     commands_s=round(agent_s - model_s, 3) if agent_s is not None else None,
                     calls=len(durations), waiting_at_end=waiting, source=source,
                     windows=tuple(windows))


def clock(epoch: float) -> str:
    """An epoch second as the report writes a time of day (UTC)."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M:%SZ")
