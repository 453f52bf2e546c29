"""DockerDaemonConfig: the address pools every concurrent trial's network is carved from.

Seed pitfall: "all predefined address pools have been fully subnetted" at 25 concurrent trials,
because Docker's default pools give about 31 networks and interrupted trials leave theirs
behind. The script merges `default-address-pools` into daemon.json (backup first, validation,
no overlap with host routes or existing networks, restart only when no container would be
hurt) and proves the pool by allocating networks; destroy restores the backup. The merge, the
checks and the record are daemon_json.py, which both scripts run from the host code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi

from components.config import DockerConfig
from components.host import Host, host_script


@dataclass(frozen=True, kw_only=True)
class DockerDaemonConfigArgs:
    host: Host
    docker: DockerConfig
    # Empty: the docker CLI's own default endpoint on the host.
    docker_host: str = ""


class DockerDaemonConfig(pulumi.ComponentResource):
    daemon_json: pulumi.Output[str]
    backup: pulumi.Output[str]
    first_subnet: pulumi.Output[str]
    last_subnet: pulumi.Output[str]

    def __init__(
        self, name: str, args: DockerDaemonConfigArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("benchstack:components:DockerDaemonConfig", name, None, opts)
        docker = args.docker
        pools = [pool.model_dump() for pool in docker.address_pools]
        env = {
            "DAEMON_JSON": docker.daemon_json,
            "ADDRESS_POOLS_JSON": json.dumps(pools, sort_keys=True),
            "RESTART_CMD": docker.restart_command,
            "ALLOW_RESTART_WITH_RUNNING": str(int(docker.allow_restart_with_running_containers)),
            "PROOF_NETWORKS": str(docker.proof_networks),
        }
        if args.docker_host:
            env["DOCKER_HOST"] = args.docker_host
        run = host_script(
            f"{name}-apply",
            host=args.host,
            script="daemon_config.sh",
            env=env,
            delete_script="daemon_config.delete.sh",
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.daemon_json = pulumi.Output.from_input(docker.daemon_json)
        self.backup = run.outputs.apply(lambda o: str(o.get("backup", "")))
        self.first_subnet = run.outputs.apply(lambda o: str(o.get("first_subnet", "")))
        self.last_subnet = run.outputs.apply(lambda o: str(o.get("last_subnet", "")))
        self.ready = run.command
        self.register_outputs(
            {
                "daemon_json": self.daemon_json,
                "backup": self.backup,
                "first_subnet": self.first_subnet,
                "last_subnet": self.last_subnet,
            }
        )
