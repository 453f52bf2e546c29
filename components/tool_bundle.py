"""ToolBundle: a read-only tmux + python + asciinema bundle that every task container mounts.

Seed pitfall: task images without tmux/asciinema made Terminus-2 install them over the network
in every trial; at 25 concurrent trials those downloads timed out and dozens of trials failed
in setup before the agent started. The bundle is built once from the host's tmux and python
(run through the bundle's own dynamic loader, so the image's libc does not matter, with the
host's C.UTF-8 locale for images that have no glibc locale data, such as musl-based or static
ones), proven on the host and inside a canary image that has neither tool, and rebuilt only when
an input changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from components.config import ToolBundleConfig
from components.seam.host import Host
from components.seam.step import host_step
from contracts import hostlayout
from hostside import tool_bundle


@dataclass(frozen=True, kw_only=True)
class ToolBundleArgs:
    host: Host
    tools: ToolBundleConfig
    tools_dir: str
    # The image to prove the bundle in: tools.canary_image, else a task image.
    canary_image: pulumi.Input[str] | None = None


def step_inputs(
    tools: ToolBundleConfig, tools_dir: str, canary_image: pulumi.Input[str] | None
) -> dict[str, Any]:
    """The inputs of hostside/tool_bundle.py create, from the config. What the bundle is made of
    is found on the host (its tmux, its python, glibc's C.utf8 locale; the wheel from pip)."""
    return {
        "tools_dir": tools_dir,
        "asciinema_sha256": tools.asciinema_sha256,
        "bundle_root": hostlayout.TOOLS_MOUNT,
        "canary_image": canary_image,
        "host_tmux": None,
        "host_python": None,
        "host_locale": None,
        "asciinema_wheel": None,
    }


class ToolBundle(pulumi.ComponentResource):
    tools_dir: pulumi.Output[str]
    bundle_root: pulumi.Output[str]
    tmux_version: pulumi.Output[str]
    asciinema_version: pulumi.Output[str]
    input_hash: pulumi.Output[str]

    def __init__(self, name: str, args: ToolBundleArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("benchstack:components:ToolBundle", name, None, opts)
        if not args.tools_dir.startswith("/"):
            raise ValueError(f"ToolBundleArgs.tools_dir must be absolute, got {args.tools_dir!r}")
        run = host_step(
            f"{name}-build",
            host=args.host,
            create=tool_bundle.create,
            delete=tool_bundle.delete,
            inputs=step_inputs(args.tools, args.tools_dir, args.canary_image),
            delete_inputs={"tools_dir": args.tools_dir},
            opts=pulumi.ResourceOptions(parent=self),
        )
        # Known from the config (tied to the step, so users wait for it), not read from its
        # output: that is unknown while the step updates, and the job config rendered from it
        # would then be planned as a replacement of the job.
        self.tools_dir = pulumi.Output.all(run.command.id, args.tools_dir).apply(lambda v: v[1])
        self.bundle_root = pulumi.Output.from_input(hostlayout.TOOLS_MOUNT)
        self.tmux_version = run.outputs.apply(lambda o: str(o.get("tmux_version", "")))
        self.asciinema_version = run.outputs.apply(lambda o: str(o.get("asciinema_version", "")))
        self.input_hash = run.outputs.apply(lambda o: str(o.get("input_hash", "")))
        self.register_outputs(
            {
                "tools_dir": self.tools_dir,
                "bundle_root": self.bundle_root,
                "tmux_version": self.tmux_version,
                "asciinema_version": self.asciinema_version,
                "input_hash": self.input_hash,
            }
        )
