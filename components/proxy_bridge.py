"""ProxyBridge: exposes the host's loopback HTTP proxy on the Docker bridge gateway.

Seed: tasks fetch from GitHub, Cloudflare and package mirrors at run time; the proxy listens on
127.0.0.1, which task containers cannot reach. A supervised socat on the gateway address (not
0.0.0.0: the proxy must not be opened to the network) forwards to it, and containers reach it
as host.docker.internal. Not a tmux pane: it must survive the SSH session and come back if it
dies.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components.host import Host, host_script


@dataclass(frozen=True, kw_only=True)
class ProxyBridgeArgs:
    host: Host
    upstream: str
    bridge_port: int
    state_dir: str
    # Empty: the gateway of Docker's `bridge` network, read on the host.
    bind_address: str = ""
    # Prove a request from inside a container: an image with bash, and a URL that answers
    # through the proxy. Without both, the listener and the upstream are still checked.
    check_image: pulumi.Input[str] | None = None
    check_url: str | None = None


class ProxyBridge(pulumi.ComponentResource):
    proxy_url: pulumi.Output[str]
    bind_address: pulumi.Output[str]
    pid_file: pulumi.Output[str]
    log_file: pulumi.Output[str]

    def __init__(
        self, name: str, args: ProxyBridgeArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("benchstack:components:ProxyBridge", name, None, opts)
        if not 0 < args.bridge_port < 65536:
            raise ValueError(f"ProxyBridgeArgs.bridge_port out of range: {args.bridge_port}")
        env: dict[str, pulumi.Input[str]] = {
            "UPSTREAM": args.upstream,
            "BRIDGE_PORT": str(args.bridge_port),
            "STATE_DIR": args.state_dir,
            "BIND_ADDRESS": args.bind_address,
        }
        if args.check_image is not None and args.check_url:
            env["CHECK_IMAGE"] = args.check_image
            env["CHECK_URL"] = args.check_url
        run = host_script(
            f"{name}-socat",
            host=args.host,
            script="proxy_bridge.sh",
            env=env,
            delete_script="proxy_bridge.delete.sh",
            delete_env={"STATE_DIR": args.state_dir},
            opts=pulumi.ResourceOptions(parent=self),
        )
        default_url = f"http://host.docker.internal:{args.bridge_port}"
        self.proxy_url = run.outputs.apply(lambda o: str(o.get("proxy_url") or default_url))
        self.bind_address = run.outputs.apply(lambda o: str(o.get("bind_address", "")))
        self.pid_file = run.outputs.apply(lambda o: str(o.get("pid_file", "")))
        self.log_file = run.outputs.apply(lambda o: str(o.get("log_file", "")))
        self.ready = run.command
        self.register_outputs(
            {
                "proxy_url": self.proxy_url,
                "bind_address": self.bind_address,
                "pid_file": self.pid_file,
                "log_file": self.log_file,
            }
        )
