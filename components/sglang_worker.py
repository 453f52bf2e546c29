"""SGLangWorker: one SGLang server container per GPU host, ready only when it serves the config.

The seed's "Prepare the SGLang image and model" and "Launch the two SGLang workers": the image
(pulled, or loaded from an archive), the checkpoint (optionally staged from S3, then checked
complete), the container with the seed's `docker run` options and `sglang serve` flags, and a
readiness probe on the host that waits for /health and compares /get_server_info with the
config, naming every mismatch.

Children, in order: [stage] -> check -> image -> container -> ready. Destroy runs them
backwards; the container is stopped with the seed's 30 s grace.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

import pulumi
import pulumi_docker as docker

from components.config import ModelConfig, ServingConfig
from components.seam.host import Host
from components.seam.step import host_step
from components.serving import (
    docker_provider,
    image_reference,
    readiness_check,
    serving_container,
    venvs_dir,
)
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


class SGLangWorker(pulumi.ComponentResource):
    """An SGLang server on one GPU host; `url` resolves only once it serves the config."""

    url: pulumi.Output[str]
    server_info: pulumi.Output[dict]
    container_id: pulumi.Output[str]
    image_id: pulumi.Output[str]

    def __init__(
        self, name: str, args: SGLangWorkerArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("benchstack:components:SGLangWorker", name, None, opts)
        if not args.workspace:
            raise ValueError("SGLangWorkerArgs.workspace: the host's workspace is needed (the "
                             "probe and staging venvs are cached there)")
        self.args = args
        host = args.host
        workspace = args.workspace

        provider = docker_provider(name, host, self)

        # --- the checkpoint: optional staging from S3, then proof it is complete -----------
        model_deps: list[pulumi.Resource] = []
        if args.model.s3_uri:
            credentials = {"aws_access_key_id": args.s3_access_key_id,
                           "aws_secret_access_key": args.s3_secret_access_key}
            stage = host_step(
                f"{name}-model-stage",
                host=host,
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
                opts=pulumi.ResourceOptions(parent=self),
            )
            model_deps.append(stage.command)
        check = host_step(
            f"{name}-model-check",
            host=host,
            create=model_check.create,
            inputs={"model_path": args.host_model_path, "user": args.serving.user},
            triggers=[args.host_model_path, args.serving.user],
            opts=pulumi.ResourceOptions(parent=self, depends_on=model_deps),
        )

        image_id = image_reference(
            name,
            host=host,
            image=args.serving.image,
            image_archive=args.serving.image_archive,
            provider=provider,
            parent=self,
        )

        argv = serve_argv(args)
        # Host network: the router reaches the worker on the host's private IP; host IPC: NCCL
        # between the TP ranks needs the host's shared memory. Both read back from the engine
        # as "host" (tests/serving/test_container_readback_real.py), so neither is in
        # ignore_changes: the perpetual diffs pulumi-docker is known for come from values the
        # engine rewrites ("bridge"/"default", "container:<name>" -> id, a tag -> an image id),
        # and none of those is used here. The seed's `docker stop --time 30`.
        container = serving_container(
            name,
            host=host,
            container_name=args.container_name,
            image_id=image_id,
            command=argv,
            stop_timeout_s=WORKER_STOP_TIMEOUT_S,
            provider=provider,
            parent=self,
            depends_on=[check.command],
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

        url = args.url
        spec = {
            "mode": "worker",
            "url": url,
            "expect": expected_server_info(args),
            "timeout_s": args.serving.health_timeout_s,
            "interval_s": 5,
            "container": args.container_name,
        }
        ready = readiness_check(
            name,
            host=host,
            spec=spec,
            container=container,
            workspace=workspace,
            serving=args.serving,
            timeout_s=args.serving.health_timeout_s,
            parent=self,
        )

        # The URL resolves through the probe: whatever uses it (the router) waits for it.
        self.url = ready.outputs.apply(lambda _out: url)
        self.server_info = ready.outputs.apply(lambda out: dict(out.get("server_info") or {}))
        self.container_id = container.id
        self.image_id = pulumi.Output.from_input(image_id)
        self.register_outputs(
            {"url": self.url, "server_info": self.server_info, "container_id": self.container_id,
             "image_id": self.image_id}
        )
