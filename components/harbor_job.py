"""HarborJob: the benchmark job itself, from a pinned Harbor install to a running (or resumed) job.

The seed's "Install Harbor", "Download and pin Terminal-Bench 2.1", "Create the Harbor and
Docker Compose configs", "Run the full-run preflight", "Launch", and "Stop the experiment
correctly" as one component. Children (host steps of `hostside/`, run through the
host seam), in dependency order:

    install (harbor_install)  ─┐
    dataset (harbor_dataset)  ─┼─> configs (harbor_configs) -> preflight (harbor_preflight)
                               ┘                               -> launch (harbor_launch)
    launch's delete: the stop (SIGTERM, bounded wait, leftover compose projects)

Where the job's files are (jobs dir, log, PID file, launch token, resolved config) is
contracts/jobdir.py's, asked here and on the host alike.

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
    config_digest,
    expectations_json,
    preflight_expectations,
    render_compose_override,
    render_job_config,
)
from components.seam.host import Host
from components.seam.probe import probe_host
from components.seam.step import ScriptRun, content_hash, host_step
from components.trial_namespace import PULL_SECRET
from contracts import hostlayout, jobdir
from hostside import (
    harbor_configs,
    harbor_dataset,
    harbor_install,
    harbor_launch,
    harbor_preflight,
    k8s_access,
    k8s_preflight,
)


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
    # Trials as pods (harbor.environment kubernetes): the namespace the stack made for them.
    cluster: ClusterAccess | None = None


@dataclass(frozen=True, kw_only=True)
class ClusterAccess:
    """What the job needs of the TrialNamespace and the stack: where the pods go, who Harbor is
    there, and what the pre-launch probe checks (the images the pods pull, by task)."""

    namespace: pulumi.Input[str]
    service_account: pulumi.Input[str]
    # The stack's kubeconfig (a secret) as JSON with its file references inlined: the Harbor
    # host asks the cluster for the controller's token with it.
    kubeconfig: pulumi.Input[str]
    images: dict[str, list[str]]
    probe_image: str


# How long the Harbor controller's token is valid: longer than any job (the seed's took 7 h;
# five attempts at 25 concurrent trials take days); the launch of a resume renews it.
CONTROLLER_TOKEN_S = 30 * 24 * 3600


def controller_kubeconfig_path(workspace: str, namespace: str) -> str:
    """Where the Harbor controller's kubeconfig is on the Harbor host (hostside/
    k8s_access.py writes it)."""
    return f"{workspace.rstrip('/')}/configs/{namespace}.kubeconfig.json"


def check_args(args: HarborJobArgs) -> None:
    """What only the wiring can get wrong (the sections themselves are checked as config)."""
    if args.harbor.agent.needs_model:
        for key in ("model_name", "api_base"):
            if getattr(args, key) is None:
                raise ValueError(
                    f"HarborJobArgs.{key} is required for the {args.harbor.agent.name} agent")
    if args.dataset.path is not None and not (args.dataset_path or "").startswith("/"):
        raise ValueError(
            "HarborJobArgs.dataset_path: a path dataset needs its absolute path on the Harbor "
            f"host (Harbor stores it verbatim), got {args.dataset_path!r}"
        )
    if (args.cluster is None) != (args.harbor.kubernetes is None):
        raise ValueError("HarborJobArgs.cluster is given exactly when "
                         "harbor.environment.kind is kubernetes")


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
    name = (job_name or harbor.job_name
            or f"{harbor.job_name_prefix}-{config_digest(config_yaml, compose_yaml)}")
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
    k8s_watch: dict[str, str] | None = None,
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
        create=harbor_configs.create,
        delete=harbor_configs.delete,
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
        create=harbor_preflight.create,
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
        create=harbor_launch.create,
        delete=harbor_launch.delete,
        inputs={
            **same_run,
            "log_dir": log_dir,
            "openai_api_key": api_key,
            "launch_token": token,
            "start_timeout_s": harbor.start_timeout_s,
            "nofile": harbor.nofile,
            "resolved_sha256": preflight.outputs.apply(lambda o: o.get("resolved_sha256", "")),
            "k8s_watch": k8s_watch,
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
    # Trials as pods: the namespace and the watcher's inputs (None on the Docker host).
    k8s_namespace: pulumi.Output[str | None]
    k8s_watch: dict[str, str] | None

    def _cluster_steps(self, name: str, args: HarborJobArgs, workspace: str,
                       child: Callable[..., pulumi.ResourceOptions]) -> list[pulumi.Resource]:
        """Trials as pods: the Harbor controller's kubeconfig (a token of the namespace's
        ServiceAccount), then the pre-launch probe of the cluster with that identity: the
        rights, the task images in the registry, a pod admitted, scheduled and run, the tools
        and the egress the tasks need. Nothing on the Docker host."""
        k8s, cluster = args.harbor.kubernetes, args.cluster
        self.k8s_watch = None
        self.k8s_namespace = pulumi.Output.from_input(None)
        if k8s is None or cluster is None:
            return []
        kubeconfig_path = controller_kubeconfig_path(workspace, k8s.namespace)
        access = host_step(
            f"{name}-cluster-access",
            host=args.host,
            create=k8s_access.create,
            delete=k8s_access.delete,
            inputs={
                "kubeconfig": cluster.kubeconfig,
                "namespace": cluster.namespace,
                "service_account": cluster.service_account,
                "out_path": kubeconfig_path,
                "token_seconds": CONTROLLER_TOKEN_S,
            },
            delete_inputs={"out_path": kubeconfig_path},
            secret_inputs=("kubeconfig",),
            opts=child(),
        )
        agent = args.harbor.agent
        # Terminus-2 drives tmux in the task container (and asciinema records it); on a
        # cluster no bundle is mounted: the image must have them.
        tools = (["tmux"] + (["asciinema"] if agent.record_terminal_session else [])
                 if agent.needs_model else [])
        probe = host_step(
            f"{name}-cluster-preflight",
            host=args.host,
            create=k8s_preflight.create,
            inputs={
                # Known from the config, tied to the step that writes it.
                "kubeconfig": pulumi.Output.all(access.command.id, kubeconfig_path).apply(
                    lambda v: v[1]),
                "namespace": cluster.namespace,
                "registry": k8s.registry,
                "images": cluster.images,
                "probe_image": cluster.probe_image,
                "need_tools": tools,
                "egress_url": k8s.egress_url,
                "timeout_s": k8s.preflight_timeout_s,
            },
            triggers=[content_hash(json.dumps(cluster.images, sort_keys=True))],
            opts=child(access.command),
        )
        self.k8s_watch = {"kubeconfig": kubeconfig_path, "namespace": k8s.namespace}
        self.k8s_namespace = pulumi.Output.all(probe.command.id, cluster.namespace).apply(
            lambda v: v[1])
        return [access.command, probe.command]

    def __init__(
        self, name: str, args: HarborJobArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("benchstack:components:HarborJob", name, None, opts)
        check_args(args)
        host, harbor, dataset = args.host, args.harbor, args.dataset
        workspace = args.workspace.rstrip("/")
        jobs_dir = jobdir.jobs_dir(workspace)
        log_dir = jobdir.log_dir(workspace)
        tasks_dir = tasks_dir_of(workspace, dataset, args.dataset_path)

        # The job needs whatever the caller depends on (router, images, tool bundle, proxy
        # bridge) before any of its steps runs, not just before the component "completes".
        given = opts.depends_on if opts and opts.depends_on else []
        outer: list = list(given) if isinstance(given, list | tuple) else [given]

        def child(*after: pulumi.Resource, **extra) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(parent=self, depends_on=[*outer, *after], **extra)

        install = host_step(
            f"{name}-install",
            host=host,
            create=harbor_install.create,
            delete=harbor_install.delete,
            inputs={
                "workspace": workspace,
                "version": harbor.version,
                "wheel_sha256": harbor.wheel_sha256,
                "python": harbor.python,
                "wheel": harbor.wheel_path,
                "extras": [harbor.kubernetes.client] if harbor.kubernetes else [],
            },
            delete_inputs={"workspace": workspace, "version": harbor.version},
            opts=child(),
        )
        clone = clone_dir(workspace, dataset)
        dataset_run = host_step(
            f"{name}-dataset",
            host=host,
            create=harbor_dataset.create,
            delete=harbor_dataset.delete,
            inputs={
                "dataset_path": args.dataset_path,
                "git_url": dataset.repo,
                "commit": dataset.commit,
                "clone_dir": clone,
                "subdir": dataset.tasks_subdir,
                "expected_tasks": dataset.expected_tasks,
                "include": list(dataset.include),
                "exclude": list(dataset.exclude),
            },
            delete_inputs={"clone_dir": clone},
            opts=child(),
        )

        cluster_steps = self._cluster_steps(name, args, workspace, child)

        rendered = pulumi.Output.all(args.api_base, args.tools_dir, args.proxy_url).apply(
            lambda v: render_plan(
                harbor,
                dataset,
                model_name=args.model_name,
                workspace=workspace,
                tasks_dir=tasks_dir,
                api_base=v[0],
                tools_dir=v[1],
                proxy_url=v[2],
            )
        )
        default_bin = hostlayout.harbor_bin(workspace, harbor.version)
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
            harbor=harbor,
            n_concurrent=harbor.n_concurrent_trials,
            rendered=rendered,
            harbor_bin=harbor_bin,
            jobs_dir=jobs_dir,
            log_dir=log_dir,
            tasks_dir=tasks_dir,
            api_key=args.api_key,
            token=status.apply(lambda s: str(s.get("token") or "start")),
            configs_opts=child(dataset_run.command),
            # A new install or dataset must be checked again, even with the same config text.
            preflight_opts=lambda configs: child(configs, install.command, dataset_run.command,
                                                 *cluster_steps),
            launch_opts=child,
            k8s_watch=self.k8s_watch,
        )
        launch = steps.launch

        # Paths are known from the config alone; tying them to the launch makes a consumer of
        # job_dir (e.g. the audit) wait for Harbor to have started.
        def after_launch(value: pulumi.Input[str]) -> pulumi.Output[str]:
            return pulumi.Output.all(launch.command.id, value).apply(lambda v: v[1])

        # What a rerun of some of this job's tasks repeats exactly (components/harbor_rerun.py).
        self.host = host
        self.harbor = harbor
        self.dataset = dataset
        self.model_name = args.model_name
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
                "k8s_namespace": self.k8s_namespace,
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

