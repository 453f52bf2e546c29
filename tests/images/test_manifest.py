"""The image manifest, on the real Terminal-Bench 2.1 task.toml files and on faulty copies."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from components.manifest import ImageManifest, ManifestError, load_manifest
from tests.conftest import TB21_TASKS

# From shared/data/tb21-tasks/SOURCE.md: the tasks whose task.toml says allow_internet = false.
TB21_OFFLINE = sorted(
    "build-cython-ext chess-best-move code-from-image constraints-scheduling db-wal-recovery "
    "dna-insert extract-elf gcode-to-text git-leak-recovery kv-store-grpc largest-eigenval "
    "log-summary-date-ranges merge-diff-arc-agi-task modernize-scientific-stack "
    "multi-source-data-merger openssl-selfsigned-cert polyglot-c-py regex-log sanitize-git-repo "
    "sqlite-db-truncate vulnerable-secret".split()
)


@pytest.fixture
def dataset_copy(tmp_path: Path) -> Path:
    """A writable copy of five real tasks (the shared data is read-only)."""
    root = tmp_path / "tasks"
    for task in ("fix-git", "regex-log", "build-pmars", "hf-model-inference", "extract-elf"):
        (root / task).mkdir(parents=True)
        shutil.copyfile(TB21_TASKS / task / "task.toml", root / task / "task.toml")
        (root / task / "task.toml").chmod(0o644)
    return root


def test_tb21_has_89_distinct_images_sorted_with_their_tasks() -> None:
    manifest = load_manifest(TB21_TASKS)
    assert len(manifest.images) == 89
    names = manifest.image_names
    assert names == sorted(names) and len(set(names)) == 89
    assert len(manifest.tasks) == 89
    by_image = manifest.as_dict()
    assert by_image["alexgshaw/fix-git:20260403"] == ["fix-git"]
    assert by_image["alexgshaw/hf-model-inference:20260430"] == ["hf-model-inference"]
    tags = [name.rsplit(":", 1)[1] for name in names]
    assert (tags.count("20251031"), tags.count("20260403"), tags.count("20260430")) == (79, 6, 4)


def test_tb21_no_network_tasks_are_the_21_offline_ones() -> None:
    manifest = load_manifest(TB21_TASKS)
    assert manifest.no_network_tasks == TB21_OFFLINE


def test_content_hash_is_stable_and_follows_the_images(dataset_copy: Path) -> None:
    first = load_manifest(dataset_copy)
    assert first.content_hash() == load_manifest(dataset_copy).content_hash()
    # An edit that does not change images or network policy keeps the hash.
    toml = dataset_copy / "fix-git" / "task.toml"
    toml.write_text(toml.read_text().replace('difficulty = "easy"', 'difficulty = "hard"') + "\n")
    assert load_manifest(dataset_copy).content_hash() == first.content_hash()
    # A new image tag (a new dataset commit) changes it.
    toml.write_text(toml.read_text().replace("fix-git:20260403", "fix-git:20270101"))
    changed = load_manifest(dataset_copy)
    assert changed.content_hash() != first.content_hash()
    assert "alexgshaw/fix-git:20270101" in changed.image_names


def test_shared_image_lists_every_task_and_round_trips(dataset_copy: Path) -> None:
    toml = dataset_copy / "build-pmars" / "task.toml"
    toml.write_text(toml.read_text().replace("build-pmars:20251031", "fix-git:20260403"))
    manifest = load_manifest(dataset_copy)
    assert manifest.as_dict()["alexgshaw/fix-git:20260403"] == ["build-pmars", "fix-git"]
    assert len(manifest.images) == 4
    assert ImageManifest.model_validate_json(manifest.model_dump_json()) == manifest


def test_network_mode_other_than_public_is_no_network(dataset_copy: Path) -> None:
    toml = dataset_copy / "fix-git" / "task.toml"
    toml.write_text(toml.read_text().replace("[agent]", '[agent]\nnetwork_mode = "allowlist"'))
    assert load_manifest(dataset_copy).no_network_tasks == ["extract-elf", "fix-git", "regex-log"]


def test_malformed_toml_names_the_file(dataset_copy: Path) -> None:
    bad = dataset_copy / "regex-log" / "task.toml"
    bad.write_text(bad.read_text().replace('docker_image = "', "docker_image = "))
    with pytest.raises(ManifestError) as err:
        load_manifest(dataset_copy)
    assert str(bad) in str(err.value) and "not valid TOML" in str(err.value)


def test_missing_docker_image_names_the_file(dataset_copy: Path) -> None:
    bad = dataset_copy / "build-pmars" / "task.toml"
    lines = [line for line in bad.read_text().splitlines() if "docker_image" not in line]
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(ManifestError) as err:
        load_manifest(dataset_copy)
    assert str(bad) in str(err.value) and "docker_image" in str(err.value)


def test_missing_environment_table_names_the_file(dataset_copy: Path) -> None:
    bad = dataset_copy / "fix-git" / "task.toml"
    bad.write_text('schema_version = "1.1"\n')
    with pytest.raises(ManifestError, match=str(bad)):
        load_manifest(dataset_copy)


def test_empty_or_missing_dataset_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="no <task>/task.toml"):
        load_manifest(tmp_path)
    with pytest.raises(ManifestError, match="does not exist"):
        load_manifest(tmp_path / "nope")
