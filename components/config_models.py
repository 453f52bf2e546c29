"""The stack config's models: each `benchstack:*` section of `Pulumi.<stack>.yaml` as a pydantic
model, with its defaults and the checks one field (or one section) can make on its own.

Owns: every default, every field-level check (ranges, patterns, paths, addresses), and the
derived views of a parsed config (`StackConfig.gpu_hosts`, `.worker_port()`...). Checks that
compare sections live in components/config_checks.py; reading a stack and reporting what is
wrong in components/config.py, which is also the import point for all of these names.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from contracts.harbor_profiles import KNOWN_VERSIONS, PROFILES, HarborProfile

NAMESPACE = "benchstack"
PROJECT_DIR = Path(__file__).resolve().parent.parent

Role = Literal["gpu_worker", "harbor"]
AgentName = Literal["oracle", "nop", "terminus-2"]
MODEL_FREE_AGENTS = {"oracle", "nop"}
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


HOST_KEY_PATTERN = r"^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/]+={0,3}$"


class GpuSpec(Model):
    count: int = Field(ge=1)
    model: str
    memory_gb: float = Field(gt=0)


def ip_of(value: str | None) -> Address | None:
    """The IP address `value` is, or None for a host name (or `local`, or nothing)."""
    try:
        return ipaddress.ip_address(value or "")
    except ValueError:
        return None


def _ip(value: str) -> str:
    ipaddress.ip_address(value)
    return value


def _host_ip(value: str) -> str:
    """A host's own address: a valid IP that names one machine (not 0.0.0.0 or ::)."""
    if ipaddress.ip_address(value).is_unspecified:
        raise ValueError(f"{value} names no host; give the address the other hosts reach it on")
    return value


def _host_address(value: str) -> str:
    """An IP is checked as one; so is what can only be meant as one (digits and dots, or a
    colon: 10.0.0.300 and 10.0.0 are typos, not host names); anything else is a host name."""
    if ip_of(value) is not None or ":" in value or re.fullmatch(r"[0-9.]+", value):
        return _host_ip(value)
    return value


def _absolute(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError(f"must be an absolute path on the host, got {value!r}")
    return value


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
        return _host_address(value)

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
    # Empty: decided on the host (hostside/dockerd_restart.py): systemd's docker unit,
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


class ServingRecordConfig(Model):
    """`serving.record`: the serving plane's own record kept beside the job. A sampler started
    with the launch reads the gateway's and every worker's metrics endpoint every `interval_s`
    into the job dir (contracts/jobdir.py: SERVING_RECORD) while Harbor runs."""

    enabled: bool = True
    interval_s: float = Field(default=10, ge=1, le=600)
    # The record's bound: past half of it the sampler reads at twice the interval, past three
    # quarters at four times, past seven eighths at eight; at the bound it stops and says so.
    max_mb: int = Field(default=256, ge=1)


class SpeedCheckConfig(Model):
    """`serving.speed_check`: a short load at the job's agent concurrency through the gateway
    once the serving plane is ready, before the job launches. Its figures (decode tokens/s per
    request, time to first token) go into the provenance manifest; a floor or ceiling set here
    that the measurement misses stops `up` with both figures."""

    enabled: bool = True
    # Unset: measured and recorded, never refused.
    min_decode_tokens_per_s: float | None = Field(default=None, gt=0)
    max_time_to_first_token_s: float | None = Field(default=None, gt=0)
    # Requests each of the agent-concurrency clients sends, one after the other.
    rounds: int = Field(default=2, ge=1, le=20)
    output_tokens: int = Field(default=256, ge=8, le=8192)
    # The prompt's length in tokens; unset: the tasks' typical first prompt (the median
    # instruction of the dataset inside the agent's prompt template, components/speed_check.py).
    prompt_tokens: int | None = Field(default=None, ge=16)
    # The whole load's bound: a check that cannot finish in it fails, saying so.
    timeout_s: int = Field(default=600, ge=10)


class ServingConfig(Model):
    image: str
    image_archive: str | None = None
    # Docker's `--gpus` for the worker containers; null on a CPU host (the local rehearsal's
    # stand-in workers), the one difference a GPU-less host forces besides the image. A host that
    # declares hosts[].gpus has them checked before its worker (hostside/gpu_check.py) even
    # where the worker gets none: a CPU stand-in rehearsing a GPU host (tests/e2e/gpu_plane.py).
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
    # How long a worker may take from its start to serving; unset: derived from the model's size
    # and the layout (components/sglang_worker.py startup_timeout_s).
    health_timeout_s: int | None = Field(default=None, gt=0)
    # SGLang's Prometheus metrics (`--enable-metrics`: running and queued requests, token usage,
    # generation throughput, time to first token on the worker's own port): what the serving
    # record beside the job reads, and the gateway's load signal. The seed ran without them.
    enable_metrics: bool = True
    record: ServingRecordConfig = ServingRecordConfig()
    speed_check: SpeedCheckConfig = SpeedCheckConfig()

    @field_validator("user")
    @classmethod
    def _uid_gid(cls, value: str) -> str:
        if not re.fullmatch(r"\d+:\d+", value):
            raise ValueError("must be a numeric uid:gid such as 1000:1000 (a user name means "
                             f"nothing inside the image), got {value!r}")
        return value


# The gateways a stack can run, each with the one version benchstack pins and proves: `smg`
# (the Shepherd Model Gateway, sglang-router's successor) and `sglang-router` (the seed's exact
# setup). The router container's image must carry it (checked at readiness, in the container).
GATEWAY_VERSIONS = {"smg": "1.13.0", "sglang-router": "0.3.2"}
Gateway = Literal["smg", "sglang-router"]


class RouterConfig(Model):
    implementation: Gateway = "smg"
    bind_host: str = "127.0.0.1"
    # How long each worker may take to answer /health from the router's host before the
    # router starts (they are already proven ready by their own probes).
    worker_timeout_s: int = Field(default=60, gt=0)
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
    # The gateway's Prometheus listener (both gateways default to 0.0.0.0:29000, every
    # interface): bound on purpose where the sampler on the Harbor host reads it, never on all.
    metrics_host: str = "127.0.0.1"
    metrics_port: int = Field(default=29000, ge=1, le=65535)
    # smg's worker overload protection (on by default in smg: a worker with >= 8 waiting
    # requests or >= 80% KV use is left out of routing). Off here, on a measurement
    # (benchmarks/bench_gateway.py: 20 Terminus-2-like agents, growing shared prefixes): an
    # agent's turns share a long prefix cached on one worker, and a turn moved off it is
    # prefilled again elsewhere. Where it acted (100 turns moved at 12 turns an agent) it bought
    # no wall time or turn latency and cost prefix-cache hits (0.094 of prompt tokens vs 0.106);
    # the waiting threshold is never reached at a job the config allows (agents <= replicas x
    # max_running_requests); and in the stack's layout (dp_aware over HTTP) smg 1.13.0 fetches
    # no worker loads at all, so it would act on nothing.
    worker_overload_protection: bool = False

    @field_validator("bind_host")
    @classmethod
    def _bind_ip(cls, value: str) -> str:
        return _ip(value)

    @field_validator("metrics_host")
    @classmethod
    def _metrics_ip(cls, value: str) -> str:
        if ipaddress.ip_address(value).is_unspecified:
            raise ValueError(f"{value} is every interface; bind the metrics listener to the "
                             "address the Harbor host reads it on (127.0.0.1 by default)")
        return value

    @model_validator(mode="after")
    def _gateway_features(self) -> RouterConfig:
        if self.worker_overload_protection and self.implementation != "smg":
            raise ValueError(f"worker_overload_protection: {self.implementation} "
                             f"{GATEWAY_VERSIONS[self.implementation]} has none (smg only)")
        return self

    @property
    def version(self) -> str:
        """The pinned version of the gateway this router runs."""
        return GATEWAY_VERSIONS[self.implementation]

    @property
    def metrics_url(self) -> str:
        return f"http://{self.metrics_host}:{self.metrics_port}/metrics"


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


# A Kubernetes object name (a DNS-1123 label): namespaces, secrets, service accounts.
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# A Kubernetes quantity: 4, 500m, 8Gi, 1.5...
QUANTITY = r"^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti)?$"
# The Python client Harbor 0.21.0's ack environment imports and does not install itself.
KUBERNETES_CLIENT = "kubernetes==35.0.0"


class QuotaConfig(Model):
    """`harbor.environment.kubernetes.quota`: the namespace's ResourceQuota, the cap on what the
    trials' pods may request at once (Harbor's pods request each task's cpus/memory_mb)."""

    cpu: str = Field(pattern=QUANTITY)
    memory: str = Field(pattern=QUANTITY)
    pods: int | None = Field(default=None, ge=1)


class KubernetesConfig(Model):
    """`harbor.environment.kubernetes`: the trials as pods on the user's cluster (Harbor's `ack`
    environment). The kubeconfig is the secret `benchstack:kubeconfig`, never in this file."""

    # The trials' namespace: the stack creates it (and deletes it, with its pods, on destroy).
    namespace: str = Field(max_length=63, pattern=DNS_LABEL)
    # The registry the pods pull the task images from (`host[:port]`): every task's
    # docker_image must be in it (checked before launch).
    registry: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9.-]*(:[0-9]{1,5})?(/[a-z0-9._/-]+)?$")
    # With the secret `benchstack:kubernetesRegistryPassword`: the pods' image pull secret.
    registry_username: str | None = None
    quota: QuotaConfig
    # Harbor runs the trial pods privileged (as 0.21.0 does by default); false drops it through
    # pod_overrides, for clusters whose policy refuses privileged pods.
    privileged: bool = True
    # The image the pre-launch probe pod runs; default: the first task image.
    probe_image: str | None = None
    # A URL the pods must reach (the model endpoint for agents installed in the task, a proxy);
    # the probe pod fetches it before launch.
    egress_url: str | None = None
    # How long the probe pod may take to be admitted, scheduled, pulled and run.
    preflight_timeout_s: int = Field(default=300, gt=0)
    client: str = Field(default=KUBERNETES_CLIENT, pattern=r"^kubernetes==[0-9][0-9.]*$")


class EnvironmentConfig(Model):
    """`harbor.environment`: where the trials run. `docker` (the default): containers on the
    Harbor host's Docker engine. `kubernetes`: pods on a cluster (the section of that name)."""

    kind: Literal["docker", "kubernetes"] = "docker"
    kubernetes: KubernetesConfig | None = None

    @model_validator(mode="after")
    def _section_matches_kind(self) -> EnvironmentConfig:
        if self.kind == "kubernetes" and self.kubernetes is None:
            raise ValueError("kind is kubernetes: add the `kubernetes` section (namespace, "
                             "registry, quota)")
        if self.kind == "docker" and self.kubernetes is not None:
            raise ValueError("a `kubernetes` section is given but kind is docker: set "
                             "`kind: kubernetes` or drop the section")
        return self


class HarborConfig(Model):
    # Picks a profile (contracts/harbor_profiles.py): its rendering of the job config, its
    # flags, preflight, resume and result reading. 0.21.0 reproduces a leaderboard number as it
    # was run; 0.26.0 is Harbor as it is run today (another score convention: see README).
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
    environment: EnvironmentConfig = EnvironmentConfig()
    # The longest the stack's job may run one trial for, in hours: a task whose timeouts (agent,
    # verifier, environment build, agent setup, each times its multiplier) add up to more, or
    # that has no agent timeout, is refused before launch, naming it. Unset: not checked.
    max_job_hours: float | None = Field(default=None, gt=0)

    @field_validator("version")
    @classmethod
    def _known_version(cls, value: str) -> str:
        if value not in PROFILES:
            raise ValueError(f"Harbor {value!r} has no profile here; the known versions are "
                             f"{', '.join(KNOWN_VERSIONS)}")
        return value

    @property
    def profile(self) -> HarborProfile:
        """What this Harbor version renders, runs and reports differently."""
        return PROFILES[self.version]

    @property
    def kubernetes(self) -> KubernetesConfig | None:
        """The cluster section when the trials run as pods; None on the Docker host."""
        return self.environment.kubernetes if self.environment.kind == "kubernetes" else None


class DatasetConfig(Model):
    # Either a git repository pinned to a commit, or a path on the Harbor host.
    repo: str | None = None
    commit: str | None = Field(default=None, pattern=r"^[0-9a-f]{40}$")
    path: str | None = Field(default=None, min_length=1)
    tasks_subdir: str = Field(default="tasks", min_length=1)
    expected_tasks: int = Field(gt=0)
    # The same task dirs on the machine running Pulumi: the image manifest is read from here.
    manifest_path: str = Field(min_length=1)
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)

    @field_validator("tasks_subdir")
    @classmethod
    def _inside_repo(cls, value: str) -> str:
        if value.startswith("/") or ".." in Path(value).parts:
            raise ValueError(f"must stay inside the dataset repository, got {value!r}")
        return value


REGISTRY_HOST = r"[A-Za-z0-9][A-Za-z0-9.-]*(:\d+)?(/\S*)?"


class ImagesConfig(Model):
    # A registry host[:port] that mirrors docker.io (no scheme: skopeo takes docker://HOST/...).
    mirror: str | None = None
    username: str | None = None
    concurrency: int = Field(default=4, ge=1, le=32)
    retries: int = Field(default=5, ge=0, le=20)
    # The wait after an image's first failed attempt; it doubles per attempt, at most 60 s.
    retry_backoff_s: int = Field(default=5, ge=0, le=60)
    pin_digests: bool = False
    # Tasks with allow_internet = false need Harbor's egress sidecar image (built with buildx);
    # true: fail before launch, naming those tasks, when it cannot be had.
    require_sidecar: bool = True
    # The tag Harbor looks up for its sidecar on a linux/amd64 engine
    # (`harbor-prebuilt:harbor-docker-egress-control-sidecar--<blake2b of its build context>`);
    # default: the stack's Harbor version's (contracts/harbor_profiles.py), 0.21.0's on its own.
    sidecar_image: str = PROFILES["0.21.0"].sidecar_image
    # Bound on one image's copy.
    pull_timeout_s: int = Field(default=1800, ge=1)
    # The pull's private work dir on the Harbor host (skopeo's temp files, the authfile): a
    # disk, not a small tmpfs.
    scratch_dir: str = "/var/tmp"
    # Change it (a date will do) to re-check the images on the next `up` although nothing else
    # changed, e.g. after a `docker system prune`; an all-present check asks no registry.
    rerun_token: str = ""

    @field_validator("mirror")
    @classmethod
    def _registry_host(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(REGISTRY_HOST, value):
            raise ValueError(f"must be a registry HOST[:PORT] without a scheme, got {value!r}")
        return value

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
    hosts: list[HostConfig] = Field(min_length=1)
    # Required wherever a host runs containers: the GPU workers, and the Harbor host unless the
    # trials run on Kubernetes.
    docker: DockerConfig | None = None
    harbor: HarborConfig
    dataset: DatasetConfig
    images: ImagesConfig = ImagesConfig()
    tools: ToolBundleConfig = ToolBundleConfig()
    proxy: ProxyConfig | None = None
    model: ModelConfig | None = None
    serving: ServingConfig | None = None
    router: RouterConfig | None = None
    ssh: SshConfig = SshConfig()

    @field_validator("workspace")
    @classmethod
    def _absolute_workspace(cls, value: str) -> str:
        return _absolute(value)

    @model_validator(mode="before")
    @classmethod
    def _sidecar_of_the_version(cls, data: Any) -> Any:
        """images.sidecar_image, unless given: the tag the stack's Harbor version looks up."""
        if not isinstance(data, dict):
            return data
        harbor, images = data.get("harbor"), data.get("images", {})
        version = harbor.get("version") if isinstance(harbor, dict) else None
        if (isinstance(version, str) and version in PROFILES and isinstance(images, dict)
                and "sidecar_image" not in images):
            data = {**data, "images": {**images,
                                       "sidecar_image": PROFILES[version].sidecar_image}}
        return data

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
        return sum(pool.subnets for pool in self.docker.address_pools) if self.docker else 0

    @property
    def docker_hosts(self) -> list[HostConfig]:
        """The hosts whose Docker engine runs the stack's containers (their daemon.json is the
        stack's): the GPU workers, and the Harbor host when the trials are containers there."""
        trials_on_host = self.harbor.kubernetes is None
        return [h for h in self.hosts
                if "gpu_worker" in h.roles or ("harbor" in h.roles and trials_on_host)]
