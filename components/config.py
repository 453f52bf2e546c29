"""The stack config: `Pulumi.<stack>.yaml` parsed into pydantic models and checked as a whole.

Everything that would fail hours into a run is rejected here, before any resource exists:
a GPU layout that does not match the host, a model that cannot fit, more agents than the
serving plane can hold, more concurrent trials than the Docker address pools can give, and so
on. Every error names the config key to change (`benchstack:serving.tp_size`, ...).

Components never read config: `__main__.py` loads a `StackConfig` and hands typed args to them.
Secrets (SSH key, API key, registry and S3 credentials) are not part of the model: they are read
with `require_secret`/`get_secret` and stay Pulumi Outputs (see `StackSecrets`).
"""

from __future__ import annotations

import ipaddress
import json
import re
import typing
from pathlib import Path, PurePosixPath
from types import UnionType
from typing import Any, Literal

import pulumi
import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

NAMESPACE = "benchstack"
PROJECT_DIR = Path(__file__).resolve().parent.parent

Role = Literal["gpu_worker", "harbor"]
AgentName = Literal["oracle", "nop", "terminus-2"]
MODEL_FREE_AGENTS = {"oracle", "nop"}
BYTES_PER_PARAM = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int4": 0.5}


class ConfigError(pulumi.RunError, ValueError):
    """A stack config that cannot work; `problems` lists `key: message` lines.

    A `pulumi.RunError`: the CLI prints its message alone, with no traceback, and registers
    nothing.
    """

    def __init__(self, problems: list[str], source: str = "stack config"):
        self.problems = problems
        super().__init__(f"{source} is invalid:\n" + "\n".join(f"  - {p}" for p in problems))


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


HOST_KEY_PATTERN = r"^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/]+={0,3}$"


class GpuSpec(Model):
    count: int = Field(ge=1)
    model: str
    memory_gb: float = Field(gt=0)


def _ip(value: str) -> str:
    ipaddress.ip_address(value)
    return value


def _host_ip(value: str) -> str:
    """A host's own address: a valid IP that names one machine (not 0.0.0.0 or ::)."""
    if ipaddress.ip_address(value).is_unspecified:
        raise ValueError(f"{value} names no host; give the address the other hosts reach it on")
    return value


def _absolute(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError(f"must be an absolute path on the host, got {value!r}")
    return value


def _looks_numeric(value: str) -> bool:
    return all(c.isdigit() or c in ".:" for c in value)


class HostConfig(Model):
    name: str = Field(pattern=r"^[a-z][a-z0-9-]*$")
    # `local` is the machine running Pulumi; anything else is reached over SSH.
    address: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9.:_-]*$")
    user: str | None = None
    port: int = Field(default=22, ge=1, le=65535)
    # The address the other hosts use to reach this one (the seed's WORKER_A_IP); defaults
    # to `address`.
    private_ip: str | None = None
    # The key pulumi-docker's ssh connection uses (it shells out to the local ssh, which takes
    # a key file, not key material); unset: the ssh agent.
    ssh_key_path: str | None = None
    # The host's SSH key, pinned on every SSH path ("ssh-ed25519 AAAA...", as
    # `ssh-keyscan -t ed25519 ADDRESS` prints it after the address); unset: ssh.host_key_policy.
    host_key: str | None = Field(default=None, pattern=HOST_KEY_PATTERN)
    arch: str = "amd64"
    gpus: GpuSpec | None = None
    roles: list[Role] = Field(min_length=1)
    # This host's SGLang worker listens here instead of serving.port, and benchstack's files
    # live here instead of `workspace` (another disk; or two hosts that are one machine, as the
    # rehearsal's loopback SSH host is).
    serving_port: int | None = Field(default=None, ge=1, le=65535)
    workspace: str | None = None

    @field_validator("workspace")
    @classmethod
    def _absolute_workspace(cls, value: str | None) -> str | None:
        return None if value is None else _absolute(value).rstrip("/")

    @field_validator("address")
    @classmethod
    def _address(cls, value: str) -> str:
        # 10.0.0.300 or 10.0.0 is a typo, not a host name.
        return _host_ip(value) if _looks_numeric(value) else value

    @field_validator("private_ip")
    @classmethod
    def _private_ip(cls, value: str | None) -> str | None:
        return None if value is None else _host_ip(value)

    @property
    def is_local(self) -> bool:
        return self.address == "local"

    @property
    def reach_address(self) -> str:
        return self.private_ip or ("127.0.0.1" if self.is_local else self.address)


class SshConfig(Model):
    # How every SSH path (remote commands, the status probe, the Docker provider) checks a host
    # without a pinned `hosts[].host_key`: `accept-new` trusts the first key seen, records it in
    # `known_hosts` and accepts only that one after; `pinned` requires hosts[].host_key.
    host_key_policy: Literal["accept-new", "pinned"] = "accept-new"
    known_hosts: str = "~/.ssh/known_hosts"


class AddressPool(Model):
    base: str
    size: int = Field(ge=8, le=30)

    @field_validator("base")
    @classmethod
    def _cidr(cls, value: str) -> str:
        ipaddress.ip_network(value, strict=True)
        return value

    @property
    def network(self) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
        return ipaddress.ip_network(self.base)

    @property
    def subnets(self) -> int:
        return 2 ** max(0, self.size - self.network.prefixlen)


class DockerConfig(Model):
    address_pools: list[AddressPool] = Field(min_length=1)
    daemon_json: str = "/etc/docker/daemon.json"
    # Empty: decided on the host (components/hostside/dockerd_restart.py): systemd's docker unit,
    # else /etc/init.d/docker, else the running dockerd restarted with its own command line.
    restart_command: str = ""
    # Restarting dockerd kills running containers (an SGLang worker loses minutes of loading).
    allow_restart_with_running_containers: bool = False
    # Networks beyond the concurrent trials: leftovers of interrupted trials, router, tests.
    network_margin: int = Field(default=8, ge=0)
    proof_networks: int = Field(default=64, ge=1)


class ModelConfig(Model):
    name: str = Field(min_length=1, pattern=r"\S")
    # Where the checkpoint is on each GPU host (mounted into the container). A relative path
    # is relative to the project directory, which only the local host has (the rehearsal's
    # demo checkpoint); a remote GPU host needs an absolute one.
    path: str = Field(min_length=1)
    params_billion: float = Field(gt=0)
    dtype: Literal["bf16", "fp16", "fp8", "int4"] = "bf16"
    # Stage the checkpoint from S3 to `path` on each GPU host first (credentials: the secrets
    # s3AccessKeyId / s3SecretAccessKey); the endpoint for an S3-compatible store.
    s3_uri: str | None = Field(default=None, pattern=r"^s3://[^/]+")
    s3_endpoint_url: str | None = None
    s3_region: str = "us-east-1"
    # A python with boto3 on the GPU hosts for the staging, instead of a staging venv
    # (air-gapped hosts); unset: a venv is built once under the workspace.
    stage_python: str | None = None


class ServingConfig(Model):
    image: str
    image_archive: str | None = None
    # Docker's `--gpus` for the worker containers; null on a CPU host (the local rehearsal's
    # stand-in workers), the one difference a GPU-less host forces besides the image.
    gpus: str | None = "all"
    port: int = Field(default=30001, ge=1, le=65535)
    tp_size: int = Field(ge=1)
    dp_size: int = Field(ge=1)
    context_length: int = Field(gt=0)
    max_running_requests: int = Field(gt=0)
    max_mamba_cache_size: int | None = Field(default=None, gt=0)
    mem_fraction_static: float = Field(gt=0, le=1)
    reasoning_parser: str | None = None
    tool_call_parser: str | None = None
    max_total_tokens: int | None = Field(default=None, gt=0)
    # The container's uid:gid (numbers: a name means nothing inside the SGLang image).
    user: str = "1000:1000"
    # A python with httpx on the hosts for the readiness probe, instead of a probe venv
    # (air-gapped hosts); unset: a venv is built once under the workspace.
    probe_python: str | None = None
    # Extra `pip install` arguments for the venvs built on the hosts (the probe's httpx, the
    # staging's boto3), e.g. an index mirror's `--index-url URL`.
    pip_args: list[str] = Field(default_factory=list)
    # Extra `sglang serve` flags, appended as given (an escape hatch, e.g. --enable-metrics).
    extra_server_args: list[str] = Field(default_factory=list)
    # The worker containers' memlock limit in bytes (the seed's `--ulimit memlock=-1`: NCCL
    # pins memory). -1 is unlimited; a host whose Docker engine may not raise it (no
    # CAP_SYS_RESOURCE, as on the rehearsal machines) needs its own hard limit or less.
    memlock: int = Field(default=-1, ge=-1)

    @field_validator("user")
    @classmethod
    def _uid_gid(cls, value: str) -> str:
        if not re.fullmatch(r"\d+:\d+", value):
            raise ValueError("must be a numeric uid:gid such as 1000:1000 (a user name means "
                             f"nothing inside the image), got {value!r}")
        return value
    health_timeout_s: int = Field(default=1800, gt=0)


class RouterConfig(Model):
    bind_host: str = "127.0.0.1"
    # How long each worker may take to answer /health from the router's host before the
    # router starts (they are already proven ready by their own probes).
    worker_timeout_s: int = Field(default=60, gt=0)

    @field_validator("bind_host")
    @classmethod
    def _bind_ip(cls, value: str) -> str:
        return _ip(value)
    port: int = Field(default=30000, ge=1, le=65535)
    policy: Literal["cache_aware", "round_robin", "random", "power_of_two"] = "cache_aware"
    dp_aware: bool = True
    balance_abs_threshold: int = Field(default=1, ge=0)
    balance_rel_threshold: float = Field(default=1.2, ge=1.0)
    image: str | None = None
    health_timeout_s: int = Field(default=300, gt=0)
    # The router container's open-files limit (the seed: 65536); at most the Docker engine's own
    # hard limit where it may not raise it.
    nofile: int = Field(default=65536, ge=1024)


class AgentConfig(Model):
    name: AgentName
    n_concurrent: int = Field(ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    top_k: int | None = Field(default=None, gt=0)
    max_input_tokens: int | None = Field(default=None, gt=0)
    max_output_tokens: int | None = Field(default=None, gt=0)
    record_terminal_session: bool = True

    @property
    def needs_model(self) -> bool:
        return self.name not in MODEL_FREE_AGENTS


TASK_NAME = r"^[A-Za-z0-9][A-Za-z0-9._/-]*$"


class RerunsConfig(Model):
    """`harbor.reruns`: tasks of the finished main job to run again as a job of their own.

    Written as a list of task names, or as `{from_audit: true}`: the tasks the audit of the
    finished main job lists for rerun (infra or cancelled). The rerun starts on the first `up`
    after the main job finished; the main job's directory is never written to.
    """

    tasks: list[str] = Field(default_factory=list)
    from_audit: bool = False

    @model_validator(mode="before")
    @classmethod
    def _list_form(cls, value: Any) -> Any:
        return {"tasks": value} if isinstance(value, list) else value

    @field_validator("tasks")
    @classmethod
    def _task_names(cls, value: list[str]) -> list[str]:
        for task in value:
            if not re.fullmatch(TASK_NAME, task):
                raise ValueError(f"{task!r} is not a task name (the task's directory name)")
        dups = sorted({t for t in value if value.count(t) > 1})
        if dups:
            raise ValueError(f"task {dups[0]!r} is listed twice")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> RerunsConfig:
        if self.from_audit == bool(self.tasks):
            raise ValueError(
                "give either a list of tasks or `from_audit: true`, not both and not neither"
            )
        return self


class HarborConfig(Model):
    version: str
    wheel_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    python: str = "python3.13"
    n_concurrent_trials: int = Field(ge=1)
    agent: AgentConfig
    agent_timeout_multiplier: float = Field(default=1.0, gt=0)
    agent_setup_timeout_multiplier: float = Field(default=1.0, gt=0)
    verifier_timeout_multiplier: float | None = Field(default=None, gt=0)
    job_name_prefix: str = Field(default="benchstack", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    reference_score: float | None = Field(default=None, ge=0, le=100)
    # At least one wave of trial teardowns after SIGTERM, or Harbor is killed mid-save.
    stop_timeout_s: int = Field(default=600, ge=30)
    # Open files for Harbor (the seed's `ulimit -n 65536`); the host's hard limit must allow it.
    nofile: int = Field(default=65536, ge=1024)
    # Attempts per task (pass@k); leaderboards ask for 5.
    n_attempts: int = Field(default=1, ge=1)
    environment_build_timeout_multiplier: float | None = Field(default=None, gt=0)
    # "none": task containers get no network at all (the tool bundle must carry the tools).
    container_network: Literal["default", "none"] = "default"
    # How long the launch waits for the first trial to start (images are pulled before).
    start_timeout_s: int = Field(default=600, gt=0)
    # A wheel already on the Harbor host (air-gapped); unset: `pip download` it there.
    wheel_path: str | None = None
    # A fixed job name; unset: job_name_prefix and a digest of the rendered config.
    job_name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]+$")
    reruns: RerunsConfig | None = None


class DatasetConfig(Model):
    # Either a git repository pinned to a commit, or a path on the Harbor host.
    repo: str | None = None
    commit: str | None = Field(default=None, pattern=r"^[0-9a-f]{40}$")
    path: str | None = Field(default=None, min_length=1)
    tasks_subdir: str = Field(default="tasks", min_length=1)
    expected_tasks: int = Field(gt=0)
    # The same task dirs on the machine running Pulumi: the image manifest is read from here.
    manifest_path: str = Field(min_length=1)

    @field_validator("tasks_subdir")
    @classmethod
    def _inside_repo(cls, value: str) -> str:
        if value.startswith("/") or ".." in Path(value).parts:
            raise ValueError(f"must stay inside the dataset repository, got {value!r}")
        return value
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)


REGISTRY_HOST = r"[A-Za-z0-9][A-Za-z0-9.-]*(:\d+)?(/\S*)?"


class ImagesConfig(Model):
    # A registry host[:port] that mirrors docker.io (no scheme: skopeo takes docker://HOST/...).
    mirror: str | None = None

    @field_validator("mirror")
    @classmethod
    def _registry_host(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(REGISTRY_HOST, value):
            raise ValueError(f"must be a registry HOST[:PORT] without a scheme, got {value!r}")
        return value
    username: str | None = None
    concurrency: int = Field(default=4, ge=1, le=32)
    retries: int = Field(default=5, ge=0, le=20)
    # The wait after an image's first failed attempt; it doubles per attempt, at most 60 s.
    retry_backoff_s: int = Field(default=5, ge=0, le=60)
    pin_digests: bool = False
    # Tasks with allow_internet = false need Harbor's egress sidecar image (built with buildx);
    # true: fail before launch, naming those tasks, when it cannot be had.
    require_sidecar: bool = True
    # The tag Harbor 0.21.0 looks up for its sidecar on a linux/amd64 engine
    # (`harbor-prebuilt:harbor-docker-egress-control-sidecar--<blake2b of its build context>`).
    sidecar_image: str = "harbor-prebuilt:harbor-docker-egress-control-sidecar--b1e6760734a9e6f6"
    # Bound on one image's copy.
    pull_timeout_s: int = Field(default=1800, ge=1)
    # The pull's private work dir on the Harbor host (skopeo's temp files, the authfile): a
    # disk, not a small tmpfs.
    scratch_dir: str = "/var/tmp"
    # Change it (a date will do) to re-check the images on the next `up` although nothing else
    # changed, e.g. after a `docker system prune`; an all-present check asks no registry.
    rerun_token: str = ""

    @field_validator("scratch_dir")
    @classmethod
    def _absolute_scratch(cls, value: str) -> str:
        return _absolute(value)


class ProxyConfig(Model):
    upstream: str = "127.0.0.1:27890"
    bridge_port: int = Field(default=27891, ge=1, le=65535)
    # Default: the gateway of Docker's `bridge` network, read on the host.
    bind_address: str | None = None
    # A URL a task container fetches through the bridge when it starts (the seed used
    # https://example.com/); unset: only the listener and the upstream are checked.
    check_url: str | None = None

    @field_validator("upstream")
    @classmethod
    def _host_port(cls, value: str) -> str:
        host, _, port = value.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"expected HOST:PORT, got {value!r}")
        return value

    @field_validator("check_url")
    @classmethod
    def _plain_http(cls, value: str | None) -> str | None:
        # The check speaks HTTP/1.0 to the proxy from bash (task images may lack curl).
        if value is not None and not value.startswith("http://"):
            raise ValueError(f"must be an http:// URL (the check sends a plain GET), got {value!r}")
        return value

    @property
    def upstream_port(self) -> int:
        return int(self.upstream.rpartition(":")[2])


class ToolBundleConfig(Model):
    asciinema_sha256: str = Field(
        default="249ccf108509d643ddaf38979dac48c99e9e251f597173d8553a30d7a6423104",
        pattern=r"^[0-9a-f]{64}$",
    )
    # An image with neither tmux nor asciinema to prove the bundle in; default: the first
    # task image of the manifest.
    canary_image: str | None = None


class StackConfig(Model):
    # Results, logs, venvs and bundles on every host: an absolute path.
    workspace: str

    @field_validator("workspace")
    @classmethod
    def _absolute_workspace(cls, value: str) -> str:
        return _absolute(value)
    hosts: list[HostConfig] = Field(min_length=1)
    docker: DockerConfig
    harbor: HarborConfig
    dataset: DatasetConfig
    images: ImagesConfig = ImagesConfig()
    tools: ToolBundleConfig = ToolBundleConfig()
    proxy: ProxyConfig | None = None
    model: ModelConfig | None = None
    serving: ServingConfig | None = None
    router: RouterConfig | None = None
    ssh: SshConfig = SshConfig()

    # -- derived views ------------------------------------------------------------------
    @property
    def gpu_hosts(self) -> list[HostConfig]:
        return [h for h in self.hosts if "gpu_worker" in h.roles]

    @property
    def harbor_host(self) -> HostConfig:
        return next(h for h in self.hosts if "harbor" in h.roles)

    @property
    def needs_model(self) -> bool:
        return self.harbor.agent.needs_model

    def workspace_of(self, host: HostConfig) -> str:
        """Where benchstack keeps its files on `host`."""
        return host.workspace or self.workspace.rstrip("/")

    def worker_port(self, host: HostConfig) -> int:
        """The port `host`'s SGLang worker listens on."""
        if self.serving is None:
            raise ValueError("no serving section: no worker port")
        return host.serving_port or self.serving.port

    @property
    def replicas(self) -> int:
        return len(self.gpu_hosts) * self.serving.dp_size if self.serving else 0

    @property
    def address_pool_networks(self) -> int:
        return sum(pool.subnets for pool in self.docker.address_pools)


def _check(cfg: StackConfig) -> list[str]:
    """Cross-field checks: each problem names the key to change."""
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
        if "gpu_worker" in host.roles and host.gpus is not None and cpu_serving:
            problems.append(f"{ns}:serving.gpus: null, but {host.name} declares "
                            f"{ns}:hosts[{i}].gpus: the workers would not use them")
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

    serving, model = cfg.serving, cfg.model
    if model and not PurePosixPath(model.path).is_absolute():
        remote = [h.name for h in cfg.gpu_hosts if not h.is_local]
        if remote:
            problems.append(
                f"{ns}:model.path: {model.path!r} is relative (to the project directory, which "
                f"only the local host has), but GPU hosts {', '.join(remote)} are remote: give "
                "the absolute path of the checkpoint on them"
            )
    if serving:
        per_host = serving.tp_size * serving.dp_size
        for i, host in enumerate(cfg.hosts):
            if "gpu_worker" in host.roles and host.gpus and host.gpus.count != per_host:
                problems.append(
                    f"{ns}:serving.tp_size: tp_size x dp_size = {serving.tp_size} x "
                    f"{serving.dp_size} = {per_host}, but {ns}:hosts[{i}].gpus.count of "
                    f"{host.name} is {host.gpus.count}"
                )
        if model:
            weights_gb = model.params_billion * BYTES_PER_PARAM[model.dtype] / serving.tp_size
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
        capacity = cfg.replicas * serving.max_running_requests
        if cfg.needs_model and cfg.harbor.agent.n_concurrent > capacity:
            problems.append(
                f"{ns}:harbor.agent.n_concurrent: {cfg.harbor.agent.n_concurrent} concurrent "
                f"agents exceed the serving capacity of {cfg.replicas} replicas x "
                f"max_running_requests {serving.max_running_requests} = {capacity}"
            )
        agent = cfg.harbor.agent
        if agent.max_input_tokens and agent.max_input_tokens > serving.context_length:
            problems.append(
                f"{ns}:harbor.agent.max_input_tokens: {agent.max_input_tokens} is above "
                f"{ns}:serving.context_length {serving.context_length}"
            )
        if agent.max_output_tokens and agent.max_output_tokens > serving.context_length:
            problems.append(
                f"{ns}:harbor.agent.max_output_tokens: {agent.max_output_tokens} is above "
                f"{ns}:serving.context_length {serving.context_length}"
            )

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

    needed = cfg.harbor.n_concurrent_trials + cfg.docker.network_margin
    if cfg.address_pool_networks < needed:
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

    router = cfg.router
    if router and router.policy == "power_of_two" and not router.dp_aware and len(
            cfg.gpu_hosts) < 2:
        problems.append(f"{ns}:router.policy: power_of_two needs at least 2 workers")
    problems.extend(_pool_clashes(cfg))
    if cfg.docker.proof_networks > cfg.address_pool_networks:
        problems.append(
            f"{ns}:docker.proof_networks: {cfg.docker.proof_networks} proof networks, but "
            f"{ns}:docker.address_pools give only {cfg.address_pool_networks}"
        )
    if serving and serving.max_total_tokens and serving.max_total_tokens < serving.context_length:
        problems.append(
            f"{ns}:serving.max_total_tokens: {serving.max_total_tokens} is below "
            f"{ns}:serving.context_length {serving.context_length}: one full-context request "
            "could never be scheduled"
        )
    if serving and serving.port < 1024 and not serving.user.startswith("0:"):
        problems.append(
            f"{ns}:serving.port: {serving.port} is a privileged port, which uid "
            f"{serving.user.split(':')[0]} ({ns}:serving.user) cannot bind: use a port >= 1024"
        )
    known = KNOWN_HARBOR_WHEELS.get(cfg.harbor.version)
    owner = next((v for v, sha in KNOWN_HARBOR_WHEELS.items() if sha == cfg.harbor.wheel_sha256),
                 None)
    if (known and known != cfg.harbor.wheel_sha256) or (owner and owner != cfg.harbor.version):
        problems.append(
            f"{ns}:harbor.wheel_sha256: it is not the sha256 of the harbor {cfg.harbor.version} "
            f"wheel" + (f" (it is {owner}'s)" if owner else f" ({known})")
        )

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

    problems.extend(_port_clashes(cfg))
    return problems


# Harbor wheels whose sha256 is known: a version and a hash that do not belong together are a
# copy-paste slip, caught before a venv is built from the wrong wheel.
KNOWN_HARBOR_WHEELS = {
    "0.21.0": "c77d779a03f1a9e8ecb3c449e17f39a9728b82238832f1fd28632eb9426c0a21",
}
# Where Docker puts docker0 by default: a pool there takes the bridge's own subnet.
DOCKER_DEFAULT_BRIDGE = ipaddress.ip_network("172.17.0.0/16")
LOOPBACK = ipaddress.ip_network("127.0.0.0/8")


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
            if value and _looks_numeric(value):
                host_ips.append((f"{ns}:hosts[{i}].{key}", ipaddress.ip_address(value)))
    for j, pool in enumerate(cfg.docker.address_pools):
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


def _port_clashes(cfg: StackConfig) -> list[str]:
    """Ports that two services would bind on the same host."""
    ns = NAMESPACE
    bound: dict[str, dict[int, str]] = {}

    def bind(host: str, port: int, key: str) -> str | None:
        owner = bound.setdefault(host, {}).get(port)
        if owner:
            return f"{key}: port {port} on {host} is already used by {owner}"
        bound[host][port] = key
        return None

    problems = []
    harbor = cfg.harbor_host.name if any("harbor" in h.roles for h in cfg.hosts) else None
    if cfg.serving:
        for i, host in enumerate(cfg.hosts):
            if "gpu_worker" not in host.roles:
                continue
            key = f"{ns}:hosts[{i}].serving_port" if host.serving_port else f"{ns}:serving.port"
            clash = bind(host.name, cfg.worker_port(host), key)
            if clash:
                problems.append(clash)
    if cfg.router and harbor:
        clash = bind(harbor, cfg.router.port, f"{ns}:router.port")
        if clash:
            problems.append(clash)
    if cfg.proxy and harbor:
        for port, key in ((cfg.proxy.upstream_port, "proxy.upstream"),
                          (cfg.proxy.bridge_port, "proxy.bridge_port")):
            clash = bind(harbor, port, f"{ns}:{key}")
            if clash:
                problems.append(clash)
    return problems


def _format_validation_error(error: ValidationError) -> list[str]:
    problems = []
    for item in error.errors():
        path = ""
        for part in item["loc"]:
            path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
        message = item["msg"]
        if item["type"] == "extra_forbidden":
            message = "unknown key (check its spelling against README's config reference)"
        problems.append(f"{NAMESPACE}:{path}: {message}")
    return problems


def parse_stack_config(values: dict[str, Any], source: str = "stack config") -> StackConfig:
    """Validate a stack's `benchstack:*` values (namespace already stripped)."""
    try:
        cfg = StackConfig.model_validate(values)
    except ValidationError as error:
        raise ConfigError(_format_validation_error(error), source) from None
    problems = _check(cfg)
    if problems:
        raise ConfigError(problems, source)
    return cfg


SECRET_KEYS = {
    "sshPrivateKey",
    "apiKey",
    "registryPassword",
    "s3AccessKeyId",
    "s3SecretAccessKey",
}


def split_stack_file(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Read `Pulumi.<stack>.yaml`: (structured benchstack values, secret entries)."""
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise ConfigError([f"not valid YAML: {error}"], str(path)) from None
    values: dict[str, Any] = {}
    secrets: dict[str, Any] = {}
    for key, value in (document.get("config") or {}).items():
        namespace, _, name = key.partition(":")
        if namespace != NAMESPACE:
            continue
        (secrets if name in SECRET_KEYS else values)[name] = value
    return values, secrets


def load_stack_file(path: Path) -> StackConfig:
    values, secrets = split_stack_file(path)
    plain = _plaintext_secrets(secrets)
    if plain:
        raise ConfigError(plain, str(path))
    return parse_stack_config(values, source=str(path))


def _plaintext_secrets(secrets: dict[str, Any]) -> list[str]:
    """Secret keys written as plain text in the stack file instead of `pulumi config set
    --secret` (which stores `{secure: ...}`): they would sit in git and in the state unencrypted."""
    return [
        f"{NAMESPACE}:{key}: written in plain text; remove it from the stack file and set it "
        f"with `pulumi config set --secret {NAMESPACE}:{key}`"
        for key, value in sorted(secrets.items())
        if not (isinstance(value, dict) and set(value) == {"secure"})
    ]


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


def load_pulumi_config() -> tuple[StackConfig, StackSecrets]:
    """Read the current stack's config through Pulumi (the program's entry point)."""
    import pulumi

    config = pulumi.Config(NAMESPACE)
    values: dict[str, Any] = {}
    problems: list[str] = []
    for key, field in StackConfig.model_fields.items():
        raw = config.get(key)
        if raw is None:
            continue
        try:
            values[key] = decode_config_value(raw, field)
        except ValueError as error:
            problems.append(f"{NAMESPACE}:{key}: {error}")
    if problems:
        raise ConfigError(problems, f"Pulumi.{pulumi.get_stack()}.yaml")
    stack_file = PROJECT_DIR / f"Pulumi.{pulumi.get_stack()}.yaml"
    file_problems = _stack_file_problems(stack_file)
    if file_problems:
        raise ConfigError(file_problems, stack_file.name)
    stack_config = parse_stack_config(values, source=f"Pulumi.{pulumi.get_stack()}.yaml")
    secrets = StackSecrets(
        ssh_private_key=config.get_secret("sshPrivateKey"),
        api_key=config.get_secret("apiKey") or pulumi.Output.secret("EMPTY"),
        registry_password=config.get_secret("registryPassword"),
        s3_access_key_id=config.get_secret("s3AccessKeyId"),
        s3_secret_access_key=config.get_secret("s3SecretAccessKey"),
    )
    if stack_config.images.username and secrets.registry_password is None:
        raise ConfigError(
            [f"{NAMESPACE}:registryPassword: {NAMESPACE}:images.username is set; set the password "
             f"with `pulumi config set --secret {NAMESPACE}:registryPassword`"],
            "stack config",
        )
    return stack_config, secrets


def decode_config_value(raw: str, field: FieldInfo) -> Any:
    """One config value as the Pulumi CLI hands it to the program: a plain string stays a
    string (`benchstack:workspace: /var/lib/...`); objects, lists, numbers and booleans arrive
    as JSON text."""
    if _is_plain_string(field.annotation):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        shown = raw if len(raw) <= 60 else raw[:57] + "..."
        raise ValueError(
            f"expected a YAML object, list or number, got the text {shown!r}"
        ) from None


def _is_plain_string(annotation: Any) -> bool:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return annotation is str or (typing.get_origin(annotation) in (typing.Union, UnionType)
                                 and args == [str])


def _stack_file_problems(path: Path) -> list[str]:
    """Top-level keys the model does not know (typos like `servng`) and secrets in plain text."""
    if not path.exists():
        return []
    values, secrets = split_stack_file(path)
    unknown = [f"{NAMESPACE}:{k}: unknown key" for k in sorted(values)
               if k not in StackConfig.model_fields]
    return unknown + _plaintext_secrets(secrets)


class StackSecrets:
    """Secret config values; each is a secret `pulumi.Output[str]` or None."""

    def __init__(self, *, ssh_private_key, api_key, registry_password, s3_access_key_id,
                 s3_secret_access_key):
        self.ssh_private_key = ssh_private_key
        self.api_key = api_key
        self.registry_password = registry_password
        self.s3_access_key_id = s3_access_key_id
        self.s3_secret_access_key = s3_secret_access_key

