"""HarborRerun: some tasks of a finished main job, run again as a job of their own.

The seed's score became trustworthy only after a few targeted reruns of the trials with clear
infra impact. Harbor 0.21 cannot rerun selected trials (its resume only retries what an
interruption cut), so a rerun is a second job: the main job's pinned Harbor install, dataset,
agent, sampling, serving endpoint, compose override, tool bundle and proxy, with the dataset
narrowed to the rerun tasks (`task_names`), under its own name, log and PID file. The main
job's directory is never written to; `python -m audit MAIN --rerun RERUN` merges the two.

Which tasks (`harbor.reruns`): a list, or `from_audit: true`, the tasks the audit of the
finished main job lists for rerun (infra or cancelled). The audit runs at program time, on
every `up` and `preview`, as its own CLI where pulumi runs: the seam's one call of it
(components/seam/audit.py) reads a remote Harbor host's finished job from a copy made once.
A finished job's directory does not change, so its list does not either.

When (the `waiting` reason of the host seam): while the main job is absent, running or
interrupted, the rerun's three steps (configs, preflight, launch) are declared but only say
why they wait. On the first `up` after the main job finished, their triggers change and they
are replaced by the real steps; preview shows that replacement before it runs. After that the
launch token is the rerun's own status (components/job_spec.py), so a second `up` starts
nothing, and destroy stops the rerun gracefully before the main job, like the main job.

The rerun's name is `<main job name>-rerun-<digest of its tasks>`: another task list is
another job (the old one is stopped; its results stay).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import pulumi

from components.config import RerunsConfig
from components.harbor_job import HarborJob
from components.job_spec import JobSpec, Rendered, declare_job_steps
from components.seam.audit import tasks_to_rerun
from components.seam.probe import probe_host
from contracts import jobdir


@dataclass(frozen=True, kw_only=True)
class HarborRerunArgs:
    # The main job: its spec is repeated, its state and name waited on.
    job: HarborJob
    reruns: RerunsConfig


@dataclass(frozen=True)
class RerunPlan:
    """What the rerun is, given the main job's state: `waiting` is empty once it can run."""

    waiting: str
    tasks: tuple[str, ...] = ()
    job_name: str = ""
    rendered: Rendered | None = None


def rerun_job_name(main_job_name: str, tasks: tuple[str, ...]) -> str:
    digest = hashlib.sha256("\n".join(sorted(tasks)).encode()).hexdigest()
    return f"{main_job_name}{jobdir.RERUN_INFIX}{digest[:8]}"


def oldest_first(found: list[str], current: str) -> list[str]:
    """The reruns found on the host, then this one (once launched), each once."""
    return list(dict.fromkeys([*found, *([current] if current else [])]))


def plan_rerun(
    spec: JobSpec,
    *,
    state: str,
    main_job_name: str,
    tasks: list[str] | None,
    resolved: list,
) -> RerunPlan:
    if state != "finished" or tasks is None:
        return RerunPlan(
            waiting=f"waits for the main job {main_job_name} to finish; the rerun starts on "
            "the first `pulumi up` after that"
        )
    if not tasks:
        return RerunPlan(waiting=f"the audit of the main job {main_job_name} lists no task "
                         "for rerun")
    chosen = tuple(tasks)
    name = rerun_job_name(main_job_name, chosen)
    # The main job's spec, narrowed to the rerun tasks.
    rendered = spec.render(resolved, job_name=name, tasks=chosen)
    return RerunPlan(waiting="", tasks=chosen, job_name=name, rendered=rendered)


class HarborRerun(pulumi.ComponentResource):
    """A rerun job of some of the main job's tasks; waits until the main job has finished."""

    job_name: pulumi.Output[str]
    job_dir: pulumi.Output[str]
    job_log: pulumi.Output[str]
    pid_file: pulumi.Output[str]
    # Every rerun of the main job on the host, this one included once launched, oldest first.
    job_dirs: pulumi.Output[list[str]]
    tasks: pulumi.Output[list[str]]
    waiting: pulumi.Output[str]

    def __init__(
        self, name: str, args: HarborRerunArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("benchstack:components:HarborRerun", name, None, opts)
        job, spec = args.job, args.job.spec
        jobs_dir, log_dir = spec.jobs_dir, spec.log_dir
        if args.reruns.from_audit:
            finished_dir = pulumi.Output.all(job.job_state, job.job_dir).apply(
                lambda v: v[1] if v[0] == "finished" else "")
            listed = tasks_to_rerun(spec.host, finished_dir)
        else:
            listed = job.job_state.apply(
                lambda s: list(args.reruns.tasks) if s == "finished" else None)
        plan = pulumi.Output.all(job.job_state, job.job_name, listed, spec.resolved()).apply(
            lambda v: plan_rerun(spec, state=v[0], main_job_name=v[1], tasks=v[2],
                                 resolved=v[3])
        )
        waiting = plan.apply(lambda p: p.waiting)

        def say_why(values: list) -> None:
            state, main_name, why = values
            if why:
                pulumi.log.info(
                    f"harbor.reruns: the main job {main_name} is {state}: the rerun {why}",
                    resource=self,
                )

        pulumi.Output.all(job.job_state, job.job_name, waiting).apply(say_why)
        job_name = plan.apply(lambda p: p.job_name)
        status = spec.status(job_name)

        def child(*after: pulumi.Resource) -> pulumi.ResourceOptions:
            # After the main job's launch: a rerun never races the job whose tasks it repeats.
            return pulumi.ResourceOptions(parent=self, depends_on=[job.launch, *after])

        steps = declare_job_steps(
            name,
            spec,
            rendered=plan.apply(lambda p: p.rendered),
            harbor_bin=job.harbor_bin,
            token=pulumi.Output.all(waiting, status).apply(
                lambda v: "waiting" if v[0] else str(v[1].get("token") or "start")
            ),
            configs_opts=child(),
            preflight_opts=child,
            launch_opts=child,
            waiting=waiting,
        )
        launch = steps.launch

        def once_launched(value) -> pulumi.Output[str]:
            return pulumi.Output.all(launch.command.id, job_name, value).apply(
                lambda v: v[2] if v[1] else ""
            )

        self.job_name = job_name
        self.job_dir = once_launched(job_name.apply(lambda n: jobdir.job_dir(jobs_dir, n)))
        # Earlier rounds (another task list) stay on the host and in the merge.
        found = probe_host(
            spec.host, "harbor_reruns.sh",
            job.job_name.apply(lambda n: {"JOB_NAME": n, "JOBS_DIR": jobs_dir}),
        )
        self.job_dirs = pulumi.Output.all(found, self.job_dir).apply(
            lambda v: oldest_first(v[0].get("job_dirs") or [], v[1])
        )
        self.job_log = once_launched(job_name.apply(lambda n: jobdir.job_log(log_dir, n)))
        self.pid_file = once_launched(job_name.apply(lambda n: jobdir.pid_file(log_dir, n)))
        self.tasks = plan.apply(lambda p: list(p.tasks))
        self.waiting = waiting
        self.register_outputs(
            {
                "job_name": self.job_name,
                "job_dir": self.job_dir,
                "job_log": self.job_log,
                "pid_file": self.pid_file,
                "job_dirs": self.job_dirs,
                "tasks": self.tasks,
                "waiting": self.waiting,
            }
        )
