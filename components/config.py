"""The stack config: `Pulumi.<stack>.yaml` read, parsed into the models and checked as a whole.

Everything that would fail hours into a run is rejected here, before any resource exists:
a GPU layout that does not match the host, a model that cannot fit, more agents than the
serving plane can hold, more concurrent trials than the Docker address pools can give, and so
on. Every error names the config key to change (`benchstack:serving.tp_size`, ...).

Owns the loading: the stack file or `pulumi.Config` read (`load_pulumi_config`,
`load_stack_file`), the CLI's value encoding decoded, secrets kept apart, and pydantic's errors
turned into `benchstack:<key>: <message>` lines. The models are components/config_models/'s (one
module per plane), the cross-section checks components/config_checks.py's; this module is the
import point for all of them (`from components.config import HarborConfig`).

Components never read config: `__main__.py` loads a `StackConfig` and hands typed args to them.
Secrets (SSH key, API key, registry and S3 credentials) are not part of the model: they are read
with `require_secret`/`get_secret` and stay Pulumi Outputs (see `StackSecrets`).
"""

from __future__ import annotations

import json
import typing
from dataclasses import dataclass
from pathlib import Path
from types import UnionType
from typing import Any

import pulumi
import yaml
from pydantic import ValidationError
from pydantic.fields import FieldInfo

from components.config_checks import (
    BYTES_PER_PARAM,
    KNOWN_HARBOR_WHEELS,
    ConfigError,
    check_rerun_tasks,
    check_task_needs,
    stack_problems,
)
from components.config_models import (
    NAMESPACE,
    PROJECT_DIR,
    AgentConfig,
    DatasetConfig,
    DockerConfig,
    EnvironmentConfig,
    GpuSpec,
    HarborConfig,
    HostConfig,
    ImagesConfig,
    KubernetesConfig,
    ModelConfig,
    ProxyConfig,
    RerunsConfig,
    RouterConfig,
    ServingConfig,
    ServingRecordConfig,
    SpeedCheckConfig,
    SshConfig,
    StackConfig,
    ToolBundleConfig,
)

# What callers import from here (the models and checks are re-exported).
__all__ = [
    "BYTES_PER_PARAM",
    "KNOWN_HARBOR_WHEELS",
    "NAMESPACE",
    "PROJECT_DIR",
    "AgentConfig",
    "ConfigError",
    "DatasetConfig",
    "DockerConfig",
    "EnvironmentConfig",
    "GpuSpec",
    "HarborConfig",
    "HostConfig",
    "ImagesConfig",
    "KubernetesConfig",
    "ModelConfig",
    "ProxyConfig",
    "RerunsConfig",
    "RouterConfig",
    "ServingConfig",
    "ServingRecordConfig",
    "SpeedCheckConfig",
    "SshConfig",
    "StackConfig",
    "StackSecrets",
    "ToolBundleConfig",
    "check_rerun_tasks",
    "check_task_needs",
    "load_pulumi_config",
    "load_stack_file",
    "parse_stack_config",
    "split_stack_file",
]


def _format_validation_error(error: ValidationError) -> list[str]:
    problems = []
    for item in error.errors():
        path = ""
        for part in item["loc"]:
            path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
        message = item["msg"]
        if item["type"] == "extra_forbidden":
            message = "unknown key (check its spelling against README's config reference)"
        problems.append(f"{NAMESPACE}:{path}: {message}")
    return problems


def parse_stack_config(values: dict[str, Any], source: str = "stack config") -> StackConfig:
    """Validate a stack's `benchstack:*` values (namespace already stripped)."""
    try:
        cfg = StackConfig.model_validate(values)
    except ValidationError as error:
        raise ConfigError(_format_validation_error(error), source) from None
    problems = stack_problems(cfg)
    if problems:
        raise ConfigError(problems, source)
    return cfg


SECRET_KEYS = {
    "sshPrivateKey",
    "apiKey",
    "registryPassword",
    "s3AccessKeyId",
    "s3SecretAccessKey",
    "kubeconfig",
    "kubernetesRegistryPassword",
}


def split_stack_file(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Read `Pulumi.<stack>.yaml`: (structured benchstack values, secret entries)."""
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise ConfigError([f"not valid YAML: {error}"], str(path)) from None
    values: dict[str, Any] = {}
    secrets: dict[str, Any] = {}
    for key, value in (document.get("config") or {}).items():
        namespace, _, name = key.partition(":")
        if namespace != NAMESPACE:
            continue
        (secrets if name in SECRET_KEYS else values)[name] = value
    return values, secrets


def load_stack_file(path: Path) -> StackConfig:
    values, secrets = split_stack_file(path)
    plain = _plaintext_secrets(secrets)
    if plain:
        raise ConfigError(plain, str(path))
    return parse_stack_config(values, source=str(path))


def _plaintext_secrets(secrets: dict[str, Any]) -> list[str]:
    """Secret keys written as plain text in the stack file instead of `pulumi config set
    --secret` (which stores `{secure: ...}`): they would sit in git and in the state unencrypted."""
    return [
        f"{NAMESPACE}:{key}: written in plain text; remove it from the stack file and set it "
        f"with `pulumi config set --secret {NAMESPACE}:{key}`"
        for key, value in sorted(secrets.items())
        if not (isinstance(value, dict) and set(value) == {"secure"})
    ]


@dataclass(frozen=True, kw_only=True)
class StackSecrets:
    """Secret config values; each is a secret Output or None (api_key: "EMPTY" when unset)."""

    ssh_private_key: pulumi.Output[str] | None
    api_key: pulumi.Output[str]
    registry_password: pulumi.Output[str] | None
    s3_access_key_id: pulumi.Output[str] | None
    s3_secret_access_key: pulumi.Output[str] | None
    # The cluster's kubeconfig and the pods' registry password (harbor.environment kubernetes).
    kubeconfig: pulumi.Output[str] | None = None
    kubernetes_registry_password: pulumi.Output[str] | None = None


def load_pulumi_config() -> tuple[StackConfig, StackSecrets]:
    """Read the current stack's config through Pulumi (the program's entry point)."""
    config = pulumi.Config(NAMESPACE)
    values: dict[str, Any] = {}
    problems: list[str] = []
    for key, field in StackConfig.model_fields.items():
        raw = config.get(key)
        if raw is None:
            continue
        try:
            values[key] = decode_config_value(raw, field)
        except ValueError as error:
            problems.append(f"{NAMESPACE}:{key}: {error}")
    if problems:
        raise ConfigError(problems, f"Pulumi.{pulumi.get_stack()}.yaml")
    stack_file = PROJECT_DIR / f"Pulumi.{pulumi.get_stack()}.yaml"
    file_problems = _stack_file_problems(stack_file)
    if file_problems:
        raise ConfigError(file_problems, stack_file.name)
    stack_config = parse_stack_config(values, source=f"Pulumi.{pulumi.get_stack()}.yaml")
    secrets = StackSecrets(
        ssh_private_key=config.get_secret("sshPrivateKey"),
        api_key=config.get_secret("apiKey") or pulumi.Output.secret("EMPTY"),
        registry_password=config.get_secret("registryPassword"),
        s3_access_key_id=config.get_secret("s3AccessKeyId"),
        s3_secret_access_key=config.get_secret("s3SecretAccessKey"),
        kubeconfig=config.get_secret("kubeconfig"),
        kubernetes_registry_password=config.get_secret("kubernetesRegistryPassword"),
    )
    problems = _missing_secrets(stack_config, secrets)
    if problems:
        raise ConfigError(problems, "stack config")
    return stack_config, secrets


def _missing_secrets(cfg: StackConfig, secrets: StackSecrets) -> list[str]:
    """Secrets a section needs that are not set, each with the command that sets it."""
    ns = NAMESPACE
    needed = []
    if cfg.images.username and secrets.registry_password is None:
        needed.append(("registryPassword", f"{ns}:images.username is set"))
    k8s = cfg.harbor.kubernetes
    if k8s is not None and secrets.kubeconfig is None:
        needed.append(("kubeconfig", f"{ns}:harbor.environment.kind is kubernetes; the "
                       "cluster's kubeconfig"))
    if k8s is not None and k8s.registry_username and secrets.kubernetes_registry_password is None:
        needed.append(("kubernetesRegistryPassword",
                       f"{ns}:harbor.environment.kubernetes.registry_username is set"))
    return [
        f"{ns}:{key}: {why}: set it with `pulumi config set --secret {ns}:{key}"
        + (" < FILE`" if key == "kubeconfig" else "`")
        for key, why in needed
    ]


def decode_config_value(raw: str, field: FieldInfo) -> Any:
    """One config value as the Pulumi CLI hands it to the program: a plain string stays a
    string (`benchstack:workspace: /var/lib/...`); objects, lists, numbers and booleans arrive
    as JSON text."""
    if _is_plain_string(field.annotation):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        shown = raw if len(raw) <= 60 else raw[:57] + "..."
        raise ValueError(
            f"expected a YAML object, list or number, got the text {shown!r}"
        ) from None


def _is_plain_string(annotation: Any) -> bool:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return annotation is str or (typing.get_origin(annotation) in (typing.Union, UnionType)
                                 and args == [str])


def _stack_file_problems(path: Path) -> list[str]:
    """Top-level keys the model does not know (typos like `servng`) and secrets in plain text."""
    if not path.exists():
        return []
    values, secrets = split_stack_file(path)
    unknown = [f"{NAMESPACE}:{k}: unknown key" for k in sorted(values)
               if k not in StackConfig.model_fields]
    return unknown + _plaintext_secrets(secrets)
