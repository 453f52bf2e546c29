"""The serving_image step (an image from an archive) for real, as the seam runs it: `docker save`
archives of the canary image on the test engine."""

from __future__ import annotations

import hashlib
import json
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ScriptResult, docker
from tests.serving.conftest import run_step

pytestmark = pytest.mark.real


@pytest.fixture
def tag(canary_image: str) -> Iterator[str]:
    name = f"benchstack-test/sglang-load:{uuid.uuid4().hex[:10]}"
    try:
        yield name
    finally:
        docker("rmi", name, check=False)


def save(canary_image: str, tag: str, archive: Path) -> str:
    docker("tag", canary_image, tag)
    docker("save", "-o", str(archive), tag)
    image_id = docker("image", "inspect", "--format", "{{.Id}}", tag).stdout.strip()
    docker("rmi", tag)  # the canary keeps the layers; only the tag is gone
    return image_id


def image_load(archive: Path, image: str) -> ScriptResult:
    return run_step("serving_image", {"archive": str(archive), "image": image})


def test_load_then_idempotent(canary_image: str, tag: str, tmp_path: Path) -> None:
    archive = tmp_path / "sglang.tar"
    image_id = save(canary_image, tag, archive)
    first = image_load(archive, tag)
    assert first.returncode == 0, first.stderr
    assert first.outputs == {"image": tag, "image_id": image_id, "architecture": "amd64",
                             "loaded": True}
    second = image_load(archive, tag)
    assert second.returncode == 0, second.stderr
    assert second.outputs["loaded"] is False
    assert second.outputs["image_id"] == image_id


def test_missing_archive(tmp_path: Path) -> None:
    result = image_load(tmp_path / "none.tar", "x:y")
    assert result.returncode == 1
    assert "none.tar not found" in result.reason


def test_not_a_docker_archive(tmp_path: Path) -> None:
    archive = tmp_path / "other.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(__file__, arcname="README")
    result = image_load(archive, "x:y")
    assert result.returncode == 1
    assert result.reason == (
        f"serving_image: {archive} has no readable manifest.json: is it a docker-archive tar?")


def test_archive_without_the_configured_tag(canary_image: str, tag: str, tmp_path: Path) -> None:
    archive = tmp_path / "sglang.tar"
    save(canary_image, tag, archive)
    other = f"benchstack-test/not-in-archive:{uuid.uuid4().hex[:8]}"
    result = image_load(archive, other)
    assert result.returncode == 1
    assert f"does not hold {other}" in result.reason


def test_arm64_archive_is_refused_and_removed(canary_image: str, tag: str, tmp_path: Path) -> None:
    archive = tmp_path / "sglang.tar"
    save(canary_image, tag, archive)
    # Relabel the image config as arm64 (and rename its blob to the new digest).
    root = tmp_path / "x"
    with tarfile.open(archive) as tar:
        tar.extractall(root, filter="tar")
    manifest = json.loads((root / "manifest.json").read_text())
    config_path = root / manifest[0]["Config"]
    config = json.loads(config_path.read_text())
    config["architecture"] = "arm64"
    data = json.dumps(config).encode()
    digest = hashlib.sha256(data).hexdigest()
    config_path.unlink()
    (root / f"{digest}.json").write_bytes(data)
    manifest[0]["Config"] = f"{digest}.json"
    (root / "manifest.json").write_text(json.dumps(manifest))
    arm = tmp_path / "arm64.tar"
    with tarfile.open(arm, "w") as tar:
        for path in sorted(root.iterdir()):
            tar.add(path, arcname=path.name)

    result = image_load(arm, tag)
    assert result.returncode == 1
    assert "is arm64, not amd64" in result.reason
    # Left as found: the wrong image is not kept under the tag.
    assert docker("image", "inspect", tag, check=False).returncode != 0
    assert docker("image", "inspect", canary_image, check=False).returncode == 0
