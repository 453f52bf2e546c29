"""DockerDaemonConfig: the address pools every concurrent trial's network is carved from.

Seed pitfall: "all predefined address pools have been fully subnetted" at 25 concurrent trials,
because Docker's default pools give about 31 networks and interrupted trials leave theirs
behind. The host step (hostside/daemon_config.py) merges `default-address-pools` into
daemon.json (backup first, validation, no overlap with host routes or existing networks, restart
only when no container would be hurt) and proves the pool by allocating networks; destroy
restores the backup.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from components.config import DockerConfig
from components.seam.host import Host
from components.seam.step import host_step
from hostside import daemon_config


@dataclass(frozen=True, kw_only=True)
class DockerDaemonConfigArgs:
    host: Host
    docker: DockerConfig
    # Empty: the docker CLI's own default endpoint on the host.
    docker_host: str = ""


def step_inputs(docker: DockerConfig, docker_host: str = "") -> dict[str, Any]:
    """The inputs of hostside/daemon_config.py (create and delete), from the config."""
    return {
        "daemon_json": docker.daemon_json,
        "address_pools": [pool.model_dump() for pool in docker.address_pools],
        "restart_command": docker.restart_command,
        "allow_restart_with_running_containers": docker.allow_restart_with_running_containers,
        "proof_networks": docker.proof_networks,
        "docker_host": docker_host,
    }


class DockerDaemonConfig(pulumi.ComponentResource):
    daemon_json: pulumi.Output[str]
    backup: pulumi.Output[str]
    first_subnet: pulumi.Output[str]
    last_subnet: pulumi.Output[str]

    def __init__(
        self, name: str, args: DockerDaemonConfigArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("benchstack:components:DockerDaemonConfig", name, None, opts)
        run = host_step(
            f"{name}-apply",
            host=args.host,
            create=daemon_config.create,
            delete=daemon_config.delete,
            inputs=step_inputs(args.docker, args.docker_host),
            # Destroy restores from the record the create left beside daemon.json.
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.daemon_json = pulumi.Output.from_input(args.docker.daemon_json)
        self.backup = run.outputs.apply(lambda o: str(o.get("backup", "")))
        self.first_subnet = run.outputs.apply(lambda o: str(o.get("first_subnet", "")))
        self.last_subnet = run.outputs.apply(lambda o: str(o.get("last_subnet", "")))
        self.register_outputs(
            {
                "daemon_json": self.daemon_json,
                "backup": self.backup,
                "first_subnet": self.first_subnet,
                "last_subnet": self.last_subnet,
            }
        )
