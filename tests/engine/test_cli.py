"""The real Pulumi CLI on the project: its build, the state backend of a fresh clone, the config
as the CLI encodes it, rejected configs, and secrets.

What cannot run here, and why: `preview`/`up`/`destroy` of the stacks' command resources need
the pulumi-command provider, and `pulumi up` without `--client` needs the Python language host;
the module proxy refuses both modules (tests/env/engine/build.sh probes them on every setup and
`test_engine_reports_what_it_lacks` pins that down, so the day they are served this fails and
says so).
"""

from __future__ import annotations

import hashlib
import json
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
from tests.engine.conftest import Engine, inline, pulumi, record_outputs
from tests.engine.paths import engine_status
from tests.graph.program import stack_config

pytestmark = pytest.mark.real

STACKS = ["local", "a100", "h100"]


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


def test_cli_is_built_and_not_older_than_the_sdk_pin(engine: Engine, project: Path) -> None:
    cli = pulumi(engine, project, "version")
    assert cli.returncode == 0, cli.stderr
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    sdk_pin = next(d.split("==")[1] for d in deps if d.startswith("pulumi=="))
    assert version_tuple(cli.stdout) >= version_tuple(sdk_pin), (cli.stdout, sdk_pin)
    plugins = pulumi(engine, project, "plugin", "ls", "--json")
    assert plugins.returncode == 0, plugins.stderr
    # Nothing was downloaded into the tests' PULUMI_HOME.
    assert json.loads(plugins.stdout or "[]") == []


def test_engine_reports_what_it_lacks(engine: Engine) -> None:
    """The two engine parts the module proxy refuses; when one is served, build it and turn
    the blocked tests on (this test then fails, on purpose)."""
    status = engine_status()
    assert status["pulumi"].startswith("v3.")
    assert "refused" in status["language_host_python"], status
    assert "refused" in status["command_provider"], status


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


@pytest.mark.parametrize("stack", STACKS)
def test_config_reaches_the_program_as_the_cli_encodes_it(
    engine: Engine, project: Path, stack: str
) -> None:
    """Every stack file, fed by the real CLI: the program's model equals the one read from the
    file, and the raw strings are exactly what the graph tests feed their mocks."""
    result = inline(engine, project, stack, "up", "config")
    assert result["ok"], result["error"][-3000:]
    decoded = result["outputs"]["decoded"]
    assert decoded == load_stack_file(ROOT / f"Pulumi.{stack}.yaml").model_dump(mode="json")
    raw = result["outputs"]["raw"]
    assert raw == stack_config(stack) | {}, "the graph tests' encoding differs from the CLI's"
    assert raw["benchstack:workspace"].startswith("/"), "a plain string must stay a string"


def set_config(engine: Engine, project: Path, stack: str, *args: str,
               stdin: str | None = None) -> None:
    init = pulumi(engine, project, "stack", "select", "--create", stack)
    assert init.returncode == 0, init.stderr
    cli = pulumi(engine, project, "config", "set", "--stack", stack, *args, stdin=stdin)
    assert cli.returncode == 0, cli.stderr


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
    ],
    ids=["out-of-range", "unknown-key", "not-an-object", "rerun-task", "manifest"],
)
def test_rejected_config_is_one_clean_message(
    engine: Engine, project: Path, args: tuple[str, ...], named: str
) -> None:
    set_config(engine, project, "local", *args)
    result = inline(engine, project, "local", "preview", "main")
    assert not result["ok"]
    error = result["error"]
    assert named in error, error[-2000:]
    assert "Traceback" not in error and "runtime error" not in error, error[-3000:]
    # Nothing was registered: the stack holds no resource at all, not even the stack itself.
    export = pulumi(engine, project, "stack", "export", "--stack", "local")
    assert export.returncode == 0, export.stderr
    assert not json.loads(export.stdout)["deployment"].get("resources")


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
    engine: Engine, project: Path, args: tuple[str, ...], expected: dict
) -> None:
    """`pulumi config set --path` (the README's way) gives the rerun section the model reads."""
    set_config(engine, project, "local", *args)
    result = inline(engine, project, "local", "up", "config")
    assert result["ok"], result["error"][-3000:]
    assert result["outputs"]["decoded"]["harbor"]["reruns"] == expected


def ed25519_key(tmp_path: Path) -> str:
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return key.read_text()


def test_ssh_key_set_from_a_file_stays_secret(engine: Engine, project: Path, tmp_path) -> None:
    """`pulumi config set --secret benchstack:sshPrivateKey -- < key` as the stack file says:
    the CLI stores it without its trailing newline; the program gets the key, and neither the
    stack file, the state nor the outputs hold it in plain text."""
    key = ed25519_key(tmp_path)
    set_config(engine, project, "a100", "--secret", "benchstack:sshPrivateKey", "--", stdin=key)
    stack_file = (project / "Pulumi.a100.yaml").read_text()
    assert "PRIVATE KEY" not in stack_file
    stored = yaml.safe_load(stack_file)["config"]["benchstack:sshPrivateKey"]
    assert set(stored) == {"secure"}

    result = inline(engine, project, "a100", "up", "config")
    assert result["ok"], result["error"][-3000:]
    assert result["outputs"]["ssh_key"] == "[secret]"
    stored_key = key.rstrip("\n")
    assert result["outputs"]["ssh_key_sha256"] == hashlib.sha256(stored_key.encode()).hexdigest()
    body = key.strip().splitlines()[1]
    for args in (("stack", "export"), ("stack", "output", "--json"), ("config",)):
        cli = pulumi(engine, project, *args, "--stack", "a100")
        assert cli.returncode == 0, cli.stderr
        assert body not in cli.stdout and "PRIVATE KEY" not in cli.stdout, args
    state = "".join(p.read_text() for p in (project / ".pulumi-state").rglob("*.json"))
    assert body not in state and "PRIVATE KEY" not in state


def test_fresh_clone_gets_its_python_environment(engine: Engine, project: Path) -> None:
    """The first `pulumi up` of a fresh clone creates `.venv` and installs the program's
    dependencies, by the language host's own code (sdk/v3 python/toolchain, see
    tests/env/engine/cmd/python-deps) reading Pulumi.yaml's `toolchain: pip` and
    `requirements.txt`. Then the real CLI runs the program with that environment."""
    assert not (project / ".venv").exists()
    proc = subprocess.run([str(engine.root / "bin" / "python-deps"), str(project)],
                          capture_output=True, text=True, timeout=900, env=engine.env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    python = project / ".venv" / "bin" / "python"
    imports = subprocess.run(
        [str(python), "-c", "import pulumi, pulumi_command, pulumi_docker, pydantic, httpx, boto3"],
        capture_output=True, text=True, cwd="/",
    )
    assert imports.returncode == 0, imports.stderr
    run = subprocess.run(
        [str(python), str(project / "tests" / "engine" / "inline.py"), str(project), "local",
         "up", "config"], capture_output=True, text=True, timeout=600, cwd=project, env=engine.env,
    )
    result = json.loads(run.stdout.strip().splitlines()[-1]) if run.stdout.strip() else {}
    assert run.returncode == 0 and result.get("ok"), (run.stderr[-3000:], result)
    assert result["outputs"]["decoded"]["workspace"] == "/var/lib/benchstack/local"


def test_no_secret_in_any_process_arguments_during_up(engine: Engine, project: Path,
                                                      tmp_path) -> None:
    """While the real CLI runs `up` with the SSH key and the API key set as secrets, no
    process on the machine carries either in its arguments (`ps` shows them to every user)."""

    key = ed25519_key(tmp_path)
    set_config(engine, project, "a100", "--secret", "benchstack:sshPrivateKey", "--", stdin=key)
    set_config(engine, project, "a100", "--secret", "benchstack:apiKey", "sk-benchstack-canary")
    needles = [key.strip().splitlines()[1].encode(), b"sk-benchstack-canary"]
    seen: list[str] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
                try:
                    args = cmdline.read_bytes()
                except OSError:
                    continue
                if any(n in args for n in needles):
                    seen.append(args.replace(b"\0", b" ").decode(errors="replace")[:200])
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        result = inline(engine, project, "a100", "up", "config")
    finally:
        done.set()
        watcher.join(timeout=5)
    assert result["ok"], result["error"][-2000:]
    assert seen == [], seen


def test_audit_reads_the_job_from_the_real_stack_outputs(engine: Engine, project: Path,
                                                          tmp_path) -> None:
    """`python -m audit --stack` through the real `pulumi stack output --json`, run from a
    directory other than the project's: the same report as the job dir given directly."""
    from components import outputs as keys
    from tests.audit.audit_jobgen import seed_final_run, write_job

    job_dir = write_job(tmp_path / "results", "seed-job", seed_final_run())
    record_outputs(engine, project, "local", {keys.JOB_DIR: str(job_dir),
                                              keys.REFERENCE_SCORE: 73.0,
                                              keys.HARBOR_HOST: "local"}, tmp_path)
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
    assert via_stack["raw"] == direct["raw"] and via_stack["adjusted"] == direct["adjusted"]
    assert via_stack["reference"]["score"] == 73.0
    assert [t["category"] for t in via_stack["trials"]] == [t["category"] for t in direct["trials"]]
