"""hostside/harbor_preflight.py without Harbor: the field walk, the comparison, the
dataset, mount and resume checks, Harbor's error line, and a whole run through the seam with a
stand-in `harbor` executable (the real Harbor is in tests/harbor/test_preflight_real.py)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from components.seam.code import module_closure
from contracts.harbor_profiles import PROFILES
from hostside import harbor_preflight as pf
from tests.harbor.conftest import seam_step

RESOLVED = {
    "job_name": "j1",
    "n_concurrent_trials": 25,
    "agent_timeout_multiplier": None,
    "agents": [{"name": "terminus-2", "kwargs": {"api_base": "http://127.0.0.1:30000/v1"}}],
    "datasets": [{"path": "/data/tasks"}],
}


def test_paths_read_as_the_user_writes_them() -> None:
    assert pf.show(["agents", 0, "kwargs", "api_base"]) == "agents[0].kwargs.api_base"
    assert pf.show(["datasets", "#len"]) == "datasets (count)"
    assert pf.show([0, "x"]) == "[0].x"


def test_walk() -> None:
    assert pf.walk(RESOLVED, ["agents", 0, "kwargs", "api_base"]) == "http://127.0.0.1:30000/v1"
    assert pf.walk(RESOLVED, ["datasets", "#len"]) == 1
    assert pf.walk(RESOLVED, ["nope", "#len"]) is pf.MISSING
    assert pf.walk({"x": 3}, ["x", "#len"]) == 0
    assert pf.walk(RESOLVED, ["agents", 3, "name"]) is pf.MISSING
    assert pf.walk(RESOLVED, ["agents", "name"]) is pf.MISSING
    assert pf.walk(RESOLVED, ["agent_timeout_multiplier"]) is None


def test_field_mismatches_use_harbors_default_for_a_dropped_field() -> None:
    checks = [
        {"path": ["n_concurrent_trials"], "expect": 25, "default": 4},
        {"path": ["agents", 0, "kwargs", "api_base"], "expect": "http://127.0.0.1:30999/v1"},
        {"path": ["agent_timeout_multiplier"], "expect": 6.0, "default": 1.0},
        {"path": ["n_attempts"], "expect": 1, "default": 1},
        {"path": ["datasets", "#len"], "expect": 2, "default": 0},
    ]
    found = pf.field_mismatches(RESOLVED, checks)
    assert found == [
        'field agents[0].kwargs.api_base is "http://127.0.0.1:30000/v1" in Harbor\'s resolved '
        'config, but the stack config asks for "http://127.0.0.1:30999/v1": fix the stack config '
        "or the Harbor version",
        "field agent_timeout_multiplier is null in Harbor's resolved config, but the stack config "
        "asks for 6.0: fix the stack config or the Harbor version",
        "field datasets (count) is 1 in Harbor's resolved config, but the stack config asks for "
        "2: fix the stack config or the Harbor version",
    ]
    assert pf.field_mismatches(RESOLVED, checks[:1] + checks[3:4]) == []


def test_datasets_and_mount_sources_must_exist() -> None:
    assert pf.missing_datasets(RESOLVED, is_dir=lambda p: True) == []
    assert pf.missing_datasets(RESOLVED, is_dir=lambda p: False) == [
        "dataset path /data/tasks does not exist on the Harbor host: run the dataset step"
    ]
    assert pf.missing_datasets({"datasets": [{"name": "registry-only"}]}, lambda p: False) == []
    override = {"services": {"main": {"volumes": [
        "/opt/tools:/opt/tools:ro", "relative:/x", {"type": "bind", "source": "/cache"},
        {"type": "volume", "source": "named"},
    ]}}}
    assert pf.mount_sources(override) == ["/opt/tools", "/cache"]
    assert pf.mount_sources(None) == pf.mount_sources({"services": {}}) == []
    assert pf.missing_mounts(override, "/c.yaml", exists=lambda p: p != "/cache") == [
        "mount source /cache in /c.yaml does not exist: build the tool bundle first"
    ]


def test_config_drift_ignores_what_harbor_ignores() -> None:
    old = {**RESOLVED, "job_name": "other", "debug": True}
    assert pf.config_drift(old, RESOLVED) == []
    assert pf.config_drift({**old, "n_concurrent_trials": 1}, RESOLVED) == ["n_concurrent_trials"]
    assert pf.config_drift({"a": 1}, {"b": 2}) == ["a", "b"]
    # Each version ignores its own fields: 0.26.0 the job's place, not its debug flag.
    ignored = PROFILES["0.26.0"].resume_ignored
    assert pf.config_drift({**RESOLVED, "jobs_dir": "/old"}, RESOLVED, ignored) == []
    assert pf.config_drift(old, RESOLVED, ignored) == ["debug"]


def test_harbors_wrapped_error_becomes_one_line() -> None:
    boxed = (
        "Traceback stuff\n  ValidationError: 1 validation error for JobConfig\n  n_concurrent "
        "(20)\n   cannot exceed n_concurrent_trials\n\n(25)  \n"
    )
    # From the first "Error" on (as `grep -o 'Error.*'` did), across Harbor's wrapping.
    assert pf.harbor_reason(boxed) == (
        "Error: 1 validation error for JobConfig n_concurrent (20) cannot exceed "
        "n_concurrent_trials (25)"
    )
    assert pf.harbor_reason("x" * 10 + "Error " + "y" * 1000, limit=20) == "Error " + "y" * 14
    assert pf.harbor_reason("nothing useful") == ""
    # 0.26.0's --dry-run says why it failed on its own line, after its tables.
    assert pf.harbor_reason("| table |\nDry run failed: [Errno 2] No such file or\n"
                            "directory: '/data/tasks'\n") == (
        "Dry run failed: [Errno 2] No such file or directory: '/data/tasks'")


def test_check_raises_the_first_problem_and_counts_the_rest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    checks = [{"path": ["n_concurrent_trials"], "expect": 30}]
    with pytest.raises(pf.HostError) as err:
        pf.check(RESOLVED, checks, override=None, compose_path="/c.yaml", job_name="j1",
                 existing={**RESOLVED, "n_concurrent_trials": 2}, jobs_dir="/r",
                 is_dir=lambda p: False)
    assert str(err.value).startswith("field n_concurrent_trials is 25")
    assert str(err.value).endswith("(and 2 more above)")
    err_text = capsys.readouterr().err
    assert "also: dataset path /data/tasks does not exist" in err_text
    assert "also: job j1 already exists in /r with a different config (field " \
        "n_concurrent_trials): choose another job name; results are kept" in err_text
    # The same config under the same name is a resume: fine.
    pf.check(RESOLVED, [], override=None, compose_path="/c.yaml", job_name="j1",
             existing=dict(RESOLVED), jobs_dir="/r", is_dir=lambda p: True)


def test_the_expected_fields_must_be_a_list_of_checks() -> None:
    assert pf.parse_checks([{"path": ["x"], "expect": 1}]) == [{"path": ["x"], "expect": 1}]
    for bad in ({"path": ["x"]}, [{"path": "x", "expect": 1}], [{"path": ["x"]}]):
        with pytest.raises(pf.HostError, match="expected must be a JSON list"):
            pf.parse_checks(bad)


# --- a whole run, with a stand-in harbor ------------------------------------------------------


def fake_harbor(tmp_path: Path, body: str) -> Path:
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    harbor = venv_bin / "harbor"
    harbor.write_text("#!/usr/bin/env bash\n" + body)
    harbor.chmod(0o755)
    # The step reads the compose override with the venv's python (PyYAML), beside harbor.
    (venv_bin / "python").symlink_to(sys.executable)
    return harbor


def job_inputs(tmp_path: Path, harbor: Path, expected: list[dict]) -> dict:
    (tmp_path / "tools").mkdir(exist_ok=True)
    config = tmp_path / "job.yaml"
    config.write_text("jobs_dir: x\n")
    compose = tmp_path / "compose.yaml"
    compose.write_text(f"services:\n  main:\n    volumes:\n      - {tmp_path / 'tools'}:/t:ro\n")
    return {"harbor_bin": str(harbor), "job_config": str(config), "compose_path": str(compose),
            "job_name": "j1", "jobs_dir": str(tmp_path / "results"), "expected": expected,
            "resolved_out": str(tmp_path / "logs" / "j1.resolved-config.json"),
            "harbor_flags": [], "harbor_version": "0.21.0"}


def run_step(inputs: dict):
    return seam_step("harbor_preflight", "create", inputs, timeout=60)


def test_a_run_saves_what_harbor_resolved_and_reports_its_digest(tmp_path: Path) -> None:
    resolved = json.dumps({"n_concurrent_trials": 3, "datasets": [{"path": str(tmp_path)}]})
    harbor = fake_harbor(tmp_path, f"""
[[ "$*" == *"--print-config"* && "$*" == *"--job-name j1"* && "$HARBOR_TELEMETRY" == 0 ]] || exit 9
[[ -z "${{BENCHSTACK_INPUTS:-}}${{PYTHONPATH:-}}" ]] || exit 8  # the step's own, not Harbor's
printf '%s\\n' '{resolved}'
""")
    inputs = job_inputs(tmp_path, harbor, [{"path": ["n_concurrent_trials"], "expect": 3}])
    proc = run_step(inputs)
    assert proc.returncode == 0, proc.stderr
    saved = tmp_path / "logs" / "j1.resolved-config.json"
    assert proc.outputs == {"resolved_config": str(saved), "checked_fields": 1,
                            "resolved_sha256": hashlib.sha256(saved.read_bytes()).hexdigest(),
                            "dry_run": None}
    assert json.loads(saved.read_text())["n_concurrent_trials"] == 3
    assert "1 fields match" in proc.stderr

    # The tool bundle gone: the mount source is named.
    (tmp_path / "tools").rmdir()
    proc = run_step(inputs)
    assert proc.returncode == 1
    assert proc.reason == (
        f"harbor_preflight: mount source {tmp_path / 'tools'} in {inputs['compose_path']} does "
        "not exist: build the tool bundle first"
    )


def test_harbors_refusal_is_one_line(tmp_path: Path) -> None:
    harbor = fake_harbor(tmp_path, """
printf 'ValueError: n_concurrent (30)\\n  cannot exceed\\n  n_concurrent_trials (25)\\n'
exit 1
""")
    proc = run_step(job_inputs(tmp_path, harbor, []))
    assert proc.returncode == 1
    assert proc.reason == (
        f"harbor_preflight: harbor run --print-config rejected {tmp_path / 'job.yaml'} (Error: "
        "n_concurrent (30) cannot exceed n_concurrent_trials (25)): fix the job settings in the "
        "stack config"
    )


# A 0.26.0 stand-in: print-config as before; --dry-run refuses an unknown agent kwarg the way
# Harbor words it, else says how many trials it would run (stderr: its warnings).
DRY_RUN_HARBOR = """
flags="--base-url http://127.0.0.1:30000/v1 --api-key-name OPENAI_API_KEY"
[[ "$*" == *"$flags"* && "$OPENAI_API_KEY" != "" ]] || { echo "flags or key missing: $*"; exit 9; }
if [[ "$*" == *--print-config* ]]; then echo '{"n_concurrent_trials": 3}'; exit 0; fi
[[ "$*" == *--dry-run* ]] || exit 7
if grep -q bogus "$3"; then
  printf "Dry run failed: agents[0]: Invalid kwargs for agent 'terminus-2':\n"
  printf "  Unknown option 'bogus'.\n"
  exit 1
fi
echo "Warning: Task hello: overrides apply only to the agent environment" >&2
printf 'table\nDry run OK — 3 trial(s); nothing was run.\n'
"""


def test_a_version_with_a_dry_run_lets_harbor_check_the_job_too(tmp_path: Path) -> None:
    harbor = fake_harbor(tmp_path, DRY_RUN_HARBOR)
    inputs = {**job_inputs(tmp_path, harbor, [{"path": ["n_concurrent_trials"], "expect": 3}]),
              "harbor_version": "0.26.0",
              "harbor_flags": ["--base-url", "http://127.0.0.1:30000/v1",
                               "--api-key-name", "OPENAI_API_KEY"]}
    proc = run_step(inputs)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.outputs["dry_run"] == {
        "trials": 3, "warnings": ["Task hello: overrides apply only to the agent environment"]}
    assert "harbor --dry-run: OK, 3 trial(s); nothing run" in proc.stderr
    # What print-config lets through, Harbor's dry run refuses, in its own words.
    Path(inputs["resolved_out"]).unlink()
    Path(inputs["job_config"]).write_text("agents: [{kwargs: {bogus: 1}}]\n")
    proc = run_step(inputs)
    assert proc.returncode == 1
    assert proc.reason == (
        f"harbor_preflight: harbor run --dry-run rejected {inputs['job_config']} (Dry run "
        "failed: agents[0]: Invalid kwargs for agent 'terminus-2': Unknown option 'bogus'.): "
        "fix the job settings in the stack config")
    assert not Path(inputs["resolved_out"]).exists(), "a refused job's config was saved"
    # 0.21.0 has no dry run: the same stand-in is asked for print-config only.
    proc = run_step({**inputs, "harbor_version": "0.21.0"})
    assert proc.returncode == 0 and proc.outputs["dry_run"] is None, proc.stderr


def test_an_unknown_version_is_refused_naming_the_known_ones(tmp_path: Path) -> None:
    harbor = fake_harbor(tmp_path, "exit 0\n")
    proc = run_step({**job_inputs(tmp_path, harbor, []), "harbor_version": "0.99.0"})
    assert proc.reason == ("harbor_preflight: harbor_version: no Harbor profile for '0.99.0'; "
                           "known: 0.21.0, 0.26.0")


def test_the_step_checks_its_files_before_running_harbor(tmp_path: Path) -> None:
    harbor = fake_harbor(tmp_path, "exit 0\n")
    inputs = job_inputs(tmp_path, harbor, [])
    proc = run_step({**inputs, "job_config": str(tmp_path / "absent.yaml")})
    assert proc.returncode == 1
    assert "absent.yaml does not exist: run the configs step" in proc.stderr
    proc = run_step({**inputs, "harbor_bin": str(tmp_path / "nope")})
    assert proc.returncode == 1 and "is not executable: run the install step" in proc.stderr
    missing = {k: v for k, v in inputs.items() if k != "resolved_out"}
    proc = run_step(missing)
    assert proc.reason == "harbor_preflight: input resolved_out missing: the program must pass it"


def test_the_step_runs_from_the_host_package() -> None:
    assert "hostside/harbor_preflight.py" in module_closure("harbor_preflight")
    assert "contracts/jobdir.py" in module_closure("harbor_preflight")
