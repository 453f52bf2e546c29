"""The hosts: who they are, how they are reached (`hosts`, `ssh`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from components.config_models.base import Model, absolute_path, host_address, host_ip

Role = Literal["gpu_worker", "harbor"]

HOST_KEY_PATTERN = r"^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/]+={0,3}$"


class GpuSpec(Model):
    count: int = Field(ge=1)
    model: str
    memory_gb: float = Field(gt=0)


class HostConfig(Model):
    name: str = Field(pattern=r"^[a-z][a-z0-9-]*$")
    # `local` is the machine running Pulumi; anything else is reached over SSH.
    address: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9.:_-]*$")
    user: str | None = None
    port: int = Field(default=22, ge=1, le=65535)
    # The address the other hosts use to reach this one (the seed's WORKER_A_IP); defaults
    # to `address`.
    private_ip: str | None = None
    # The key pulumi-docker's ssh connection uses (it shells out to the local ssh, which takes
    # a key file, not key material); unset: the ssh agent.
    ssh_key_path: str | None = None
    # The host's SSH key, pinned on every SSH path ("ssh-ed25519 AAAA...", as
    # `ssh-keyscan -t ed25519 ADDRESS` prints it after the address); unset: ssh.host_key_policy.
    host_key: str | None = Field(default=None, pattern=HOST_KEY_PATTERN)
    arch: str = "amd64"
    gpus: GpuSpec | None = None
    roles: list[Role] = Field(min_length=1)
    # This host's SGLang worker listens here instead of serving.port, and benchstack's files
    # live here instead of `workspace` (another disk; or two hosts that are one machine, as the
    # rehearsal's loopback SSH host is).
    serving_port: int | None = Field(default=None, ge=1, le=65535)
    workspace: str | None = None

    @field_validator("workspace")
    @classmethod
    def _absolute_workspace(cls, value: str | None) -> str | None:
        return None if value is None else absolute_path(value).rstrip("/")

    @field_validator("address")
    @classmethod
    def _address(cls, value: str) -> str:
        return host_address(value)

    @field_validator("private_ip")
    @classmethod
    def _private_ip(cls, value: str | None) -> str | None:
        return None if value is None else host_ip(value)

    @property
    def is_local(self) -> bool:
        return self.address == "local"

    @property
    def reach_address(self) -> str:
        return self.private_ip or ("127.0.0.1" if self.is_local else self.address)


class SshConfig(Model):
    # How every SSH path (remote commands, the status probe, the Docker provider) checks a host
    # without a pinned `hosts[].host_key`: `accept-new` trusts the first key seen, records it in
    # `known_hosts` and accepts only that one after; `pinned` requires hosts[].host_key.
    host_key_policy: Literal["accept-new", "pinned"] = "accept-new"
    known_hosts: str = "~/.ssh/known_hosts"
