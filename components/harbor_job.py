"""HarborJob: the benchmark job itself, from a pinned Harbor install to a running (or resumed) job.

The seed's "Install Harbor", "Download and pin Terminal-Bench 2.1", "Create the Harbor and
Docker Compose configs", "Run the full-run preflight", "Launch", and "Stop the experiment
correctly" as one component. Children (host steps of `hostside/`, run through the
host seam), in dependency order:

    install (harbor_install)  ─┐
    dataset (harbor_dataset)  ─┼─> configs (harbor_configs) -> preflight (harbor_preflight)
                               ┘                               -> launch (harbor_launch)
    launch's delete: the stop (SIGTERM, bounded wait, leftover compose projects)

What the job is (`JobSpec`) and its configs -> preflight -> launch steps are
components/job_spec.py's, shared with the reruns. Where the job's files are (jobs dir, log, PID
file, launch token, resolved config) is contracts/jobdir.py's, asked here and on the host alike.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pulumi

from components.job_spec import (
    JobSpec,
    clone_dir,
    controller_kubeconfig_path,
    declare_job_steps,
)
from components.seam.step import content_hash, host_step
from contracts import jobdir
from hostside import harbor_dataset, harbor_install, k8s_access, k8s_preflight


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


@dataclass(frozen=True, kw_only=True)
class HarborJobArgs:
    """The job (shared with its reruns), and the cluster the trials run on when they are pods."""

    spec: JobSpec
    # Trials as pods (harbor.environment kubernetes): the namespace the stack made for them.
    cluster: ClusterAccess | None = None
    # What the steps that read the serving plane and the trials' plane wait for (router, speed
    # check, images, bundle, bridge). An argument, not the component's depends_on: the engine
    # answers a component's registration, and so lets its children register, only once the
    # component's own dependencies are done, and Harbor's install would wait for the plane.
    after: Sequence[pulumi.Resource] = ()

    def __post_init__(self) -> None:
        if (self.cluster is None) != (self.spec.harbor.kubernetes is None):
            raise ValueError("HarborJobArgs.cluster is given exactly when "
                             "harbor.environment.kind is kubernetes")


# How long the Harbor controller's token is valid: longer than any job (the seed's took 7 h;
# five attempts at 25 concurrent trials take days); the launch of a resume renews it.
CONTROLLER_TOKEN_S = 30 * 24 * 3600


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
    # Trials as pods: the namespace (None on the Docker host).
    k8s_namespace: pulumi.Output[str | None]
    resolved_config_path: pulumi.Output[str]
    compose_path: pulumi.Output[str]

    def _cluster_steps(self, name: str, args: HarborJobArgs,
                       child: Callable[..., pulumi.ResourceOptions]) -> list[pulumi.Resource]:
        """Trials as pods: the Harbor controller's kubeconfig (a token of the namespace's
        ServiceAccount), then the pre-launch probe of the cluster with that identity: the
        rights, the task images in the registry, a pod admitted, scheduled and run, the tools
        and the egress the tasks need. Nothing on the Docker host."""
        spec, cluster = args.spec, args.cluster
        k8s = spec.harbor.kubernetes
        self.k8s_namespace = pulumi.Output.from_input(None)
        if k8s is None or cluster is None:
            return []
        kubeconfig_path = controller_kubeconfig_path(spec.workspace, k8s.namespace)
        access = host_step(
            f"{name}-cluster-access",
            host=spec.host,
            create=k8s_access.create,
            inputs={
                "kubeconfig": cluster.kubeconfig,
                "namespace": cluster.namespace,
                "service_account": cluster.service_account,
                "out_path": kubeconfig_path,
                "token_seconds": CONTROLLER_TOKEN_S,
            },
            delete=k8s_access.delete,
            delete_inputs={"out_path": kubeconfig_path},
            secret_inputs=("kubeconfig",),
            opts=child(),
        )
        agent = spec.harbor.agent
        # Terminus-2 drives tmux in the task container (and asciinema records it); on a
        # cluster no bundle is mounted: the image must have them.
        tools = (["tmux"] + (["asciinema"] if agent.record_terminal_session else [])
                 if agent.needs_model else [])
        probe = host_step(
            f"{name}-cluster-preflight",
            host=spec.host,
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
                "preflight_timeout_s": k8s.preflight_timeout_s,
            },
            triggers=[content_hash(json.dumps(cluster.images, sort_keys=True))],
            opts=child(access.command),
        )
        self.k8s_namespace = pulumi.Output.all(probe.command.id, cluster.namespace).apply(
            lambda v: v[1])
        return [access.command, probe.command]

    def __init__(
        self, name: str, args: HarborJobArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("benchstack:components:HarborJob", name, None, opts)
        spec = args.spec
        harbor, dataset, workspace = spec.harbor, spec.dataset, spec.workspace
        jobs_dir, log_dir, tasks_dir = spec.jobs_dir, spec.log_dir, spec.tasks_dir

        # Every step that reads the planes waits for them (args.after). Harbor's install and
        # the dataset read none of them: they run while the serving plane comes up (minutes of
        # weights on GPUs), and the preflight waits for both.
        outer = list(args.after)

        def child(*after: pulumi.Resource, **extra) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(parent=self, depends_on=[*outer, *after], **extra)

        def beside_the_plane() -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(parent=self)

        install = host_step(
            f"{name}-install",
            host=spec.host,
            create=harbor_install.create,
            inputs={
                "workspace": workspace,
                "version": harbor.version,
                "wheel_sha256": harbor.wheel_sha256,
                "python": harbor.python,
                "wheel_path": harbor.wheel_path,
                "extras": [harbor.kubernetes.client] if harbor.kubernetes else [],
            },
            delete=harbor_install.delete,
            delete_inputs={"workspace": workspace, "version": harbor.version},
            opts=beside_the_plane(),
        )
        clone = clone_dir(workspace, dataset)
        dataset_run = host_step(
            f"{name}-dataset",
            host=spec.host,
            create=harbor_dataset.create,
            inputs={
                "dataset_path": spec.dataset_path,
                "repo": dataset.repo,
                "commit": dataset.commit,
                "clone_dir": clone,
                "tasks_subdir": dataset.tasks_subdir,
                "expected_tasks": dataset.expected_tasks,
                "include": list(dataset.include),
                "exclude": list(dataset.exclude),
            },
            delete=harbor_dataset.delete,
            delete_inputs={"clone_dir": clone},
            opts=beside_the_plane(),
        )

        cluster_steps = self._cluster_steps(name, args, child)

        rendered = spec.resolved().apply(spec.render)
        # Known from the config and tied to the step (see ToolBundle.tools_dir for why).
        harbor_bin = pulumi.Output.all(install.command.id, spec.harbor_bin).apply(lambda v: v[1])
        job_name = rendered.apply(lambda r: r.job_name)
        status = spec.status(job_name)
        steps = declare_job_steps(
            name,
            spec,
            rendered=rendered,
            harbor_bin=harbor_bin,
            token=status.apply(lambda s: str(s.get("token") or "start")),
            configs_opts=child(dataset_run.command),
            # A new install or dataset must be checked again, even with the same config text.
            preflight_opts=lambda configs: child(configs, install.command, dataset_run.command,
                                                 *cluster_steps),
            launch_opts=child,
        )
        launch = steps.launch

        # Paths are known from the config alone; tying them to the launch makes a consumer of
        # job_dir (e.g. the audit) wait for Harbor to have started.
        def after_launch(value: pulumi.Input[str]) -> pulumi.Output[str]:
            return pulumi.Output.all(launch.command.id, value).apply(lambda v: v[1])

        # What a rerun of some of this job's tasks repeats, and waits for.
        self.spec = spec
        self.launch = launch.command
        # What the provenance manifest records of the launched job.
        self.resolved_config_path = job_name.apply(lambda n: jobdir.resolved_config(log_dir, n))
        self.compose_path = rendered.apply(lambda r: r.compose_path)

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
