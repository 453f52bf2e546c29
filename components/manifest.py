"""The image manifest of a task dataset: which Docker images its `task.toml` files need.

Pure Python (no Pulumi): it reads `<dataset>/<task>/task.toml` for every task directory and
returns the distinct images, sorted, each with the tasks that use it, plus the tasks whose
network policy is not public. Harbor 0.21.0 runs those behind its egress-control sidecar,
an image that has to exist before launch (see hostside/image_sidecar.py).

The task name is the task directory name: that is what `harbor run -i` filters on and what a
user sees in the dataset tree.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict

# Harbor 0.21.0 (`harbor.models.task.config`): a policy other than "public" turns on egress
# control; the deprecated `allow_internet = false` becomes "no-network".
_PUBLIC = "public"
_POLICY_SECTIONS = ("environment", "agent", "verifier")


class ManifestError(ValueError):
    """A dataset that cannot give a manifest; the message names the offending file."""


class ImageEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    image: str
    tasks: list[str]


class ImageManifest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    images: list[ImageEntry]
    no_network_tasks: list[str]

    @property
    def image_names(self) -> list[str]:
        return [entry.image for entry in self.images]

    @property
    def tasks(self) -> list[str]:
        return sorted(task for entry in self.images for task in entry.tasks)

    def as_dict(self) -> dict[str, list[str]]:
        """image -> tasks, the shape the component exports."""
        return {entry.image: list(entry.tasks) for entry in self.images}

    def content_hash(self) -> str:
        """A stable sha256 of what the pull depends on (images, tasks, no-network tasks).

        The ImageSet component uses it as a trigger: a changed dataset commit that changes any
        image or the set of offline tasks re-runs the pull; a commit that only edits
        instructions does not.
        """
        canonical = json.dumps(self.model_dump(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


def _is_no_network(doc: dict, path: Path) -> bool:
    env = doc.get("environment") or {}
    if env.get("allow_internet") is False:
        return True
    sections = [(name, doc.get(name) or {}) for name in _POLICY_SECTIONS]
    for i, step in enumerate(doc.get("steps") or []):
        if isinstance(step, dict):
            sections += [(f"steps[{i}].{n}", step.get(n) or {}) for n in ("agent", "verifier")]
    for label, section in sections:
        if not isinstance(section, dict):
            raise ManifestError(f"{path}: [{label}] is not a table")
        mode = section.get("network_mode")
        if mode is not None and mode != _PUBLIC:
            return True
    return False


def _read_task(path: Path) -> tuple[str, bool]:
    """(docker_image, needs egress control) of one task.toml; errors name the file."""
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{path}: not valid TOML: {exc}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path}: cannot be read: {exc}") from exc
    env = doc.get("environment")
    if not isinstance(env, dict):
        raise ManifestError(
            f"{path}: no [environment] table; every task must set [environment].docker_image"
        )
    image = env.get("docker_image")
    if not isinstance(image, str) or not image.strip():
        raise ManifestError(
            f"{path}: [environment].docker_image is missing or empty; this project only runs "
            "prebuilt task images (set docker_image to the task's published image)"
        )
    image = image.strip()
    if any(ch.isspace() for ch in image):
        raise ManifestError(f"{path}: [environment].docker_image {image!r} contains whitespace")
    return image, _is_no_network(doc, path)


def load_manifest(dataset_dir: Path | str) -> ImageManifest:
    """Build the manifest from every `<dataset_dir>/<task>/task.toml`.

    A directory without task.toml (or a plain file such as SOURCE.md) is not a task. An empty
    dataset is an error: it almost always means a wrong path or an unpinned checkout.
    """
    root = Path(dataset_dir)
    if not root.is_dir():
        raise ManifestError(f"{root}: dataset directory does not exist")
    users: dict[str, list[str]] = {}
    no_network: list[str] = []
    for task_toml in sorted(root.glob("*/task.toml")):
        task = task_toml.parent.name
        image, offline = _read_task(task_toml)
        users.setdefault(image, []).append(task)
        if offline:
            no_network.append(task)
    if not users:
        raise ManifestError(f"{root}: no <task>/task.toml found; is this the dataset root?")
    entries = [ImageEntry(image=img, tasks=sorted(tasks)) for img, tasks in sorted(users.items())]
    return ImageManifest(
        images=entries,
        no_network_tasks=sorted(no_network),
    )
