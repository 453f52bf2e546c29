"""The serving plane: the model, the SGLang workers and the gateway (`model`, `serving`,
`router`)."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from components.config_models.base import Model, ip_literal


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
        return ip_literal(value)

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
