"""What the Harbor job runs, as data: the job config, the compose override, the preflight checks.

Three renderings of one set of settings, so that they cannot drift apart:

- `render_job_config`: Harbor 0.21.0's JobConfig (YAML) for `harbor run --config`. Only the
  fields we decide are written; everything else stays at Harbor's default.
- `render_compose_override`: the file given to `--extra-docker-compose`: the tool bundle mounted
  read-only (tmux/asciinema bind-mounted into /usr/local/bin, which Debian's login PATH keeps),
  `host.docker.internal` mapped to the host gateway, and the proxy bridge variables.
- `preflight_expectations`: every field of the config Harbor resolves (`--print-config`) that
  must equal what the stack asked for, with the default Harbor omits it for (print-config
  excludes defaults). The preflight script compares field by field and names the first
  mismatching one.

Nothing here touches Pulumi: the component feeds resolved values in (inside `Output.apply`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

Agent = Literal["oracle", "nop", "terminus-2"]
# `none`: trial containers get no network at all (the tasks that set allow_internet = false).
ContainerNetwork = Literal["default", "none"]

# Where containers see the tool bundle; the bundle's wrappers default to this root.
TOOLS_MOUNT = "/opt/harbor-tools"
# Debian's /etc/profile resets PATH for the agent's `bash --login` pane, but keeps this dir.
TOOLS_BIN_TARGET = "/usr/local/bin"
NO_PROXY = "127.0.0.1,localhost"
# Harbor's own default, which `--print-config` leaves out when it is unchanged.
HARBOR_DEFAULT_CONCURRENCY = 4
AGENTS = ("oracle", "nop", "terminus-2")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DatasetSpec(_Strict):
    """The pinned task set: a git repository at a commit, or a directory already on the host."""

    git_url: str | None = None
    commit: str | None = None
    # The tasks' directory inside the repository (TB 2.1 keeps them under `tasks/`).
    subdir: str = "tasks"
    path: str | None = None
    expected_tasks: int = Field(gt=0)
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _one_source(self) -> DatasetSpec:
        if bool(self.path) == bool(self.git_url):
            raise ValueError("dataset: set exactly one of `path` or `git_url` (+ `commit`)")
        if self.git_url and not self.commit:
            raise ValueError("dataset.commit: a git dataset must be pinned to a commit")
        if self.commit and len(self.commit) != 40:
            raise ValueError(f"dataset.commit: give the full 40-hex commit, got {self.commit!r}")
        if self.path and not self.path.startswith("/"):
            raise ValueError(
                f"dataset.path must be absolute (Harbor stores it verbatim): {self.path}"
            )
        return self


class JobSettings(_Strict):
    """The Harbor job as the stack config describes it (plain values only)."""

    agent: Agent = "terminus-2"
    # No default here: the stack config's harbor.n_concurrent_trials is the one.
    n_concurrent_trials: int = Field(ge=1)
    n_concurrent_agents: int | None = Field(default=None, ge=1)
    n_attempts: int = Field(default=1, ge=1)
    model_name: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_input_tokens: int | None = Field(default=None, gt=0)
    max_output_tokens: int | None = Field(default=None, gt=0)
    record_terminal_session: bool = True
    agent_timeout_multiplier: float | None = Field(default=None, gt=0)
    agent_setup_timeout_multiplier: float | None = Field(default=None, gt=0)
    verifier_timeout_multiplier: float | None = Field(default=None, gt=0)
    environment_build_timeout_multiplier: float | None = Field(default=None, gt=0)
    # "none" cuts task containers off any network: only what is mounted can be used.
    container_network: ContainerNetwork = "default"

    @model_validator(mode="after")
    def _consistent(self) -> JobSettings:
        # Agents above trials is the stack config's check (harbor.agent.n_concurrent).
        if self.agent == "terminus-2" and not self.model_name:
            raise ValueError("job.model_name is required for the terminus-2 agent")
        return self

    @property
    def uses_model(self) -> bool:
        return self.agent == "terminus-2"


def _agent(settings: JobSettings, api_base: str | None) -> dict[str, Any]:
    agent: dict[str, Any] = {"name": settings.agent}
    if settings.n_concurrent_agents is not None:
        agent["n_concurrent"] = settings.n_concurrent_agents
    if not settings.uses_model:
        return agent
    if not api_base:
        raise ValueError("api_base is required for the terminus-2 agent (router_url + '/v1')")
    agent["model_name"] = settings.model_name
    kwargs: dict[str, Any] = {
        "api_base": api_base,
        "record_terminal_session": settings.record_terminal_session,
    }
    if settings.temperature is not None:
        kwargs["temperature"] = settings.temperature
    call: dict[str, Any] = {}
    if settings.top_p is not None:
        call["top_p"] = settings.top_p
    if settings.top_k is not None:
        # litellm rejects an unknown top-level top_k for openai/ models; extra_body passes it.
        call["extra_body"] = {"top_k": settings.top_k}
    if call:
        kwargs["llm_call_kwargs"] = call
    info: dict[str, Any] = {}
    if settings.max_input_tokens is not None:
        info["max_input_tokens"] = settings.max_input_tokens
    if settings.max_output_tokens is not None:
        info["max_output_tokens"] = settings.max_output_tokens
    if info:
        # Zero costs: a self-hosted model; litellm otherwise looks the model up in its price map.
        info |= {"input_cost_per_token": 0, "output_cost_per_token": 0}
        kwargs["model_info"] = info
    agent["kwargs"] = kwargs
    return agent


def job_config(
    settings: JobSettings,
    *,
    jobs_dir: str,
    dataset_path: str,
    dataset: DatasetSpec,
    api_base: str | None,
) -> dict[str, Any]:
    """The JobConfig dict (job_name and the compose override are given on the command line)."""
    config: dict[str, Any] = {"jobs_dir": jobs_dir, "n_attempts": settings.n_attempts}
    config["n_concurrent_trials"] = settings.n_concurrent_trials
    for key in (
        "agent_timeout_multiplier",
        "agent_setup_timeout_multiplier",
        "verifier_timeout_multiplier",
        "environment_build_timeout_multiplier",
    ):
        value = getattr(settings, key)
        if value is not None:
            config[key] = value
    config["environment"] = {"type": "docker", "delete": True}
    config["agents"] = [_agent(settings, api_base)]
    entry: dict[str, Any] = {"path": dataset_path}
    if dataset.include:
        entry["task_names"] = list(dataset.include)
    if dataset.exclude:
        entry["exclude_task_names"] = list(dataset.exclude)
    config["datasets"] = [entry]
    return config


def render_job_config(settings: JobSettings, **kwargs: Any) -> str:
    return yaml.safe_dump(job_config(settings, **kwargs), sort_keys=False)


def compose_override(
    settings: JobSettings, *, tools_dir: str | None, proxy_url: str | None
) -> dict[str, Any]:
    """The `--extra-docker-compose` file: Harbor merges it over every trial's `main` service."""
    main: dict[str, Any] = {}
    if tools_dir:
        tools = tools_dir.rstrip("/")
        main["volumes"] = [
            f"{tools}:{TOOLS_MOUNT}:ro",
            f"{tools}/bin/tmux:{TOOLS_BIN_TARGET}/tmux:ro",
            f"{tools}/bin/asciinema:{TOOLS_BIN_TARGET}/asciinema:ro",
        ]
    if settings.container_network == "none":
        if proxy_url:
            raise ValueError(
                "proxy_url is set but job.container_network is 'none': a container without "
                "network cannot reach the proxy bridge; drop one of them"
            )
        main["network_mode"] = "none"
    else:
        # The proxy bridge listens on the Docker gateway; this name reaches it from any trial.
        main["extra_hosts"] = ["host.docker.internal:host-gateway"]
        if proxy_url:
            main["environment"] = {
                "HTTP_PROXY": proxy_url,
                "HTTPS_PROXY": proxy_url,
                "http_proxy": proxy_url,
                "https_proxy": proxy_url,
                "NO_PROXY": NO_PROXY,
                "no_proxy": NO_PROXY,
            }
    return {"services": {"main": main}}


def render_compose_override(settings: JobSettings, **kwargs: Any) -> str:
    return yaml.safe_dump(compose_override(settings, **kwargs), sort_keys=False)


def preflight_expectations(
    settings: JobSettings,
    *,
    dataset_path: str,
    dataset: DatasetSpec,
    api_base: str | None,
    compose_path: str,
) -> list[dict[str, Any]]:
    """Fields of the resolved config to check: `{"path": [...], "expect": v, "default": d}`.

    A path step is a key, a list index, or "#len" (the length of the list reached so far).

    `default` is what an absent field means (print-config drops fields equal to Harbor's
    default), so a stack asking for the default value still passes.
    """
    checks: list[dict[str, Any]] = []

    def want(path: list[Any], expect: Any, default: Any = None) -> None:
        checks.append({"path": path, "expect": expect, "default": default})

    want(["n_concurrent_trials"], settings.n_concurrent_trials, HARBOR_DEFAULT_CONCURRENCY)
    want(["n_attempts"], settings.n_attempts, 1)
    for key in (
        "agent_timeout_multiplier",
        "agent_setup_timeout_multiplier",
        "verifier_timeout_multiplier",
        "environment_build_timeout_multiplier",
    ):
        want([key], getattr(settings, key))
    want(["environment", "type"], "docker", "docker")
    want(["environment", "extra_docker_compose"], [compose_path], [])
    agent = _agent(settings, api_base)
    want(["agents", "#len"], 1, 1)  # Harbor omits its default [{name: oracle}]
    want(["agents", 0, "name"], settings.agent, "oracle")
    want(["agents", 0, "n_concurrent"], settings.n_concurrent_agents)
    if settings.uses_model:
        kwargs = agent["kwargs"]
        want(["agents", 0, "model_name"], settings.model_name)
        want(["agents", 0, "kwargs", "api_base"], api_base)
        want(["agents", 0, "kwargs", "record_terminal_session"], settings.record_terminal_session)
        want(["agents", 0, "kwargs", "temperature"], settings.temperature)
        want(["agents", 0, "kwargs", "llm_call_kwargs"], kwargs.get("llm_call_kwargs"))
        want(["agents", 0, "kwargs", "model_info"], kwargs.get("model_info"))
    want(["datasets", "#len"], 1)
    want(["datasets", 0, "path"], dataset_path)
    want(["datasets", 0, "task_names"], list(dataset.include) or None)
    want(["datasets", 0, "exclude_task_names"], list(dataset.exclude) or None)
    return checks


def config_digest(*texts: str) -> str:
    """A short, stable name suffix for a job: a changed config gets a new job name."""
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:10]


def expectations_json(checks: list[dict[str, Any]]) -> str:
    return json.dumps(checks, sort_keys=True)
