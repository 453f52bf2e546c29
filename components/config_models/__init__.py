"""The stack config's models: each `benchstack:*` section of `Pulumi.<stack>.yaml` as a pydantic
model, with its defaults and the checks one field (or one section) can make on its own, one
module per plane:

- `base.py`: the base model, the namespace, the project directory, address and path checks;
- `hosts.py`: `hosts`, `ssh`;
- `containers.py`: the Docker hosts' `docker` (address pools), `images`, `proxy`, `tools`;
- `serving.py`: `model`, `serving` (its record and speed check), `router` (the gateways);
- `harbor.py`: `harbor` (its agent, reruns, trial environment), `dataset`;
- `stack.py`: `StackConfig`, every section together and its derived views (`.gpu_hosts`,
  `.worker_port()`...).

Owns every default and every field-level check (ranges, patterns, paths, addresses). Checks that
compare sections live in components/config_checks.py; reading a stack and reporting what is
wrong in components/config.py, which is also the import point for all of these names. A new key
goes into its plane's module; this package re-exports each model.
"""

from components.config_models.base import NAMESPACE, PROJECT_DIR, Model, ip_of
from components.config_models.containers import (
    AddressPool,
    DockerConfig,
    ImagesConfig,
    ProxyConfig,
    ToolBundleConfig,
)
from components.config_models.harbor import (
    KUBERNETES_CLIENT,
    AgentConfig,
    DatasetConfig,
    EnvironmentConfig,
    HarborConfig,
    KubernetesConfig,
    QuotaConfig,
    RerunsConfig,
)
from components.config_models.hosts import GpuSpec, HostConfig, SshConfig
from components.config_models.serving import (
    GATEWAY_VERSIONS,
    ModelConfig,
    RouterConfig,
    ServingConfig,
    ServingRecordConfig,
    SpeedCheckConfig,
)
from components.config_models.stack import StackConfig

__all__ = [
    "GATEWAY_VERSIONS",
    "KUBERNETES_CLIENT",
    "NAMESPACE",
    "PROJECT_DIR",
    "AddressPool",
    "AgentConfig",
    "DatasetConfig",
    "DockerConfig",
    "EnvironmentConfig",
    "GpuSpec",
    "HarborConfig",
    "HostConfig",
    "ImagesConfig",
    "KubernetesConfig",
    "Model",
    "ModelConfig",
    "ProxyConfig",
    "QuotaConfig",
    "RerunsConfig",
    "RouterConfig",
    "ServingConfig",
    "ServingRecordConfig",
    "SpeedCheckConfig",
    "SshConfig",
    "StackConfig",
    "ToolBundleConfig",
    "ip_of",
]
