"""Shared test plumbing: where the real peers are, and how a host script is run by hand.

The peers (Docker engine, registry, proxy, Harbor venv) are started by `make setup`
(setup/dev.sh, then tests/env/setup.sh) with the same defaults as below. A missing peer is a test
failure, never a skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from components.seam import code as seam_code
from components.seam.code import PROJECT_ROOT
from hostside import dockerd_restart
from tests.machine import SHARED, setting
from tests.stages import NO_ENGINE

ROOT = Path(__file__).resolve().parent.parent
PROBES = ROOT / "hostside" / "probes"
TB21_TASKS = SHARED / "data" / "tb21-tasks"
SAMPLE_JOBS = SHARED / "reference" / "harbor-sample-jobs"

# The peers' addresses and paths: setup/defaults.env's (tests/machine.py).
STATE = Path(setting("TEST_STATE"))
REGISTRY = setting("REGISTRY")
PROXY = setting("PROXY")
CANARY_IMAGE = setting("CANARY_IMAGE")
HARBOR_VENV = STATE / f"harbor-{setting('HARBOR_VERSION')}"
# The other pinned profile's venv (0.26.0): tests/env/setup.sh installs both.
HARBOR_LATEST_VENV = STATE / f"harbor-{setting('HARBOR_LATEST_VERSION')}"
SSHD_PORT = int(setting("SSHD_PORT"))
SSHD_DIR = STATE / "sshd"


# Fixtures that start or need a real peer (engine, registry, Harbor, S3, sshd, the Pulumi CLI).
# A test that requests one, directly or through another fixture, is marked `real`; the rest
# is the fast loop, `make unit` (`pytest -m "not real"`).
PEER_FIXTURES = {
    "docker_engine", "canary_image", "harbor_bin", "harbor_latest_bin", "installed_harbor",
    "demo_dataset", "jobs",
    "s3_env", "s3_client", "bucket", "engine", "test_engine", "registry", "own_registry",
    "test_images", "processes", "sshd", "k8s_cluster",
}


# What a real test waits for beyond the peers (tests/run.sh runs them in stages as the builds
# finish): the Pulumi engine, the one-node cluster.
STAGE_FIXTURES = {"engine": "engine", "k8s_cluster": "cluster"}
# A test that brings up a stack on this machine whose Docker daemon config restarts this
# machine's engine (the local stack's address pools): marked `restarts_docker`, and tests/run.sh
# runs those alone, after the stages that run side by side (the two-host rehearsal's hosts are
# containers of this engine). test_upgrade.py, which builds its stack by hand, is marked there;
# `engine_left_running` below fails any other real test during which the engine was restarted.
RESTART_FIXTURES = {"local"}


def pytest_terminal_summary(terminalreporter) -> None:
    """Where a real stage's time goes: its Pulumi CLI calls by verb, and the five slowest (this
    process's: an xdist run's workers keep their own)."""
    engine_conftest = sys.modules.get("tests.engine.conftest")
    calls = getattr(engine_conftest, "CLI_CALLS", [])
    if not calls:
        return
    verbs: dict[str, list[float]] = {}
    for verb, seconds, _test in calls:
        verbs.setdefault(verb, []).append(seconds)
    terminalreporter.write_line("pulumi CLI: " + ", ".join(
        f"{verb} {len(times)}x {sum(times):.0f} s" for verb, times in
        sorted(verbs.items(), key=lambda item: -sum(item[1]))))
    for verb, seconds, test in sorted(calls, key=lambda call: -call[1])[:5]:
        terminalreporter.write_line(f"  {seconds:6.1f} s  pulumi {verb}  ({test})")


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        # Fixtures, not the parametrized arguments pytest lists with them: a fast test's
        # `registry` or `local` argument is no peer (no test parametrizes a fixture indirectly).
        params = set(getattr(getattr(item, "callspec", None), "params", {}))
        fixtures = set(getattr(item, "fixturenames", ())) - params
        if PEER_FIXTURES & fixtures:
            item.add_marker(pytest.mark.real)
        for fixture, marker in STAGE_FIXTURES.items():
            if fixture in fixtures:
                item.add_marker(getattr(pytest.mark, marker))
        if PEER_FIXTURES & fixtures and RESTART_FIXTURES & fixtures:
            item.add_marker(pytest.mark.restarts_docker)


@pytest.fixture(autouse=True)
def engine_left_running(request: pytest.FixtureRequest) -> Iterator[None]:
    """The proof that only `restarts_docker` tests restart this machine's Docker engine: any other
    real test, here or beside it (tests/run.sh runs some side by side), during which the engine
    serving the default socket changed fails, naming both PIDs. Not a test run with a Docker
    endpoint that nothing serves (NO_ENGINE: the stages beside the restarts), which reaches no
    engine, so could restart none, and sees the restarts beside it."""
    marks = {mark.name for mark in request.node.iter_markers()}
    if ("real" not in marks or "restarts_docker" in marks
            or os.environ.get("DOCKER_HOST") == NO_ENGINE):
        yield
        return
    before = dockerd_restart.serving_pids("")
    yield
    after = dockerd_restart.serving_pids("")
    if before and after != before:
        pytest.fail(f"this machine's Docker engine was restarted during this test (dockerd "
                    f"{before} -> {after or 'none'}): a test that restarts it is marked "
                    "restarts_docker (tests/conftest.py), and tests/run.sh never runs one beside "
                    "another test", pytrace=False)



@dataclass(frozen=True)
class ScriptResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def outputs(self) -> dict:
        """The script's outputs: the last stdout line, a JSON object by convention."""
        lines = [line for line in self.stdout.splitlines() if line.strip()]
        if not lines:
            raise AssertionError(f"script printed nothing on stdout; stderr:\n{self.stderr}")
        return json.loads(lines[-1])

    @property
    def reason(self) -> str:
        """The one-line failure reason: the last non-empty stderr line."""
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        return lines[-1] if lines else ""


# The host code as HostCode copies it to a host: the same files at the same paths.
CODE = str(PROJECT_ROOT)


def until_stdin_closes(*argv: str) -> subprocess.Popen:
    """A process that runs until the test closes its standard input, with `argv` on its
    command line: a stand-in for a process a test watches end (Harbor, a sampler) that ends
    when the test says, never on a clock."""
    return subprocess.Popen(["python3", "-c", "import sys; sys.stdin.read()", *argv],
                            stdin=subprocess.PIPE)


def docker(*args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, check=check, timeout=timeout
    )


@pytest.fixture
def scratch_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the host code (hostside/ with its probes, contracts/) that the seam reads
    instead of the checkout's, for a test that adds a throwaway probe or module: the checkout's
    own stays as it is for every other test (and every other worker) reading it meanwhile."""
    for package in ("hostside", "contracts"):
        shutil.copytree(PROJECT_ROOT / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(seam_code, "PROJECT_ROOT", tmp_path)
    seam_code._module_closure.cache_clear()
    yield tmp_path
    seam_code._module_closure.cache_clear()


@pytest.fixture(scope="session")
def docker_engine() -> None:
    """The real Docker engine; its absence fails the test (run `make setup` first)."""
    if shutil.which("docker") is None:
        pytest.fail("docker CLI not found: run `make setup`")
    proc = docker("info", "--format", "{{.ServerVersion}}", check=False, timeout=30)
    if proc.returncode != 0:
        pytest.fail(f"Docker engine not answering: {proc.stderr.strip()} (run `make setup`)")


@pytest.fixture(scope="session")
def canary_image(docker_engine: None) -> str:
    """An image with neither tmux nor python: what the tool bundle must work in."""
    if docker("image", "inspect", CANARY_IMAGE, check=False).returncode != 0:
        pytest.fail(f"canary image {CANARY_IMAGE} missing: run `make setup`")
    return CANARY_IMAGE


@pytest.fixture(scope="session")
def harbor_bin() -> Path:
    harbor = HARBOR_VENV / "bin" / "harbor"
    if not harbor.exists():
        pytest.fail(f"Harbor 0.21.0 not installed at {HARBOR_VENV}: run `make setup`")
    return harbor


@pytest.fixture(scope="session")
def harbor_latest_bin() -> Path:
    """The tests' Harbor of the other profile (0.26.0)."""
    harbor = HARBOR_LATEST_VENV / "bin" / "harbor"
    if not harbor.exists():
        pytest.fail(f"Harbor {setting('HARBOR_LATEST_VERSION')} not installed at "
                    f"{HARBOR_LATEST_VENV}: run `make setup`")
    return harbor


# The k8s cluster's fixtures, defined once for every test directory (a session fixture imported
# into two modules would be two clusters). Imported last: tests.k8s.cluster reads names above.
from tests.k8s.cluster import (  # noqa: E402, F401
    harbor_with_k8s_client,
    k8s_cluster,
    namespace,
)
