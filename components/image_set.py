"""ImageSet: every task image of the pinned dataset present on the Harbor host as linux/amd64.

Seed step "Pull the 89 task images" as a resource: the manifest (components/manifest.py) is read
on the machine running Pulumi and passed, with the `images` section, to the host step
`hostside/image_set.py` (the pull engine: hostside/image_pull.py), run with the host's python3:
it pulls what is missing with skopeo (mirror, credentials, retries, bounded concurrency,
architecture check) and reports each image's digest. The manifest's content hash is a trigger,
so a new dataset commit that changes the images re-runs the step on the next `up`; the step
itself skips images already present, so only the new ones are pulled.

Harbor 0.21.0 runs tasks whose network policy is not public behind an egress-control sidecar
image it builds with `docker buildx` (hostside/image_sidecar.py). The step checks for it before
pulling anything: present,
built by Harbor (buildx), or assembled from Harbor's own build context without buildx (given
`harbor_python`); otherwise, with `require_sidecar`, it fails naming the tasks that would break.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components.config import ImagesConfig
from components.manifest import ImageManifest
from components.seam.host import Host
from components.seam.step import host_step
from hostside import image_set

# The tag Harbor 0.21.0 looks up for its sidecar (the config's default, kept here by name).
HARBOR_0_21_0_SIDECAR_IMAGE = ImagesConfig.model_fields["sidecar_image"].default
# Where the registry digests of pulled images are kept on the host between runs, unless the args
# name a place (`~`: the home of the host's user).
STATE_DIR = "~/.local/state/benchstack/image-set"


@dataclass(frozen=True, kw_only=True)
class RegistryCredentials:
    """Login for the registry images are pulled from (the mirror, else Docker Hub)."""

    username: str
    password: pulumi.Input[str]  # a Pulumi secret (config.require_secret)


@dataclass(frozen=True, kw_only=True)
class ImageSetArgs:
    host: Host
    images: ImagesConfig
    manifest: ImageManifest
    # images.username with the registryPassword secret.
    credentials: RegistryCredentials | None = None
    # The Harbor venv's python on the host: derives the sidecar tag from the installed Harbor and
    # lets the script build (buildx) or assemble (no buildx) a missing sidecar before launch.
    harbor_python: str | None = None
    state_dir: str | None = None


def _check(args: ImageSetArgs) -> None:
    if not args.manifest.images:
        raise ValueError("ImageSetArgs.manifest has no images: check the dataset path")
    if args.credentials is not None and not args.credentials.username:
        raise ValueError("ImageSetArgs.credentials.username is empty")
    for path_field in ("harbor_python", "state_dir"):
        value = getattr(args, path_field)
        if value is not None and not value.startswith("/"):
            raise ValueError(f"ImageSetArgs.{path_field} must be an absolute path, got {value!r}")


def step_inputs(args: ImageSetArgs) -> dict[str, pulumi.Input]:
    """The inputs of the host step for these args (the password only as the given Input)."""
    images, credentials = args.images, args.credentials
    return {
        "images": list(args.manifest.image_names),
        "no_network_tasks": list(args.manifest.no_network_tasks),
        "mirror": images.mirror,
        "concurrency": images.concurrency,
        "retries": images.retries,
        "retry_backoff_s": images.retry_backoff_s,
        "pull_timeout_s": images.pull_timeout_s,
        "pin_digests": images.pin_digests,
        "require_sidecar": images.require_sidecar,
        "sidecar_image": images.sidecar_image,
        "sidecar_context": None,
        "harbor_python": args.harbor_python,
        "state_dir": args.state_dir or STATE_DIR,
        "scratch_dir": images.scratch_dir,
        "registry_username": credentials.username if credentials else None,
        "registry_password": (
            pulumi.Output.secret(credentials.password) if credentials else None),
    }


class ImageSet(pulumi.ComponentResource):
    images_ready: pulumi.Output[int]
    images_total: pulumi.Output[int]
    image_digests: pulumi.Output[dict]
    repo_digests: pulumi.Output[dict]
    pinned_images: pulumi.Output[dict]
    manifest: pulumi.Output[dict]
    manifest_hash: pulumi.Output[str]
    sidecar_status: pulumi.Output[str]

    def __init__(self, name: str, args: ImageSetArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("benchstack:components:ImageSet", name, None, opts)
        _check(args)
        manifest_hash = args.manifest.content_hash()
        run = host_step(
            f"{name}-pull",
            host=args.host,
            create=image_set.create,
            inputs=step_inputs(args),
            # A new dataset commit with other images re-runs the pull (config changes re-render
            # the command and re-run it anyway). No delete: removing task images on destroy
            # would only cost the next `up` hours of pulling.
            triggers=[manifest_hash, *filter(None, [args.images.rerun_token])],
            # The password travels on standard input, and only when there is one.
            secret_inputs=("registry_password",) if args.credentials else (),
            opts=pulumi.ResourceOptions(parent=self),
        )
        outputs = run.outputs
        self.images_ready = outputs.apply(lambda o: int(o.get("ready", 0)))
        self.images_total = outputs.apply(lambda o: int(o.get("total", 0)))
        self.image_digests = outputs.apply(lambda o: dict(o.get("digests") or {}))
        self.repo_digests = outputs.apply(lambda o: dict(o.get("repo_digests") or {}))
        self.pinned_images = outputs.apply(lambda o: dict(o.get("pinned") or {}))
        self.sidecar_status = outputs.apply(
            lambda o: str((o.get("sidecar") or {}).get("status", ""))
        )
        self.manifest = pulumi.Output.from_input(args.manifest.as_dict())
        self.manifest_hash = pulumi.Output.from_input(manifest_hash)
        self.register_outputs(
            {
                "images_ready": self.images_ready,
                "images_total": self.images_total,
                "image_digests": self.image_digests,
                "repo_digests": self.repo_digests,
                "pinned_images": self.pinned_images,
                "manifest": self.manifest,
                "manifest_hash": self.manifest_hash,
                "sidecar_status": self.sidecar_status,
            }
        )
