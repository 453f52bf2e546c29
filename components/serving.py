"""What the SGLang workers and the router share: one Docker provider per host, the image by
id, the serving container's common options, and the readiness probe run on the host.

Neither component imports the other; both build their containers and probes from here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_docker as docker

from components.config import ServingConfig
from components.seam.host import Host
from components.seam.probe import probe_host
from components.seam.step import ScriptRun, host_step
from contracts.hostlayout import venvs_dir
from hostside import serving_image, serving_probe

# The seed ran both with Docker's json-file logs, capped: hours of request logs must not fill /.
LOG_DRIVER = "json-file"
LOG_OPTS = {"max-size": "100m", "max-file": "10"}


def docker_provider(name: str, host: Host, parent: pulumi.Resource) -> docker.Provider:
    """One explicit provider per host (default providers are disabled in Pulumi.yaml).

    pulumi-docker reaches `ssh://user@host` by running the local `ssh` binary, which cannot take
    key material, only a file or an agent. Writing the secret key to a stable path would leave
    it on disk in plain text, so the key comes from the user's ssh-agent (`ssh-add`) or from a
    key file they already keep (`hosts[].ssh_key_path`). The host-key policy and BatchMode come
    from the seam (`Host.docker_ssh_opts`), the same as every other SSH path.
    """
    return docker.Provider(
        f"{name}-docker",
        host=host.docker_host,
        ssh_opts=host.docker_ssh_opts,
        opts=pulumi.ResourceOptions(parent=parent),
    )


def image_reference(
    name: str,
    *,
    host: Host,
    image: str,
    image_archive: str | None,
    provider: docker.Provider,
    parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource] = (),
) -> pulumi.Output[str]:
    """The image's id (sha256:...) on `host`: containers reference it, never a tag string, so
    a tag that moves upstream can never swap the image under a running benchmark."""
    if "@sha256:" not in image and image_archive is None:
        pulumi.log.warn(
            f"{name}: image {image!r} is a tag; pin it as name@sha256:<digest> so that a later "
            "host or rerun gets the same image"
        )
    if image_archive is not None:
        load = host_step(
            f"{name}-image-load",
            host=host,
            create=serving_image.create,
            inputs={"archive": image_archive, "image": image},
            triggers=[image_archive, image],
            opts=pulumi.ResourceOptions(parent=parent, depends_on=list(depends_on)),
        )
        return load.outputs.apply(lambda out: str(out["image_id"]))
    pulled = docker.RemoteImage(
        f"{name}-image",
        name=image,
        # Several containers share it, and a destroy must not delete a 20 GB image that other
        # stacks (or the next up) use.
        keep_locally=True,
        platform="linux/amd64",
        opts=pulumi.ResourceOptions(
            parent=parent, provider=provider, depends_on=list(depends_on)
        ),
    )
    return pulled.image_id



def probe_inputs(
    spec: pulumi.Input[Mapping[str, Any]], *, workspace: str, serving: ServingConfig,
    timeout_s: int,
) -> dict[str, pulumi.Input[Any]]:
    """The inputs of one serving_probe step (hostside/serving_probe.py)."""
    return {
        "spec": spec,
        "python": serving.probe_python,
        "venvs_dir": venvs_dir(workspace),
        "pip_args": list(serving.pip_args),
        # Room above the probe's own bound for its last attempts and the report.
        "hard_timeout_s": timeout_s + 600,
    }


# The label a serving container's run token lives in (the status probe reads it).
RUN_TOKEN_LABEL = "benchstack.run-token"


def run_token(host: Host, container_name: str) -> pulumi.Output[str]:
    """The run token the serving container must carry (read at every preview and up): the
    running container's own, or a new one when it stopped or is absent (below)."""
    status = probe_host(host, "container_status.sh",
                        {"CONTAINER": container_name, "LABEL": RUN_TOKEN_LABEL})
    return status.apply(lambda s: str(s.get("token") or "start"))


def serving_container(
    name: str,
    *,
    host: Host,
    container_name: str,
    image_id: pulumi.Input[str],
    command: pulumi.Input[Sequence[pulumi.Input[str]]],
    stop_timeout_s: int,
    provider: docker.Provider,
    parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource],
    token: pulumi.Input[str] | None = None,
    **options,
) -> docker.Container:
    """A serving container on the host's network (it listens where Harbor and the router reach
    it; "host" reads back unchanged, so no ignore_changes), with capped logs, that must keep
    running. `options`: the role's own docker.Container arguments (ulimits, user, volumes...).

    Keeping it running: the engine learns that a container stopped only on a refresh, so a
    read-only probe (at every preview and up) returns the run token the running container
    carries, or a new one when it stopped; the token is a label, so a stopped worker or router
    is replaced (started again, and proven ready) by the next `up`, as the Harbor job is resumed.
    `token`: run_token's, where the caller's own steps before the container need it too.
    """
    if token is None:
        token = run_token(host, container_name)
    return docker.Container(
        f"{name}-container",
        name=container_name,
        image=image_id,
        command=command,
        network_mode="host",
        # The seed's `docker stop --time N`. stop_timeout is the engine's default for `docker
        # stop`; pulumi-docker's delete ignores it and stops with destroy_grace_seconds as the
        # timeout (unset: 0 s, an immediate kill).
        stop_timeout=stop_timeout_s,
        destroy_grace_seconds=stop_timeout_s,
        log_driver=LOG_DRIVER,
        log_opts=LOG_OPTS,
        must_run=True,
        labels=[docker.ContainerLabelArgs(label=RUN_TOKEN_LABEL, value=token)],
        opts=pulumi.ResourceOptions(
            parent=parent,
            provider=provider,
            depends_on=list(depends_on),
            # The name and the port are fixed: a replacement created before the old container
            # is deleted fails with "name already in use" / "address already in use".
            delete_before_replace=True,
        ),
        **options,
    )


def readiness_check(
    name: str,
    *,
    host: Host,
    spec: pulumi.Input[Mapping[str, Any]],
    container: docker.Container,
    workspace: str,
    serving: ServingConfig,
    timeout_s: int,
    parent: pulumi.Resource,
) -> ScriptRun:
    """The readiness probe of one container, run on its host (readiness.py over httpx)."""
    return host_step(
        f"{name}-ready",
        host=host,
        create=serving_probe.create,
        inputs=probe_inputs(spec, workspace=workspace, serving=serving, timeout_s=timeout_s),
        # A new container (replacement, new image) must be proven again; a new probe is an
        # update (its code digest is in the command), which runs it again too.
        triggers=[container.id],
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[container]),
    )
