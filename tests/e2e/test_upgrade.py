"""An old stack upgrades in place: the local stack brought up by the release before the three-
package layout (hostside/ and contracts/ out of components/, the typed seam, one name per value)
is updated by this tree's `up`: the host code is copied again and the steps whose command
changed run their idempotent create again; the job's dir, log and results are the same.

What this tree changed in the serving plane is replaced, and only that: the gateway (smg by
default, its metrics listener bound to loopback) and the worker (SGLang's metrics on) are new
containers, proven ready again, and the speed check before launch is new. A replaced worker cuts
the model calls in flight, so the old job is let finish first (an operator upgrades between
jobs); the finished job is left alone. The preview's diff is written to the test's output
(`pytest -s` shows it).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from contracts import outputs as keys
from tests.conftest import ROOT
from tests.e2e.conftest import DAEMON_JSON, LocalStack, docker0_address
from tests.e2e.test_local_stack import assert_demo_scores, audit_json, leftovers, wait_for_job
from tests.engine.conftest import Engine, ok, pulumi, steps, tracked_files
from tests.machine import link_shared

# Its stack's daemon config restarts this machine's Docker engine (tests/conftest.py).
pytestmark = [pytest.mark.real, pytest.mark.restarts_docker]

# The last commit with the old layout (the host code under components/, the seam one module).
PREVIOUS_RELEASE = "7fa2f99"
# What this tree replaces or adds in a stack of that release: the serving plane's containers
# (new flags), their readiness (a new container is proven again), the provenance (its facts
# changed), and the speed check it did not have.
REPLACED = {"local-sglang-container", "local-sglang-ready", "router-container", "router-ready",
            "provenance-write"}
ADDED = {"speed", "speed-measure"}


def checkout(commit: str, dest: Path) -> Path:
    """The project at `commit`, as a fresh clone of it has it (with this test env's venv)."""
    archive = subprocess.run(["git", "archive", "--format=tar", commit], cwd=ROOT,
                             capture_output=True, check=False)
    assert archive.returncode == 0, (
        f"commit {commit} is not in this clone's history: {archive.stderr.decode()[-300:]}")
    dest.mkdir(parents=True)
    tar = dest / "release.tar"
    tar.write_bytes(archive.stdout)
    with tarfile.open(tar) as t:
        t.extractall(dest, filter="data")
    tar.unlink()
    (dest / ".venv").symlink_to(Path(ROOT / ".venv").resolve())
    link_shared(dest)
    return dest


def pull_into(project: Path) -> None:
    """What `git pull` of this tree does to a clone of the previous release: the tracked files
    replaced, the removed ones gone; the state and the venv stay."""
    for path in sorted(project.rglob("*"), reverse=True):
        if path.relative_to(project).parts[0] in (".pulumi-state", ".venv") or path.is_dir():
            continue
        path.unlink()
    for rel in tracked_files():
        if (ROOT / rel).is_file():
            (project / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, project / rel)


def test_a_stack_of_the_previous_release_upgrades_in_place(
    engine: Engine, tmp_path: Path, target_url: str, canary_from_mirror: None, harbor_bin: Path
):
    workspace = tmp_path / "workspace"
    daemon_before = DAEMON_JSON.read_bytes() if DAEMON_JSON.exists() else None
    docker0_before = docker0_address()
    # One clone, as an operator has it: brought up by the previous release, then pulled.
    stack = LocalStack(engine, checkout(PREVIOUS_RELEASE, tmp_path / "benchstack"), workspace)

    def configure() -> None:
        stack.config("benchstack:workspace", str(workspace))
        stack.config("--path", "benchstack:proxy.check_url", target_url)

    try:
        ok(pulumi(engine, stack.project, "stack", "select", "--create", "local"))
        configure()
        stack.up()
        before = stack.outputs()
        wait_for_job(before)
        urns = {r["urn"] for r in stack.resources()}

        # `git pull` of this release; the stack file is the new one, the operator's settings
        # set again (a merge would keep them).
        pull_into(stack.project)
        configure()
        human = ok(stack.cli("preview", "--diff"))
        print(f"\n--- `pulumi preview --diff` of the upgrade ---\n{human.stdout}")
        plan = steps(stack.preview())
        ops = {name: op for name, op in plan.items() if op not in ("same", "read")
               and not name.startswith("benchstack-")}
        assert {n for n, op in ops.items() if op == "replace"} == REPLACED, ops
        assert {n for n, op in ops.items() if op == "create"} == ADDED, ops
        assert not [n for n, op in ops.items() if op not in ("update", "replace", "create")], ops
        updated = {n for n, op in ops.items() if op == "update"}
        # The host code and every step whose command names it; nothing else.
        assert "local-code-copy" in ops and "job-launch" in ops, ops
        assert all(n.endswith(("-code-copy", "-apply", "-build", "-socat", "-install",
                               "-dataset", "-configs", "-preflight", "-launch", "-pull",
                               "-ready", "-reach", "-write", "-check", "-stage", "-image-load"))
                   for n in updated), ops

        done = steps(stack.up())
        assert {n: op for n, op in done.items() if op not in ("same", "read")
                and not n.startswith("benchstack-")} == ops
        after = stack.outputs()
        assert after[keys.JOB_DIR] == before[keys.JOB_DIR]
        added = {r["urn"] for r in stack.resources()} - urns
        assert {u.rsplit("::", 1)[-1] for u in added} == ADDED, added
        assert urns <= {r["urn"] for r in stack.resources()}, "a resource was dropped"
        shipped = workspace / ".benchstack" / "code"
        assert (shipped / "hostside" / "harbor_launch.py").is_file()
        assert (shipped / "contracts" / "jobdir.py").is_file()
        assert not (shipped / "components").exists(), "the old layout's code is still there"
        stack.preview("--expect-no-changes")

        assert_demo_scores(audit_json(after[keys.JOB_DIR]))
        stack.destroy()
        assert leftovers(after[keys.JOB_NAME], workspace) == {
            "containers": [], "networks": [], "processes": []}
        assert (Path(after[keys.JOB_DIR]) / "result.json").is_file(), "destroy lost the results"
        assert json.loads((Path(after[keys.JOB_DIR]) / "result.json").read_text())
        assert (DAEMON_JSON.read_bytes() if DAEMON_JSON.exists() else None) == daemon_before
        assert docker0_address() == docker0_before
    finally:
        exported = stack.cli("stack", "export")
        if exported.returncode == 0 and exported.json()["deployment"].get("resources"):
            stack.destroy()
