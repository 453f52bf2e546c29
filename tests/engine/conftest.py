"""The real Pulumi engine for the tests: the CLI, the Python language host and the command,
Docker and Kubernetes providers setup/engine/build.sh built, driving copies of the project.

Every test runs the CLI on a fresh copy of the project (the CLI writes `encryptionsalt`, secrets
and config into the stack file and state into `.pulumi-state/`, which must never touch the
checkout), with a PULUMI_HOME of its own that holds only the built providers (nothing is ever
downloaded), no PULUMI_BACKEND_URL (the project's own `file://./.pulumi-state` backend decides)
and a passphrase, so secrets are encrypted as a user's are. The program is run by the language
host from the copy's `__main__.py`, in the copy's `.venv` (a link to the test environment's,
which holds the same pins, unless a test asks for a fresh clone without one).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.engine.paths import engine_root
from tests.machine import link_shared

PASSPHRASE = "benchstack-engine-tests"
PROGRAMS = Path(__file__).resolve().parent / "programs"


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
    """The built engine with its own PULUMI_HOME (`home`), whose plugins are the built ones."""
    root = engine_root()
    if not (root / "bin" / "pulumi").is_file():
        pytest.fail(f"no Pulumi CLI under {root}: run `make setup`")
    home.mkdir(parents=True, exist_ok=True)
    plugins = home / "plugins"
    if not plugins.exists():
        plugins.symlink_to(root / "home" / "plugins")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_")}
    env.update(
        PULUMI_HOME=str(home),
        PULUMI_CONFIG_PASSPHRASE=PASSPHRASE,
        PULUMI_SKIP_UPDATE_CHECK="1",
        PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION="true",
        # The engine must use only this build: its language host and nothing else named pulumi.
        PATH=":".join([str(root / "bin"), "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"]),
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


def copy_project(tmp_path: Path, *, venv: bool = True, program: str | None = None) -> Path:
    """The project as a fresh clone has it: its tracked files (working-tree content). With
    `venv`, `.venv` is the test environment's; with `program`, `__main__.py` is that test
    program of tests/engine/programs/ instead of the project's."""
    dest = tmp_path / "benchstack"
    for rel in tracked_files():
        src = ROOT / rel
        if not src.exists():
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    link_shared(dest)
    if venv:
        (dest / ".venv").symlink_to(Path(sys.prefix))
    if program:
        shutil.copy2(PROGRAMS / f"{program}.py", dest / "__main__.py")
    return dest


@dataclass(frozen=True)
class Cli:
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def json(self) -> dict:
        return json.loads(self.stdout)


# Every CLI call of this process (its verb, seconds and test), for the summary where a stage's
# time goes (tests/conftest.py: pytest_terminal_summary).
CLI_CALLS: list[tuple[str, float, str]] = []


def pulumi(engine: Engine, project: Path, *args: str, stdin: str | None = None,
           timeout: float = 900, env: dict[str, str] | None = None) -> Cli:
    started = time.monotonic()
    proc = subprocess.run(
        [str(engine.pulumi), "--non-interactive", "--color", "never", *args], cwd=project,
        env={**engine.env, **(env or {})}, input=stdin, capture_output=True, text=True,
        timeout=timeout,
    )
    CLI_CALLS.append((args[0] if args else "", time.monotonic() - started,
                      os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]))
    return Cli(proc.returncode, proc.stdout, proc.stderr)


def errors(cli: Cli) -> list[str]:
    """The error diagnostics of a `--json` run (its events), else the last lines it printed."""
    found = []
    try:
        plan, _ = json.JSONDecoder().raw_decode(cli.stdout)
    except ValueError:
        plan = {}
    for diagnostic in plan.get("diagnostics") or []:
        if diagnostic.get("severity") == "error":
            found.append(f"{diagnostic.get('urn', '').rsplit('::', 1)[-1]}: "
                         f"{diagnostic['message']}")
    for line in cli.stdout.splitlines():
        if '"diagnosticEvent"' in line and '"severity":"error"' in line:
            event = json.loads(line)["diagnosticEvent"]
            found.append(f"{event.get('urn', '').rsplit('::', 1)[-1]}: {event['message']}")
    return found or [cli.output[-4000:]]


def ok(cli: Cli) -> Cli:
    if cli.returncode != 0:
        reasons = "\n".join(errors(cli))
        raise AssertionError(f"pulumi failed ({cli.returncode}):\n{reasons[-6000:]}")
    return cli


def steps(cli: Cli) -> dict[str, str]:
    """What a `preview --json` planned, or an `up --json` did, to each resource: name -> op.

    `up --json` prints its preview's plan as one JSON document (none with `--skip-preview`),
    then the update's engine events, one per line: what was done is in the events
    (`resOutputsEvent`), not the plan."""
    first, end = json.JSONDecoder().raw_decode(cli.stdout)
    events = [json.loads(line) for line in cli.stdout[end:].splitlines() if line.strip()]
    if "steps" not in first:  # no plan: the first line is an event too
        events.insert(0, first)
    elif not events:
        return {step["urn"].rsplit("::", 1)[-1]: step["op"] for step in first["steps"]}
    done: dict[str, str] = {}
    for event in events:
        if "resOutputsEvent" in event:
            step = event["resOutputsEvent"]["metadata"]
            name = step["urn"].rsplit("::", 1)[-1]
            # A replacement is reported as its parts (delete-replaced, create-replacement).
            done[name] = "replace" if step["op"] in REPLACEMENT_OPS or done.get(
                name) == "replace" else step["op"]
    return done


REPLACEMENT_OPS = {"replace", "create-replacement", "delete-replaced"}


def changed(cli: Cli) -> dict[str, str]:
    """The steps that did something (not `same`, not the stack itself)."""
    return {name: op for name, op in steps(cli).items()
            if op not in ("same", "read") and not name.startswith("benchstack-")}


def set_config(engine: Engine, project: Path, stack: str, *args: str,
               stdin: str | None = None) -> None:
    ok(pulumi(engine, project, "stack", "select", "--create", stack))
    ok(pulumi(engine, project, "config", "set", "--stack", stack, *args, stdin=stdin))


def record_outputs(engine: Engine, tmp_path: Path, stack: str, outputs: dict) -> Path:
    """A project whose stack `stack` has exactly `outputs` (its program only exports them), so
    that `pulumi stack output --json` answers with them; returns that project."""
    project = copy_project(tmp_path / f"{stack}-outputs", program="outputs")
    recorded = project / "outputs.json"
    recorded.write_text(json.dumps(outputs))
    ok(pulumi(engine, project, "stack", "select", "--create", stack))
    ok(pulumi(engine, project, "up", "--yes", "--stack", stack,
              env={"BENCHSTACK_TEST_OUTPUTS": str(recorded)}))
    return project
