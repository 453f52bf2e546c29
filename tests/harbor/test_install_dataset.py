"""Real runs of the harbor_install and harbor_dataset steps: the pinned wheel, the pinned dataset,
and what their deletes remove (and keep)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hostside.uv_installer import UV_VERSION
from tests.conftest import ROOT
from tests.harbor.conftest import (
    WHEEL,
    WHEEL_SHA256,
    dataset_inputs,
    install_harbor,
    seam_step,
)

pytestmark = pytest.mark.no_docker


def test_install_from_the_pinned_wheel(installed_harbor: dict) -> None:
    harbor = Path(installed_harbor["harbor_bin"])
    version = subprocess.run([str(harbor), "--version"], capture_output=True, text=True,
                             env={"HARBOR_TELEMETRY": "0", "PATH": "/usr/bin:/bin"})
    assert version.returncode == 0 and "0.21.0" in version.stdout
    freeze = Path(installed_harbor["freeze"]).read_text()
    # A wheel install is frozen as `harbor @ file://...#sha256=<the pinned hash>`.
    assert f"harbor @ file://{WHEEL}#sha256={WHEEL_SHA256}" in freeze and "litellm==" in freeze
    assert installed_harbor["wheel_sha256"] == WHEEL_SHA256
    # Installed by uv, from the installer venv the step keeps with benchstack's own on the host.
    uv = Path(installed_harbor["workspace"]) / ".benchstack" / f"installer-uv-{UV_VERSION}"
    assert (uv / "bin" / "uv").is_file()
    # Idempotent: a second run keeps the venv (no reinstall: well under the install time).
    again = install_harbor(Path(installed_harbor["workspace"]))
    assert again.returncode == 0, again.stderr
    assert again.outputs["harbor_bin"] == str(harbor)
    assert "already installed" in again.stderr


@pytest.mark.real  # pip, reaching for an index
def test_a_host_whose_index_has_no_uv_installs_with_pip(tmp_path: Path) -> None:
    """pip that cannot get uv (here: an index on a closed loopback port) is no failed install:
    the step says so and installs with pip, as before uv."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_INDEX_URL="http://127.0.0.1:9/simple", PIP_NO_CACHE_DIR="1",
               PIP_RETRIES="0", PYTHONPATH=str(ROOT))
    probe = subprocess.run(
        [sys.executable, "-c", "import sys; from hostside.uv_installer import uv_python; "
         f"print(uv_python({str(tmp_path)!r}, step='harbor_install'))"],
        capture_output=True, text=True, env=env, timeout=300)
    assert (probe.returncode, probe.stdout) == (0, "None\n"), probe.stderr
    assert "no uv here (pip could not install uv==" in probe.stderr
    assert "installing with pip" in probe.stderr
    assert not list(tmp_path.iterdir()), "a half-built installer venv was left"


@pytest.mark.real  # the wheel setup.sh downloaded
def test_wrong_wheel_hash_aborts_naming_both_hashes(tmp_path: Path) -> None:
    wrong = "0" * 64
    result = install_harbor(tmp_path, wheel_sha256=wrong)
    assert result.returncode != 0
    assert WHEEL_SHA256 in result.reason and wrong in result.reason
    assert not (tmp_path / "harbor-0.21.0").exists(), "nothing may be installed"


@pytest.mark.real  # the wheel setup.sh downloaded
def test_a_tampered_wheel_is_refused(tmp_path: Path) -> None:
    tampered = tmp_path / "harbor-0.21.0-py3-none-any.whl"
    shutil.copy(WHEEL, tampered)
    with tampered.open("ab") as handle:
        handle.write(b"\0")
    result = install_harbor(tmp_path / "ws", wheel_path=str(tampered))
    assert result.returncode != 0 and f"expected {WHEEL_SHA256}" in result.reason
    assert not (tmp_path / "ws" / "harbor-0.21.0").exists()


def test_python_below_3_12_is_refused(tmp_path: Path) -> None:
    python311 = shutil.which("python3.11")
    assert python311, "python3.11 is the project's interpreter and must exist"
    result = install_harbor(tmp_path, python=python311)
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
    clone = tmp_path / "ws" / "datasets" / f"tb-demo-{pinned[:12]}"
    inputs = dataset_inputs(repo=url, commit=pinned, clone_dir=str(clone))
    result = seam_step("harbor_dataset", "create", inputs)
    assert result.returncode == 0, result.stderr
    out = result.outputs
    assert out["commit"] == pinned and out["task_count"] == 3 and out["selected_count"] == 3
    tasks = Path(out["dataset_path"])
    assert tasks == clone / "tasks"
    # Git kept no empty environment/ dirs; Harbor needs them.
    assert all((tasks / t / "environment").is_dir() for t in ("hello-file", "hello-file-slow"))
    assert not (tasks / "hello-file-2").exists(), "the later commit must not leak in"
    # Idempotent: the clone is reused.
    again = seam_step("harbor_dataset", "create", inputs)
    assert again.returncode == 0 and "cloning" not in again.stderr
    # The head commit has 4 tasks: a count mismatch names both numbers, nothing is replaced.
    wrong = seam_step("harbor_dataset", "create", inputs | {"commit": head})
    assert wrong.returncode != 0
    assert "has 4 tasks" in wrong.reason and "expected 3" in wrong.reason


def test_wrong_task_count_names_both_numbers(demo_dataset: Path) -> None:
    result = seam_step("harbor_dataset", "create",
                       dataset_inputs(dataset_path=str(demo_dataset), expected_tasks=89))
    assert result.returncode != 0
    assert "has 3 tasks" in result.reason and "expected 89" in result.reason


def test_unknown_commit_and_empty_selection_are_refused(tmp_path: Path, demo_dataset: Path) -> None:
    from tests.harbor.conftest import DEMO_TASKS

    url, _, _ = _demo_repo(tmp_path, DEMO_TASKS)
    clone = tmp_path / "ws" / "datasets" / "tb-demo-111111111111"
    missing = seam_step("harbor_dataset", "create", dataset_inputs(
        repo=url, commit="1" * 40, clone_dir=str(clone)))
    assert missing.returncode != 0 and "not in" in missing.reason
    assert not list((tmp_path / "ws" / "datasets").glob("*")), "no half clone left behind"
    none = seam_step("harbor_dataset", "create", dataset_inputs(
        dataset_path=str(demo_dataset), include=["hello-file-*"], exclude=["hello-file-*"]))
    assert none.returncode != 0 and "no task" in none.reason


def test_the_deletes_remove_what_the_steps_made_and_only_that(tmp_path: Path) -> None:
    """The dataset's delete removes the clone it made (never a directory the user gave); the
    install's removes a venv (pyvenv.cfg) and the downloaded wheel, and keeps the freeze list."""
    from tests.harbor.conftest import DEMO_TASKS

    given = tmp_path / "given"
    shutil.copytree(DEMO_TASKS, given)
    gone = seam_step("harbor_dataset", "delete", {"clone_dir": None})
    assert gone.returncode == 0 and gone.outputs == {"removed": ""}
    url, pinned, _ = _demo_repo(tmp_path, DEMO_TASKS)
    clone = tmp_path / "ws" / "datasets" / f"tb-demo-{pinned[:12]}"
    assert seam_step("harbor_dataset", "create", dataset_inputs(
        repo=url, commit=pinned, clone_dir=str(clone))).returncode == 0
    removed = seam_step("harbor_dataset", "delete", {"clone_dir": str(clone)})
    assert removed.outputs == {"removed": str(clone)} and not clone.exists()
    assert not clone.parent.exists(), "the emptied datasets/ dir goes too"
    assert seam_step("harbor_dataset", "delete", {"clone_dir": str(given)}).outputs == {
        "removed": ""} and given.is_dir(), "not a clone: left alone"

    workspace = tmp_path / "iws"
    (workspace / "harbor-0.21.0" / "bin").mkdir(parents=True)
    (workspace / "harbor-0.21.0" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (workspace / "wheels").mkdir()
    (workspace / "wheels" / "harbor-0.21.0-py3-none-any.whl").write_bytes(b"w")
    (workspace / "logs").mkdir()
    (workspace / "logs" / "harbor-0.21.0-freeze.txt").write_text("harbor==0.21.0\n")
    where = {"workspace": str(workspace), "version": "0.21.0"}
    out = seam_step("harbor_install", "delete", where)
    assert out.returncode == 0, out.stderr
    assert out.outputs["removed"] == [str(workspace / "harbor-0.21.0"),
                                      str(workspace / "wheels" / "harbor-0.21.0-py3-none-any.whl")]
    assert sorted(p.name for p in workspace.iterdir()) == ["logs"]
    again = seam_step("harbor_install", "delete", where)
    assert again.returncode == 0 and again.outputs == {"removed": []}
