"""benchstack: the whole reproduction stack as one Pulumi graph.

This file only loads the stack config and wires components; each component owns its checks.
Destroy runs the graph backwards: job, router, workers, proxy bridge, daemon config — the
seed's manual stop order.
"""

from __future__ import annotations

from pathlib import PurePosixPath

import pulumi

from components import outputs as keys
from components.config import (
    PROJECT_DIR,
    ConfigError,
    HostConfig,
    SshConfig,
    StackConfig,
    check_rerun_tasks,
    load_pulumi_config,
)
from components.docker_daemon import DockerDaemonConfig, DockerDaemonConfigArgs
from components.harbor_job import HarborJob, HarborJobArgs
from components.harbor_rerun import HarborRerun, HarborRerunArgs
from components.host import Host
from components.host_code import HostCode, HostCodeArgs
from components.hostside import jobdir
from components.image_set import ImageSet, ImageSetArgs, RegistryCredentials
from components.manifest import ManifestError, load_manifest
from components.provenance import Provenance, ProvenanceArgs
from components.proxy_bridge import ProxyBridge, ProxyBridgeArgs
from components.router import Router, RouterArgs
from components.runtime import leave_quietly_when_interrupted
from components.sglang_worker import SGLangWorker, SGLangWorkerArgs
from components.tool_bundle import ToolBundle, ToolBundleArgs


def host_of(cfg: HostConfig, ssh: SshConfig, ssh_private_key) -> Host:
    return Host(
        name=cfg.name,
        address=cfg.address,
        user=cfg.user,
        port=cfg.port,
        # Given for every host: the seam (components/host.py) uses it only over ssh.
        private_key=ssh_private_key,
        key_path=cfg.ssh_key_path,
        host_key=cfg.host_key,
        known_hosts=ssh.known_hosts,
    )


def local_path(cfg: StackConfig, path: str) -> str:
    """A path in the stack file: relative ones are relative to the project directory."""
    return path if PurePosixPath(path).is_absolute() else str(PROJECT_DIR / path)


def main() -> None:
    leave_quietly_when_interrupted()
    cfg, secrets = load_pulumi_config()
    # Read before any resource exists: a bad dataset or rerun list changes nothing.
    manifest_dir = local_path(cfg, cfg.dataset.manifest_path)
    try:
        manifest = load_manifest(manifest_dir)
    except ManifestError as exc:
        raise ConfigError([f"benchstack:dataset.manifest_path: {exc}"]) from None
    check_rerun_tasks(cfg.harbor.reruns, manifest.tasks, manifest_dir)
    # The Harbor host's plane (router, images, bundle, bridge, job) lives in its workspace.
    workspace = cfg.workspace_of(cfg.harbor_host)
    # Every step on a host runs code copied there first (components/host_code.py).
    hosts = {
        h.name: HostCode(
            f"{h.name}-code",
            HostCodeArgs(host=host_of(h, cfg.ssh, secrets.ssh_private_key),
                         workspace=cfg.workspace_of(h)),
        ).host
        for h in cfg.hosts
    }
    harbor_cfg = cfg.harbor_host
    harbor_host = hosts[harbor_cfg.name]

    daemons = {
        h.name: DockerDaemonConfig(
            f"{h.name}-docker-daemon",
            DockerDaemonConfigArgs(host=hosts[h.name], docker=cfg.docker),
        )
        for h in cfg.hosts
    }

    # --- serving plane (the GPU hosts; the local host with CPU stand-ins in the rehearsal) ----
    workers: list[SGLangWorker] = []
    router: Router | None = None
    if cfg.serving and cfg.model and cfg.router:
        model_path = local_path(cfg, cfg.model.path)
        for h in cfg.gpu_hosts:
            workers.append(
                SGLangWorker(
                    f"{h.name}-sglang",
                    SGLangWorkerArgs(
                        host=hosts[h.name],
                        serving=cfg.serving,
                        model=cfg.model,
                        bind_host=h.reach_address,
                        port=cfg.worker_port(h),
                        container_name=f"benchstack-sglang-{h.name}",
                        model_path=model_path,
                        workspace=cfg.workspace_of(h),
                        s3_access_key_id=secrets.s3_access_key_id,
                        s3_secret_access_key=secrets.s3_secret_access_key,
                    ),
                    opts=pulumi.ResourceOptions(depends_on=[daemons[h.name]]),
                )
            )
        router = Router(
            "router",
            RouterArgs(
                host=harbor_host,
                router=cfg.router,
                serving=cfg.serving,
                model=cfg.model,
                worker_urls=[w.args.url for w in workers],
                container_name="benchstack-sglang-router",
                workspace=workspace,
                model_path=model_path,
            ),
            # The router is only useful once every worker reports the config we asked for.
            opts=pulumi.ResourceOptions(depends_on=[*workers, daemons[harbor_cfg.name]]),
        )

    # --- the Harbor host's plane ----------------------------------------------------------
    harbor_daemon = daemons[harbor_cfg.name]
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

    dataset = cfg.dataset
    job = HarborJob(
        "job",
        HarborJobArgs(
            host=harbor_host,
            harbor=cfg.harbor,
            dataset=dataset,
            workspace=workspace,
            dataset_path=(
                local_path(cfg, dataset.path)
                if dataset.path and harbor_cfg.is_local
                else dataset.path
            ),
            model_name=f"openai/{cfg.model.name}" if cfg.model and cfg.needs_model else None,
            # From the config, not the router's readiness output: see RouterArgs.worker_urls.
            api_base=f"{router.url}/v1" if router else None,
            tools_dir=tools.tools_dir,
            proxy_url=proxy.proxy_url if proxy else None,
            api_key=secrets.api_key,
        ),
        opts=pulumi.ResourceOptions(
            depends_on=[d for d in (router, images, tools, proxy) if d is not None]
        ),
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
            dataset=dataset,
            task_count=len(manifest.tasks),
            image_digests=images.image_digests,
            model=cfg.model,
            workers=workers,
            router=router,
            rerun=rerun,
        ),
        opts=pulumi.ResourceOptions(depends_on=[job] + ([rerun] if rerun else [])),
    )

    pulumi.export(keys.HARBOR_HOST, harbor_cfg.name)
    pulumi.export(keys.ROUTER_URL, router.router_url if router else None)
    pulumi.export(keys.WORKER_URLS, [w.url for w in workers])
    pulumi.export(keys.JOB_NAME, job.job_name)
    pulumi.export(keys.JOBS_DIR, job.jobs_dir)
    pulumi.export(keys.JOB_DIR, job.job_dir)
    pulumi.export(keys.JOB_LOG, job.job_log)
    pulumi.export(keys.JOB_PID_FILE, job.pid_file)
    pulumi.export(keys.DATASET_PATH, job.dataset_path)
    pulumi.export(keys.TOOLS_DIR, tools.tools_dir)
    pulumi.export(keys.PROXY_URL, proxy.proxy_url if proxy else None)
    pulumi.export(keys.IMAGES_READY, images.images_ready)
    pulumi.export(keys.IMAGE_DIGESTS, images.image_digests)
    pulumi.export(keys.REFERENCE_SCORE, cfg.harbor.reference_score)
    pulumi.export(keys.RERUN_JOB_DIRS, rerun.job_dirs if rerun else [])
    pulumi.export(keys.RERUN_WAITING, rerun.waiting if rerun else "")
    pulumi.export(keys.PROVENANCE_PATH, provenance.path)


main()
