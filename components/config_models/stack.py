"""The whole stack file: every section together, and the views of a parsed config the program
uses (`StackConfig.gpu_hosts`, `.worker_port()`...)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from components.config_models.base import Model, absolute_path
from components.config_models.containers import (
    DockerConfig,
    ImagesConfig,
    ProxyConfig,
    ToolBundleConfig,
)
from components.config_models.harbor import DatasetConfig, HarborConfig
from components.config_models.hosts import HostConfig, SshConfig
from components.config_models.serving import ModelConfig, RouterConfig, ServingConfig
from contracts.harbor_profiles import PROFILES


class StackConfig(Model):
    # Results, logs, venvs and bundles on every host: an absolute path.
    workspace: str
    hosts: list[HostConfig] = Field(min_length=1)
    # Required wherever a host runs containers: the GPU workers, and the Harbor host unless the
    # trials run on Kubernetes.
    docker: DockerConfig | None = None
    harbor: HarborConfig
    dataset: DatasetConfig
    images: ImagesConfig = ImagesConfig()
    tools: ToolBundleConfig = ToolBundleConfig()
    proxy: ProxyConfig | None = None
    model: ModelConfig | None = None
    serving: ServingConfig | None = None
    router: RouterConfig | None = None
    ssh: SshConfig = SshConfig()

    @field_validator("workspace")
    @classmethod
    def _absolute_workspace(cls, value: str) -> str:
        return absolute_path(value)

    @model_validator(mode="before")
    @classmethod
    def _sidecar_of_the_version(cls, data: Any) -> Any:
        """images.sidecar_image, unless given: the tag the stack's Harbor version looks up."""
        if not isinstance(data, dict):
            return data
        harbor, images = data.get("harbor"), data.get("images", {})
        version = harbor.get("version") if isinstance(harbor, dict) else None
        if (isinstance(version, str) and version in PROFILES and isinstance(images, dict)
                and "sidecar_image" not in images):
            data = {**data, "images": {**images,
                                       "sidecar_image": PROFILES[version].sidecar_image}}
        return data

    # -- derived views ------------------------------------------------------------------
    @property
    def gpu_hosts(self) -> list[HostConfig]:
        return [h for h in self.hosts if "gpu_worker" in h.roles]

    @property
    def harbor_host(self) -> HostConfig:
        return next(h for h in self.hosts if "harbor" in h.roles)

    @property
    def needs_model(self) -> bool:
        return self.harbor.agent.needs_model

    def workspace_of(self, host: HostConfig) -> str:
        """Where benchstack keeps its files on `host`."""
        return host.workspace or self.workspace.rstrip("/")

    def worker_port(self, host: HostConfig) -> int:
        """The port `host`'s SGLang worker listens on."""
        if self.serving is None:
            raise ValueError("no serving section: no worker port")
        return host.serving_port or self.serving.port

    @property
    def replicas(self) -> int:
        return len(self.gpu_hosts) * self.serving.dp_size if self.serving else 0

    @property
    def address_pool_networks(self) -> int:
        return sum(pool.subnets for pool in self.docker.address_pools) if self.docker else 0

    @property
    def docker_hosts(self) -> list[HostConfig]:
        """The hosts whose Docker engine runs the stack's containers (their daemon.json is the
        stack's): the GPU workers, and the Harbor host when the trials are containers there."""
        trials_on_host = self.harbor.kubernetes is None
        return [h for h in self.hosts
                if "gpu_worker" in h.roles or ("harbor" in h.roles and trials_on_host)]
