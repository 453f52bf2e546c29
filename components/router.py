"""Router: the gateway in front of every worker, ready when a real completion answers.

The seed's "Launch the SGLang router on Worker B", with the gateway `router.implementation`
names: `smg` (the Shepherd Model Gateway, `python3 -m smg launch`, the default) or the seed's
own `sglang-router` (`python3 -m sglang_router.launch_router`), each pinned to one version
that the image must carry (GATEWAY_VERSIONS in components/config_models/serving.py, read in the
container at readiness). Both take the seed's flags (worker URLs, dp-aware, cache_aware, balance
thresholds); both serve Prometheus metrics, bound here to `router.metrics_host:metrics_port`
(127.0.0.1:29000) instead of their default of every interface; smg's worker overload
protection is as `router.worker_overload_protection` decides. On 127.0.0.1 of the Harbor host
by default, nofile 65536, stopped with a 180 s grace so in-flight agent requests can finish
(the seed's stop order: the router first, then the workers; Pulumi gets it from the
dependency on the workers' URLs).

Children: reach (every worker's /health from this host, before the router starts) -> image ->
container -> ready (the gateway's version in the container, /health, /v1/models lists the
served model, every worker registered, and "Reply with exactly READY." answered through it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

import pulumi
import pulumi_docker as docker

from components.config import ModelConfig, RouterConfig, ServingConfig
from components.seam.host import Host
from components.seam.step import host_step
from components.serving import (
    docker_provider,
    image_reference,
    probe_inputs,
    readiness_check,
    serving_container,
)
from hostside import serving_probe

ROUTER_STOP_TIMEOUT_S = 180


@dataclass(frozen=True, kw_only=True)
class RouterArgs:
    host: Host
    router: RouterConfig
    # The workers' image, user and DP size, and the served model (its checkpoint is mounted
    # read-only, as the seed did).
    serving: ServingConfig
    model: ModelConfig
    # Known from the config: a worker's replacement must not make them unknown (the engine would
    # then replace the router too). The router depends on the workers for their readiness.
    worker_urls: Sequence[str]
    container_name: str
    # Benchstack's files on the Harbor host: the probe venv is cached there (required by the
    # component).
    workspace: str | None = None
    # The checkpoint on the host, when model.path is relative to the project (local hosts).
    model_path: str | None = None

    @property
    def image(self) -> str:
        return self.router.image or self.serving.image

    @property
    def image_archive(self) -> str | None:
        # A router image of its own is pulled; the workers' archive holds theirs.
        return None if self.router.image else self.serving.image_archive


# How each gateway is started in the container (`python3 -m`: no console script on PATH needed).
GATEWAY_COMMANDS = {
    "smg": ["python3", "-m", "smg", "launch"],
    "sglang-router": ["python3", "-m", "sglang_router.launch_router"],
}
# The Python distribution that carries each gateway (its version is read in the container).
GATEWAY_PACKAGES = {"smg": "smg", "sglang-router": "sglang-router"}


def router_argv(router: RouterConfig, worker_urls: Sequence[str]) -> list[str]:
    """The container command: the seed's launch_router flags, for either gateway (smg reads
    them as sglang-router did), the metrics listener where the stack binds it, and smg's
    overload protection as the config decides it."""
    argv = [
        *GATEWAY_COMMANDS[router.implementation],
        "--host", router.bind_host,
        "--port", str(router.port),
        "--worker-urls", *worker_urls,
    ]
    if router.dp_aware:
        argv.append("--dp-aware")
    argv += [
        "--policy", router.policy,
        "--balance-abs-threshold", str(router.balance_abs_threshold),
        "--balance-rel-threshold", format(router.balance_rel_threshold, "g"),
        "--prometheus-host", router.metrics_host,
        "--prometheus-port", str(router.metrics_port),
    ]
    if router.implementation == "smg" and not router.worker_overload_protection:
        argv.append("--disable-worker-overload-protection")
    return argv


def gateway_pin(router: RouterConfig) -> dict[str, str]:
    """What the readiness probe holds the running gateway to: its package and pinned version."""
    return {"package": GATEWAY_PACKAGES[router.implementation], "version": router.version}


class Router(pulumi.ComponentResource):
    """The SGLang router; `router_url` resolves only once a chat completion went through it."""

    router_url: pulumi.Output[str]
    router_args: pulumi.Output[list[str]]
    worker_urls: pulumi.Output[list[str]]
    container_id: pulumi.Output[str]

    def __init__(
        self, name: str, args: RouterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("benchstack:components:Router", name, None, opts)
        if not args.worker_urls:
            raise ValueError("RouterArgs.worker_urls: at least one worker URL is needed")
        if not args.workspace:
            raise ValueError("RouterArgs.workspace: the Harbor host's workspace is needed (the "
                             "probe venv is cached there)")
        host, workspace = args.host, args.workspace
        worker_urls = pulumi.Output.from_input([str(u).rstrip("/") for u in args.worker_urls])
        provider = docker_provider(name, host, self)

        # The private network from this host to every worker: the path the router will use.
        reach_spec = worker_urls.apply(
            lambda urls: {"mode": "reach", "worker_urls": urls,
                          "timeout_s": args.router.worker_timeout_s, "interval_s": 2}
        )
        reach = host_step(
            f"{name}-reach",
            host=host,
            create=serving_probe.create,
            inputs=probe_inputs(reach_spec, workspace=workspace, serving=args.serving,
                                timeout_s=args.router.worker_timeout_s * len(args.worker_urls)),
            # Another set of workers is another network path to prove.
            triggers=[reach_spec.apply(lambda spec: json.dumps(spec, sort_keys=True))],
            opts=pulumi.ResourceOptions(parent=self),
        )

        image_id = image_reference(
            name,
            host=host,
            image=args.image,
            image_archive=args.image_archive,
            provider=provider,
            parent=self,
        )

        volumes = None
        model_path = args.model_path or args.model.path
        if model_path:
            volumes = [
                docker.ContainerVolumeArgs(
                    host_path=model_path,
                    container_path=f"/models/{PurePosixPath(model_path).name}",
                    read_only=True,
                )
            ]
        # Host network: it listens on the host's 127.0.0.1 (Harbor's endpoint) and reaches the
        # workers on their private IPs. The seed's `docker stop --time 180`: in-flight agent
        # requests get to finish.
        container = serving_container(
            name,
            host=host,
            container_name=args.container_name,
            image_id=image_id,
            command=worker_urls.apply(lambda urls: router_argv(args.router, urls)),
            stop_timeout_s=ROUTER_STOP_TIMEOUT_S,
            provider=provider,
            parent=self,
            depends_on=[reach.command],
            ulimits=[docker.ContainerUlimitArgs(name="nofile", soft=args.router.nofile,
                                                hard=args.router.nofile)],
            user=args.serving.user,
            envs=["HOME=/tmp"],
            volumes=volumes,
        )

        url = f"http://{args.router.bind_host}:{args.router.port}"
        ready_spec = worker_urls.apply(
            lambda urls: {
                "mode": "router",
                "url": url,
                "model": args.model.name,
                "worker_urls": urls,
                "timeout_s": args.router.health_timeout_s,
                "worker_timeout_s": args.router.worker_timeout_s,
                "interval_s": 2,
                "dp_size": args.serving.dp_size if args.router.dp_aware else None,
                "container": args.container_name,
                "gateway": gateway_pin(args.router),
            }
        )
        ready = readiness_check(
            name,
            host=host,
            spec=ready_spec,
            container=container,
            workspace=workspace,
            serving=args.serving,
            timeout_s=(args.router.health_timeout_s
                       + args.router.worker_timeout_s * len(args.worker_urls)),
            parent=self,
        )

        # Resolves once a completion went through the router; users that render from it (the
        # job's config) take `url` instead, known from the config, for the reason above.
        self.url = url
        self.router_url = ready.outputs.apply(lambda _out: url)
        self.worker_urls = pulumi.Output.all(worker_urls, ready.outputs).apply(
            lambda values: values[0]
        )
        self.router_args = worker_urls.apply(lambda urls: router_argv(args.router, urls))
        self.container_id = container.id
        self.register_outputs({"router_url": self.router_url, "worker_urls": self.worker_urls,
                               "router_args": self.router_args,
                               "container_id": self.container_id})
