"""The GPU plane of one worker host, checked before its SGLang container starts: the GPUs against
the layout (hostside/gpu_check.py), then the container runtime (hostside/gpu_runtime.py: docker
info, and a smoke container of the serving image that must list the same GPUs).

Both are host steps: they run at `up`, never at `preview` (a command resource runs only when
created or updated), and change nothing on the host. They run again whenever the worker
container will be (re)created: their triggers are the image's id and the container's run token
(a stopped worker gets a new one, components/serving.py), so a worker restarted by the next `up`
is checked again first, and a GPU taken by another process since stops that `up` before the
container is touched.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi

from components.config import GpuSpec, ServingConfig
from components.seam.host import Host
from components.seam.step import host_step
from hostside import gpu_check, gpu_runtime

# The host's GPUs as Docker's `--gpus` gives them where the workers get none (a CPU stand-in
# rehearsing a GPU host): gpu_check still reads what the host has.
ALL_GPUS = "all"


@dataclass(frozen=True, kw_only=True)
class GpuPlaneArgs:
    host: Host
    serving: ServingConfig
    # hosts[].gpus, and its key in the stack file (for the messages); None: the layout's count.
    spec: GpuSpec | None
    spec_key: str | None
    image_id: pulumi.Input[str]
    # The worker container's name, and its run token (the checks run again with each new one).
    container_name: str
    run_token: pulumi.Input[str]


@dataclass(frozen=True)
class GpuPlane:
    """The steps the container waits for, and what they read (None: no check declared)."""

    steps: list[pulumi.Resource]
    facts: pulumi.Output[dict | None]


def wanted(args: GpuPlaneArgs) -> bool:
    """A worker that gets GPUs, or a host that declares them, has its GPUs checked."""
    return args.serving.gpus is not None or args.spec is not None


def check_inputs(args: GpuPlaneArgs) -> dict[str, pulumi.Input]:
    serving = args.serving
    return {
        "host": args.host.name,
        "gpus": serving.gpus or ALL_GPUS,
        "needed": serving.tp_size * serving.dp_size,
        "needed_from": (f"serving.tp_size x dp_size = {serving.tp_size} x "
                        f"{serving.dp_size}"),
        "model": args.spec.model if args.spec else None,
        "memory_gb": args.spec.memory_gb if args.spec else None,
        "memory_key": f"{args.spec_key}.memory_gb" if args.spec_key else None,
        "mem_fraction_static": serving.mem_fraction_static,
        "image": args.image_id,
        "container": args.container_name,
    }


def gpu_plane(name: str, args: GpuPlaneArgs, *, parent: pulumi.Resource,
              depends_on: Sequence[pulumi.Resource] = ()) -> GpuPlane:
    """`{name}-gpu-check`, and `{name}-gpu-runtime` where the worker gets GPUs."""
    if not wanted(args):
        return GpuPlane(steps=[], facts=pulumi.Output.from_input(None))
    triggers = [args.image_id, args.run_token]
    check = host_step(
        f"{name}-gpu-check", host=args.host, create=gpu_check.create,
        inputs=check_inputs(args), triggers=triggers,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(depends_on)),
    )
    if args.serving.gpus is None:
        return GpuPlane(steps=[check.command], facts=check.outputs.apply(dict))
    uuids = check.outputs.apply(lambda out: [g["uuid"] for g in out.get("gpus") or []])
    runtime = host_step(
        f"{name}-gpu-runtime", host=args.host, create=gpu_runtime.create,
        inputs={"host": args.host.name, "image": args.image_id, "gpus": args.serving.gpus,
                "user": args.serving.user, "uuids": uuids,
                "container": f"benchstack-gpu-smoke-{args.host.name}"},
        triggers=triggers,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[check.command]),
    )
    facts = pulumi.Output.all(check.outputs, runtime.outputs).apply(
        lambda v: {**v[0], "runtime": v[1]})
    return GpuPlane(steps=[check.command, runtime.command], facts=facts)
