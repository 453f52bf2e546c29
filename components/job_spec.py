"""What a Harbor job is, apart from its name and its tasks: one typed value, `JobSpec`, that the
main job (components/harbor_job.py) and its reruns (components/harbor_rerun.py) both take, and
the steps every such job declares on the Harbor host (`declare_job_steps`: configs -> preflight
-> launch, stopped on delete).

A rerun repeats its main job exactly: the same pinned Harbor install, dataset, agent and
sampling, serving endpoint and key, compose override (tool bundle, proxy) or cluster, narrowed
to some tasks under its own name. Sharing the spec, not fifteen attributes of the job, is what
keeps the two the same.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath

import pulumi

from components.config import DatasetConfig, HarborConfig
from components.harbor_config import (
    compose_identity,
    config_digest,
    expectations_json,
    harbor_flags,
    preflight_expectations,
    render_compose_override,
    render_job_config,
)
from components.seam.host import Host
from components.seam.probe import probe_host
from components.seam.step import ScriptRun, content_hash, host_step
from components.trial_namespace import PULL_SECRET
from contracts import hostlayout, jobdir
from hostside import harbor_configs, harbor_launch, harbor_preflight


def controller_kubeconfig_path(workspace: str, namespace: str) -> str:
    """Where the Harbor controller's kubeconfig is on the Harbor host (hostside/k8s_access.py
    writes it)."""
    return f"{workspace.rstrip('/')}/configs/{namespace}.kubeconfig.json"


def clone_dir(workspace: str, dataset: DatasetConfig) -> str | None:
    """Where a git dataset is cloned on the host (named after the repository and commit); None
    for a dataset that is a path."""
    if dataset.repo is None or dataset.commit is None:
        return None
    repo = PurePosixPath(dataset.repo.rstrip("/")).name.removesuffix(".git")
    return f"{workspace}/datasets/{repo}-{dataset.commit[:12]}"


def tasks_dir_of(workspace: str, dataset: DatasetConfig, dataset_path: str | None) -> str:
    """Where the task dirs are on the host: the clone's tasks_subdir, or the given path."""
    clone = clone_dir(workspace, dataset)
    if clone is not None:
        return f"{clone}/{dataset.tasks_subdir}"
    if not dataset_path:
        raise ValueError("dataset: set `path`, or `repo` and `commit`")
    return dataset_path.rstrip("/")


@dataclass(frozen=True)
class Rendered:
    """Everything derived from the resolved inputs, computed once inside one apply."""

    job_name: str
    config_yaml: str
    compose_yaml: str
    config_path: str
    compose_path: str
    expected: str
    # `harbor run`'s flags beside the config (the version's own endpoint flags, or none).
    flags: tuple[str, ...] = ()


def render_plan(
    harbor: HarborConfig,
    dataset: DatasetConfig,
    *,
    model_name: str | None,
    workspace: str,
    tasks_dir: str,
    api_base: str | None,
    tools_dir: str | None,
    proxy_url: str | None,
    job_name: str | None = None,
) -> Rendered:
    """The job config, compose override, job name and preflight checks for resolved inputs.

    The name: `job_name`, else harbor.job_name, else harbor.job_name_prefix and a digest."""
    config_dir = f"{workspace}/configs"
    k8s = harbor.kubernetes
    config_yaml = render_job_config(
        harbor,
        dataset=dataset,
        model_name=model_name,
        api_base=api_base,
        jobs_dir=jobdir.jobs_dir(workspace),
        dataset_path=tasks_dir,
        kubeconfig_path=controller_kubeconfig_path(workspace, k8s.namespace) if k8s else None,
        pull_secret=PULL_SECRET if k8s and k8s.registry_username else None,
    )
    # Pods have no compose project: Harbor refuses --extra-docker-compose for them.
    compose_yaml = ("" if k8s else
                    render_compose_override(harbor, tools_dir=tools_dir, proxy_url=proxy_url))
    flags = harbor_flags(harbor, api_base)
    # The flags are part of the job's config (Harbor writes them into config.json): another
    # endpoint is another job. No flags (0.21.0): the name it always had.
    digest = config_digest(config_yaml, compose_identity(compose_yaml),
                           *([" ".join(flags)] if flags else []))
    name = job_name or harbor.job_name or f"{harbor.job_name_prefix}-{digest}"
    compose_path = "" if k8s else f"{config_dir}/{name}.compose.yaml"
    checks = preflight_expectations(
        harbor, dataset=dataset, model_name=model_name, api_base=api_base,
        dataset_path=tasks_dir, compose_path=compose_path,
    )
    return Rendered(
        job_name=name,
        config_yaml=config_yaml,
        compose_yaml=compose_yaml,
        config_path=f"{config_dir}/{name}.job.yaml",
        compose_path=compose_path,
        expected=expectations_json(checks),
        flags=tuple(flags),
    )


@dataclass(frozen=True, kw_only=True)
class JobSpec:
    """A Harbor job on the Harbor host, but its name and task list: the stack's harbor and
    dataset sections, and what the other layers resolve (the endpoint, the bundle, the proxy)."""

    host: Host
    harbor: HarborConfig
    dataset: DatasetConfig
    workspace: str
    # The task dirs on the Harbor host when the dataset is a path (resolved against the
    # project for the local host); None for a git dataset.
    dataset_path: str | None = None
    # `openai/<served model>` for terminus-2; None for model-free agents.
    model_name: str | None = None
    api_base: pulumi.Input[str] | None = None
    api_key: pulumi.Input[str] = "EMPTY"
    tools_dir: pulumi.Input[str] | None = None
    proxy_url: pulumi.Input[str] | None = None
    # The serving plane's record kept beside the job (hostside/serving_sampler.py's spec: the
    # gateway's and workers' metrics URLs, the interval, the bound); None: none kept.
    serving_record: dict | None = None

    def __post_init__(self) -> None:
        """What only the wiring can get wrong (the sections themselves are checked as config)."""
        if self.harbor.agent.needs_model:
            for key in ("model_name", "api_base"):
                if getattr(self, key) is None:
                    raise ValueError(
                        f"JobSpec.{key} is required for the {self.harbor.agent.name} agent")
        if self.dataset.path is not None and not (self.dataset_path or "").startswith("/"):
            raise ValueError(
                "JobSpec.dataset_path: a path dataset needs its absolute path on the Harbor "
                f"host (Harbor stores it verbatim), got {self.dataset_path!r}"
            )
        object.__setattr__(self, "workspace", self.workspace.rstrip("/"))

    @property
    def tasks_dir(self) -> str:
        return tasks_dir_of(self.workspace, self.dataset, self.dataset_path)

    @property
    def jobs_dir(self) -> str:
        return jobdir.jobs_dir(self.workspace)

    @property
    def log_dir(self) -> str:
        return jobdir.log_dir(self.workspace)

    @property
    def harbor_bin(self) -> str:
        """The harbor the install step makes (known from the config before it runs)."""
        return hostlayout.harbor_bin(self.workspace, self.harbor.version)

    @property
    def k8s_watch(self) -> dict[str, str] | None:
        """The cluster watcher's inputs for trials as pods (None on the Docker host)."""
        k8s = self.harbor.kubernetes
        if k8s is None:
            return None
        return {"kubeconfig": controller_kubeconfig_path(self.workspace, k8s.namespace),
                "namespace": k8s.namespace}

    def resolved(self) -> pulumi.Output[list]:
        """What the other layers resolve: [api_base, tools_dir, proxy_url]."""
        return pulumi.Output.all(self.api_base, self.tools_dir, self.proxy_url)

    def render(self, resolved: list, *, job_name: str | None = None,
               tasks: tuple[str, ...] | None = None) -> Rendered:
        """This job rendered with the resolved values; `tasks` narrows the dataset to those
        tasks (a rerun), under `job_name`."""
        api_base, tools_dir, proxy_url = resolved
        dataset = (self.dataset if tasks is None
                   else self.dataset.model_copy(update={"include": list(tasks)}))
        return render_plan(self.harbor, dataset, model_name=self.model_name,
                           workspace=self.workspace, tasks_dir=self.tasks_dir, api_base=api_base,
                           tools_dir=tools_dir, proxy_url=proxy_url, job_name=job_name)

    def status(self, job_name: pulumi.Input[str]) -> pulumi.Output[dict]:
        """The job's state and launch token, read on the host now (see harbor_job.py)."""
        return probe_host(
            self.host, "harbor_status.sh",
            pulumi.Output.from_input(job_name).apply(
                lambda n: {"JOB_NAME": n, "JOBS_DIR": self.jobs_dir, "LOG_DIR": self.log_dir}),
        )


@dataclass(frozen=True)
class JobSteps:
    configs: ScriptRun
    preflight: ScriptRun
    launch: ScriptRun


def declare_job_steps(
    name: str,
    spec: JobSpec,
    *,
    rendered: pulumi.Output[Rendered] | pulumi.Output[Rendered | None],
    harbor_bin: pulumi.Input[str],
    token: pulumi.Input[str],
    configs_opts: pulumi.ResourceOptions,
    preflight_opts: Callable[[pulumi.Resource], pulumi.ResourceOptions],
    launch_opts: Callable[[pulumi.Resource], pulumi.ResourceOptions],
    waiting: pulumi.Input[str] | None = None,
) -> JobSteps:
    """A Harbor job's configs -> preflight -> launch (stopped on delete), for the main job and
    for a rerun alike. `rendered` is None while the job `waiting` (see host_step)."""
    harbor, jobs_dir, log_dir = spec.harbor, spec.jobs_dir, spec.log_dir

    def field(pick: Callable[[Rendered], str]) -> pulumi.Output[str]:
        return rendered.apply(lambda r: pick(r) if r else "")

    job_name = field(lambda r: r.job_name)
    config_path = field(lambda r: r.config_path)
    compose_path = field(lambda r: r.compose_path)
    # What replaces the configs (and so the preflight): the job's config and override, but what
    # is not the job's (the trial's init): a change of that is an update that rewrites the file.
    config_hash = rendered.apply(
        lambda r: content_hash(r.config_yaml, compose_identity(r.compose_yaml)) if r else "waiting"
    )
    configs = host_step(
        f"{name}-configs",
        host=spec.host,
        create=harbor_configs.create,
        inputs={
            "config_path": config_path,
            "compose_path": compose_path,
            "job_config_yaml": field(lambda r: r.config_yaml),
            "compose_yaml": field(lambda r: r.compose_yaml),
        },
        delete=harbor_configs.delete,
        delete_inputs={"config_path": config_path, "compose_path": compose_path},
        triggers=[config_hash],
        waiting=waiting,
        opts=configs_opts,
    )
    # The preflight resolves exactly the job the launch then runs, with the same flags.
    same_run: dict[str, pulumi.Input] = {
        "harbor_bin": harbor_bin,
        "job_config": config_path,
        "compose_path": compose_path,
        "job_name": job_name,
        "jobs_dir": jobs_dir,
        "harbor_flags": rendered.apply(lambda r: list(r.flags) if r else []),
        "harbor_version": harbor.version,
    }
    preflight = host_step(
        f"{name}-preflight",
        host=spec.host,
        create=harbor_preflight.create,
        inputs={
            **same_run,
            "expected": rendered.apply(lambda r: json.loads(r.expected) if r else []),
            "resolved_out": job_name.apply(
                lambda n: jobdir.resolved_config(log_dir, n) if n else ""),
        },
        triggers=[config_hash, harbor.wheel_sha256, spec.tasks_dir],
        waiting=waiting,
        opts=preflight_opts(configs.command),
    )
    launch = host_step(
        f"{name}-launch",
        host=spec.host,
        create=harbor_launch.create,
        inputs={
            **same_run,
            "log_dir": log_dir,
            "openai_api_key": spec.api_key,
            "launch_token": token,
            "start_timeout_s": harbor.start_timeout_s,
            "nofile": harbor.nofile,
            "resolved_sha256": preflight.outputs.apply(lambda o: o.get("resolved_sha256", "")),
            "k8s_watch": spec.k8s_watch,
            "serving_record": spec.serving_record,
        },
        # The launch's delete is the stop.
        delete=harbor_launch.delete,
        delete_inputs={
            "job_name": job_name,
            "jobs_dir": jobs_dir,
            "log_dir": log_dir,
            "n_concurrent_trials": harbor.n_concurrent_trials,
            "stop_timeout_s": harbor.stop_timeout_s,
        },
        triggers=[job_name, token],
        secret_inputs=("openai_api_key",),
        waiting=waiting,
        # Replacing a launch means another job or a resume: the old Harbor must be stopped
        # (and its dead trials' containers removed) before the new one starts (host_step
        # makes every step with a delete delete-before-replace).
        opts=launch_opts(preflight.command),
    )
    return JobSteps(configs=configs, preflight=preflight, launch=launch)
