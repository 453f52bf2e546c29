"""ProxyBridge: exposes the host's loopback HTTP proxy on the Docker bridge gateway.

Seed: tasks fetch from GitHub, Cloudflare and package mirrors at run time; the proxy listens on
127.0.0.1, which task containers cannot reach. A supervised socat on the gateway address (not
0.0.0.0: the proxy must not be opened to the network) forwards to it, and containers reach it
as host.docker.internal. Not a tmux pane: it must survive the SSH session and come back if it
dies.

Coming back: socat itself is restarted by its supervisor (a systemd unit, else a restart loop).
When the supervisor is gone too (a reboot, a kill), nothing on the host brings it back, and a
Command re-runs only when its inputs change. So, as for the Harbor job's launch, a read-only
probe (hostside/proxy_status.py, at every preview and up) returns the token the running bridge
recorded, or a new one when it is down; the token is the step's trigger, and the next `up`
replaces the step: the bridge is started again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from components.config import ProxyConfig
from components.seam.host import Host
from components.seam.probe import probe_host
from components.seam.step import host_step
from hostside import proxy_bridge

# The supervisor's unit and state files are named after it.
BRIDGE_NAME = "benchstack-proxy-bridge"


@dataclass(frozen=True, kw_only=True)
class ProxyBridgeArgs:
    host: Host
    proxy: ProxyConfig
    state_dir: str
    # Prove a request from inside a container: an image with bash (with proxy.check_url).
    # Without either, the listener and the upstream are still checked.
    check_image: pulumi.Input[str] | None = None


def step_inputs(
    proxy: ProxyConfig, state_dir: str, token: pulumi.Input[str],
    check_image: pulumi.Input[str] | None,
) -> dict[str, Any]:
    """The inputs of hostside/proxy_bridge.py create, from the config. The container check needs
    both an image and proxy.check_url; without either, only the listener and the upstream are
    checked."""
    checked = check_image is not None and proxy.check_url is not None
    return {
        "name": BRIDGE_NAME,
        "token": token,
        "upstream": proxy.upstream,
        "bridge_port": proxy.bridge_port,
        "state_dir": state_dir,
        "bind_address": proxy.bind_address,
        "check_image": check_image if checked else None,
        "check_url": proxy.check_url if checked else None,
    }


class ProxyBridge(pulumi.ComponentResource):
    proxy_url: pulumi.Output[str]
    bind_address: pulumi.Output[str]
    pid_file: pulumi.Output[str]
    log_file: pulumi.Output[str]

    def __init__(
        self, name: str, args: ProxyBridgeArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("benchstack:components:ProxyBridge", name, None, opts)
        proxy = args.proxy
        status = probe_host(
            args.host, "proxy_status.sh",
            {"STATE_DIR": args.state_dir, "NAME": BRIDGE_NAME,
             "BRIDGE_PORT": str(proxy.bridge_port)},
        )
        token = status.apply(lambda s: str(s.get("token") or "start"))
        run = host_step(
            f"{name}-socat",
            host=args.host,
            create=proxy_bridge.create,
            delete=proxy_bridge.delete,
            inputs=step_inputs(proxy, args.state_dir, token, args.check_image),
            delete_inputs={"state_dir": args.state_dir, "name": BRIDGE_NAME},
            triggers=[token],
            opts=pulumi.ResourceOptions(parent=self),
        )
        # Known from the config, not read from the step's output: the job's config is rendered
        # from it, and a value that is unknown while the bridge is repaired (a replacement)
        # would make the engine replace the job's steps too, stopping a running job. Whoever
        # uses it depends on this component, so the bridge is up first.
        self.proxy_url = pulumi.Output.from_input(f"http://host.docker.internal:{proxy.bridge_port}")
        self.bind_address = run.outputs.apply(lambda o: str(o.get("bind_address", "")))
        self.pid_file = run.outputs.apply(lambda o: str(o.get("pid_file", "")))
        self.log_file = run.outputs.apply(lambda o: str(o.get("log_file", "")))
        self.register_outputs(
            {
                "proxy_url": self.proxy_url,
                "bind_address": self.bind_address,
                "pid_file": self.pid_file,
                "log_file": self.log_file,
            }
        )
