"""The real Pulumi engine on the project: its build and plugins, the state backend of a fresh
clone and its Python environment, the config as the CLI encodes it, rejected configs, and
secrets. Every program here is run by the language host; the lifecycle of the stacks' resources
is tests/e2e (the local stack) and tests/engine/test_docker_provider.py (containers).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

import pytest
import yaml

from components.config import load_stack_file
from tests.conftest import ROOT
from tests.engine.conftest import (
    Engine,
    copy_project,
    ok,
    pulumi,
    record_outputs,
    set_config,
)
from tests.engine.paths import engine_status
from tests.graph.program import stack_config

pytestmark = pytest.mark.real

STACKS = ["local", "a100", "h100", "h100-tb4"]


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


def sdk_pins() -> dict[str, str]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return dict(d.split("==") for d in deps if "==" in d)


def test_cli_is_built_and_not_older_than_the_sdk_pin(engine: Engine, project: Path) -> None:
    cli = ok(pulumi(engine, project, "version"))
    sdk_pin = sdk_pins()["pulumi"]
    assert version_tuple(cli.stdout) >= version_tuple(sdk_pin), (cli.stdout, sdk_pin)
    # The language host is the one built beside the CLI (the engine finds it there).
    assert (engine.root / "bin" / "pulumi-language-python").is_file()
    assert os.access(engine.root / "bin" / "pulumi-language-python-exec", os.X_OK)


@pytest.mark.k8s_provider
def test_the_providers_are_the_ones_the_sdk_pins_ask_for(engine: Engine, project: Path) -> None:
    """`pulumi plugin ls` holds exactly the command and Docker providers built from
    ../shared/vendor and the Kubernetes provider built from its Go module, at the versions of
    the SDK pins: a pin bump without a provider build fails here, not at a user's `pulumi up`
    (the SDK asks the engine for its own version)."""
    plugins = json.loads(ok(pulumi(engine, project, "plugin", "ls", "--json")).stdout)
    installed = {(p["name"], p["version"]) for p in plugins if p["kind"] == "resource"}
    pins = sdk_pins()
    assert installed == {("command", pins["pulumi-command"]), ("docker", pins["pulumi-docker"]),
                         ("kubernetes", pins["pulumi-kubernetes"])}
    assert installed == {("command", "1.2.1"), ("docker", "5.1.1"), ("kubernetes", "4.25.0")}
    status = engine_status()
    assert {p["name"] for p in status["parts"]} == {
        f"cli-{status['pulumi']}", "command-1.2.1", "docker-5.1.1", "kubernetes-4.25.0"}


def test_fresh_clone_state_backend(engine: Engine, project: Path) -> None:
    """A fresh clone has the project's file:// backend folder, so the first CLI call works."""
    assert not (project / ".pulumi-state" / ".pulumi").exists()
    init = pulumi(engine, project, "stack", "init", "local")
    assert init.returncode == 0, init.stderr
    state = project / ".pulumi-state" / ".pulumi" / "stacks" / "benchstack" / "local.json"
    assert state.is_file()
    listed = pulumi(engine, project, "stack", "ls", "--json")
    assert [s["name"] for s in json.loads(listed.stdout)] == ["local"]
    removed = pulumi(engine, project, "stack", "rm", "local", "--yes")
    assert removed.returncode == 0, removed.stderr
    assert json.loads(pulumi(engine, project, "stack", "ls", "--json").stdout) == []


def config_up(engine: Engine, project: Path, stack: str) -> dict:
    """`pulumi up` of the config program (tests/engine/programs/config.py): what it read."""
    ok(pulumi(engine, project, "stack", "select", "--create", stack))
    ok(pulumi(engine, project, "up", "--yes", "--stack", stack))
    return ok(pulumi(engine, project, "stack", "output", "--json", "--stack", stack)).json()


@pytest.fixture
def config_project(tmp_path) -> Path:
    return copy_project(tmp_path, program="config")


@pytest.mark.parametrize("stack", STACKS)
def test_config_reaches_the_program_as_the_cli_encodes_it(
    engine: Engine, config_project: Path, stack: str
) -> None:
    """Every stack file, fed by the real CLI to the program the language host runs: the
    program's model equals the one read from the file, and the raw strings are exactly what
    the graph tests feed their mocks."""
    outputs = config_up(engine, config_project, stack)
    decoded = outputs["decoded"]
    assert decoded == load_stack_file(ROOT / f"Pulumi.{stack}.yaml").model_dump(mode="json")
    raw = outputs["raw"]
    assert raw == stack_config(stack) | {}, "the graph tests' encoding differs from the CLI's"
    assert raw["benchstack:workspace"].startswith("/"), "a plain string must stay a string"


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--path", "benchstack:harbor.n_concurrent_trials", "0"),
         "benchstack:harbor.n_concurrent_trials"),
        (("benchstack:servng", "{}"), "benchstack:servng"),
        (("benchstack:docker", "pools"), "benchstack:docker"),
        (("--path", "benchstack:harbor.reruns[0]", "hello-fiel"),
         "benchstack:harbor.reruns: task 'hello-fiel' is not a task of the dataset"),
        (("--path", "benchstack:dataset.manifest_path", "/nonexistent/tasks"),
         "benchstack:dataset.manifest_path: /nonexistent/tasks: dataset directory does not exist"),
        (("--path", "benchstack:harbor.version", "0.23.0"),
         "benchstack:harbor.version: Value error, Harbor '0.23.0' has no profile here; the known "
         "versions are 0.21.0, 0.26.0"),
        # The demo tasks' timeouts against a job that may hold a trial for 3.6 s.
        (("--path", "benchstack:harbor.max_job_hours", "0.001"),
         "benchstack:harbor.max_job_hours: 0.001 h, but a trial of hello-file, hello-file-slow, "
         "hello-file-wrong can take up to"),
    ],
    ids=["out-of-range", "unknown-key", "not-an-object", "rerun-task", "manifest",
         "harbor-version", "max-job-hours"],
)
def test_rejected_config_is_one_clean_message(
    engine: Engine, project: Path, args: tuple[str, ...], named: str
) -> None:
    """The project's program, run by the language host: one message naming the key, no
    traceback, and nothing registered (not even the stack), before anything touches a host."""
    set_config(engine, project, "local", *args)
    for operation in (("preview",), ("up", "--yes")):
        cli = pulumi(engine, project, *operation, "--stack", "local")
        assert cli.returncode != 0
        assert named in cli.output, cli.output[-2000:]
        assert "Traceback" not in cli.output and "runtime error" not in cli.output, cli.output
        assert "KeyboardInterrupt" not in cli.output, cli.output
    export = ok(pulumi(engine, project, "stack", "export", "--stack", "local")).json()
    assert not export["deployment"].get("resources")


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (('"proof_networks": docker.proof_networks,', '"proof_network": docker.proof_networks,'),
         "docker-daemon-apply: hostside/daemon_config.py create needs input proof_networks and "
         "has no input proof_network (Inputs)"),
        (("create=daemon_config.create,", "create=daemon_config.docker0_address,"),
         "docker-daemon-apply: <function docker0_address"),
    ],
    ids=["wrong-key", "not-a-verb"],
)
def test_a_host_step_declared_wrong_fails_preview_before_any_host(
    engine: Engine, project: Path, edit: tuple[str, str], named: str
) -> None:
    """The typed seam under the real CLI: a component that passes a key its host module does
    not read, or a function that is no host verb, fails `pulumi preview` (and `up`) with one
    line naming the step, the module and the key; nothing is registered."""
    component = project / "components" / "docker_daemon.py"
    text = component.read_text()
    assert edit[0] in text
    component.write_text(text.replace(edit[0], edit[1]))
    ok(pulumi(engine, project, "stack", "select", "--create", "local"))
    for operation in (("preview",), ("up", "--yes")):
        cli = pulumi(engine, project, *operation, "--stack", "local")
        assert cli.returncode != 0
        assert named in cli.output, cli.output[-2000:]
        assert "Traceback" not in cli.output, cli.output[-3000:]
    export = ok(pulumi(engine, project, "stack", "export", "--stack", "local")).json()
    assert not export["deployment"].get("resources")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--path", "benchstack:harbor.reruns.from_audit", "true"),
         {"tasks": [], "from_audit": True}),
        (("--path", "benchstack:harbor.reruns[0]", "hello-file-slow"),
         {"tasks": ["hello-file-slow"], "from_audit": False}),
    ],
    ids=["from-audit", "task-list"],
)
def test_reruns_set_as_the_readme_says_reach_the_program(
    engine: Engine, config_project: Path, args: tuple[str, ...], expected: dict
) -> None:
    """`pulumi config set --path` (the README's way) gives the rerun section the model reads."""
    set_config(engine, config_project, "local", *args)
    assert config_up(engine, config_project, "local")["decoded"]["harbor"]["reruns"] == expected


def ed25519_key(tmp_path: Path) -> str:
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return key.read_text()


def test_ssh_key_set_from_a_file_stays_secret(engine: Engine, config_project: Path,
                                               tmp_path) -> None:
    """`pulumi config set --secret benchstack:sshPrivateKey -- < key` as the stack file says:
    the CLI stores it without its trailing newline; the program gets the key, and neither the
    stack file, the state nor the outputs hold it in plain text."""
    project = config_project
    key = ed25519_key(tmp_path)
    set_config(engine, project, "a100", "--secret", "benchstack:sshPrivateKey", "--", stdin=key)
    stack_file = (project / "Pulumi.a100.yaml").read_text()
    assert "PRIVATE KEY" not in stack_file
    stored = yaml.safe_load(stack_file)["config"]["benchstack:sshPrivateKey"]
    assert set(stored) == {"secure"}

    outputs = config_up(engine, project, "a100")
    assert outputs["ssh_key"] == "[secret]"
    stored_key = key.rstrip("\n")
    assert outputs["ssh_key_sha256"] == hashlib.sha256(stored_key.encode()).hexdigest()
    body = key.strip().splitlines()[1]
    for args in (("stack", "export"), ("stack", "output", "--json"), ("config",)):
        cli = ok(pulumi(engine, project, *args, "--stack", "a100"))
        assert body not in cli.stdout and "PRIVATE KEY" not in cli.stdout, args
    state = "".join(p.read_text() for p in (project / ".pulumi-state").rglob("*.json"))
    assert body not in state and "PRIVATE KEY" not in state


def test_fresh_clone_gets_its_python_environment(engine: Engine, tmp_path) -> None:
    """The first `pulumi preview` of a fresh clone (no `.venv`) creates `.venv` through the
    language host (Pulumi.yaml: `toolchain: pip`, `virtualenv: .venv`) from requirements.txt,
    and then runs the program in it: the plan of the local stack."""
    project = copy_project(tmp_path, venv=False)
    assert not (project / ".venv").exists()
    ok(pulumi(engine, project, "stack", "select", "--create", "local"))
    preview = ok(pulumi(engine, project, "preview", "--json", "--stack", "local", timeout=1200))
    assert preview.json()["changeSummary"]["create"] >= 15
    python = project / ".venv" / "bin" / "python"
    imports = subprocess.run(
        [str(python), "-c",
         "import pulumi, pulumi_command, pulumi_docker, pydantic, httpx, boto3, components"],
        capture_output=True, text=True, cwd="/",
    )
    assert imports.returncode == 0, imports.stderr
    freeze = subprocess.run([str(python), "-m", "pip", "freeze"], capture_output=True,
                            text=True, check=True).stdout
    pins = sdk_pins()
    for name in ("pulumi", "pulumi-command", "pulumi-docker", "pulumi-kubernetes"):
        assert f"{name.replace('-', '_')}=={pins[name]}" in freeze.replace("-", "_"), name


def test_no_secret_in_any_process_arguments_during_up(engine: Engine, config_project: Path,
                                                      tmp_path) -> None:
    """While the real CLI runs `up` with the SSH key and the API key set as secrets, no
    process on the machine carries either in its arguments (`ps` shows them to every user).
    The local stack's own `up` is watched the same way in tests/e2e."""
    project = config_project
    key = ed25519_key(tmp_path)
    set_config(engine, project, "a100", "--secret", "benchstack:sshPrivateKey", "--", stdin=key)
    set_config(engine, project, "a100", "--secret", "benchstack:apiKey", "sk-benchstack-canary")
    needles = [key.strip().splitlines()[1].encode(), b"sk-benchstack-canary"]
    with ProcessWatch(needles) as seen:
        config_up(engine, project, "a100")
    assert seen == [], seen


class ProcessWatch:
    """Every process's arguments, read from /proc while the block runs: those holding a needle."""

    def __init__(self, needles: list[bytes]) -> None:
        self.needles = needles
        self.seen: list[str] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.error: Exception | None = None

    def _watch(self) -> None:
        try:
            while not self.done.is_set():
                self._look()
                time.sleep(0.05)
        except Exception as exc:  # a watch that stopped saw nothing more: the block fails
            self.error = exc

    def _look(self) -> None:
        # Listed, then read one by one: a process may end between the two (a glob's own check of
        # each path raised then, and the watch stopped).
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                args = (Path("/proc") / pid / "cmdline").read_bytes()
            except OSError:
                continue
            if any(n in args for n in self.needles):
                self.seen.append(args.replace(b"\0", b" ").decode(errors="replace")[:200])

    def __enter__(self) -> list[str]:
        self.thread.start()
        return self.seen

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join(timeout=5)
        if self.error is not None:
            raise AssertionError(f"the process watch stopped early: {self.error!r}")


def test_audit_reads_the_job_from_the_real_stack_outputs(engine: Engine, tmp_path) -> None:
    """`python -m audit --stack` through the real `pulumi stack output --json`, run from a
    directory other than the project's: the same report as the job dir given directly."""
    from contracts import outputs as keys
    from tests.audit.audit_jobgen import seed_final_run, write_job

    job_dir = write_job(tmp_path / "results", "seed-job", seed_final_run())
    project = record_outputs(engine, tmp_path, "local", {
        keys.JOB_DIR: str(job_dir), keys.REFERENCE_SCORE: 73.0, keys.HARBOR_HOST: "local"})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def audit(*args: str) -> dict:
        proc = subprocess.run([sys.executable, "-m", "audit", *args, "--format", "json"],
                              cwd=elsewhere, env={**engine.env, "PYTHONPATH": str(ROOT)},
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout)

    via_stack = audit("--stack", "local", "--project", str(project))
    direct = audit(str(job_dir), "--reference-score", "73")
    assert via_stack["scores"] == direct["scores"]
    assert via_stack["reference"]["comparisons"] == direct["reference"]["comparisons"]
    assert via_stack["reference"]["published"]["score"] == 73.0
    assert [t["category"] for t in via_stack["trials"]] == [t["category"] for t in direct["trials"]]
