"""Router: the SGLang router in front of every worker, ready when a real completion answers.

The seed's "Launch the SGLang router on Worker B": `sglang_router.launch_router` in the SGLang
image with its flags (worker URLs, dp-aware, cache_aware, balance thresholds), on 127.0.0.1 of
the Harbor host by default, nofile 65536, stopped with a 180 s grace so in-flight agent requests
can finish (the seed's stop order: the router first, then the workers; Pulumi gets it from the
dependency on the workers' URLs).

Children: reach (every worker's /health from this host, before the router starts) -> image ->
container -> ready (/health, /v1/models lists the served model, every worker registered, and
"Reply with exactly READY." answered through the router).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

import pulumi
import pulumi_docker as docker

from components.host import Host, host_script
from components.serving import (
    docker_provider,
    image_reference,
    probe_env,
    readiness_check,
    serving_container,
)

ROUTER_STOP_TIMEOUT_S = 180
NOFILE = 65536
POLICIES = ("cache_aware", "round_robin", "random", "power_of_two")


@dataclass(frozen=True, kw_only=True)
class RouterArgs:
    host: Host
    image: str
    image_archive: str | None = None
    bind_host: str = "127.0.0.1"
    port: int = 30000
    worker_urls: Sequence[pulumi.Input[str]] = field(default_factory=list)
    dp_aware: bool = True
    policy: str = "cache_aware"
    balance_abs_threshold: int = 1
    balance_rel_threshold: float = 1.2
    served_model_name: str
    user: str
    container_name: str
    health_timeout_s: int = 300
    # With dp_aware, the router registers each worker once per DP rank; given, readiness
    # checks that it did (proof that it read the workers' dp_size).
    worker_dp_size: int | None = None
    # How long each worker may take to answer /health from the router's host before the
    # router is started (they are already proven ready by their own probes).
    worker_timeout_s: int = 60
    workspace: str | None = None
    # The seed mounts the checkpoint into the router too (read-only); optional.
    model_path: str | None = None
    probe_python: str | None = None


def _check(args: RouterArgs) -> None:
    def bad(name: str, why: str) -> ValueError:
        return ValueError(f"RouterArgs.{name}: {why}")

    if not args.worker_urls:
        raise bad("worker_urls", "at least one worker URL is needed")
    if args.policy not in POLICIES:
        raise bad("policy", f"{args.policy!r} is not one of {', '.join(POLICIES)}")
    if args.policy == "power_of_two" and len(args.worker_urls) < 2 and not args.dp_aware:
        raise bad("policy", "power_of_two needs at least 2 workers")
    if args.balance_abs_threshold < 0:
        raise bad("balance_abs_threshold", "must be >= 0")
    if args.balance_rel_threshold < 1.0:
        raise bad("balance_rel_threshold", "must be >= 1.0")
    if not 0 < args.port < 65536:
        raise bad("port", f"not a TCP port: {args.port}")
    if args.worker_dp_size is not None and args.worker_dp_size < 1:
        raise bad("worker_dp_size", f"must be >= 1, got {args.worker_dp_size}")
    uid, sep, gid = args.user.partition(":")
    if not (uid.isdigit() and sep and gid.isdigit()):
        raise bad("user", f"must be 'uid:gid' (numbers), got {args.user!r}")
    if args.model_path is not None and not PurePosixPath(args.model_path).is_absolute():
        raise bad("model_path", f"must be an absolute path, got {args.model_path!r}")


def router_argv(args: RouterArgs, worker_urls: Sequence[str]) -> list[str]:
    """The container command: the seed's launch_router flags."""
    argv = [
        "python3", "-m", "sglang_router.launch_router",
        "--host", args.bind_host,
        "--port", str(args.port),
        "--worker-urls", *worker_urls,
    ]
    if args.dp_aware:
        argv.append("--dp-aware")
    argv += [
        "--policy", args.policy,
        "--balance-abs-threshold", str(args.balance_abs_threshold),
        "--balance-rel-threshold", format(args.balance_rel_threshold, "g"),
    ]
    return argv


class Router(pulumi.ComponentResource):
    """The SGLang router; `router_url` resolves only once a chat completion went through it."""

    router_url: pulumi.Output[str]
    worker_urls: pulumi.Output[list[str]]

    def __init__(
        self, name: str, args: RouterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("benchstack:components:Router", name, None, opts)
        _check(args)
        host = args.host
        worker_urls = pulumi.Output.all(*args.worker_urls).apply(
            lambda urls: [str(u).rstrip("/") for u in urls]
        )
        provider = docker_provider(name, host, self)

        # The private network from this host to every worker: the path the router will use.
        reach_spec = worker_urls.apply(
            lambda urls: json.dumps(
                {"mode": "reach", "worker_urls": urls, "timeout_s": args.worker_timeout_s},
                sort_keys=True,
            )
        )
        reach = host_script(
            f"{name}-reach",
            host=host,
            script="serving_probe.sh",
            env=probe_env(reach_spec, args.workspace, args.probe_python,
                          args.worker_timeout_s * len(args.worker_urls)),
            triggers=[reach_spec],
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
        if args.model_path:
            volumes = [
                docker.ContainerVolumeArgs(
                    host_path=args.model_path,
                    container_path=f"/models/{PurePosixPath(args.model_path).name}",
                    read_only=True,
                )
            ]
        # Host network: it listens on the host's 127.0.0.1 (Harbor's endpoint) and reaches the
        # workers on their private IPs. The seed's `docker stop --time 180`: in-flight agent
        # requests get to finish.
        container = serving_container(
            name,
            container_name=args.container_name,
            image_id=image_id,
            command=worker_urls.apply(lambda urls: router_argv(args, urls)),
            stop_timeout_s=ROUTER_STOP_TIMEOUT_S,
            provider=provider,
            parent=self,
            depends_on=[reach.command],
            ulimits=[docker.ContainerUlimitArgs(name="nofile", soft=NOFILE, hard=NOFILE)],
            user=args.user,
            envs=["HOME=/tmp"],
            volumes=volumes,
        )

        url = f"http://{args.bind_host}:{args.port}"
        ready_spec = worker_urls.apply(
            lambda urls: json.dumps(
                {
                    "mode": "router",
                    "url": url,
                    "model": args.served_model_name,
                    "worker_urls": urls,
                    "timeout_s": args.health_timeout_s,
                    "worker_timeout_s": args.worker_timeout_s,
                    "interval_s": 2,
                    "dp_size": args.worker_dp_size if args.dp_aware else None,
                    "container": args.container_name,
                },
                sort_keys=True,
            )
        )
        ready = readiness_check(
            name,
            host=host,
            spec=ready_spec,
            container=container,
            workspace=args.workspace,
            probe_python=args.probe_python,
            timeout_s=args.health_timeout_s + args.worker_timeout_s * len(args.worker_urls),
            parent=self,
        )

        self.router_url = ready.outputs.apply(lambda _out: url)
        self.worker_urls = pulumi.Output.all(worker_urls, ready.outputs).apply(
            lambda values: values[0]
        )
        self.register_outputs({"router_url": self.router_url, "worker_urls": self.worker_urls})
