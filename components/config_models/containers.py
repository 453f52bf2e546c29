"""The Docker hosts' plane: the daemon's address pools, the task images, the proxy bridge and the
tool bundle (`docker`, `images`, `proxy`, `tools`)."""

from __future__ import annotations

import ipaddress
import re

from pydantic import Field, field_validator

from components.config_models.base import Model, absolute_path
from contracts.harbor_profiles import PROFILES


class AddressPool(Model):
    base: str
    size: int = Field(ge=8, le=30)

    @field_validator("base")
    @classmethod
    def _cidr(cls, value: str) -> str:
        ipaddress.ip_network(value, strict=True)
        return value

    @property
    def network(self) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
        return ipaddress.ip_network(self.base)

    @property
    def subnets(self) -> int:
        return 2 ** max(0, self.size - self.network.prefixlen)


class DockerConfig(Model):
    address_pools: list[AddressPool] = Field(min_length=1)
    daemon_json: str = "/etc/docker/daemon.json"
    # Empty: decided on the host (hostside/dockerd_restart.py): systemd's docker unit,
    # else /etc/init.d/docker, else the running dockerd restarted with its own command line.
    restart_command: str = ""
    # Restarting dockerd kills running containers (an SGLang worker loses minutes of loading).
    allow_restart_with_running_containers: bool = False
    # Networks beyond the concurrent trials: leftovers of interrupted trials, router, tests.
    network_margin: int = Field(default=8, ge=0)
    proof_networks: int = Field(default=64, ge=1)


REGISTRY_HOST = r"[A-Za-z0-9][A-Za-z0-9.-]*(:\d+)?(/\S*)?"


class ImagesConfig(Model):
    # A registry host[:port] that mirrors docker.io (no scheme: skopeo takes docker://HOST/...).
    mirror: str | None = None
    username: str | None = None
    concurrency: int = Field(default=4, ge=1, le=32)
    retries: int = Field(default=5, ge=0, le=20)
    # The wait after an image's first failed attempt; it doubles per attempt, at most 60 s.
    retry_backoff_s: int = Field(default=5, ge=0, le=60)
    pin_digests: bool = False
    # Tasks with allow_internet = false need Harbor's egress sidecar image (built with buildx);
    # true: fail before launch, naming those tasks, when it cannot be had.
    require_sidecar: bool = True
    # The tag Harbor looks up for its sidecar on a linux/amd64 engine
    # (`harbor-prebuilt:harbor-docker-egress-control-sidecar--<blake2b of its build context>`);
    # default: the stack's Harbor version's (contracts/harbor_profiles.py), 0.21.0's on its own.
    sidecar_image: str = PROFILES["0.21.0"].sidecar_image
    # Bound on one image's copy.
    pull_timeout_s: int = Field(default=1800, ge=1)
    # The pull's private work dir on the Harbor host (skopeo's temp files, the authfile): a
    # disk, not a small tmpfs.
    scratch_dir: str = "/var/tmp"
    # Change it (a date will do) to re-check the images on the next `up` although nothing else
    # changed, e.g. after a `docker system prune`; an all-present check asks no registry.
    rerun_token: str = ""

    @field_validator("mirror")
    @classmethod
    def _registry_host(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(REGISTRY_HOST, value):
            raise ValueError(f"must be a registry HOST[:PORT] without a scheme, got {value!r}")
        return value

    @field_validator("scratch_dir")
    @classmethod
    def _absolute_scratch(cls, value: str) -> str:
        return absolute_path(value)


class ProxyConfig(Model):
    upstream: str = "127.0.0.1:27890"
    bridge_port: int = Field(default=27891, ge=1, le=65535)
    # Default: the gateway of Docker's `bridge` network, read on the host.
    bind_address: str | None = None
    # A URL a task container fetches through the bridge when it starts (the seed used
    # https://example.com/); unset: only the listener and the upstream are checked.
    check_url: str | None = None

    @field_validator("upstream")
    @classmethod
    def _host_port(cls, value: str) -> str:
        host, _, port = value.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"expected HOST:PORT, got {value!r}")
        return value

    @field_validator("check_url")
    @classmethod
    def _plain_http(cls, value: str | None) -> str | None:
        # The check speaks HTTP/1.0 to the proxy from bash (task images may lack curl).
        if value is not None and not value.startswith("http://"):
            raise ValueError(f"must be an http:// URL (the check sends a plain GET), got {value!r}")
        return value

    @property
    def upstream_port(self) -> int:
        return int(self.upstream.rpartition(":")[2])


class ToolBundleConfig(Model):
    asciinema_sha256: str = Field(
        default="249ccf108509d643ddaf38979dac48c99e9e251f597173d8553a30d7a6423104",
        pattern=r"^[0-9a-f]{64}$",
    )
    # An image with neither tmux nor asciinema to prove the bundle in; default: the first
    # task image of the manifest.
    canary_image: str | None = None
