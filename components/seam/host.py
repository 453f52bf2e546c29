"""A host as every path toward it sees it: its address, its user, and one set of SSH options."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

import pulumi

from components.seam.ssh import known_host_key

LOCAL_ADDRESS = "local"

HostKeyPolicy = Literal["pinned", "accept-new"]


@dataclass(frozen=True)
class ShippedCode:
    """The host's code as the steps find it: its directory there, and the resource that copied
    it (every step depends on it, so it is there before the first create and after the last
    delete)."""

    path: str
    resource: pulumi.Resource


@dataclass(frozen=True, kw_only=True)
class Host:
    """Where steps and containers run, and how every SSH path reaches it.

    `private_key` is a Pulumi secret (None: the ssh agent; unused on the local host, where
    nothing goes over ssh); `key_path` is a key file for the paths that run the local OpenSSH
    client with no way to take key material (pulumi-docker).

    Host keys, the same on every path (remote commands, the status probes, the Docker
    provider): `host_key` ("ssh-ed25519 AAAA...") pins the one key accepted; without it,
    `accept-new` trusts the first key seen, records it in `known_hosts` (as OpenSSH's own
    `StrictHostKeyChecking=accept-new` does) and accepts only that key from then on.
    """

    name: str
    address: str
    user: str | None = None
    port: int = 22
    private_key: pulumi.Input[str] | None = None
    key_path: str | None = None
    host_key: str | None = None
    known_hosts: str = "~/.ssh/known_hosts"
    # A host still booting refuses connections: retry with a pause, not in a tight loop.
    dial_error_limit: int = 20
    per_dial_timeout: int = 15
    # Set by __main__ once HostCode is declared for the host; host_step requires it.
    code: ShippedCode | None = None

    @property
    def is_local(self) -> bool:
        return self.address == LOCAL_ADDRESS

    @property
    def host_key_policy(self) -> HostKeyPolicy:
        return "pinned" if self.host_key else "accept-new"

    @property
    def known_hosts_name(self) -> str:
        """The host as known_hosts names it (`[addr]:port` off port 22)."""
        return self.address if self.port == 22 else f"[{self.address}]:{self.port}"

    def ssh_options(self) -> list[str]:
        """Options for every run of the local OpenSSH client toward this host (no `-p`: the
        Docker provider takes the port from its ssh:// URL)."""
        opts = ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={self.per_dial_timeout}",
                "-o", "ServerAliveInterval=30"]
        if self.host_key:
            # The pinned key and nothing else: no known_hosts file is read or written.
            opts += ["-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=/dev/null",
                     "-o", f"KnownHostsCommand=/bin/echo {self.known_hosts_name} {self.host_key}"]
        else:
            opts += ["-o", "StrictHostKeyChecking=accept-new",
                     "-o", f"UserKnownHostsFile={self.known_hosts}"]
        if self.key_path:
            opts += ["-i", self.key_path, "-o", "IdentitiesOnly=yes"]
        return opts

    def ssh_access(self) -> dict | None:
        """How this machine's ssh reaches the host, for a program of its own (the audit copying
        a job dir): the target, the port and the seam's options; None for the local host."""
        if self.is_local:
            return None
        return {"target": self.ssh_target, "port": self.port, "options": self.ssh_options()}

    @property
    def ssh_target(self) -> str:
        return f"{self.user}@{self.address}" if self.user else self.address

    @functools.cached_property
    def accepted_host_key(self) -> pulumi.Output[str]:
        """The one host key every path accepts (looked up once per program run)."""
        return known_host_key(self)

    @property
    def docker_ssh_opts(self) -> list[str] | None:
        """pulumi-docker's `ssh_opts` toward this host: none for the local engine's socket."""
        return None if self.is_local else self.ssh_options()

    @property
    def docker_host(self) -> str:
        """The Docker endpoint for pulumi-docker's provider (it shells out to the local ssh)."""
        if self.is_local:
            return "unix:///var/run/docker.sock"
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port != 22 else ""
        return f"ssh://{user}{self.address}{port}"
