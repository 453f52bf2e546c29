"""The trials' plane: Harbor, its agent, its dataset, its reruns and where its trials run
(`harbor`, `dataset`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from components.config_models.base import Model
from contracts.harbor_profiles import (
    CONVENTIONS,
    KNOWN_VERSIONS,
    LEADERBOARD,
    PROFILES,
    HarborProfile,
)

AgentName = Literal["oracle", "nop", "terminus-2"]
MODEL_FREE_AGENTS = {"oracle", "nop"}


class AgentConfig(Model):
    name: AgentName
    n_concurrent: int = Field(ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    top_k: int | None = Field(default=None, gt=0)
    max_input_tokens: int | None = Field(default=None, gt=0)
    max_output_tokens: int | None = Field(default=None, gt=0)
    record_terminal_session: bool = True

    @property
    def needs_model(self) -> bool:
        return self.name not in MODEL_FREE_AGENTS


TASK_NAME = r"^[A-Za-z0-9][A-Za-z0-9._/-]*$"


class RerunsConfig(Model):
    """`harbor.reruns`: tasks of the finished main job to run again as a job of their own.

    Written as a list of task names, or as `{from_audit: true}`: the tasks the audit of the
    finished main job lists for rerun (infra or cancelled). The rerun starts on the first `up`
    after the main job finished; the main job's directory is never written to.
    """

    tasks: list[str] = Field(default_factory=list)
    from_audit: bool = False

    @model_validator(mode="before")
    @classmethod
    def _list_form(cls, value: Any) -> Any:
        return {"tasks": value} if isinstance(value, list) else value

    @field_validator("tasks")
    @classmethod
    def _task_names(cls, value: list[str]) -> list[str]:
        for task in value:
            if not re.fullmatch(TASK_NAME, task):
                raise ValueError(f"{task!r} is not a task name (the task's directory name)")
        dups = sorted({t for t in value if value.count(t) > 1})
        if dups:
            raise ValueError(f"task {dups[0]!r} is listed twice")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> RerunsConfig:
        if self.from_audit == bool(self.tasks):
            raise ValueError(
                "give either a list of tasks or `from_audit: true`, not both and not neither"
            )
        return self


# A Kubernetes object name (a DNS-1123 label): namespaces, secrets, service accounts.
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# A Kubernetes quantity: 4, 500m, 8Gi, 1.5...
QUANTITY = r"^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti)?$"
# The Python client Harbor 0.21.0's ack environment imports and does not install itself.
KUBERNETES_CLIENT = "kubernetes==35.0.0"


class QuotaConfig(Model):
    """`harbor.environment.kubernetes.quota`: the namespace's ResourceQuota, the cap on what the
    trials' pods may request at once (Harbor's pods request each task's cpus/memory_mb)."""

    cpu: str = Field(pattern=QUANTITY)
    memory: str = Field(pattern=QUANTITY)
    pods: int | None = Field(default=None, ge=1)


class KubernetesConfig(Model):
    """`harbor.environment.kubernetes`: the trials as pods on the user's cluster (Harbor's `ack`
    environment). The kubeconfig is the secret `benchstack:kubeconfig`, never in this file."""

    # The trials' namespace: the stack creates it (and deletes it, with its pods, on destroy).
    namespace: str = Field(max_length=63, pattern=DNS_LABEL)
    # The registry the pods pull the task images from (`host[:port]`): every task's
    # docker_image must be in it (checked before launch).
    registry: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9.-]*(:[0-9]{1,5})?(/[a-z0-9._/-]+)?$")
    # With the secret `benchstack:kubernetesRegistryPassword`: the pods' image pull secret.
    registry_username: str | None = None
    quota: QuotaConfig
    # Harbor runs the trial pods privileged (as 0.21.0 does by default); false drops it through
    # pod_overrides, for clusters whose policy refuses privileged pods.
    privileged: bool = True
    # The image the pre-launch probe pod runs; default: the first task image.
    probe_image: str | None = None
    # A URL the pods must reach (the model endpoint for agents installed in the task, a proxy);
    # the probe pod fetches it before launch.
    egress_url: str | None = None
    # How long the probe pod may take to be admitted, scheduled, pulled and run.
    preflight_timeout_s: int = Field(default=300, gt=0)
    client: str = Field(default=KUBERNETES_CLIENT, pattern=r"^kubernetes==[0-9][0-9.]*$")


class EnvironmentConfig(Model):
    """`harbor.environment`: where the trials run. `docker` (the default): containers on the
    Harbor host's Docker engine. `kubernetes`: pods on a cluster (the section of that name)."""

    kind: Literal["docker", "kubernetes"] = "docker"
    kubernetes: KubernetesConfig | None = None

    @model_validator(mode="after")
    def _section_matches_kind(self) -> EnvironmentConfig:
        if self.kind == "kubernetes" and self.kubernetes is None:
            raise ValueError("kind is kubernetes: add the `kubernetes` section (namespace, "
                             "registry, quota)")
        if self.kind == "docker" and self.kubernetes is not None:
            raise ValueError("a `kubernetes` section is given but kind is docker: set "
                             "`kind: kubernetes` or drop the section")
        return self


class ReferenceScore(Model):
    """A published score, in the convention it was published in (its name: contracts/
    harbor_profiles.py CONVENTIONS), with its ± when known: the audit compares in that one."""

    score: float = Field(ge=0, le=100)
    plus_minus: float | None = Field(default=None, ge=0)
    convention: str = LEADERBOARD

    @field_validator("convention")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in CONVENTIONS:
            raise ValueError(f"unknown convention {value!r}; known: {', '.join(CONVENTIONS)}")
        return value


class HarborConfig(Model):
    # Picks a profile (contracts/harbor_profiles.py): its rendering of the job config, its
    # flags, preflight, resume and result reading. 0.21.0 runs a job as the published runs were
    # run; 0.26.0 is Harbor as it is run today (each with its own job mean; neither is the
    # board's: README, Harbor versions and score conventions).
    version: str
    wheel_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    python: str = "python3.13"
    n_concurrent_trials: int = Field(ge=1)
    agent: AgentConfig
    agent_timeout_multiplier: float = Field(default=1.0, gt=0)
    agent_setup_timeout_multiplier: float = Field(default=1.0, gt=0)
    verifier_timeout_multiplier: float | None = Field(default=None, gt=0)
    job_name_prefix: str = Field(default="benchstack", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    # A bare number was published on the board (convention `leaderboard`).
    reference_score: ReferenceScore | None = None
    # At least one wave of trial teardowns after SIGTERM, or Harbor is killed mid-save.
    stop_timeout_s: int = Field(default=600, ge=30)
    # Open files for Harbor (the seed's `ulimit -n 65536`); the host's hard limit must allow it.
    nofile: int = Field(default=65536, ge=1024)
    # Attempts per task (pass@k); leaderboards ask for 5.
    n_attempts: int = Field(default=1, ge=1)
    environment_build_timeout_multiplier: float | None = Field(default=None, gt=0)
    # "none": task containers get no network at all (the tool bundle must carry the tools).
    container_network: Literal["default", "none"] = "default"
    # How long the launch waits for the first trial to start (images are pulled before).
    start_timeout_s: int = Field(default=600, gt=0)
    # A wheel already on the Harbor host (air-gapped); unset: `pip download` it there.
    wheel_path: str | None = None
    # A fixed job name; unset: job_name_prefix and a digest of the rendered config.
    job_name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]+$")
    reruns: RerunsConfig | None = None
    environment: EnvironmentConfig = EnvironmentConfig()
    # The longest the stack's job may run one trial for, in hours: a task whose timeouts (agent,
    # verifier, environment build, agent setup, each times its multiplier) add up to more, or
    # that has no agent timeout, is refused before launch, naming it. Unset: not checked.
    max_job_hours: float | None = Field(default=None, gt=0)

    @field_validator("reference_score", mode="before")
    @classmethod
    def _bare_score(cls, value: Any) -> Any:
        bare = isinstance(value, int | float) and not isinstance(value, bool)
        return {"score": value} if bare else value

    @field_validator("version")
    @classmethod
    def _known_version(cls, value: str) -> str:
        if value not in PROFILES:
            raise ValueError(f"Harbor {value!r} has no profile here; the known versions are "
                             f"{', '.join(KNOWN_VERSIONS)}")
        return value

    @property
    def profile(self) -> HarborProfile:
        """What this Harbor version renders, runs and reports differently."""
        return PROFILES[self.version]

    @property
    def kubernetes(self) -> KubernetesConfig | None:
        """The cluster section when the trials run as pods; None on the Docker host."""
        return self.environment.kubernetes if self.environment.kind == "kubernetes" else None


class DatasetConfig(Model):
    # Either a git repository pinned to a commit, or a path on the Harbor host.
    repo: str | None = None
    commit: str | None = Field(default=None, pattern=r"^[0-9a-f]{40}$")
    path: str | None = Field(default=None, min_length=1)
    tasks_subdir: str = Field(default="tasks", min_length=1)
    expected_tasks: int = Field(gt=0)
    # The same task dirs on the machine running Pulumi: the image manifest is read from here.
    manifest_path: str = Field(min_length=1)
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)

    @field_validator("tasks_subdir")
    @classmethod
    def _inside_repo(cls, value: str) -> str:
        if value.startswith("/") or ".." in Path(value).parts:
            raise ValueError(f"must stay inside the dataset repository, got {value!r}")
        return value
