"""The image manifest of a task dataset: which Docker images its `task.toml` files need.

Pure Python (no Pulumi): it reads `<dataset>/<task>/task.toml` for every task directory and
returns the distinct images, sorted, each with the tasks that use it, plus the tasks whose
network policy is not public. Harbor runs those behind its egress-control sidecar, an image
that has to exist before launch (see hostside/image_sidecar.py). It also reads what each task
needs of the host and of the job (`TaskNeeds`: GPUs, and the timeouts a trial of it can take),
which the config checks hold against the stack before anything runs
(components/config_checks.py: `task_problems`).

The task name is the task directory name: that is what `harbor run -i` filters on and what a
user sees in the dataset tree.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from contracts import harbor_profiles as harbor

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


class TaskNeeds(BaseModel):
    """What one task's trial needs: `[environment].gpus` (and `gpu_types`), and its timeouts in
    seconds as task.toml gives them, Harbor's defaults where it gives none (agent: none at all;
    multi-step tasks: their steps' agent and verifier timeouts added up)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpus: int = Field(default=0, ge=0)
    gpu_types: list[str] | None = None
    agent_timeout_s: float | None = None
    verifier_timeout_s: float = harbor.VERIFIER_TIMEOUT_S
    build_timeout_s: float = harbor.BUILD_TIMEOUT_S


class ImageManifest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    images: list[ImageEntry]
    no_network_tasks: list[str]
    # Each task's needs, by task name (components/config_checks.py holds them to the stack).
    needs: dict[str, TaskNeeds] = Field(default_factory=dict)

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
        pulled = self.model_dump(include={"images", "no_network_tasks"})
        canonical = json.dumps(pulled, sort_keys=True, separators=(",", ":"))
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


def _seconds(section: object, key: str, path: Path, label: str) -> float | None:
    value = section.get(key) if isinstance(section, dict) else None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ManifestError(f"{path}: [{label}].{key} must be a positive number, got {value!r}")
    return float(value)


def _needs(doc: dict, env: dict, path: Path) -> TaskNeeds:
    """A task's GPUs and timeouts (Harbor's `harbor/models/task/config.py` fields)."""
    gpus = env.get("gpus") or 0
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
        raise ManifestError(f"{path}: [environment].gpus must be a whole number, got {gpus!r}")
    gpu_types = env.get("gpu_types")
    if gpu_types is not None and not (isinstance(gpu_types, list)
                                      and all(isinstance(t, str) for t in gpu_types)):
        raise ManifestError(f"{path}: [environment].gpu_types must be a list of names")
    agent = _seconds(doc.get("agent"), "timeout_sec", path, "agent")
    verifier = _seconds(doc.get("verifier"), "timeout_sec", path, "verifier")
    steps = [s for s in doc.get("steps") or [] if isinstance(s, dict)]
    if steps:
        # A multi-step trial runs every step's agent and verifier in turn.
        per_step = [(_seconds(s.get("agent"), "timeout_sec", path, f"steps[{i}].agent"),
                     _seconds(s.get("verifier"), "timeout_sec", path, f"steps[{i}].verifier"))
                    for i, s in enumerate(steps)]
        agents = [a if a is not None else agent for a, _ in per_step]
        agent = None if any(a is None for a in agents) else sum(a for a in agents if a)
        verifier = sum(v if v is not None else harbor.VERIFIER_TIMEOUT_S for _, v in per_step)
    build = _seconds(env, "build_timeout_sec", path, "environment")
    return TaskNeeds(
        gpus=gpus, gpu_types=gpu_types, agent_timeout_s=agent,
        verifier_timeout_s=verifier if verifier is not None else harbor.VERIFIER_TIMEOUT_S,
        build_timeout_s=build if build is not None else harbor.BUILD_TIMEOUT_S,
    )


def _read_task(path: Path) -> tuple[str, bool, TaskNeeds]:
    """(docker_image, needs egress control, needs) of one task.toml; errors name the file."""
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
    return image, _is_no_network(doc, path), _needs(doc, env, path)


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
    needs: dict[str, TaskNeeds] = {}
    for task_toml in sorted(root.glob("*/task.toml")):
        task = task_toml.parent.name
        image, offline, needs[task] = _read_task(task_toml)
        users.setdefault(image, []).append(task)
        if offline:
            no_network.append(task)
    if not users:
        raise ManifestError(f"{root}: no <task>/task.toml found; is this the dataset root?")
    entries = [ImageEntry(image=img, tasks=sorted(tasks)) for img, tasks in sorted(users.items())]
    return ImageManifest(
        images=entries,
        no_network_tasks=sorted(no_network),
        needs=needs,
    )
