"""The typed seam: a host step is declared with its host module's own verb, and the inputs the
program gives it are checked against that verb's `Inputs` when the program runs, before any
resource is registered (so a wrong key or module fails `pulumi preview`, not a host)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import subprocess
from pathlib import Path

import pytest

from components.seam.audit import audit_command, rerun_list
from components.seam.host import Host, ShippedCode
from components.seam.step import StepError, check_inputs, host_step
from hostside import daemon_config, harbor_launch, waiting
from hostside.step import Verb
from tests.audit.audit_jobgen import TrialSpec, write_job
from tests.conftest import PROJECT_ROOT

# A host whose code is "shipped": enough for a declaration that fails before any resource.
HOST = Host(name="h", address="local",
            code=ShippedCode(path="/ws/.benchstack/code", resource=None))  # type: ignore[arg-type]
DAEMON = {"daemon_json": "/etc/docker/daemon.json", "address_pools": [],
          "restart_command": "", "allow_restart_with_running_containers": False,
          "proof_networks": 2, "docker_host": ""}


def test_a_wrong_key_is_refused_at_declaration_naming_step_module_and_key():
    with pytest.raises(StepError, match=r"^h-daemon: hostside/daemon_config.py create needs "
                                        r"input allow_restart_with_running_containers and has no "
                                        r"input allow_restart_with_running \(Inputs\)$"):
        host_step("h-daemon", host=HOST, create=daemon_config.create,
                  inputs={**{k: v for k, v in DAEMON.items()
                             if k != "allow_restart_with_running_containers"},
                          "allow_restart_with_running": False})
    missing = {k: v for k, v in DAEMON.items() if k != "proof_networks"}
    with pytest.raises(StepError, match="needs input proof_networks"):
        host_step("h-daemon", host=HOST, create=daemon_config.create, inputs=missing)


def test_a_function_that_is_no_host_verb_is_refused():
    with pytest.raises(StepError, match=r"is not a host step verb"):
        host_step("h-daemon", host=HOST, create=daemon_config.docker0_address,  # type: ignore
                  inputs=DAEMON)
    with pytest.raises(StepError, match="is not a host step verb"):
        host_step("h-daemon", host=HOST, create="daemon_config", inputs=DAEMON)  # type: ignore


def test_a_delete_of_another_module_or_of_the_wrong_inputs_is_refused():
    with pytest.raises(StepError, match="one step runs one module"):
        host_step("h-daemon", host=HOST, create=daemon_config.create, inputs=DAEMON,
                  delete=harbor_launch.delete)
    with pytest.raises(StepError, match=r"hostside/harbor_launch.py delete needs input "
                                        r"n_concurrent_trials \(StopInputs\)"):
        check_inputs("job-launch", harbor_launch.delete,
                     {"job_name": "j", "jobs_dir": "/ws/results", "log_dir": "/ws/logs",
                      "stop_timeout_s": 60})


def test_a_plain_value_of_the_wrong_type_is_refused():
    with pytest.raises(StepError, match=r"input proof_networks must be <class 'int'>, got str"):
        check_inputs("h-daemon", daemon_config.create, {**DAEMON, "proof_networks": "16"})
    with pytest.raises(StepError, match="input daemon_json must be"):
        check_inputs("h-daemon", daemon_config.create, {**DAEMON, "daemon_json": None})
    # Optional fields take None; values still to come (Outputs) are checked on the host.
    check_inputs("w", waiting.create, {"waiting": "", "step": "s"})


def every_verb() -> list[Verb]:
    verbs = []
    for path in sorted((PROJECT_ROOT / "hostside").glob("*.py")):
        module = importlib.import_module(f"hostside.{path.stem}")
        verbs += [v for _, v in inspect.getmembers(module) if isinstance(v, Verb)]
    return verbs


def test_every_step_module_declares_its_verbs_with_their_inputs():
    """What `python3 -m hostside MODULE VERB` runs is what the program checks against."""
    verbs = every_verb()
    assert {f"{v.module}.{v.name}" for v in verbs} >= {
        "daemon_config.create", "daemon_config.delete", "harbor_launch.create",
        "harbor_launch.delete", "k8s_preflight.create", "waiting.create"}
    for v in verbs:
        assert dataclasses.is_dataclass(v.inputs), v
        # Every field has no default: the program passes every value (the config owns them).
        assert all(f.default is dataclasses.MISSING for f in dataclasses.fields(v.inputs)), v


def test_every_components_step_is_declared_with_a_verb_not_a_name():
    """No component names a module by a string any more (the old `module="..."`)."""
    for path in sorted((PROJECT_ROOT / "components").rglob("*.py")):
        text = path.read_text()
        assert "module=\"" not in text and "has_delete" not in text, path


def test_the_rerun_audit_call_reads_the_audits_own_answer(tmp_path: Path):
    """The seam's one call of the audit CLI (harbor.reruns.from_audit), run as the program runs
    it on the local host: the finished job's infra trials come back as the rerun list."""
    job = write_job(tmp_path / "results", "main", [
        TrialSpec(task="hello-file"),
        TrialSpec(task="hello-proxy", reward=None, exception_type="CancelledError",
                  exception_message=""),
    ])
    proc = subprocess.run(["/bin/bash", "-c", audit_command(str(job))], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert rerun_list(proc.stdout) == ["hello-proxy"]
    assert rerun_list("") is None and rerun_list(json.dumps({"rerun": []})) == []
    broken = subprocess.run(["/bin/bash", "-c", audit_command(str(tmp_path / "nope"))],
                            capture_output=True, text=True, timeout=120)
    assert broken.returncode != 0
    assert "harbor.reruns.from_audit: the audit of" in broken.stderr
