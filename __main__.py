"""benchstack: the whole reproduction stack as one Pulumi graph.

This file only loads the stack config and wires components; each component owns its checks.
Destroy runs the graph backwards: job, router, workers, proxy bridge, daemon config — the
seed's manual stop order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

import pulumi

from components.config import (
    PROJECT_DIR,
    ConfigError,
    HostConfig,
    ModelConfig,
    RouterConfig,
    ServingConfig,
    SshConfig,
    StackConfig,
    check_rerun_tasks,
    check_task_needs,
    load_pulumi_config,
)
from components.docker_daemon import DockerDaemonConfig, DockerDaemonConfigArgs
from components.harbor_job import ClusterAccess, HarborJob, HarborJobArgs
from components.harbor_rerun import HarborRerun, HarborRerunArgs
from components.host_code import HostCode, HostCodeArgs
from components.image_set import ImageSet, ImageSetArgs, RegistryCredentials
from components.job_spec import JobSpec
from components.manifest import ImageManifest, ManifestError, load_manifest
from components.provenance import Provenance, ProvenanceArgs
from components.proxy_bridge import ProxyBridge, ProxyBridgeArgs
from components.router import Router, RouterArgs
from components.runtime import leave_quietly_when_interrupted
from components.seam.host import Host
from components.sglang_worker import SGLangWorker, SGLangWorkerArgs
from components.speed_check import SpeedCheck, SpeedCheckArgs
from components.tool_bundle import ToolBundle, ToolBundleArgs
from components.trial_namespace import TrialNamespace, TrialNamespaceArgs, kubeconfig_json
from contracts import jobdir
from contracts import outputs as keys


def host_of(cfg: HostConfig, ssh: SshConfig, ssh_private_key) -> Host:
    return Host(
        name=cfg.name,
        address=cfg.address,
        user=cfg.user,
        port=cfg.port,
        # Given for every host: the seam (components/seam/host.py) uses it only over ssh.
        private_key=ssh_private_key,
        key_path=cfg.ssh_key_path,
        host_key=cfg.host_key,
        known_hosts=ssh.known_hosts,
    )


def local_path(cfg: StackConfig, path: str) -> str:
    """A path in the stack file: relative ones are relative to the project directory."""
    return path if PurePosixPath(path).is_absolute() else str(PROJECT_DIR / path)


def serving_record(cfg: StackConfig, worker_urls: list[str]) -> dict | None:
    """What the sampler beside the job reads (hostside/serving_sampler.py): the gateway's
    metrics listener and, with SGLang's metrics on, each worker's /metrics, from the Harbor
    host (where the router reaches the workers too)."""
    if cfg.serving is None or cfg.router is None or not cfg.serving.record.enabled:
        return None
    record = cfg.serving.record
    targets = [{"source": "gateway", "url": cfg.router.metrics_url}]
    if cfg.serving.enable_metrics:
        targets += [{"source": "worker", "url": f"{url}/metrics"} for url in worker_urls]
    return {"targets": targets, "interval_s": record.interval_s,
            "max_bytes": record.max_mb * 1024 * 1024}


@dataclass(frozen=True)
class Trials:
    """Where the trials run, as the job and the stack outputs see it."""

    resources: list[pulumi.Resource]
    image_digests: pulumi.Input[dict]
    images_ready: pulumi.Input[int]
    tools_dir: pulumi.Input[str] | None = None
    proxy_url: pulumi.Input[str] | None = None
    cluster: ClusterAccess | None = None


def containers_on_the_host(cfg: StackConfig, manifest, harbor_host: Host,
                           harbor_daemon: DockerDaemonConfig, workspace: str,
                           secrets) -> Trials:
    """Trials as containers on the Harbor host's Docker engine: the task images pulled there,
    the tmux/asciinema bundle mounted, the proxy bridge on the Docker gateway."""
    images = ImageSet(
        "images",
        ImageSetArgs(
            host=harbor_host,
            images=cfg.images,
            manifest=manifest,
            credentials=(
                RegistryCredentials(
                    username=cfg.images.username, password=secrets.registry_password
                )
                if cfg.images.username and secrets.registry_password is not None
                else None
            ),
        ),
        opts=pulumi.ResourceOptions(depends_on=[harbor_daemon]),
    )
    canary = cfg.tools.canary_image or manifest.images[0].image
    tools = ToolBundle(
        "tools",
        ToolBundleArgs(
            host=harbor_host,
            tools=cfg.tools,
            tools_dir=f"{workspace}/harbor-tools-amd64",
            canary_image=canary,
        ),
        # The canary is one of the task images: prove the bundle where it will be used.
        opts=pulumi.ResourceOptions(depends_on=[images]),
    )
    proxy: ProxyBridge | None = None
    if cfg.proxy:
        proxy = ProxyBridge(
            "proxy",
            ProxyBridgeArgs(
                host=harbor_host,
                proxy=cfg.proxy,
                # Its log stays with the other logs; destroy removes only the pid files.
                state_dir=f"{jobdir.log_dir(workspace)}/proxy-bridge",
                check_image=canary,
            ),
            opts=pulumi.ResourceOptions(depends_on=[harbor_daemon, images]),
        )
    return Trials(
        resources=[r for r in (images, tools, proxy) if r is not None],
        image_digests=images.image_digests,
        images_ready=images.images_ready,
        tools_dir=tools.tools_dir,
        proxy_url=proxy.proxy_url if proxy else None,
    )


def pods_on_the_cluster(cfg: StackConfig, manifest, secrets) -> Trials:
    """Trials as pods on the user's cluster (Harbor's ack environment): the namespace, its
    quota, pull secret and the Harbor controller's rights; the images, tools and egress the
    pods need are checked from the Harbor host before launch (HarborJob's cluster steps)."""
    k8s = cfg.harbor.kubernetes
    assert k8s is not None and secrets.kubeconfig is not None  # config.py requires both
    kubeconfig = secrets.kubeconfig.apply(kubeconfig_json)
    namespace = TrialNamespace(
        "trials",
        TrialNamespaceArgs(kubernetes=k8s, kubeconfig=kubeconfig,
                           registry_password=secrets.kubernetes_registry_password),
    )
    return Trials(
        resources=[namespace],
        # The cluster pulls the images itself; the pre-launch probe checks the registry has them.
        image_digests={},
        # Every one, or the pre-launch probe stops the job before it starts.
        images_ready=len(manifest.images),
        cluster=ClusterAccess(
            namespace=namespace.namespace,
            service_account=namespace.service_account,
            kubeconfig=kubeconfig,
            images=manifest.as_dict(),
            probe_image=k8s.probe_image or manifest.images[0].image,
        ),
    )


def checked_manifest(cfg: StackConfig) -> tuple[ImageManifest, str]:
    """The dataset's image manifest and where it was read, checked against the reruns and the
    tasks' needs: read before any resource exists, so a bad dataset or rerun list changes
    nothing."""
    manifest_dir = local_path(cfg, cfg.dataset.manifest_path)
    try:
        manifest = load_manifest(manifest_dir)
    except ManifestError as exc:
        raise ConfigError([f"benchstack:dataset.manifest_path: {exc}"]) from None
    check_rerun_tasks(cfg.harbor.reruns, manifest.tasks, manifest_dir)
    # GPU tasks the Harbor host or version cannot run, trials longer than the job may hold.
    check_task_needs(cfg, manifest.needs, manifest_dir)
    return manifest, manifest_dir


def hosts_with_code(cfg: StackConfig, secrets) -> dict[str, Host]:
    """Every host by name, once the code its steps run is copied there (components/
    host_code.py)."""
    return {
        h.name: HostCode(
            f"{h.name}-code",
            HostCodeArgs(host=host_of(h, cfg.ssh, secrets.ssh_private_key),
                         workspace=cfg.workspace_of(h)),
        ).host
        for h in cfg.hosts
    }


def docker_daemons(cfg: StackConfig, hosts: dict[str, Host]) -> dict[str, DockerDaemonConfig]:
    """The daemon config of each host whose engine runs the stack's containers (config_checks
    requires the docker section there)."""
    return {
        h.name: DockerDaemonConfig(
            f"{h.name}-docker-daemon",
            DockerDaemonConfigArgs(host=hosts[h.name], docker=cfg.docker),
        )
        for h in cfg.docker_hosts
        if cfg.docker is not None
    }


@dataclass(frozen=True)
class ServingPlane:
    """The workers, the router in front of them and the speed check through it; none of them
    for a stack without a model (the oracle agent)."""

    workers: list[SGLangWorker]
    router: Router | None = None
    speed: SpeedCheck | None = None

    @property
    def worker_urls(self) -> list[str]:
        # From the config, not the readiness outputs: see RouterArgs.worker_urls.
        return [w.args.url for w in self.workers]


def sglang_workers(cfg: StackConfig, serving: ServingConfig, model: ModelConfig,
                   hosts: dict[str, Host], daemons: dict[str, DockerDaemonConfig],
                   secrets) -> list[SGLangWorker]:
    """One SGLang worker per GPU host (the local host with CPU stand-ins in the rehearsal)."""
    return [
        SGLangWorker(
            f"{h.name}-sglang",
            SGLangWorkerArgs(
                host=hosts[h.name],
                serving=serving,
                model=model,
                bind_host=h.reach_address,
                port=cfg.worker_port(h),
                container_name=f"benchstack-sglang-{h.name}",
                model_path=local_path(cfg, model.path),
                workspace=cfg.workspace_of(h),
                s3_access_key_id=secrets.s3_access_key_id,
                s3_secret_access_key=secrets.s3_secret_access_key,
                gpu_spec=h.gpus,
                gpu_spec_key=f"benchstack:hosts[{cfg.hosts.index(h)}].gpus",
            ),
            opts=pulumi.ResourceOptions(depends_on=[daemons[h.name]]),
        )
        for h in cfg.gpu_hosts
    ]


def router_of(cfg: StackConfig, plane: tuple[RouterConfig, ServingConfig, ModelConfig],
              harbor_host: Host, workers: list[SGLangWorker],
              harbor_daemon: DockerDaemonConfig | None) -> Router:
    """The router on the Harbor host, in front of every worker."""
    router, serving, model = plane
    return Router(
        "router",
        RouterArgs(
            host=harbor_host,
            router=router,
            serving=serving,
            model=model,
            worker_urls=[w.args.url for w in workers],
            container_name="benchstack-sglang-router",
            workspace=cfg.workspace_of(cfg.harbor_host),
            model_path=local_path(cfg, model.path),
        ),
        # The router is only useful once every worker reports the config we asked for.
        opts=pulumi.ResourceOptions(
            depends_on=[*workers, *([harbor_daemon] if harbor_daemon else [])]),
    )


def speed_check(cfg: StackConfig, serving: ServingConfig, model: ModelConfig, harbor_host: Host,
                router: Router, workers: list[SGLangWorker], tasks_dir: str) -> SpeedCheck | None:
    """The serving plane measured at the job's agent concurrency before the job launches."""
    if not (cfg.needs_model and serving.speed_check.enabled):
        return None
    return SpeedCheck(
        "speed",
        SpeedCheckArgs(
            host=harbor_host,
            check=serving.speed_check,
            router_url=router.router_url,
            model=model.name,
            concurrency=cfg.harbor.agent.n_concurrent,
            tasks_dir=tasks_dir,
            ready=[router.container_id, *[w.container_id for w in workers]],
        ),
        opts=pulumi.ResourceOptions(depends_on=[router]),
    )


def serving_plane(cfg: StackConfig, hosts: dict[str, Host],
                  daemons: dict[str, DockerDaemonConfig], tasks_dir: str,
                  secrets) -> ServingPlane:
    """The GPU hosts' workers, the router on the Harbor host and the speed check through it."""
    serving, model = cfg.serving, cfg.model
    if not (serving and model and cfg.router):
        return ServingPlane(workers=[])
    harbor_host = hosts[cfg.harbor_host.name]
    workers = sglang_workers(cfg, serving, model, hosts, daemons, secrets)
    router = router_of(cfg, (cfg.router, serving, model), harbor_host, workers,
                       daemons.get(cfg.harbor_host.name))
    return ServingPlane(workers, router,
                       speed_check(cfg, serving, model, harbor_host, router, workers, tasks_dir))


def job_spec(cfg: StackConfig, harbor_host: Host, serving: ServingPlane, trials: Trials,
             secrets) -> JobSpec:
    """What the Harbor job is: the agent's endpoint, the trials' tools and proxy, the record."""
    dataset = cfg.dataset
    workspace = cfg.workspace_of(cfg.harbor_host)
    return JobSpec(
        host=harbor_host,
        harbor=cfg.harbor,
        dataset=dataset,
        workspace=workspace,
        dataset_path=(
            local_path(cfg, dataset.path)
            if dataset.path and cfg.harbor_host.is_local
            else dataset.path
        ),
        model_name=f"openai/{cfg.model.name}" if cfg.model and cfg.needs_model else None,
        # From the config, not the router's readiness output: see RouterArgs.worker_urls.
        api_base=f"{serving.router.url}/v1" if serving.router else None,
        tools_dir=trials.tools_dir,
        proxy_url=trials.proxy_url,
        api_key=secrets.api_key,
        serving_record=serving_record(cfg, serving.worker_urls),
    )


def export_outputs(cfg: StackConfig, harbor_host: Host, serving: ServingPlane, trials: Trials,
                   job: HarborJob, rerun: HarborRerun | None, provenance: Provenance) -> None:
    """The stack outputs (contracts/outputs.py: the audit reads them by these names)."""
    router = serving.router
    pulumi.export(keys.HARBOR_HOST, cfg.harbor_host.name)
    pulumi.export(keys.HARBOR_SSH, harbor_host.ssh_access())
    pulumi.export(keys.ROUTER_URL, router.router_url if router else None)
    pulumi.export(keys.WORKER_URLS, [w.url for w in serving.workers])
    pulumi.export(keys.JOB_NAME, job.job_name)
    pulumi.export(keys.JOBS_DIR, job.jobs_dir)
    pulumi.export(keys.JOB_DIR, job.job_dir)
    pulumi.export(keys.JOB_LOG, job.job_log)
    pulumi.export(keys.JOB_PID_FILE, job.pid_file)
    pulumi.export(keys.DATASET_PATH, job.dataset_path)
    pulumi.export(keys.TOOLS_DIR, trials.tools_dir)
    pulumi.export(keys.PROXY_URL, trials.proxy_url)
    pulumi.export(keys.IMAGES_READY, trials.images_ready)
    pulumi.export(keys.IMAGE_DIGESTS, trials.image_digests)
    pulumi.export(keys.TRIALS_ENVIRONMENT, cfg.harbor.environment.kind)
    pulumi.export(keys.K8S_NAMESPACE, job.k8s_namespace)
    reference = cfg.harbor.reference_score
    pulumi.export(keys.REFERENCE_SCORE, reference.model_dump() if reference else None)
    pulumi.export(keys.RERUN_JOB_DIRS, rerun.job_dirs if rerun else [])
    pulumi.export(keys.RERUN_WAITING, rerun.waiting if rerun else "")
    pulumi.export(keys.PROVENANCE_PATH, provenance.path)


def main() -> None:
    leave_quietly_when_interrupted()
    cfg, secrets = load_pulumi_config()
    manifest, manifest_dir = checked_manifest(cfg)
    hosts = hosts_with_code(cfg, secrets)
    harbor_host = hosts[cfg.harbor_host.name]
    daemons = docker_daemons(cfg, hosts)
    serving = serving_plane(cfg, hosts, daemons, manifest_dir, secrets)

    # The Harbor host's plane (images, bundle, bridge, job) lives in its workspace.
    if cfg.harbor.kubernetes is None:
        trials = containers_on_the_host(cfg, manifest, harbor_host, daemons[cfg.harbor_host.name],
                                        cfg.workspace_of(cfg.harbor_host), secrets)
    else:
        trials = pods_on_the_cluster(cfg, manifest, secrets)
    job = HarborJob(
        "job",
        HarborJobArgs(spec=job_spec(cfg, harbor_host, serving, trials, secrets),
                      cluster=trials.cluster,
                      after=[d for d in (serving.router, serving.speed, *trials.resources)
                             if d is not None]),
    )
    # Declared beside the main job from the start: it waits (and says why) until that job has
    # finished, then runs the listed tasks again as a job of its own.
    rerun = (
        HarborRerun("rerun", HarborRerunArgs(job=job, reruns=cfg.harbor.reruns),
                    opts=pulumi.ResourceOptions(depends_on=[job]))
        if cfg.harbor.reruns
        else None
    )
    provenance = Provenance(
        "provenance",
        ProvenanceArgs(
            stack=pulumi.get_stack(),
            job=job,
            dataset=cfg.dataset,
            task_count=len(manifest.tasks),
            image_digests=trials.image_digests,
            model=cfg.model,
            workers=serving.workers,
            router=serving.router,
            rerun=rerun,
            speed=serving.speed,
        ),
        opts=pulumi.ResourceOptions(depends_on=[job] + ([rerun] if rerun else [])),
    )
    export_outputs(cfg, harbor_host, serving, trials, job, rerun, provenance)


main()
