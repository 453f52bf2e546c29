"""What the Harbor job runs, as data: the job config, the compose override, the preflight checks.

Three renderings of the stack's own `harbor` and `dataset` sections (`HarborConfig`,
`DatasetConfig` of components/config.py, which hold every default and check), so that they
cannot drift apart:

- `render_job_config`: Harbor's JobConfig (YAML) for `harbor run --config`, as the stack's
  Harbor version takes it (`harbor.profile`, contracts/harbor_profiles.py). Only the fields we
  decide are written; everything else stays at Harbor's default. With `harbor_flags`, the
  flags of `harbor run` beside it: 0.21.0 has none; 0.26.0 gets the endpoint through its own
  `--base-url`, `--api-key-name` and `--api-format` (0.21.0 through the agent kwarg
  `api_base`).
- `render_compose_override`: the file given to `--extra-docker-compose`: the tool bundle mounted
  read-only (tmux/asciinema bind-mounted into /usr/local/bin, which Debian's login PATH keeps),
  `host.docker.internal` mapped to the host gateway, and the proxy bridge variables.
- `preflight_expectations`: every field of the config Harbor resolves (`--print-config`) that
  must equal what the stack asked for, with the default Harbor omits it for (print-config
  excludes defaults). The preflight script compares field by field and names the first
  mismatching one.

What the sections do not hold comes as keywords: `model_name` (`openai/<served model>`, derived
from the stack's `model` in __main__.py) and the values other layers resolve (`api_base`, paths).
Nothing here touches Pulumi: the component feeds resolved values in (inside `Output.apply`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import yaml

from components.config import AgentConfig, DatasetConfig, HarborConfig
from contracts import harbor_profiles, hostlayout

# Debian's /etc/profile resets PATH for the agent's `bash --login` pane, but keeps this dir.
TOOLS_BIN_TARGET = "/usr/local/bin"
NO_PROXY = "127.0.0.1,localhost"
# ack's pods run privileged as root; merged element-wise into its pod (containers[0] is `main`).
UNPRIVILEGED_POD = {"spec": {"containers": [{"securityContext": {"privileged": False}}]}}
# Harbor's own default, which `--print-config` leaves out when it is unchanged.
HARBOR_DEFAULT_CONCURRENCY = 4
# The harbor section's timeout multipliers, written only when set (unset: Harbor's default).
MULTIPLIERS = (
    "agent_timeout_multiplier",
    "agent_setup_timeout_multiplier",
    "verifier_timeout_multiplier",
    "environment_build_timeout_multiplier",
)


def _agent(agent: AgentConfig, model_name: str | None, api_base: str | None,
           endpoint_flags: bool = False) -> dict[str, Any]:
    """The agents[] entry; with `endpoint_flags` (0.26.0) the endpoint is not in it: the flags
    give it (`harbor_flags`)."""
    entry: dict[str, Any] = {"name": agent.name, "n_concurrent": agent.n_concurrent}
    if not agent.needs_model:
        return entry
    if not api_base:
        raise ValueError(f"api_base is required for the {agent.name} agent (router_url + '/v1')")
    if not model_name:
        raise ValueError(f"model_name is required for the {agent.name} agent "
                         "(openai/<served model>)")
    entry["model_name"] = model_name
    kwargs: dict[str, Any] = {} if endpoint_flags else {"api_base": api_base}
    kwargs["record_terminal_session"] = agent.record_terminal_session
    if agent.temperature is not None:
        kwargs["temperature"] = agent.temperature
    if call := _llm_call_kwargs(agent):
        kwargs["llm_call_kwargs"] = call
    if info := _model_info(agent):
        kwargs["model_info"] = info
    entry["kwargs"] = kwargs
    return entry


def _llm_call_kwargs(agent: AgentConfig) -> dict[str, Any]:
    """The sampling litellm passes on each call: top_p, and top_k through extra_body."""
    call: dict[str, Any] = {}
    if agent.top_p is not None:
        call["top_p"] = agent.top_p
    if agent.top_k is not None:
        # litellm rejects an unknown top-level top_k for openai/ models; extra_body passes it.
        call["extra_body"] = {"top_k": agent.top_k}
    return call


def _model_info(agent: AgentConfig) -> dict[str, Any]:
    """The model's token limits as litellm reads them; none given: nothing."""
    info: dict[str, Any] = {}
    if agent.max_input_tokens is not None:
        info["max_input_tokens"] = agent.max_input_tokens
    if agent.max_output_tokens is not None:
        info["max_output_tokens"] = agent.max_output_tokens
    if info:
        # Zero costs: a self-hosted model; litellm otherwise looks the model up in its price map.
        info |= {"input_cost_per_token": 0, "output_cost_per_token": 0}
    return info


def job_config(
    harbor: HarborConfig,
    *,
    dataset: DatasetConfig,
    model_name: str | None,
    api_base: str | None,
    jobs_dir: str,
    dataset_path: str,
    kubeconfig_path: str | None = None,
    pull_secret: str | None = None,
) -> dict[str, Any]:
    """The JobConfig dict (job_name and the compose override are given on the command line)."""
    config: dict[str, Any] = {"jobs_dir": jobs_dir, "n_attempts": harbor.n_attempts}
    config["n_concurrent_trials"] = harbor.n_concurrent_trials
    for key in MULTIPLIERS:
        value = getattr(harbor, key)
        if value is not None:
            config[key] = value
    config["environment"] = environment_entry(harbor, kubeconfig_path, pull_secret)
    config["agents"] = [_agent(harbor.agent, model_name, api_base,
                               harbor.profile.endpoint_flags)]
    entry: dict[str, Any] = {"path": dataset_path}
    if dataset.include:
        entry["task_names"] = list(dataset.include)
    if dataset.exclude:
        entry["exclude_task_names"] = list(dataset.exclude)
    config["datasets"] = [entry]
    return config


def environment_entry(
    harbor: HarborConfig, kubeconfig_path: str | None = None, pull_secret: str | None = None
) -> dict[str, Any]:
    """Where the trials run: containers on this host (`docker`) or pods in the stack's namespace
    (Harbor's generic Kubernetes environment, `ack`), reached with the Harbor controller's own
    kubeconfig (components/trial_namespace.py)."""
    k8s = harbor.kubernetes
    if k8s is None:
        return {"type": "docker", "delete": True}
    if not kubeconfig_path:
        raise ValueError("kubeconfig_path is required for trials on kubernetes")
    kwargs: dict[str, Any] = {"namespace": k8s.namespace, "kubeconfig": kubeconfig_path}
    if pull_secret:
        kwargs["image_pull_secret"] = pull_secret
    if not k8s.privileged:
        kwargs["pod_overrides"] = UNPRIVILEGED_POD
    return {"type": "ack", "delete": True, "kwargs": kwargs}


def render_job_config(harbor: HarborConfig, **kwargs: Any) -> str:
    return yaml.safe_dump(job_config(harbor, **kwargs), sort_keys=False)


def harbor_flags(harbor: HarborConfig, api_base: str | None) -> list[str]:
    """`harbor run`'s flags beside the config (the preflight's and the launch's alike): the
    endpoint through Harbor's own flags where the version has them, for an agent that calls a
    model: the router's /v1, the key from the launch's environment, the OpenAI chat protocol."""
    if not (harbor.profile.endpoint_flags and harbor.agent.needs_model):
        return []
    if not api_base:
        raise ValueError(f"api_base is required for the {harbor.agent.name} agent")
    return ["--base-url", api_base, "--api-key-name", harbor_profiles.API_KEY_VAR,
            "--api-format", harbor_profiles.API_FORMAT]


def compose_override(
    harbor: HarborConfig, *, tools_dir: str | None, proxy_url: str | None
) -> dict[str, Any]:
    """The `--extra-docker-compose` file: Harbor merges it over every trial's `main` service."""
    # An init as the trial's PID 1: Harbor's prebuilt main runs `sh -c 'sleep infinity'`, which as
    # PID 1 ignores SIGTERM, so every trial's `compose down` waited out Docker's 10 s stop before
    # its SIGKILL (benchmarks/bench_two_hosts.py: trials per minute with and without it). The
    # init passes SIGTERM on (the stop is immediate) and reaps what the agent's commands orphan.
    main: dict[str, Any] = {"init": True}
    if tools_dir:
        tools = tools_dir.rstrip("/")
        main["volumes"] = [
            f"{tools}:{hostlayout.TOOLS_MOUNT}:ro",
            f"{tools}/bin/tmux:{TOOLS_BIN_TARGET}/tmux:ro",
            f"{tools}/bin/asciinema:{TOOLS_BIN_TARGET}/asciinema:ro",
        ]
    if harbor.container_network == "none":
        if proxy_url:
            raise ValueError(
                "proxy_url is set but harbor.container_network is 'none': a container without "
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


def render_compose_override(harbor: HarborConfig, **kwargs: Any) -> str:
    return yaml.safe_dump(compose_override(harbor, **kwargs), sort_keys=False)


# What the override says about how a trial's container is run and stopped, not about the job:
# left out of the job's name, so that a stack upgraded in place keeps its job (its name was
# given before the init existed) while its next trials stop at once.
NOT_OF_THE_JOB = ("init",)


def compose_identity(compose_yaml: str) -> str:
    """The override as the job's name counts it (without NOT_OF_THE_JOB)."""
    if not compose_yaml:
        return compose_yaml
    document = yaml.safe_load(compose_yaml)
    main = document["services"]["main"]
    for key in NOT_OF_THE_JOB:
        main.pop(key, None)
    return yaml.safe_dump(document, sort_keys=False)


def preflight_expectations(
    harbor: HarborConfig,
    *,
    dataset: DatasetConfig,
    model_name: str | None,
    api_base: str | None,
    dataset_path: str,
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

    want(["n_concurrent_trials"], harbor.n_concurrent_trials, HARBOR_DEFAULT_CONCURRENCY)
    want(["n_attempts"], harbor.n_attempts, 1)
    for key in MULTIPLIERS:
        want([key], getattr(harbor, key))
    want(["environment", "type"], "ack" if harbor.kubernetes else "docker", "docker")
    if harbor.kubernetes is not None:
        want(["environment", "kwargs", "namespace"], harbor.kubernetes.namespace)
    want(["environment", "extra_docker_compose"], [compose_path] if compose_path else [], [])
    agent = harbor.agent
    entry = _agent(agent, model_name, api_base, harbor.profile.endpoint_flags)
    want(["agents", "#len"], 1, 1)  # Harbor omits its default [{name: oracle}]
    want(["agents", 0, "name"], agent.name, "oracle")
    want(["agents", 0, "n_concurrent"], agent.n_concurrent)
    if agent.needs_model:
        kwargs = entry["kwargs"]
        want(["agents", 0, "model_name"], model_name)
        if harbor.profile.endpoint_flags:
            # The flags' fields, and no second endpoint in the agent's kwargs.
            want(["agents", 0, "base_url"], api_base)
            want(["agents", 0, "model_api_key_name"], harbor_profiles.API_KEY_VAR)
            want(["agents", 0, "model_api_format"], harbor_profiles.API_FORMAT)
            want(["agents", 0, "kwargs", "api_base"], None)
        else:
            want(["agents", 0, "kwargs", "api_base"], api_base)
        want(["agents", 0, "kwargs", "record_terminal_session"], agent.record_terminal_session)
        want(["agents", 0, "kwargs", "temperature"], agent.temperature)
        want(["agents", 0, "kwargs", "llm_call_kwargs"], kwargs.get("llm_call_kwargs"))
        want(["agents", 0, "kwargs", "model_info"], kwargs.get("model_info"))
    want(["datasets", "#len"], 1)
    want(["datasets", 0, "path"], dataset_path)
    want(["datasets", 0, "task_names"], list(dataset.include) or None)
    want(["datasets", 0, "exclude_task_names"], list(dataset.exclude) or None)
    if harbor.profile.carries_policy:
        # Harbor's own error-policy table, unchanged: what the audit reads its verdicts by.
        want(["override_error_policy"], {}, {})
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
