"""Fixtures of the real-CLI tests: the Pulumi engine tests/env/setup.sh built, and a fresh
copy of the project for each test (the CLI writes `encryptionsalt` and secrets into the stack
file and state into `.pulumi-state/`, which must never touch the checkout).

Every test runs the CLI with an isolated PULUMI_HOME (no plugin is ever downloaded), no
PULUMI_BACKEND_URL (the project's own `file://./.pulumi-state` backend decides) and a
passphrase, so secrets are encrypted as a user's are.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.engine.paths import engine_root

PASSPHRASE = "benchstack-engine-tests"


@dataclass(frozen=True)
class Engine:
    root: Path
    env: dict[str, str]

    @property
    def pulumi(self) -> Path:
        return self.root / "bin" / "pulumi"


@pytest.fixture(scope="session")
def engine(tmp_path_factory) -> Engine:
    return make_engine(tmp_path_factory.mktemp("pulumi-home"))


def make_engine(home: Path) -> Engine:
    """The built CLI with its own PULUMI_HOME (`home`), for this file's tests and others'."""
    root = engine_root()
    if not (root / "bin" / "pulumi").is_file():
        pytest.fail(f"no Pulumi CLI under {root}: run `bash tests/env/setup.sh`")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_")}
    env.update(
        PULUMI_HOME=str(home),
        PULUMI_CONFIG_PASSPHRASE=PASSPHRASE,
        PULUMI_SKIP_UPDATE_CHECK="1",
        PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION="true",
        PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK="1",
        # The CLI must use only this build: nothing else named pulumi on the PATH.
        PATH=":".join([str(root / "bin"), str(Path(sys.executable).parent),
                       "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"]),
    )
    return Engine(root=root, env=env)


def tracked_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return [p for p in out.split("\0") if p]


@pytest.fixture
def project(tmp_path) -> Path:
    return copy_project(tmp_path)


def copy_project(tmp_path: Path) -> Path:
    """The project as a fresh clone has it: its tracked files (working-tree content)."""
    dest = tmp_path / "benchstack"
    for rel in tracked_files():
        src = ROOT / rel
        if not src.exists():
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    # The shared data the stack files point at sits beside the checkout.
    (tmp_path / "shared").symlink_to(ROOT.parent / "shared")
    return dest


@dataclass(frozen=True)
class Cli:
    returncode: int
    stdout: str
    stderr: str


def pulumi(engine: Engine, project: Path, *args: str, stdin: str | None = None,
           timeout: float = 300) -> Cli:
    proc = subprocess.run(
        [str(engine.pulumi), "--non-interactive", *args], cwd=project, env=engine.env,
        input=stdin, capture_output=True, text=True, timeout=timeout,
    )
    return Cli(proc.returncode, proc.stdout, proc.stderr)


def inline(engine: Engine, project: Path, stack: str, operation: str, program: str,
           timeout: float = 600, env: dict[str, str] | None = None) -> dict:
    """One operation through the real CLI with the program served inline (see inline.py)."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "engine" / "inline.py"), str(project), stack,
         operation, program],
        cwd=project, env={**engine.env, **(env or {})}, capture_output=True,
        text=True, timeout=timeout,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise AssertionError(f"inline.py failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def record_outputs(engine: Engine, project: Path, stack: str, outputs: dict,
                   tmp_path: Path) -> None:
    """Make `outputs` the real stack's outputs (a program that only exports them), so that
    `pulumi stack output --json` answers with them."""
    recorded = tmp_path / f"{stack}-outputs.json"
    recorded.write_text(json.dumps(outputs))
    result = inline(engine, project, stack, "up", "outputs",
                    env={"BENCHSTACK_TEST_OUTPUTS": str(recorded)})
    if not result["ok"]:
        raise AssertionError(f"recording the outputs failed:\n{result['error'][-2000:]}")
