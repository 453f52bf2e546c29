"""SGLangWorker: one SGLang server container per GPU host, ready only when it serves the config.

The seed's "Prepare the SGLang image and model" and "Launch the two SGLang workers": the image
(pulled, or loaded from an archive), the checkpoint (optionally staged from S3, then checked
complete), the container with the seed's `docker run` options and `sglang serve` flags, and a
readiness probe on the host that waits for /health and compares /get_server_info with the
config, naming every mismatch.

Before the container, the host's GPU plane (components/gpu_plane.py): its GPUs against the
layout, then its container runtime. The readiness wait follows the worker's startup phase by
phase from its log (hostside/readiness.py), bounded by `startup_timeout_s`.

Children, in order: [stage] -> model check -> image -> gpu check -> gpu runtime -> container ->
ready. Destroy runs them backwards; the container is stopped with the seed's 30 s grace.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import PurePosixPath

import pulumi
import pulumi_docker as docker

from components.config import BYTES_PER_PARAM, GpuSpec, ModelConfig, ServingConfig
from components.gpu_plane import GpuPlaneArgs, gpu_plane
from components.seam.host import Host
from components.seam.step import host_step
from components.serving import (
    docker_provider,
    image_reference,
    readiness_check,
    run_token,
    serving_container,
)
from contracts.hostlayout import venvs_dir
from hostside import model_check, model_stage

# The seed's `docker run` options, shared with the router where they coincide.
WORKER_STOP_TIMEOUT_S = 30
STACK_BYTES = 67108864
CONTAINER_ENV = ("HOME=/tmp", "HF_HOME=/tmp/huggingface")
# The seed appended the server log to a file; here it is the container's log, rotated so a
# multi-day run cannot fill the disk (`docker logs <name>` reads it).


@dataclass(frozen=True, kw_only=True)
class SGLangWorkerArgs:
    host: Host
    serving: ServingConfig
    model: ModelConfig
    # The address the router reaches this worker on (the host's private IP), and its port.
    bind_host: str
    port: int
    container_name: str
    # The checkpoint on the host, when model.path is relative to the project (local hosts).
    model_path: str | None = None
    # Benchstack's files on the host (its HostCode's workspace): the probe and staging venvs are
    # cached there. Required by the component; optional for the argv helpers alone.
    workspace: str | None = None
    # Staging the checkpoint from model.s3_uri: the credentials are Pulumi secrets.
    s3_access_key_id: pulumi.Input[str] | None = None
    s3_secret_access_key: pulumi.Input[str] | None = None
    # The host's GPUs as the stack declares them (hosts[].gpus) and their key, for gpu_check.
    gpu_spec: GpuSpec | None = None
    gpu_spec_key: str | None = None

    @property
    def host_model_path(self) -> str:
        return self.model_path or self.model.path

    @property
    def container_model_path(self) -> str:
        return f"/models/{PurePosixPath(self.host_model_path).name}"

    @property
    def url(self) -> str:
        """Where the router and the probes reach the worker (known from the config)."""
        return f"http://{self.bind_host}:{self.port}"


def _num(value: float) -> str:
    # 0.90 and 0.9 are the same flag value; `g` keeps ints as "4", not "4.0".
    return format(value, "g")


def serve_argv(args: SGLangWorkerArgs) -> list[str]:
    """The container command: the seed's `sglang serve` flags from the layout."""
    argv = [
        "sglang", "serve",
        "--model-path", args.container_model_path,
        "--served-model-name", args.model.name,
        "--host", args.bind_host,
        "--port", str(args.port),
        "--tp-size", str(args.serving.tp_size),
        "--dp-size", str(args.serving.dp_size),
        "--context-length", str(args.serving.context_length),
        "--max-running-requests", str(args.serving.max_running_requests),
    ]
    if args.serving.max_mamba_cache_size is not None:
        argv += ["--max-mamba-cache-size", str(args.serving.max_mamba_cache_size)]
    argv += ["--mem-fraction-static", _num(args.serving.mem_fraction_static)]
    if args.serving.reasoning_parser:
        argv += ["--reasoning-parser", args.serving.reasoning_parser]
    if args.serving.tool_call_parser:
        argv += ["--tool-call-parser", args.serving.tool_call_parser]
    # The seed leaves it out: SGLang sizes the KV pool from free GPU memory.
    if args.serving.max_total_tokens is not None:
        argv += ["--max-total-tokens", str(args.serving.max_total_tokens)]
    if args.serving.enable_metrics:
        argv.append("--enable-metrics")
    argv += list(args.serving.extra_server_args)
    return argv


def expected_server_info(args: SGLangWorkerArgs) -> dict:
    """What /get_server_info must report: exactly what the flags asked for."""
    expect: dict = {
        "served_model_name": args.model.name,
        "tp_size": args.serving.tp_size,
        "dp_size": args.serving.dp_size,
        "context_length": args.serving.context_length,
        "max_running_requests": args.serving.max_running_requests,
        "mem_fraction_static": args.serving.mem_fraction_static,
        "enable_metrics": args.serving.enable_metrics,
    }
    optional = {
        "max_mamba_cache_size": args.serving.max_mamba_cache_size,
        "reasoning_parser": args.serving.reasoning_parser,
        "tool_call_parser": args.serving.tool_call_parser,
        "max_total_tokens": args.serving.max_total_tokens,
    }
    expect.update({k: v for k, v in optional.items() if v is not None})
    return expect


# The startup's bound when serving.health_timeout_s is unset, from what a worker does before it
# serves (SGLang's phases, hostside/readiness.py): start the container and its ranks, init torch
# and NCCL, allocate the KV cache, warm the server up (a few minutes whatever the model); read the
# checkpoint (every DP replica reads it whole, at once, from the host's disk: at 0.2 GB/s, a cold
# network disk's rate, NVMe reads ten times faster); capture the CUDA graphs (minutes for
# max_running_requests-sized batches).
STARTUP_FIXED_S = 300
CHECKPOINT_READ_GB_PER_S = 0.2
CUDA_GRAPH_CAPTURE_S = 300


def startup_timeout_s(serving: ServingConfig, model: ModelConfig) -> int:
    """How long the readiness wait gives the worker: serving.health_timeout_s, or derived from
    the model's size and the layout, in whole minutes."""
    if serving.health_timeout_s is not None:
        return serving.health_timeout_s
    read_gb = model.params_billion * BYTES_PER_PARAM[model.dtype] * serving.dp_size
    seconds = STARTUP_FIXED_S + read_gb / CHECKPOINT_READ_GB_PER_S + CUDA_GRAPH_CAPTURE_S
    return int(math.ceil(seconds / 60) * 60)


def checkpoint(name: str, args: SGLangWorkerArgs, parent: pulumi.Resource) -> pulumi.Resource:
    """The checkpoint on the host: staged from S3 when model.s3_uri says so, then proven
    complete (hostside/model_check.py); returns the check."""
    workspace = args.workspace or ""
    model_deps: list[pulumi.Resource] = []
    if args.model.s3_uri:
        credentials = {"aws_access_key_id": args.s3_access_key_id,
                       "aws_secret_access_key": args.s3_secret_access_key}
        stage = host_step(
            f"{name}-model-stage",
            host=args.host,
            create=model_stage.create,
            inputs={
                "s3_uri": args.model.s3_uri,
                "model_path": args.host_model_path,
                "region": args.model.s3_region,
                "endpoint_url": args.model.s3_endpoint_url,
                "python": args.model.stage_python,
                "venvs_dir": venvs_dir(workspace),
                "pip_args": list(args.serving.pip_args),
                **credentials,
            },
            triggers=[args.model.s3_uri, args.host_model_path],
            # On the step's standard input, never in its command; unset: boto3's own chain.
            secret_inputs=tuple(k for k, v in credentials.items() if v is not None),
            opts=pulumi.ResourceOptions(parent=parent),
        )
        model_deps.append(stage.command)
    check = host_step(
        f"{name}-model-check",
        host=args.host,
        create=model_check.create,
        inputs={"model_path": args.host_model_path, "user": args.serving.user},
        triggers=[args.host_model_path, args.serving.user],
        opts=pulumi.ResourceOptions(parent=parent, depends_on=model_deps),
    )
    return check.command


def worker_container(
    name: str, args: SGLangWorkerArgs, *, image_id: pulumi.Input[str], token: pulumi.Input[str],
    provider: docker.Provider, depends_on: list[pulumi.Resource], parent: pulumi.Resource,
) -> docker.Container:
    """The SGLang server container, with the seed's `docker run` options."""
    # Host network: the router reaches the worker on the host's private IP; host IPC: NCCL
    # between the TP ranks needs the host's shared memory. Both read back from the engine
    # as "host" (tests/serving/test_container_readback_real.py), so neither is in
    # ignore_changes: the perpetual diffs pulumi-docker is known for come from values the
    # engine rewrites ("bridge"/"default", "container:<name>" -> id, a tag -> an image id),
    # and none of those is used here. The seed's `docker stop --time 30`.
    return serving_container(
        name,
        host=args.host,
        container_name=args.container_name,
        image_id=image_id,
        command=serve_argv(args),
        stop_timeout_s=WORKER_STOP_TIMEOUT_S,
        provider=provider,
        parent=parent,
        depends_on=depends_on,
        token=token,
        gpus=args.serving.gpus or None,
        ipc_mode="host",
        ulimits=[
            docker.ContainerUlimitArgs(
                name="memlock", soft=args.serving.memlock, hard=args.serving.memlock
            ),
            docker.ContainerUlimitArgs(name="stack", soft=STACK_BYTES, hard=STACK_BYTES),
        ],
        user=args.serving.user,
        envs=list(CONTAINER_ENV),
        volumes=[
            docker.ContainerVolumeArgs(
                host_path=args.host_model_path,
                container_path=args.container_model_path,
                read_only=True,
            )
        ],
    )


def readiness_spec(args: SGLangWorkerArgs) -> dict:
    """What the worker's readiness probe waits for: /health within the startup's bound, its
    phases followed in the container's log, then /get_server_info as configured."""
    return {
        "mode": "worker",
        "url": args.url,
        "expect": expected_server_info(args),
        "timeout_s": startup_timeout_s(args.serving, args.model),
        "interval_s": 5,
        "container": args.container_name,
    }


class SGLangWorker(pulumi.ComponentResource):
    """An SGLang server on one GPU host; `url` resolves only once it serves the config."""

    url: pulumi.Output[str]
    server_info: pulumi.Output[dict]
    container_id: pulumi.Output[str]
    image_id: pulumi.Output[str]
    # What gpu_check read (GPU UUIDs, models, driver, CUDA) and the startup's phases, for the
    # provenance.
    gpus: pulumi.Output[dict | None]
    startup: pulumi.Output[list]

    def __init__(
        self, name: str, args: SGLangWorkerArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("benchstack:components:SGLangWorker", name, None, opts)
        if not args.workspace:
            raise ValueError("SGLangWorkerArgs.workspace: the host's workspace is needed (the "
                             "probe and staging venvs are cached there)")
        self.args = args
        provider = docker_provider(name, args.host, self)
        model_check_step = checkpoint(name, args, self)
        image_id = image_reference(name, host=args.host, image=args.serving.image,
                                   image_archive=args.serving.image_archive, provider=provider,
                                   parent=self)
        token = run_token(args.host, args.container_name)
        plane = gpu_plane(name, GpuPlaneArgs(
            host=args.host, serving=args.serving, spec=args.gpu_spec, spec_key=args.gpu_spec_key,
            image_id=image_id, container_name=args.container_name, run_token=token,
        ), parent=self)
        container = worker_container(name, args, image_id=image_id, token=token,
                                     provider=provider, parent=self,
                                     depends_on=[model_check_step, *plane.steps])
        ready = readiness_check(name, host=args.host, spec=readiness_spec(args),
                                container=container, workspace=args.workspace,
                                serving=args.serving,
                                timeout_s=startup_timeout_s(args.serving, args.model),
                                parent=self)

        # The URL resolves through the probe: whatever uses it (the router) waits for it.
        url = args.url
        self.url = ready.outputs.apply(lambda _out: url)
        self.server_info = ready.outputs.apply(lambda out: dict(out.get("server_info") or {}))
        self.startup = ready.outputs.apply(lambda out: list(out.get("phases") or []))
        self.gpus = plane.facts
        self.container_id = container.id
        self.image_id = pulumi.Output.from_input(image_id)
        self.register_outputs(
            {"url": self.url, "server_info": self.server_info, "container_id": self.container_id,
             "image_id": self.image_id, "gpus": self.gpus, "startup": self.startup}
        )
