"""Real runs of harbor_install.sh and harbor_dataset.sh: the pinned wheel, the pinned dataset."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.harbor.conftest import HARBOR_PYTHON, WHEEL, WHEEL_SHA256, seam


def test_install_from_the_pinned_wheel(installed_harbor: dict) -> None:
    harbor = Path(installed_harbor["harbor_bin"])
    version = subprocess.run([str(harbor), "--version"], capture_output=True, text=True,
                             env={"HARBOR_TELEMETRY": "0", "PATH": "/usr/bin:/bin"})
    assert version.returncode == 0 and "0.21.0" in version.stdout
    freeze = Path(installed_harbor["freeze"]).read_text()
    # A wheel install is frozen as `harbor @ file://...#sha256=<the pinned hash>`.
    assert f"harbor @ file://{WHEEL}#sha256={WHEEL_SHA256}" in freeze and "litellm==" in freeze
    assert installed_harbor["wheel_sha256"] == WHEEL_SHA256
    # Idempotent: a second run keeps the venv (no reinstall: well under the install time).
    again = seam("harbor_install.sh", {"WORKSPACE": installed_harbor["workspace"],
                                       "PYTHON": HARBOR_PYTHON, "WHEEL": str(WHEEL)})
    assert again.returncode == 0, again.stderr
    assert again.outputs["harbor_bin"] == str(harbor)
    assert "already installed" in again.stderr


@pytest.mark.real  # the wheel setup.sh downloaded
def test_wrong_wheel_hash_aborts_naming_both_hashes(tmp_path: Path) -> None:
    wrong = "0" * 64
    result = seam("harbor_install.sh", {"WORKSPACE": str(tmp_path), "PYTHON": HARBOR_PYTHON,
                                        "WHEEL": str(WHEEL), "WHEEL_SHA256": wrong})
    assert result.returncode != 0
    assert WHEEL_SHA256 in result.reason and wrong in result.reason
    assert not (tmp_path / "harbor-0.21.0").exists(), "nothing may be installed"


@pytest.mark.real  # the wheel setup.sh downloaded
def test_a_tampered_wheel_is_refused(tmp_path: Path) -> None:
    tampered = tmp_path / "harbor-0.21.0-py3-none-any.whl"
    shutil.copy(WHEEL, tampered)
    with tampered.open("ab") as handle:
        handle.write(b"\0")
    result = seam("harbor_install.sh", {"WORKSPACE": str(tmp_path / "ws"),
                                        "PYTHON": HARBOR_PYTHON, "WHEEL": str(tampered)})
    assert result.returncode != 0 and f"expected {WHEEL_SHA256}" in result.reason
    assert not (tmp_path / "ws" / "harbor-0.21.0").exists()


def test_python_below_3_12_is_refused(tmp_path: Path) -> None:
    python311 = shutil.which("python3.11")
    assert python311, "python3.11 is the project's interpreter and must exist"
    result = seam("harbor_install.sh", {"WORKSPACE": str(tmp_path), "PYTHON": python311,
                                        "WHEEL": str(WHEEL)})
    assert result.returncode != 0
    assert "3.11" in result.reason and ">= 3.12" in result.reason


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def _demo_repo(tmp_path: Path, demo_tasks: Path) -> tuple[str, str, str]:
    """A local git repo holding the demo tasks under tasks/, with a later commit adding one."""
    repo = tmp_path / "tb-demo"
    shutil.copytree(demo_tasks, repo / "tasks")
    _git("init", "-q", cwd=repo)
    _git("add", ".", cwd=repo)
    _git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "demo", cwd=repo)
    pinned = _git("rev-parse", "HEAD", cwd=repo)
    shutil.copytree(repo / "tasks" / "hello-file", repo / "tasks" / "hello-file-2")
    _git("add", ".", cwd=repo)
    _git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "more", cwd=repo)
    return f"file://{repo}", pinned, _git("rev-parse", "HEAD", cwd=repo)


def test_git_dataset_is_cloned_at_the_pinned_commit(tmp_path: Path) -> None:
    from tests.harbor.conftest import DEMO_TASKS

    url, pinned, head = _demo_repo(tmp_path, DEMO_TASKS)
    env = {"WORKSPACE": str(tmp_path / "ws"), "GIT_URL": url, "COMMIT": pinned,
           "EXPECTED_TASKS": "3"}
    result = seam("harbor_dataset.sh", env)
    assert result.returncode == 0, result.stderr
    out = result.outputs
    assert out["commit"] == pinned and out["task_count"] == 3 and out["selected_count"] == 3
    tasks = Path(out["dataset_path"])
    assert tasks == tmp_path / "ws" / "datasets" / f"tb-demo-{pinned[:12]}" / "tasks"
    # Git kept no empty environment/ dirs; Harbor needs them.
    assert all((tasks / t / "environment").is_dir() for t in ("hello-file", "hello-file-slow"))
    assert not (tasks / "hello-file-2").exists(), "the later commit must not leak in"
    # Idempotent: the clone is reused.
    again = seam("harbor_dataset.sh", env)
    assert again.returncode == 0 and "cloning" not in again.stderr
    # The head commit has 4 tasks: a count mismatch names both numbers, nothing is replaced.
    wrong = seam("harbor_dataset.sh", env | {"COMMIT": head})
    assert wrong.returncode != 0
    assert "has 4 tasks" in wrong.reason and "expected 3" in wrong.reason


def test_wrong_task_count_names_both_numbers(demo_dataset: Path) -> None:
    result = seam("harbor_dataset.sh", {"DATASET_PATH": str(demo_dataset), "EXPECTED_TASKS": "89"})
    assert result.returncode != 0
    assert "has 3 tasks" in result.reason and "expected 89" in result.reason


def test_unknown_commit_and_empty_selection_are_refused(tmp_path: Path, demo_dataset: Path) -> None:
    from tests.harbor.conftest import DEMO_TASKS

    url, _, _ = _demo_repo(tmp_path, DEMO_TASKS)
    missing = seam("harbor_dataset.sh", {"WORKSPACE": str(tmp_path / "ws"), "GIT_URL": url,
                                         "COMMIT": "1" * 40, "EXPECTED_TASKS": "3"})
    assert missing.returncode != 0 and "not in" in missing.reason
    assert not list((tmp_path / "ws" / "datasets").glob("*")), "no half clone left behind"
    none = seam("harbor_dataset.sh", {"DATASET_PATH": str(demo_dataset), "EXPECTED_TASKS": "3",
                                      "INCLUDE": "hello-file-*", "EXCLUDE": "hello-file-*"})
    assert none.returncode != 0 and "no task" in none.reason
