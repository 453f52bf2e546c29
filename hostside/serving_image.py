"""The SGLang image loaded from an archive on this host (the seed's skopeo route for hosts whose
Docker daemon cannot pull), proven amd64 (the workers' and the router's `-image-load`,
components/serving.py).

create: `docker load`s `archive` unless `image` is already the archive's image (its config
digest is the id `docker load` gives it), then checks that `image` is that image and amd64 (a
wrong-architecture image it loaded is removed again: the host is left as it was found); outputs
image, image_id, architecture, loaded.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from .step import HostError, emit, log, verb

NAME = "serving_image"
DOCKER = "docker"


@dataclass(frozen=True)
class Inputs:
    archive: str
    image: str


def archive_image_id(archive: Path) -> str:
    """The id `docker load` gives the archive's image: its config blob's digest, sha256:..."""
    try:
        with tarfile.open(archive) as tar:
            member = tar.extractfile("manifest.json")
            if member is None:
                raise KeyError("manifest.json")
            manifest = json.load(member)
        config = str(manifest[0]["Config"]).split("/")[-1]
    except (OSError, tarfile.TarError, KeyError, IndexError, TypeError, ValueError):
        raise HostError(f"{archive} has no readable manifest.json: is it a docker-archive tar?"
                        ) from None
    return "sha256:" + config.removesuffix(".json").removeprefix("sha256:")


def inspect(image: str, field: str) -> str | None:
    proc = subprocess.run([DOCKER, "image", "inspect", "--format", f"{{{{.{field}}}}}", image],
                          capture_output=True, text=True, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


@verb(Inputs)
def create(inputs: Inputs) -> None:
    archive, image = Path(inputs.archive), inputs.image
    if not archive.is_file() or archive.stat().st_size == 0:
        raise HostError(f"image archive {archive} not found (or empty) on "
                        f"{socket.gethostname()}: copy it there or fix serving.image_archive")
    want = archive_image_id(archive)
    loaded = False
    if inspect(image, "Id") != want:
        log(NAME, f"docker load -i {archive}")
        if subprocess.run([DOCKER, "load", "-i", str(archive)], stdin=subprocess.DEVNULL,
                          stdout=sys.stderr, check=False).returncode != 0:
            raise HostError(f"docker load -i {archive} failed")
        loaded = True
    image_id = inspect(image, "Id")
    if image_id is None:
        raise HostError(f"{archive} does not hold {image}: set serving.image to the tag it holds")
    if image_id != want:
        raise HostError(f"{image} is {image_id} after loading, not the archive's {want}: set "
                        "serving.image to the tag the archive holds")
    arch = inspect(image, "Architecture") or ""
    if arch != "amd64":
        if loaded:
            # Leave the host as it was found: the wrong image must not stay under the tag.
            subprocess.run([DOCKER, "rmi", image], capture_output=True, check=False)
        raise HostError(f"{image} from {archive} is {arch}, not amd64: fetch it with skopeo "
                        "--override-arch amd64")
    emit({"image": image, "image_id": image_id, "architecture": arch, "loaded": loaded})
