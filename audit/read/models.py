"""Pydantic models of the Harbor 0.21.0 result files the audit reads.

Every model ignores unknown fields (Harbor adds fields between versions) and every field is
optional: a trial killed mid-way writes partial files, and a missing field must show up as
"no evidence", never as a crash. Timestamps come in two forms (naive local time in the job's
result.json, UTC with `Z` elsewhere), so they are kept as strings and parsed by `parse_time`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator


class _Tolerant(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class ExceptionInfo(_Tolerant):
    exception_type: str | None = None
    exception_message: str | None = None
    exception_traceback: str | None = None
    occurred_at: str | None = None
    # Harbor 0.26: what the job's error-policy table decided for this exception.
    policy: str | dict | None = None


class VerifierResult(_Tolerant):
    rewards: dict[str, float | None] | None = None


class AgentTimings(_Tolerant):
    """What an agent records of its model calls' times in `agent_result.metadata` (Terminus-2:
    each answered call's duration, in order, and how many episodes it began). Typed loosely:
    another agent's metadata of another shape must not make the result.json corrupt."""

    n_episodes: Any = None
    api_request_times_msec: Any = None


class AgentResult(_Tolerant):
    n_input_tokens: int | None = None
    n_cache_tokens: int | None = None
    n_output_tokens: int | None = None
    cost_usd: float | None = None
    metadata: AgentTimings | None = None

    @field_validator("metadata", mode="before")
    @classmethod
    def _timings_only(cls, value: object) -> object:
        # Only the timings are kept (a metadata may hold every message of the chat).
        if not isinstance(value, dict):
            return None
        return {k: value[k] for k in ("n_episodes", "api_request_times_msec") if k in value}


class ModelInfo(_Tolerant):
    name: str | None = None
    provider: str | None = None


class AgentInfo(_Tolerant):
    name: str | None = None
    version: str | None = None
    # The model the agent ran (the board's row is per agent version and model).
    model_info: ModelInfo | None = None


class Span(_Tolerant):
    started_at: str | None = None
    finished_at: str | None = None

    def seconds(self) -> float | None:
        start, end = parse_time(self.started_at), parse_time(self.finished_at)
        if start is None or end is None or (start.tzinfo is None) != (end.tzinfo is None):
            return None
        return max(0.0, (end - start).total_seconds())


PHASES = ("environment_setup", "agent_setup", "agent_execution", "verifier")


class TrialResult(_Tolerant):
    """A trial's result.json (Harbor's TrialResult, the fields the audit needs)."""

    schema_version: str | int | None = None  # Harbor 0.26
    task_name: str | None = None
    trial_name: str | None = None
    task_id: dict[str, object] | None = None
    # Harbor 0.26: False when the verifier ran but its reward must not be counted.
    reward_valid: bool | None = None
    agent_info: AgentInfo | None = None
    agent_result: AgentResult | None = None
    verifier_result: VerifierResult | None = None
    exception_info: ExceptionInfo | None = None
    started_at: str | None = None
    finished_at: str | None = None
    environment_setup: Span | None = None
    agent_setup: Span | None = None
    agent_execution: Span | None = None
    verifier: Span | None = None

    @property
    def reward(self) -> float | None:
        """The `reward` key, or the only key of a single-key reward.json; None when ungraded."""
        rewards = self.verifier_result.rewards if self.verifier_result else None
        if not rewards:
            return None
        if "reward" in rewards:
            return rewards["reward"]
        if len(rewards) == 1:
            return next(iter(rewards.values()))
        return None

    @property
    def filter_name(self) -> str | None:
        """The name Harbor's `-i/--include-task-name` filter matches for this task.

        For a local dataset that is the task dir's name, not `[task].name` from task.toml
        (TB 2.1 tasks are named `terminal-bench/<dir>`), so it comes from `task_id`.
        """
        tid = self.task_id or {}
        if isinstance(tid.get("org"), str) and isinstance(tid.get("name"), str):
            return f"{tid['org']}/{tid['name']}"
        path = tid.get("path")
        if isinstance(path, str) and path.strip("/"):
            return path.rstrip("/").rsplit("/", 1)[-1]
        return None

    def phase_seconds(self) -> dict[str, float | None]:
        return {
            phase: (span.seconds() if (span := getattr(self, phase)) else None) for phase in PHASES
        }


class EvalStats(_Tolerant):
    n_trials: int | None = None
    metrics: list[dict[str, float | None]] | None = None
    reward_stats: dict[str, dict[str, list[str]]] | None = None


class JobStats(_Tolerant):
    evals: dict[str, EvalStats] | None = None
    n_completed_trials: int | None = None
    n_errored_trials: int | None = None
    n_cancelled_trials: int | None = None
    n_input_tokens: int | None = None
    n_cache_tokens: int | None = None
    n_output_tokens: int | None = None


class JobResult(_Tolerant):
    """The job's result.json. `finished_at` stays null when the job was interrupted."""

    schema_version: str | int | None = None  # Harbor 0.26
    id: str | None = None
    started_at: str | None = None
    updated_at: str | None = None
    finished_at: str | None = None
    n_total_trials: int | None = None
    stats: JobStats | None = None

    def listed_rewards(self) -> dict[str, float]:
        """trial name -> reward, from every eval's reward_stats (what the job recorded)."""
        out: dict[str, float] = {}
        for ev in ((self.stats.evals if self.stats else None) or {}).values():
            for key, by_value in ((ev.reward_stats or {}).get("reward") or {}).items():
                try:
                    value = float(key)
                except ValueError:
                    continue
                for trial in by_value:
                    out[trial] = value
        return out

    def reported_means(self) -> list[float]:
        """The `mean` metric of every eval, as the job wrote it."""
        means: list[float] = []
        for ev in ((self.stats.evals if self.stats else None) or {}).values():
            for metric in ev.metrics or []:
                mean = metric.get("mean")
                if isinstance(mean, int | float):
                    means.append(float(mean))
        return means


class DatasetConfig(_Tolerant):
    """One entry of the job config's `datasets`: a local `path`, or a registry `name` at `ref`."""

    path: str | None = None
    name: str | None = None
    version: str | None = None
    ref: str | None = None
    commit: str | None = None
    task_names: list[str] | None = None
    exclude_task_names: list[str] | None = None
    n_tasks: int | None = None

    def filtered(self) -> bool:
        return bool(self.task_names or self.exclude_task_names or self.n_tasks is not None)


class AgentConfig(_Tolerant):
    name: str | None = None
    import_path: str | None = None
    model_name: str | None = None
    override_timeout_sec: float | None = None
    override_setup_timeout_sec: float | None = None
    max_timeout_sec: float | None = None
    # Passed to the agent's __init__ (api_base, model_info...) and to its execs.
    kwargs: dict[str, object] | None = None
    env: dict[str, object] | None = None


class EnvironmentConfig(_Tolerant):
    type: str | None = None
    env: dict[str, object] | None = None
    kwargs: dict[str, object] | None = None
    override_memory_mb: int | None = None
    override_cpus: float | None = None


class VerifierConfig(_Tolerant):
    override_timeout_sec: float | None = None
    max_timeout_sec: float | None = None


TIMEOUT_MULTIPLIERS = (
    "timeout_multiplier",
    "agent_timeout_multiplier",
    "verifier_timeout_multiplier",
    "agent_setup_timeout_multiplier",
    "environment_build_timeout_multiplier",
)


class JobConfig(_Tolerant):
    """The job's config.json (Harbor's JobConfig): what the leaderboard conformance reads."""

    job_name: str | None = None
    n_attempts: int | None = None
    # null means 1.0 (Harbor's default).
    timeout_multiplier: float | None = None
    agent_timeout_multiplier: float | None = None
    verifier_timeout_multiplier: float | None = None
    agent_setup_timeout_multiplier: float | None = None
    environment_build_timeout_multiplier: float | None = None
    agents: list[AgentConfig] | None = None
    environment: EnvironmentConfig | None = None
    verifier: VerifierConfig | None = None
    datasets: list[DatasetConfig] | None = None
    # Explicit task list (`-p task_dir` runs): a filter of its own.
    tasks: list[dict] | None = None


# Where a config tells an agent its model endpoint.
_ENDPOINT_KEYS = ("api_base", "base_url", "openai_api_base", "api_url", "endpoint")
_ENDPOINT_ENV = ("OPENAI_BASE_URL", "OPENAI_API_BASE", "ANTHROPIC_BASE_URL", "LLM_BASE_URL")


def model_endpoints(config: JobConfig | None) -> list[str]:
    """Every model endpoint URL the job's agents were given (kwargs or env)."""
    out: list[str] = []
    for agent in (config.agents if config else None) or []:
        for key, value in (agent.kwargs or {}).items():
            if key.lower() in _ENDPOINT_KEYS and isinstance(value, str) and value:
                out.append(value)
        for key, value in (agent.env or {}).items():
            if key.upper() in _ENDPOINT_ENV and isinstance(value, str) and value:
                out.append(value)
    return out


def parse_time(value: str | None) -> datetime | None:
    """Parse both timestamp forms Harbor writes: naive local time and UTC ending in `Z`."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
