"""The host package (hostside): how a step's inputs reach it, how it answers and
fails, and the rule that a host module decides no value the program owns."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import json
import subprocess
from pathlib import Path

import pytest

from components.seam import code as seam_code
from components.seam.code import PROJECT_ROOT, code_digest, code_files, module_closure
from components.seam.step import render_step

HOSTSIDE = PROJECT_ROOT / "hostside"


def run(command: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(["/bin/sh", "-c", command], input=stdin, capture_output=True,
                          text=True, timeout=60)


@pytest.fixture
def probe_module(scratch_code: Path):
    """A throwaway module in the package (the seam only runs modules from there), in a copy of
    the host code (tests/conftest.py `scratch_code`)."""
    path = scratch_code / "hostside" / "_seam_probe.py"
    path.write_text(
        "from dataclasses import dataclass\n"
        "from .step import emit, log, verb\n\n"
        "@dataclass(frozen=True)\nclass Inputs:\n    plain: str\n    token: str\n\n"
        "@verb(Inputs)\ndef create(i):\n    log('probe', 'got both')\n"
        "    emit({'plain': i.plain, 'token': i.token})\n"
    )
    return "_seam_probe"


def test_a_step_gets_its_inputs_as_json_and_its_secrets_on_stdin(probe_module):
    inputs = {"plain": "it's $HOME; `x` \"q\"", "token": "s3cr3t-value"}
    command = render_step(probe_module, "create", inputs, str(seam_code.PROJECT_ROOT), ("token",))
    assert "s3cr3t-value" not in command and len(command) < 500
    proc = run(command, json.dumps({"token": "s3cr3t-value"}))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1]) == inputs
    assert proc.stderr.strip() == "[probe] got both"
    assert command.endswith(f"# code {code_digest(module_closure(probe_module))}")


def test_a_missing_or_unknown_input_is_the_programs_bug_named_in_one_line():
    proc = run(render_step("waiting", "create", {"waiting": "because"}, str(PROJECT_ROOT)))
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip() == "waiting: input step missing: the program must pass it"
    proc = run(render_step("waiting", "create",
                           {"waiting": "w", "step": "s", "extra": 1}, str(PROJECT_ROOT)))
    assert proc.stderr.strip().startswith("waiting: unknown input extra")


def test_the_waiting_step_says_why_and_does_nothing():
    proc = run(render_step("waiting", "create", {"waiting": "the main job runs", "step": "rerun-x"},
                           str(PROJECT_ROOT)))
    assert proc.returncode == 0
    assert json.loads(proc.stdout) == {"waiting": "the main job runs"}
    assert proc.stderr.strip() == "[rerun-x] not run yet: the main job runs"


def test_unknown_modules_and_verbs_are_refused():
    assert run(render_step("waiting", "delete", {}, str(PROJECT_ROOT))).returncode == 2
    with pytest.raises(ValueError, match="nope"):
        module_closure("nope")


def test_the_digest_covers_the_package_files_a_module_runs(probe_module):
    assert module_closure("waiting") == (
        "hostside/__init__.py", "hostside/__main__.py", "hostside/step.py", "hostside/waiting.py")
    assert set(module_closure("waiting")) <= set(code_files())


def modules() -> list[str]:
    return sorted(p.stem for p in HOSTSIDE.glob("*.py")
                  if not p.stem.startswith("_") and p.stem not in ("step",))


@pytest.mark.parametrize("name", modules())
def test_a_host_module_decides_no_value_the_program_owns(name):
    """Its inputs have no defaults, and it reads no environment variable of its own: every value
    comes from the program (the config model owns the defaults), once."""
    module = importlib.import_module(f"hostside.{name}")
    inputs = getattr(module, "Inputs", None)
    if inputs is not None:
        defaulted = [f.name for f in dataclasses.fields(inputs)
                     if f.default is not dataclasses.MISSING
                     or f.default_factory is not dataclasses.MISSING]
        assert defaulted == [], f"{name}.Inputs has defaults: {defaulted}"
    tree = ast.parse(Path(module.__file__).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv"):
            pytest.fail(f"{name} reads the environment at line {node.lineno}: take an input")


def test_a_dockerd_inside_a_container_is_not_this_hosts(tmp_path: Path):
    """/proc lists the engines of containers too (a rehearsal host's, Docker-in-Docker): the
    restart plan counts only the dockerd in this host's own PID namespace."""
    from hostside.dockerd_restart import running_dockerd

    def process(pid: str, comm: str, pid_ns: str, parent: int = 1) -> None:
        (tmp_path / pid / "ns").mkdir(parents=True)
        (tmp_path / pid / "comm").write_text(f"{comm}\n")
        (tmp_path / pid / "status").write_text(f"Name:\t{comm}\nPPid:\t{parent}\n")
        (tmp_path / pid / "ns" / "pid").symlink_to(pid_ns)

    process("self", "pytest", "pid:[4026531836]")
    process("575", "dockerd", "pid:[4026531836]")        # this host's engine
    process("1171", "dockerd", "pid:[4026532411]")       # an engine inside a container
    process("1172", "containerd", "pid:[4026531836]")
    process("1180", "dockerd", "pid:[4026531836]", 575)  # the engine's fork, before its exec
    (tmp_path / "1300").mkdir()                          # gone while /proc was read
    assert running_dockerd(tmp_path) == [575]


def test_a_delete_stored_by_an_older_release_reads_its_renamed_inputs():
    """A delete runs with the inputs the creating release stored in the state, against the new
    release's host code: the launch's stop and the daemon config's delete read their renamed
    inputs (n_concurrent, allow_restart_with_running) under the new names."""
    from hostside import daemon_config, harbor_launch
    from hostside.step import read

    stop = read(harbor_launch.StopInputs, {
        "job_name": "j", "jobs_dir": "/ws/results", "log_dir": "/ws/logs",
        "n_concurrent": 25, "stop_timeout_s": 600})
    assert stop.n_concurrent_trials == 25
    daemon = read(daemon_config.Inputs, {
        "daemon_json": "/etc/docker/daemon.json", "address_pools": [], "restart_command": "",
        "allow_restart_with_running": True, "proof_networks": 2, "docker_host": ""})
    assert daemon.allow_restart_with_running_containers is True
    # The program itself must use the new names: the typed seam knows no old one.
    from components.seam.step import StepError, check_inputs

    with pytest.raises(StepError, match="has no input n_concurrent "):
        check_inputs("job-launch", harbor_launch.delete, {
            "job_name": "j", "jobs_dir": "/ws/results", "log_dir": "/ws/logs",
            "n_concurrent": 25, "n_concurrent_trials": 25, "stop_timeout_s": 600})
