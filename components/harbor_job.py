"""HarborJob: the benchmark job itself, from a pinned Harbor install to a running (or resumed) job.

The seed's "Install Harbor", "Download and pin Terminal-Bench 2.1", "Create the Harbor and
Docker Compose configs", "Run the full-run preflight", "Launch", and "Stop the experiment
correctly" as one component. Children (host steps of `components/hostside/`, run through the
host seam), in dependency order:

    install (harbor_install)  ─┐
    dataset (harbor_dataset)  ─┼─> configs (harbor_configs) -> preflight (harbor_preflight)
                               ┘                               -> launch (harbor_launch)
    launch's delete: the stop (SIGTERM, bounded wait, leftover compose projects)

Where the job's files are (jobs dir, log, PID file, launch token, resolved config) is
components/hostside/jobdir.py's, asked here and on the host alike.

Job names. The name is `<job_name_prefix>-<digest of the rendered job config and compose
override>`. An unchanged config gives the same name, so the same job dir is resumed; a changed
config (another api_base, concurrency, tool bundle path...) gives a new name and a new job, which
Harbor requires anyway (it refuses to resume a job dir with a different config). A fixed
`job_name` can be given instead; the preflight then refuses it if its dir holds another config.

Resume (why there is a status probe). A Command only re-runs when its inputs or triggers
change, but "Harbor died and the job is unfinished" is a change on the host, not in the program.
So at program time (every `up` and `preview`) a read-only probe, `harbor_status.sh` (jobdir.py
inlined), runs on the Harbor host (through `command.local.run`, over `ssh` for remote hosts)
and returns the job's state and a launch token:

- absent       -> token "start" (first launch);
- running      -> the token recorded by the launch that started the live process;
- finished     -> the same recorded token;
- interrupted  -> (process gone, no `finished_at`) a new token derived from the recorded token
                  and the dead PID.

The token is a trigger of the launch command. While Harbor runs or after it finished, the probe
returns exactly the token stored in the state, so a second `up` changes nothing. After an
interruption (SIGKILL, host reboot, `pulumi destroy` of the job only) the token differs, the
launch is replaced (`delete_before_replace`: first the stop removes the leftovers of the
dead trials, then the launch finds the job dir and runs `harbor job resume -p JOB_DIR`,
which re-runs cancelled and half-written trials). Each interruption yields one resume.

Destroy never deletes results: the job dir, the log and the PID file stay on the host.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath

import pulumi

from components.config import DatasetConfig, HarborConfig
from components.harbor_config import (
    DatasetSpec,
    JobSettings,
    config_digest,
    expectations_json,
    preflight_expectations,
    render_compose_override,
    render_job_config,
)
from components.host import Host, ScriptRun, content_hash, host_step, probe_host
from components.hostside import jobdir
from components.hostside.harbor import harbor_bin as installed_harbor_bin


@dataclass(frozen=True, kw_only=True)
class HarborJobArgs:
    """The stack's Harbor and dataset sections, and what comes from the other layers."""

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
    tools_dir: pulumi.Input[str] | None = None
    proxy_url: pulumi.Input[str] | None = None
    api_key: pulumi.Input[str] = "EMPTY"


def _settings(args: HarborJobArgs) -> tuple[DatasetSpec, JobSettings]:
    """The two sections as the rendering models (harbor_config.py) take them."""
    harbor, agent, data = args.harbor, args.harbor.agent, args.dataset
    dataset = DatasetSpec(
        git_url=data.repo,
        commit=data.commit,
        subdir=data.tasks_subdir,
        path=args.dataset_path,
        expected_tasks=data.expected_tasks,
        include=tuple(data.include),
        exclude=tuple(data.exclude),
    )
    job = JobSettings(
        agent=agent.name,
        n_concurrent_trials=harbor.n_concurrent_trials,
        n_concurrent_agents=agent.n_concurrent,
        n_attempts=harbor.n_attempts,
        model_name=args.model_name,
        temperature=agent.temperature,
        top_p=agent.top_p,
        top_k=agent.top_k,
        max_input_tokens=agent.max_input_tokens,
        max_output_tokens=agent.max_output_tokens,
        record_terminal_session=agent.record_terminal_session,
        agent_timeout_multiplier=harbor.agent_timeout_multiplier,
        agent_setup_timeout_multiplier=harbor.agent_setup_timeout_multiplier,
        verifier_timeout_multiplier=harbor.verifier_timeout_multiplier,
        environment_build_timeout_multiplier=harbor.environment_build_timeout_multiplier,
        container_network=harbor.container_network,
    )
    if job.uses_model and args.api_base is None:
        raise ValueError("HarborJobArgs.api_base is required for the terminus-2 agent")
    return dataset, job


def dataset_dir(workspace: str, dataset: DatasetSpec) -> str:
    """Where the task dirs are on the host (a clone is named after the repository and commit)."""
    if dataset.path:
        return dataset.path.rstrip("/")
    if not (dataset.git_url and dataset.commit):
        raise ValueError("dataset: set `path`, or `git_url` and `commit`")
    repo = PurePosixPath(dataset.git_url.rstrip("/")).name.removesuffix(".git")
    return f"{workspace}/datasets/{repo}-{dataset.commit[:12]}"


@dataclass(frozen=True)
class Rendered:
    """Everything derived from the resolved inputs, computed once inside one apply."""

    job_name: str
    config_yaml: str
    compose_yaml: str
    config_path: str
    compose_path: str
    expected: str


def render_plan(
    job: JobSettings,
    dataset: DatasetSpec,
    *,
    workspace: str,
    tasks_dir: str,
    api_base: str | None,
    tools_dir: str | None,
    proxy_url: str | None,
    job_name_prefix: str,
    job_name: str | None = None,
) -> Rendered:
    """The job config, compose override, job name and preflight checks for resolved inputs."""
    config_dir = f"{workspace}/configs"
    config_yaml = render_job_config(
        job,
        jobs_dir=jobdir.jobs_dir(workspace),
        dataset_path=tasks_dir,
        dataset=dataset,
        api_base=api_base,
    )
    compose_yaml = render_compose_override(job, tools_dir=tools_dir, proxy_url=proxy_url)
    name = job_name or f"{job_name_prefix}-{config_digest(config_yaml, compose_yaml)}"
    compose_path = f"{config_dir}/{name}.compose.yaml"
    checks = preflight_expectations(
        job, dataset_path=tasks_dir, dataset=dataset, api_base=api_base, compose_path=compose_path
    )
    return Rendered(
        job_name=name,
        config_yaml=config_yaml,
        compose_yaml=compose_yaml,
        config_path=f"{config_dir}/{name}.job.yaml",
        compose_path=compose_path,
        expected=expectations_json(checks),
    )


def probe_job_status(host: Host, env: pulumi.Input[dict]) -> pulumi.Output[dict]:
    """The job's state and launch token, read on the host now (see the module docstring)."""
    return probe_host(host, "harbor_status.sh", env)


@dataclass(frozen=True)
class JobSteps:
    configs: ScriptRun
    preflight: ScriptRun
    launch: ScriptRun


def declare_job_steps(
    name: str,
    *,
    host: Host,
    harbor: HarborConfig,
    n_concurrent: int,
    rendered: pulumi.Output[Rendered] | pulumi.Output[Rendered | None],
    harbor_bin: pulumi.Input[str],
    jobs_dir: str,
    log_dir: str,
    tasks_dir: str,
    api_key: pulumi.Input[str],
    token: pulumi.Input[str],
    configs_opts: pulumi.ResourceOptions,
    preflight_opts: Callable[[pulumi.Resource], pulumi.ResourceOptions],
    launch_opts: Callable[[pulumi.Resource], pulumi.ResourceOptions],
    waiting: pulumi.Input[str] | None = None,
) -> JobSteps:
    """A Harbor job's configs -> preflight -> launch (stopped on delete), for the main job and
    for a rerun alike. `rendered` is None while the job `waiting` (see host_step)."""

    def field(pick: Callable[[Rendered], str]) -> pulumi.Output[str]:
        return rendered.apply(lambda r: pick(r) if r else "")

    job_name = field(lambda r: r.job_name)
    config_path = field(lambda r: r.config_path)
    compose_path = field(lambda r: r.compose_path)
    config_hash = rendered.apply(
        lambda r: content_hash(r.config_yaml, r.compose_yaml) if r else "waiting"
    )
    configs = host_step(
        f"{name}-configs",
        host=host,
        module="harbor_configs",
        inputs={
            "config_path": config_path,
            "compose_path": compose_path,
            "job_config_yaml": field(lambda r: r.config_yaml),
            "compose_yaml": field(lambda r: r.compose_yaml),
        },
        triggers=[config_hash],
        delete_inputs={"config_path": config_path, "compose_path": compose_path},
        waiting=waiting,
        opts=configs_opts,
    )
    # The preflight resolves exactly the job the launch then runs.
    same_run: dict[str, pulumi.Input[str]] = {
        "harbor_bin": harbor_bin,
        "job_config": config_path,
        "compose_path": compose_path,
        "job_name": job_name,
        "jobs_dir": jobs_dir,
    }
    preflight = host_step(
        f"{name}-preflight",
        host=host,
        module="harbor_preflight",
        inputs={
            **same_run,
            "expected": rendered.apply(lambda r: json.loads(r.expected) if r else []),
            "resolved_out": job_name.apply(
                lambda n: jobdir.resolved_config(log_dir, n) if n else ""),
        },
        triggers=[config_hash, harbor.wheel_sha256, tasks_dir],
        waiting=waiting,
        opts=preflight_opts(configs.command),
    )
    launch = host_step(
        f"{name}-launch",
        host=host,
        module="harbor_launch",
        inputs={
            **same_run,
            "log_dir": log_dir,
            "openai_api_key": api_key,
            "launch_token": token,
            "start_timeout_s": harbor.start_timeout_s,
            "nofile": harbor.nofile,
            "resolved_sha256": preflight.outputs.apply(lambda o: o.get("resolved_sha256", "")),
        },
        # The launch's delete is the stop.
        delete_inputs={
            "job_name": job_name,
            "jobs_dir": jobs_dir,
            "log_dir": log_dir,
            "n_concurrent": n_concurrent,
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


class HarborJob(pulumi.ComponentResource):
    """A Harbor job on the Harbor host: installed, pinned, checked, launched; stopped on destroy."""

    job_name: pulumi.Output[str]
    jobs_dir: pulumi.Output[str]
    job_dir: pulumi.Output[str]
    job_log: pulumi.Output[str]
    pid_file: pulumi.Output[str]
    dataset_path: pulumi.Output[str]
    harbor_bin: pulumi.Output[str]
    job_state: pulumi.Output[str]

    def __init__(
        self, name: str, args: HarborJobArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("benchstack:components:HarborJob", name, None, opts)
        dataset, job = _settings(args)
        host = args.host
        workspace = args.workspace.rstrip("/")
        jobs_dir = jobdir.jobs_dir(workspace)
        log_dir = jobdir.log_dir(workspace)
        tasks_dir = dataset_dir(workspace, dataset)
        if dataset.git_url:
            tasks_dir = f"{tasks_dir}/{dataset.subdir}"

        # The job needs whatever the caller depends on (router, images, tool bundle, proxy
        # bridge) before any of its steps runs, not just before the component "completes".
        given = opts.depends_on if opts and opts.depends_on else []
        outer: list = list(given) if isinstance(given, list | tuple) else [given]

        def child(*after: pulumi.Resource, **extra) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(parent=self, depends_on=[*outer, *after], **extra)

        install = host_step(
            f"{name}-install",
            host=host,
            module="harbor_install",
            inputs={
                "workspace": workspace,
                "version": args.harbor.version,
                "wheel_sha256": args.harbor.wheel_sha256,
                "python": args.harbor.python,
                "wheel": args.harbor.wheel_path,
            },
            delete_inputs={"workspace": workspace, "version": args.harbor.version},
            opts=child(),
        )
        clone_dir = None if dataset.path else dataset_dir(workspace, dataset)
        dataset_run = host_step(
            f"{name}-dataset",
            host=host,
            module="harbor_dataset",
            inputs={
                "dataset_path": dataset.path,
                "git_url": dataset.git_url,
                "commit": dataset.commit,
                "clone_dir": clone_dir,
                "subdir": dataset.subdir,
                "expected_tasks": dataset.expected_tasks,
                "include": list(dataset.include),
                "exclude": list(dataset.exclude),
            },
            delete_inputs={"clone_dir": clone_dir},
            opts=child(),
        )

        rendered = pulumi.Output.all(args.api_base, args.tools_dir, args.proxy_url).apply(
            lambda v: render_plan(
                job,
                dataset,
                workspace=workspace,
                tasks_dir=tasks_dir,
                api_base=v[0],
                tools_dir=v[1],
                proxy_url=v[2],
                job_name_prefix=args.harbor.job_name_prefix,
                job_name=args.harbor.job_name,
            )
        )
        default_bin = installed_harbor_bin(workspace, args.harbor.version)
        # Known from the config and tied to the step (see ToolBundle.tools_dir for why).
        harbor_bin = pulumi.Output.all(install.command.id, default_bin).apply(lambda v: v[1])
        job_name = rendered.apply(lambda r: r.job_name)
        compose_path = rendered.apply(lambda r: r.compose_path)
        status = probe_job_status(
            host,
            job_name.apply(lambda n: {"JOB_NAME": n, "JOBS_DIR": jobs_dir, "LOG_DIR": log_dir}),
        )
        steps = declare_job_steps(
            name,
            host=host,
            harbor=args.harbor,
            n_concurrent=job.n_concurrent_trials,
            rendered=rendered,
            harbor_bin=harbor_bin,
            jobs_dir=jobs_dir,
            log_dir=log_dir,
            tasks_dir=tasks_dir,
            api_key=args.api_key,
            token=status.apply(lambda s: str(s.get("token") or "start")),
            configs_opts=child(dataset_run.command),
            # A new install or dataset must be checked again, even with the same config text.
            preflight_opts=lambda configs: child(configs, install.command, dataset_run.command),
            launch_opts=child,
        )
        launch = steps.launch

        # Paths are known from the config alone; tying them to the launch makes a consumer of
        # job_dir (e.g. the audit) wait for Harbor to have started.
        def after_launch(value: pulumi.Input[str]) -> pulumi.Output[str]:
            return pulumi.Output.all(launch.command.id, value).apply(lambda v: v[1])

        # What a rerun of some of this job's tasks repeats exactly (components/harbor_rerun.py).
        self.host = host
        self.harbor = args.harbor
        self.settings = job
        self.dataset_spec = dataset
        self.workspace = workspace
        self.tasks_dir = tasks_dir
        self.log_dir = log_dir
        self.api_key = args.api_key
        self.plan_inputs = pulumi.Output.all(args.api_base, args.tools_dir, args.proxy_url)
        self.launch = launch.command
        self.resolved_config_path = job_name.apply(lambda n: jobdir.resolved_config(log_dir, n))
        self.compose_path = compose_path

        self.job_name = job_name
        self.jobs_dir = pulumi.Output.from_input(jobs_dir)
        self.job_dir = after_launch(job_name.apply(lambda n: jobdir.job_dir(jobs_dir, n)))
        self.job_log = job_name.apply(lambda n: jobdir.job_log(log_dir, n))
        self.pid_file = job_name.apply(lambda n: jobdir.pid_file(log_dir, n))
        self.dataset_path = pulumi.Output.all(dataset_run.command.id, tasks_dir).apply(
            lambda v: v[1])
        self.harbor_bin = harbor_bin
        self.job_state = status.apply(lambda s: str(s.get("state") or "unknown"))
        self.register_outputs(
            {
                "job_name": self.job_name,
                "jobs_dir": self.jobs_dir,
                "job_dir": self.job_dir,
                "job_log": self.job_log,
                "pid_file": self.pid_file,
                "dataset_path": self.dataset_path,
                "harbor_bin": self.harbor_bin,
                "job_state": self.job_state,
            }
        )

