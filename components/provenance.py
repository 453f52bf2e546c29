"""Provenance: the manifest from which a reader can repeat the run, written beside the job's log.

One JSON beside the job's log (where: contracts/jobdir.py; schema
`benchstack.provenance/1` from contracts/outputs.py): the Harbor wheel's version and sha256,
the dataset's repository, commit and task count, every task image's digest, the SGLang image
id, the model's name and path, each worker's reported server config, the GPUs it runs on
(their UUIDs and models, the driver and its CUDA: hostside/gpu_check.py) and its startup's
phases, the router's flags, the serving plane's speed measured before launch, the stack name,
the reruns, and, read on the Harbor host (hostside/provenance.py), the config Harbor resolved
for the job and the compose override. The audit
shows it in its report and archives it next to the reports (`python -m audit --stack`).

It is rewritten whenever one of those facts changes (they are the trigger), after the job has
launched, and kept on destroy like the results.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi

from components.config import DatasetConfig, ModelConfig
from components.harbor_job import HarborJob
from components.harbor_rerun import HarborRerun
from components.router import Router
from components.seam.step import content_hash, host_step
from components.sglang_worker import SGLangWorker
from components.speed_check import SpeedCheck
from contracts import jobdir
from contracts import outputs as keys
from hostside import provenance


@dataclass(frozen=True, kw_only=True)
class ProvenanceArgs:
    stack: str
    job: HarborJob
    dataset: DatasetConfig
    task_count: int
    image_digests: pulumi.Input[dict]
    model: ModelConfig | None = None
    workers: Sequence[SGLangWorker] = ()
    router: Router | None = None
    rerun: HarborRerun | None = None
    # The serving plane's speed measured before launch (its figures are recorded).
    speed: SpeedCheck | None = None


def facts(
    args: ProvenanceArgs, *, job_name: str, job_dir: str, dataset_path: str,
    image_digests: dict, workers: list, router_args: list | None, reruns: list,
    speed: dict | None = None,
) -> dict:
    """The program's part of the manifest (the host adds the resolved config and override)."""
    harbor, model = args.job.spec.harbor, args.model
    return {
        "schema": keys.PROVENANCE_SCHEMA,
        "stack": args.stack,
        "harbor": {"version": harbor.version, "wheel_sha256": harbor.wheel_sha256,
                   "agent": harbor.agent.name, "n_attempts": harbor.n_attempts},
        "dataset": {"repo": args.dataset.repo, "commit": args.dataset.commit,
                    "path": dataset_path, "task_count": args.task_count,
                    "include": list(args.dataset.include), "exclude": list(args.dataset.exclude)},
        "task_images": dict(sorted(image_digests.items())),
        "serving": None if model is None else {
            "image_id": workers[0]["image_id"] if workers else None,
            "model_name": model.name,
            "model_path": model.path,
            "workers": workers,
            "router_args": router_args,
            "speed_check": speed,
        },
        "job": {"name": job_name, "dir": job_dir},
        "reruns": reruns,
    }


class Provenance(pulumi.ComponentResource):
    """The provenance manifest of the stack's job, on the Harbor host."""

    path: pulumi.Output[str]
    sha256: pulumi.Output[str]

    def __init__(
        self, name: str, args: ProvenanceArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("benchstack:components:Provenance", name, None, opts)
        job = args.job
        worker_facts = [
            pulumi.Output.all(w.url, w.image_id, w.server_info, w.gpus, w.startup).apply(
                lambda v: {"url": v[0], "image_id": v[1], "server_info": v[2], "gpus": v[3],
                           "startup": v[4]}
            )
            for w in args.workers
        ]
        rerun = args.rerun
        rerun_facts: pulumi.Input[list] = (
            pulumi.Output.all(rerun.job_name, rerun.job_dir, rerun.tasks).apply(
                lambda v: [{"name": v[0], "dir": v[1], "tasks": v[2]}] if v[1] else []
            )
            if rerun
            else []
        )
        # The job's dir from its name, not `job.job_dir`: that is tied to the launch step, and a
        # resume (a replaced launch) would make every fact unknown at preview and rewrite this.
        program_part = pulumi.Output.all(
            job.job_name,
            pulumi.Output.all(job.jobs_dir, job.job_name).apply(
                lambda v: jobdir.job_dir(v[0], v[1])),
            job.dataset_path,
            args.image_digests,
            pulumi.Output.all(*worker_facts),
            args.router.router_args if args.router else None,
            rerun_facts,
            args.speed.figures if args.speed else None,
        ).apply(
            lambda v: facts(
                args, job_name=v[0], job_dir=v[1], dataset_path=v[2], image_digests=v[3],
                workers=list(v[4]), router_args=v[5],
                reruns=list(v[6]), speed=v[7],
            )
        )
        facts_json = program_part.apply(lambda f: json.dumps(f, sort_keys=True))
        path = job.job_name.apply(lambda n: jobdir.provenance_file(job.spec.log_dir, n))
        write = host_step(
            f"{name}-write",
            host=job.spec.host,
            create=provenance.create,
            inputs={
                "out": path,
                "facts": program_part,
                "resolved_config": job.resolved_config_path,
                "compose_path": job.compose_path,
            },
            triggers=[facts_json.apply(content_hash)],
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[job.launch] + ([rerun] if rerun else [])
            ),
        )
        self.path = pulumi.Output.all(write.command.id, path).apply(lambda v: v[1])
        self.sha256 = write.outputs.apply(lambda o: str(o.get("sha256") or ""))
        self.register_outputs({"path": self.path, "sha256": self.sha256})
