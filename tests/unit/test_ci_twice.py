"""tests/env/ci_twice.sh's own mechanism, with a stand-in for CI's script (the real one takes 50
minutes a run): a project with that script and a `.ci/run` that records where it ran, beside a
`shared/vendor` folder. The second run starts only once the first run's clone is gone; a failed
run stops the script and its clone is deleted all the same."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.machine import ROOT, SHARED

STAND_IN = """#!/usr/bin/env bash
# Stand-in for CI's script: records where it ran, what it found beside it, and CI.
set -euo pipefail
{
  echo "ran in $PWD at $(git rev-parse HEAD) CI=$CI"
  ls ..
} >>"$RECORD"
echo "=== stage times (whole run 1 s) ===" >&2
[[ ! -e "$FAIL_IN" || "$PWD" != "$(cat "$FAIL_IN")" ]]
"""


def project(tmp_path: Path) -> tuple[Path, str]:
    """work/project (a git checkout holding the script and the stand-in), work/shared/vendor."""
    work = tmp_path / "work"
    checkout = work / "project"
    (work / SHARED.name / "vendor").mkdir(parents=True)
    (checkout / "tests" / "env").mkdir(parents=True)
    (checkout / ".ci").mkdir()
    shutil.copy2(ROOT / "tests" / "env" / "ci_twice.sh", checkout / "tests" / "env")
    (checkout / ".ci" / "run").write_text(STAND_IN)
    (checkout / ".ci" / "run").chmod(0o755)
    git = ["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git[:3], "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "stand-in"], check=True)
    head = subprocess.run([*git[:3], "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    return checkout, head


def ci_twice(checkout: Path, tmp_path: Path, fail_in: str = "") -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(tmp_path),
           "RECORD": str(tmp_path / "record"), "FAIL_IN": str(tmp_path / "fail-in"),
           "CI_TWICE_LOGS": str(tmp_path / "logs")}
    if fail_in:
        (tmp_path / "fail-in").write_text(fail_in)
    return subprocess.run(["bash", str(checkout / "tests" / "env" / "ci_twice.sh")], env=env,
                          capture_output=True, text=True, timeout=120)


def test_two_runs_from_two_fresh_clones_the_first_deleted_before_the_second(
    tmp_path: Path,
) -> None:
    checkout, head = project(tmp_path)
    done = ci_twice(checkout, tmp_path)
    assert done.returncode == 0, done.stderr
    work = checkout.parent
    record = (tmp_path / "record").read_text().splitlines()
    first, second = record.index(f"ran in {work}/ci-a at {head} CI=true"), record.index(
        f"ran in {work}/ci-b at {head} CI=true")
    # Beside the first run: its own clone; beside the second: its own, the first one gone.
    assert sorted(record[first + 1:second]) == ["ci-a", "project", "shared"]
    assert sorted(record[second + 1:]) == ["ci-b", "project", "shared"]
    assert not (work / "ci-a").exists() and not (work / "ci-b").exists()
    assert "[ci_twice] ci-b: passed in " in done.stderr
    assert f"[ci_twice] both runs passed at {head[:12]}" in done.stderr
    assert (tmp_path / "logs" / "ci-b.log").read_text().startswith("=== stage times")


def test_a_failed_run_stops_it_and_its_clone_is_deleted(tmp_path: Path) -> None:
    checkout, _ = project(tmp_path)
    done = ci_twice(checkout, tmp_path, fail_in=str(checkout.parent / "ci-a"))
    assert done.returncode != 0
    assert done.stderr.strip().endswith(
        f"ci_twice: the first run failed: see {tmp_path}/logs/ci-a.log")
    assert not (checkout.parent / "ci-a").exists() and not (checkout.parent / "ci-b").exists()
    assert "ci-b" not in (tmp_path / "record").read_text()


def test_refused_where_the_clones_could_not_build(tmp_path: Path) -> None:
    checkout, _ = project(tmp_path)
    shutil.rmtree(checkout.parent / SHARED.name)
    done = ci_twice(checkout, tmp_path)
    assert done.returncode != 0
    assert f"{checkout.parent}/shared/vendor is missing" in done.stderr
    assert not (tmp_path / "record").exists()
