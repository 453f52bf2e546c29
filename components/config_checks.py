"""The stack config's cross-section checks: what no single section can see on its own.

Owns: `stack_problems(cfg)`, every check that compares sections or hosts (a GPU layout against the
serving plane, a model against the GPU memory, agents against trials and capacity, address pools
against each other, the hosts' addresses and Docker's bridge, ports two services would bind,
a wheel's sha against its version, dataset paths against the Harbor host), the rerun tasks
against the dataset (`check_rerun_tasks`), what the dataset's tasks need against the stack
(`check_task_needs`: GPUs left on the Harbor host after serving, a Harbor version and
environment that can run GPU tasks at all, timeouts the job can hold), and `ConfigError`,
which lists the problems. Each problem is one `benchstack:<key>: <message>` line naming the key
to change. The models and their field checks are components/config_models/'s;
components/config.py runs both.
"""

from __future__ import annotations

import fnmatch
import ipaddress
from collections.abc import Mapping
from pathlib import PurePosixPath

import pulumi

from components.config_models import (
    NAMESPACE,
    PROJECT_DIR,
    DatasetConfig,
    HarborConfig,
    RerunsConfig,
    ServingConfig,
    StackConfig,
    ip_of,
)
from components.manifest import TaskNeeds
from contracts import harbor_profiles

BYTES_PER_PARAM = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int4": 0.5}
# Harbor wheels whose sha256 is known (each profile's pin): a version and a hash that do not
# belong together are a copy-paste slip, caught before a venv is built from the wrong wheel.
KNOWN_HARBOR_WHEELS = {v: p.wheel_sha256 for v, p in harbor_profiles.PROFILES.items()}
# The Harbor versions whose trials on Kubernetes (ack) are rehearsed here (tests/k8s, the
# local-k8s stack); another version's ack rendering is unproven, so it is refused.
KUBERNETES_VERSIONS = ("0.21.0",)
# Where Docker puts docker0 by default: a pool there takes the bridge's own subnet.
DOCKER_DEFAULT_BRIDGE = ipaddress.ip_network("172.17.0.0/16")
LOOPBACK = ipaddress.ip_network("127.0.0.0/8")


class ConfigError(pulumi.RunError, ValueError):
    """A stack config that cannot work; `problems` lists `key: message` lines.

    A `pulumi.RunError`: the CLI prints its message alone, with no traceback, and registers
    nothing.
    """

    def __init__(self, problems: list[str], source: str = "stack config"):
        self.problems = problems
        super().__init__(f"{source} is invalid:\n" + "\n".join(f"  - {p}" for p in problems))


def stack_problems(cfg: StackConfig) -> list[str]:
    """Every cross-section problem of a parsed config, each naming the key to change."""
    return [
        *_host_problems(cfg),
        *_model_problems(cfg),
        *_serving_problems(cfg),
        *_harbor_problems(cfg),
        *_kubernetes_problems(cfg),
        *_docker_problems(cfg),
        *_router_problems(cfg),
        *_dataset_problems(cfg),
        *_port_clashes(cfg),
    ]


def _host_problems(cfg: StackConfig) -> list[str]:
    """The hosts: names, architecture, roles against GPUs, SSH users and keys."""
    problems: list[str] = []
    ns = NAMESPACE
    names = [h.name for h in cfg.hosts]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"{ns}:hosts: host name {dup!r} is used twice")
    for i, host in enumerate(cfg.hosts):
        if host.arch != "amd64":
            problems.append(
                f"{ns}:hosts[{i}].arch: {host.name} is {host.arch!r}; task images and the tool "
                "bundle are amd64 only"
            )
        cpu_serving = cfg.serving is not None and cfg.serving.gpus is None
        if "gpu_worker" in host.roles and host.gpus is None and not cpu_serving:
            problems.append(f"{ns}:hosts[{i}].gpus: {host.name} has role gpu_worker but no gpus "
                            f"(only stand-in workers without GPUs, {ns}:serving.gpus: null, "
                            "need none)")
        if not host.is_local and host.user is None:
            problems.append(f"{ns}:hosts[{i}].user: SSH host {host.name} needs a user")
        if not host.is_local and host.host_key is None and cfg.ssh.host_key_policy == "pinned":
            port = f"-p {host.port} " if host.port != 22 else ""
            problems.append(
                f"{ns}:hosts[{i}].host_key: {ns}:ssh.host_key_policy is pinned and {host.name} "
                f"has no key: set it from `ssh-keyscan {port}-t ed25519 {host.address}`"
            )

    harbor_hosts = [h.name for h in cfg.hosts if "harbor" in h.roles]
    if len(harbor_hosts) != 1:
        problems.append(
            f"{ns}:hosts: exactly one host needs the role harbor, found {len(harbor_hosts)}"
            + (f" ({', '.join(harbor_hosts)})" if harbor_hosts else "")
        )
    return problems


def _model_problems(cfg: StackConfig) -> list[str]:
    """What a model-using agent or a GPU worker needs declared, and where the checkpoint is."""
    problems: list[str] = []
    ns = NAMESPACE
    model = cfg.model
    if cfg.needs_model:
        if not cfg.gpu_hosts:
            problems.append(
                f"{ns}:hosts: agent {cfg.harbor.agent.name!r} needs a model, but no host has "
                "the role gpu_worker"
            )
        for key in ("model", "serving", "router"):
            if getattr(cfg, key) is None:
                problems.append(
                    f"{ns}:{key}: agent {cfg.harbor.agent.name!r} needs a model; set {ns}:{key}"
                )
    elif cfg.gpu_hosts and cfg.serving is None:
        problems.append(f"{ns}:serving: hosts have the role gpu_worker but {ns}:serving is unset")

    if cfg.gpu_hosts and cfg.serving and (cfg.model is None or cfg.router is None):
        missing = [k for k in ("model", "router") if getattr(cfg, k) is None]
        problems.extend(f"{ns}:{k}: GPU workers are declared; set {ns}:{k}" for k in missing)
    if model and not PurePosixPath(model.path).is_absolute():
        remote = [h.name for h in cfg.gpu_hosts if not h.is_local]
        if remote:
            problems.append(
                f"{ns}:model.path: {model.path!r} is relative (to the project directory, which "
                f"only the local host has), but GPU hosts {', '.join(remote)} are remote: give "
                "the absolute path of the checkpoint on them"
            )
    return problems


def _serving_problems(cfg: StackConfig) -> list[str]:
    """The serving plane against the GPUs, the model's weights, the agents and its own limits."""
    serving = cfg.serving
    if serving is None:
        return []
    return [*_gpu_layout_problems(cfg, serving), *_weights_problems(cfg, serving),
            *_capacity_problems(cfg, serving), *_context_problems(cfg, serving),
            *_serving_limit_problems(serving)]


def _gpu_layout_problems(cfg: StackConfig, serving: ServingConfig) -> list[str]:
    """TP x DP against each GPU host's GPU count."""
    ns, per_host = NAMESPACE, serving.tp_size * serving.dp_size
    return [
        f"{ns}:serving.tp_size: tp_size x dp_size = {serving.tp_size} x {serving.dp_size} = "
        f"{per_host}, but {ns}:hosts[{i}].gpus.count of {host.name} is {host.gpus.count}"
        for i, host in enumerate(cfg.hosts)
        if "gpu_worker" in host.roles and host.gpus and host.gpus.count != per_host
    ]


def _weights_problems(cfg: StackConfig, serving: ServingConfig) -> list[str]:
    """The model's weights per GPU (at tp_size) against each GPU host's static memory."""
    model, ns = cfg.model, NAMESPACE
    if model is None:
        return []
    weights_gb = model.params_billion * BYTES_PER_PARAM[model.dtype] / serving.tp_size
    problems = []
    for i, host in enumerate(cfg.hosts):
        if "gpu_worker" not in host.roles or host.gpus is None:
            continue
        budget = host.gpus.memory_gb * serving.mem_fraction_static
        if weights_gb > budget:
            problems.append(
                f"{ns}:serving.tp_size: {model.name} ({model.params_billion:g}B "
                f"{model.dtype}) needs {weights_gb:.1f} GB of weights per GPU at "
                f"tp_size {serving.tp_size}, above {host.gpus.memory_gb:g} GB x "
                f"mem_fraction_static {serving.mem_fraction_static:g} = {budget:.1f} GB "
                f"on {host.name} ({ns}:hosts[{i}].gpus.memory_gb)"
            )
    return problems


def _capacity_problems(cfg: StackConfig, serving: ServingConfig) -> list[str]:
    """The job's concurrent agents against what the replicas run at once."""
    ns, agents = NAMESPACE, cfg.harbor.agent.n_concurrent
    capacity = cfg.replicas * serving.max_running_requests
    if not cfg.needs_model or agents <= capacity:
        return []
    return [f"{ns}:harbor.agent.n_concurrent: {agents} concurrent agents exceed the serving "
            f"capacity of {cfg.replicas} replicas x max_running_requests "
            f"{serving.max_running_requests} = {capacity}"]


def _context_problems(cfg: StackConfig, serving: ServingConfig) -> list[str]:
    """The agent's token limits against the context length."""
    ns, agent = NAMESPACE, cfg.harbor.agent
    return [
        f"{ns}:harbor.agent.{key}: {limit} is above {ns}:serving.context_length "
        f"{serving.context_length}"
        for key, limit in (("max_input_tokens", agent.max_input_tokens),
                           ("max_output_tokens", agent.max_output_tokens))
        if limit and limit > serving.context_length
    ]


def _serving_limit_problems(serving: ServingConfig) -> list[str]:
    """The serving section against itself: its token pool and its port."""
    ns, problems = NAMESPACE, []
    if serving.max_total_tokens and serving.max_total_tokens < serving.context_length:
        problems.append(
            f"{ns}:serving.max_total_tokens: {serving.max_total_tokens} is below "
            f"{ns}:serving.context_length {serving.context_length}: one full-context request "
            "could never be scheduled"
        )
    if serving.port < 1024 and not serving.user.startswith("0:"):
        problems.append(
            f"{ns}:serving.port: {serving.port} is a privileged port, which uid "
            f"{serving.user.split(':')[0]} ({ns}:serving.user) cannot bind: use a port >= 1024"
        )
    return problems


def _harbor_problems(cfg: StackConfig) -> list[str]:
    """The Harbor job: agents against trials, reruns against the dataset, the wheel's sha."""
    problems: list[str] = []
    ns = NAMESPACE
    if cfg.harbor.agent.n_concurrent > cfg.harbor.n_concurrent_trials:
        problems.append(
            f"{ns}:harbor.agent.n_concurrent: {cfg.harbor.agent.n_concurrent} is above "
            f"{ns}:harbor.n_concurrent_trials {cfg.harbor.n_concurrent_trials} (Harbor refuses it)"
        )

    reruns = cfg.harbor.reruns
    if reruns and cfg.dataset.exclude:
        for task in sorted(set(reruns.tasks) & set(cfg.dataset.exclude)):
            problems.append(
                f"{ns}:harbor.reruns: task {task!r} is excluded from the dataset "
                f"({ns}:dataset.exclude), so the main job never ran it"
            )
    if reruns and cfg.dataset.include:
        for task in sorted(set(reruns.tasks) - set(cfg.dataset.include)):
            problems.append(
                f"{ns}:harbor.reruns: task {task!r} is not in {ns}:dataset.include, so the main "
                "job never ran it"
            )
    known = KNOWN_HARBOR_WHEELS.get(cfg.harbor.version)
    owner = next((v for v, sha in KNOWN_HARBOR_WHEELS.items() if sha == cfg.harbor.wheel_sha256),
                 None)
    if (known and known != cfg.harbor.wheel_sha256) or (owner and owner != cfg.harbor.version):
        problems.append(
            f"{ns}:harbor.wheel_sha256: it is not the sha256 of the harbor {cfg.harbor.version} "
            f"wheel" + (f" (it is {owner}'s)" if owner else f" ({known})")
        )
    return problems


def _kubernetes_problems(cfg: StackConfig) -> list[str]:
    """What only works for trials on the Harbor host's Docker engine, asked of a cluster."""
    if cfg.harbor.kubernetes is None:
        return []
    ns = NAMESPACE
    problems = []
    if cfg.proxy is not None:
        problems.append(
            f"{ns}:proxy: the proxy bridge serves containers on the Harbor host's Docker engine; "
            "pods on a cluster get their egress from the cluster: drop the proxy section (set "
            f"{ns}:harbor.environment.kubernetes.egress_url to have it checked before launch)"
        )
    if cfg.harbor.container_network != "default":
        problems.append(
            f"{ns}:harbor.container_network: {cfg.harbor.container_network!r} is a Docker "
            "network mode; on kubernetes the cluster's network policy decides: drop the key"
        )
    if cfg.harbor.version not in KUBERNETES_VERSIONS:
        problems.append(
            f"{ns}:harbor.version: trials on kubernetes are rehearsed with Harbor "
            f"{', '.join(KUBERNETES_VERSIONS)} only (its ack environment on the test cluster); "
            f"use that version for {ns}:harbor.environment.kind kubernetes, or trials on docker"
        )
    return problems


def _docker_problems(cfg: StackConfig) -> list[str]:
    """The address pools: enough networks for the trials, no overlaps or clashes, the proof."""
    problems: list[str] = []
    ns = NAMESPACE
    if cfg.docker is None:
        return [
            f"{ns}:docker: missing; host {h.name!r} runs the stack's containers "
            + ("(an SGLang worker)" if "gpu_worker" in h.roles else "(the trials: "
               f"{ns}:harbor.environment.kind is docker)")
            + ", so its daemon's address pools must be declared"
            for h in cfg.docker_hosts[:1]
        ]
    trials_on_host = cfg.harbor.kubernetes is None
    needed = cfg.harbor.n_concurrent_trials + cfg.docker.network_margin
    if trials_on_host and cfg.address_pool_networks < needed:
        problems.append(
            f"{ns}:docker.address_pools: they give {cfg.address_pool_networks} networks, but "
            f"{cfg.harbor.n_concurrent_trials} concurrent trials need one each plus a margin of "
            f"{cfg.docker.network_margin} ({needed}); widen the base or raise the size"
        )
    pools = [p.network for p in cfg.docker.address_pools]
    for a in range(len(pools)):
        for b in range(a + 1, len(pools)):
            if pools[a].overlaps(pools[b]):
                problems.append(
                    f"{ns}:docker.address_pools[{b}]: {pools[b]} overlaps address_pools[{a}] "
                    f"{pools[a]}"
                )
    problems.extend(_pool_clashes(cfg))
    if cfg.docker.proof_networks > cfg.address_pool_networks:
        problems.append(
            f"{ns}:docker.proof_networks: {cfg.docker.proof_networks} proof networks, but "
            f"{ns}:docker.address_pools give only {cfg.address_pool_networks}"
        )
    return problems


def _router_problems(cfg: StackConfig) -> list[str]:
    """The router's policy against the workers behind it."""
    problems: list[str] = []
    ns = NAMESPACE
    router = cfg.router
    if router and router.policy == "power_of_two" and not router.dp_aware and len(
            cfg.gpu_hosts) < 2:
        problems.append(f"{ns}:router.policy: power_of_two needs at least 2 workers")
    return problems


def _dataset_problems(cfg: StackConfig) -> list[str]:
    """The dataset: one pinned source, paths the Harbor host can read."""
    problems: list[str] = []
    ns = NAMESPACE
    dataset = cfg.dataset
    for key, value in (("path", dataset.path), ("manifest_path", dataset.manifest_path)):
        if value and not value.startswith("/") and _escapes_project(value):
            problems.append(
                f"{ns}:dataset.{key}: {value!r} leaves the project directory; relative paths are "
                "relative to it (give an absolute path for a dataset elsewhere)"
            )
    remote_harbor = [h.name for h in cfg.hosts if "harbor" in h.roles and not h.is_local]
    if dataset.path and not PurePosixPath(dataset.path).is_absolute() and remote_harbor:
        problems.append(
            f"{ns}:dataset.path: {dataset.path!r} is relative (to the project directory, which "
            f"only the local host has), but the Harbor host {remote_harbor[0]} is remote: give "
            "the absolute path of the tasks on it (Harbor stores it verbatim)"
        )
    if (dataset.repo is None) == (dataset.path is None):
        problems.append(f"{ns}:dataset: set exactly one of {ns}:dataset.repo or .path")
    if dataset.repo is not None and dataset.commit is None:
        problems.append(f"{ns}:dataset.commit: a git dataset must be pinned to a commit")
    return problems


def _escapes_project(relative: str) -> bool:
    resolved = (PROJECT_DIR / relative).resolve()
    return not resolved.is_relative_to(PROJECT_DIR.resolve())


def _pool_clashes(cfg: StackConfig) -> list[str]:
    """Pools that would take addresses already in use: loopback, Docker's default bridge, or a
    host's own address (the trial networks' routes would shadow it)."""
    ns = NAMESPACE
    problems = []
    host_ips = []
    for i, host in enumerate(cfg.hosts):
        for key, value in (("address", host.address), ("private_ip", host.private_ip)):
            ip = ip_of(value)
            if ip is not None:
                host_ips.append((f"{ns}:hosts[{i}].{key}", ip))
    for j, pool in enumerate(cfg.docker.address_pools if cfg.docker else []):
        net, key = pool.network, f"{ns}:docker.address_pools[{j}]"
        if net.version == 4 and net.overlaps(LOOPBACK):
            problems.append(f"{key}: {net} overlaps loopback {LOOPBACK}")
        if net.version == 4 and net.overlaps(DOCKER_DEFAULT_BRIDGE):
            problems.append(
                f"{key}: {net} overlaps {DOCKER_DEFAULT_BRIDGE}, the Docker bridge (docker0) "
                "default; choose a base outside it"
            )
        for host_key, ip in host_ips:
            if ip in net:
                problems.append(f"{key}: {net} holds {ip}, the address in {host_key}")
    return problems


def _port_claims(cfg: StackConfig) -> list[tuple[str, int, str]]:
    """(host, port, key) of every port a service of the stack binds: each GPU host's worker,
    and on the Harbor host the router, its metrics listener and the proxy's two ends."""
    ns = NAMESPACE
    claims = [
        (host.name, cfg.worker_port(host),
         f"{ns}:hosts[{i}].serving_port" if host.serving_port else f"{ns}:serving.port")
        for i, host in enumerate(cfg.hosts)
        if cfg.serving and "gpu_worker" in host.roles
    ]
    if not any("harbor" in h.roles for h in cfg.hosts):
        return claims
    harbor = cfg.harbor_host.name
    if cfg.router:
        claims += [(harbor, cfg.router.port, f"{ns}:router.port"),
                   (harbor, cfg.router.metrics_port, f"{ns}:router.metrics_port")]
    if cfg.proxy:
        claims += [(harbor, cfg.proxy.upstream_port, f"{ns}:proxy.upstream"),
                   (harbor, cfg.proxy.bridge_port, f"{ns}:proxy.bridge_port")]
    return claims


def _port_clashes(cfg: StackConfig) -> list[str]:
    """Ports that two services would bind on the same host."""
    owners: dict[tuple[str, int], str] = {}
    problems = []
    for host, port, key in _port_claims(cfg):
        if (host, port) in owners:
            problems.append(f"{key}: port {port} on {host} is already used by "
                            f"{owners[host, port]}")
        else:
            owners[host, port] = key
    return problems


def check_rerun_tasks(reruns: RerunsConfig | None, dataset_tasks: list[str], source: str) -> None:
    """Every listed rerun task is a task of the dataset (its directory in `source`)."""
    if reruns is None:
        return
    known = set(dataset_tasks)
    unknown = [t for t in reruns.tasks if t not in known]
    if unknown:
        sample = ", ".join(sorted(known)[:5])
        raise ConfigError(
            [
                f"{NAMESPACE}:harbor.reruns: task {t!r} is not a task of the dataset {source} "
                f"(its tasks look like: {sample})"
                for t in unknown
            ]
        )


# --- what the dataset's tasks need (task.toml, read into the manifest) ------------------------


def selected_tasks(dataset: DatasetConfig,
                   tasks: Mapping[str, TaskNeeds]) -> dict[str, TaskNeeds]:
    """The tasks the job runs: Harbor matches dataset.include, then dataset.exclude, as globs on
    the task name (`task_names`, `exclude_task_names`)."""
    chosen = {t: n for t, n in tasks.items()
              if not dataset.include or any(fnmatch.fnmatch(t, g) for g in dataset.include)}
    return {t: n for t, n in chosen.items()
            if not any(fnmatch.fnmatch(t, g) for g in dataset.exclude)}


def _names(tasks: list[str], limit: int = 6) -> str:
    shown = ", ".join(sorted(tasks)[:limit])
    return shown + (f" and {len(tasks) - limit} more" if len(tasks) > limit else "")


def _gpu_problems(cfg: StackConfig, tasks: Mapping[str, TaskNeeds]) -> list[str]:
    """GPU tasks against the Harbor version and environment that must run them, and against
    the Harbor host's GPUs the serving plane leaves free."""
    ns = NAMESPACE
    gpu_tasks = {t: n for t, n in tasks.items() if n.gpus > 0}
    if not gpu_tasks:
        return []
    names = _names(list(gpu_tasks))
    harbor = cfg.harbor
    environment = "ack" if harbor.kubernetes else "docker"
    if environment not in harbor.profile.gpu_environments:
        if harbor.kubernetes:
            key, why = "harbor.environment.kind", (
                "Harbor's generic Kubernetes environment (ack) allocates no GPUs to a pod")
        else:
            key, why = "harbor.version", (
                f"Harbor {harbor.version}'s Docker environment reserves no GPUs: each of their "
                "trials fails as it starts (\"Task requires N GPU(s) but docker environment does "
                "not support GPU allocation\")")
        gpu_versions = [v for v, p in harbor_profiles.PROFILES.items()
                        if "docker" in p.gpu_environments]
        return [f"{ns}:{key}: tasks {names} need GPUs ([environment].gpus in task.toml), but "
                f"{why}: run them with {ns}:harbor.version {' or '.join(gpu_versions)} and trials "
                f"on docker, or leave them out ({ns}:dataset.exclude)"]
    problems = []
    index, host = next((i, h) for i, h in enumerate(cfg.hosts) if "harbor" in h.roles)
    total = host.gpus.count if host.gpus else 0
    serving = cfg.serving
    serves = ("gpu_worker" in host.roles and serving is not None and serving.gpus is not None)
    taken = serving.tp_size * serving.dp_size if serves and serving else 0
    left = max(total - taken, 0)
    # Harbor starts trials up to n_concurrent_trials whatever they need: at worst every slot
    # holds the GPU-hungriest trials (each attempt of a task is a trial of its own).
    trials = sorted((n.gpus for n in gpu_tasks.values() for _ in range(harbor.n_attempts)),
                    reverse=True)
    at_once = trials[:harbor.n_concurrent_trials]
    need = sum(at_once)
    if left < need:
        problems.append(
            f"{ns}:hosts[{index}].gpus: the Harbor host {host.name} has {total} GPUs"
            + (f", {taken} of them serving the model ({ns}:serving.tp_size x dp_size)"
               if taken else "")
            + f", so {left} left for tasks; GPU tasks {names} run up to {len(at_once)} trials at "
            f"once ({ns}:harbor.n_concurrent_trials {harbor.n_concurrent_trials}) needing "
            f"{need} GPUs: give the Harbor host GPUs of its own, run fewer trials at once, or "
            f"leave the tasks out ({ns}:dataset.exclude)"
        )
    if host.gpus:
        model = host.gpus.model.lower()
        wrong = {t: n.gpu_types for t, n in gpu_tasks.items()
                 if n.gpu_types and not any(kind.lower() in model for kind in n.gpu_types)}
        if wrong:
            kinds = sorted({kind for types in wrong.values() for kind in types or []})
            problems.append(
                f"{ns}:hosts[{index}].gpus.model: {host.gpus.model} is none of the GPU types "
                f"tasks {_names(list(wrong))} accept ({', '.join(kinds)}; [environment]."
                "gpu_types); Harbor's Docker environment cannot select a type and would run "
                "them on these GPUs anyway"
            )
    return problems


def trial_hours(harbor_cfg: HarborConfig, needs: TaskNeeds) -> float | None:
    """The longest one trial of a task can take, in hours, as Harbor bounds its phases: the
    environment start, the agent's setup, the agent and the verifier, each timeout times its
    multiplier (an unset one: Harbor's timeout_multiplier, 1.0); None without an agent
    timeout (Harbor then never stops the agent)."""
    if needs.agent_timeout_s is None:
        return None
    seconds = (
        needs.build_timeout_s * (harbor_cfg.environment_build_timeout_multiplier or 1.0)
        + harbor_profiles.AGENT_SETUP_TIMEOUT_S * harbor_cfg.agent_setup_timeout_multiplier
        + needs.agent_timeout_s * harbor_cfg.agent_timeout_multiplier
        + needs.verifier_timeout_s * (harbor_cfg.verifier_timeout_multiplier or 1.0)
    )
    return seconds / 3600


def _timeout_problems(cfg: StackConfig, tasks: Mapping[str, TaskNeeds]) -> list[str]:
    """Trials longer than the job may hold one (harbor.max_job_hours), or without a bound."""
    ns = NAMESPACE
    harbor = cfg.harbor
    if harbor.max_job_hours is None:
        return []
    problems = []
    hours = {t: trial_hours(harbor, n) for t, n in tasks.items()}
    unbounded = [t for t, h in hours.items() if h is None]
    if unbounded:
        problems.append(
            f"{ns}:harbor.max_job_hours: tasks {_names(unbounded)} set no agent timeout "
            "([agent].timeout_sec in task.toml): Harbor never stops their agent, so a trial of "
            f"them can outlast any {harbor.max_job_hours:g} h"
        )
    too_long = {t: h for t, h in hours.items() if h is not None and h > harbor.max_job_hours}
    if too_long:
        worst = max(too_long, key=lambda t: too_long[t])
        n = tasks[worst]
        problems.append(
            f"{ns}:harbor.max_job_hours: {harbor.max_job_hours:g} h, but a trial of "
            f"{_names(list(too_long))} can take up to {too_long[worst]:.1f} h ({worst}: agent "
            f"timeout {n.agent_timeout_s:g} s x {ns}:harbor.agent_timeout_multiplier "
            f"{harbor.agent_timeout_multiplier:g}, plus verifier {n.verifier_timeout_s:g} s, "
            f"environment build {n.build_timeout_s:g} s and agent setup "
            f"{harbor_profiles.AGENT_SETUP_TIMEOUT_S:g} s, each times its multiplier): raise "
            "max_job_hours, lower the multipliers, or leave the tasks out "
            f"({ns}:dataset.exclude)"
        )
    return problems


def check_task_needs(cfg: StackConfig, needs: Mapping[str, TaskNeeds], source: str) -> None:
    """What the job's tasks need (task.toml) against the stack, before anything runs."""
    tasks = selected_tasks(cfg.dataset, needs)
    problems = [*_gpu_problems(cfg, tasks), *_timeout_problems(cfg, tasks)]
    if problems:
        raise ConfigError(problems, f"stack config against the tasks in {source}")
