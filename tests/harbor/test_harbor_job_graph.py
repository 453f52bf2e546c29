"""HarborJob under Pulumi mocks: its children, their order, secrets, and the resume design.

The mocks validate nothing: they record each registration and the status probe's invoke, and
answer the probe with a given job state. The tests assert on what the component declared.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field, replace
from typing import Any

import pulumi
import pulumi.runtime
import pytest
from pulumi.runtime import settings as pulumi_settings
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from components.config import KNOWN_HARBOR_WHEELS, AgentConfig, DatasetConfig, HarborConfig
from components.harbor_job import HarborJob, HarborJobArgs
from components.job_spec import JobSpec
from components.seam.host import Host
from tests.conftest import PROJECT_ROOT
from tests.graph.program import shipped
from tests.harbor.conftest import called_module, step_inputs

SECRET = "sk-harbor-test-SECRET"
LOCAL = Host(name="local", address="local")
PINNED_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHRlc3QtaG9zdC1rZXktcGlubmVkLWluLWNvbmZpZw"
REMOTE = Host(name="b", address="10.0.0.2", user="bench", port=2222, private_key="KEY-SECRET",
              host_key=PINNED_KEY)


@dataclass
class Recorded:
    resources: dict[str, dict] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)
    deps: dict[str, list[str]] = field(default_factory=dict)
    options: dict[str, pulumi.ResourceOptions] = field(default_factory=dict)
    probes: list[str] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    secret_outputs: dict[str, bool] = field(default_factory=dict)


class Mocks(pulumi.runtime.Mocks):
    def __init__(self, rec: Recorded, probe: dict) -> None:
        self.rec, self.probe = rec, probe

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        self.rec.resources[args.name] = dict(args.inputs)
        self.rec.types[args.name] = args.typ
        outputs = dict(args.inputs)
        stdout = {
            "job-install": {"harbor_bin": "/ws/harbor-0.21.0/bin/harbor"},
            "job-dataset": {"dataset_path": "/data/tasks"},
            "job-preflight": {"resolved_sha256": "ab" * 32},
        }.get(args.name, {})
        outputs["stdout"] = json.dumps(stdout)
        return [f"{args.name}-id", outputs]

    def call(self, args: pulumi.runtime.MockCallArgs):
        if args.token == "command:local:run":
            self.rec.probes.append(args.args["command"])
            return {"stdout": json.dumps(self.probe), "stderr": "", "command": ""}
        return {}


def job_args(host: Host, **changes: Any) -> HarborJobArgs:
    """The stack's sections as the component gets them; `changes` edit the agent section, the
    harbor section or the Args, whichever has the key."""
    agent = AgentConfig(name="terminus-2", n_concurrent=2)
    harbor = HarborConfig(version="0.21.0", wheel_sha256=KNOWN_HARBOR_WHEELS["0.21.0"],
                          python="/usr/bin/python3.13", n_concurrent_trials=4, agent=agent,
                          job_name_prefix="tb21")
    dataset = DatasetConfig(path="/data/tasks", expected_tasks=3, manifest_path="demo/tasks")
    agent_changes = {k: v for k, v in changes.items() if k in AgentConfig.model_fields}
    harbor_changes = {k: v for k, v in changes.items() if k in HarborConfig.model_fields}
    rest = {k: v for k, v in changes.items() if k not in agent_changes | harbor_changes}
    harbor = harbor.model_copy(
        update={**harbor_changes, "agent": agent.model_copy(update=agent_changes)})
    fields = dict(
        host=shipped(host), harbor=harbor, dataset=dataset, workspace="/ws",
        dataset_path="/data/tasks",
        model_name="openai/m", api_base=pulumi.Output.from_input("http://127.0.0.1:30000/v1"),
        tools_dir=pulumi.Output.from_input("/ws/tools"),
        proxy_url=pulumi.Output.from_input("http://host.docker.internal:27891"),
        api_key=pulumi.Output.secret(SECRET),
    )
    return HarborJobArgs(spec=JobSpec(**(fields | rest)))


def declare(probe: dict, host: Host = LOCAL, **changes: Any) -> Recorded:
    rec = Recorded()
    pulumi_settings.reset_options()
    pulumi.runtime.set_mocks(Mocks(rec, probe), project="benchstack", stack="t", preview=False)
    original = pulumi.Resource.__init__

    def recording(self, t, name, custom=False, props=None, opts=None, *a, **kw):
        deps = (opts.depends_on or []) if opts else []
        rec.deps[name] = [getattr(d, "_name", None) for d in deps]
        rec.options[name] = opts
        self._name = name
        original(self, t, name, custom, props, opts, *a, **kw)

    async def program() -> None:
        router = pulumi.CustomResource("test:index:Router", "router", {})
        args = replace(job_args(host, **changes), after=[router])
        job = HarborJob("job", args)
        for key in ("job_name", "jobs_dir", "job_dir", "job_log", "pid_file", "dataset_path",
                    "harbor_bin", "job_state"):
            output = getattr(job, key)
            rec.outputs[key] = await output.future()
            rec.secret_outputs[key] = await output.is_secret()

    pulumi.Resource.__init__ = recording
    try:
        _sync_await(run_pulumi_func(program))
    finally:
        pulumi.Resource.__init__ = original
    return rec


def plain(value: Any) -> Any:
    """A secret input reaches the mocks wrapped as {<secret signature>: ..., "value": v}."""
    return value["value"] if isinstance(value, dict) and "value" in value else value


RUNNING = {"state": "running", "token": "start", "pid": 42}


def test_children_and_their_order() -> None:
    rec = declare(RUNNING)
    names = ["job-install", "job-dataset", "job-configs", "job-preflight", "job-launch"]
    for name in names:
        assert rec.types[name] == "command:local:Command", name
        # What the caller depends on (router, images, bundle, proxy) precedes every step that
        # reads it; Harbor's install and the dataset run beside the serving plane.
        beside_the_plane = name in ("job-install", "job-dataset")
        assert ("router" in rec.deps[name]) != beside_the_plane, (name, rec.deps[name])
    # The component itself waits for nothing: its children could not register before the plane.
    assert rec.deps["job"] == []
    assert "job-dataset" in rec.deps["job-configs"]
    assert {"job-configs", "job-install", "job-dataset"} <= set(rec.deps["job-preflight"])
    assert "job-preflight" in rec.deps["job-launch"]
    assert rec.options["job-launch"].delete_before_replace is True
    launch = rec.resources["job-launch"]
    assert called_module(plain(launch["create"])) == "harbor_launch create"
    source = (PROJECT_ROOT / "hostside" / "harbor_launch.py").read_text()
    assert "start_new_session=True" in source
    assert called_module(plain(launch["delete"])) == "harbor_launch delete"
    assert "signal.SIGTERM" in source, "destroy stops Harbor gracefully"
    assert called_module(rec.resources["job-preflight"]["create"]) == "harbor_preflight create"
    assert "--print-config" in (PROJECT_ROOT / "hostside" / "harbor_preflight.py").read_text()
    for step, module in (("job-install", "harbor_install"), ("job-dataset", "harbor_dataset"),
                         ("job-configs", "harbor_configs")):
        assert called_module(rec.resources[step]["create"]) == f"{module} create"
        assert called_module(rec.resources[step]["delete"]) == f"{module} delete"


def test_values_the_config_owns_reach_the_steps() -> None:
    """Every value a step uses is the config's (or the program's), passed once: the stop timeout,
    the open-files limit, the start timeout, Harbor's python."""
    rec = declare(RUNNING, stop_timeout_s=777, nofile=4096, start_timeout_s=99)
    launch = rec.resources["job-launch"]
    created = step_inputs(plain(launch["create"]))
    stop = step_inputs(plain(launch["delete"]))
    assert (created["start_timeout_s"], created["nofile"]) == (99, 4096)
    assert stop == {"job_name": rec.outputs["job_name"], "jobs_dir": "/ws/results",
                    "log_dir": "/ws/logs", "n_concurrent_trials": 4, "stop_timeout_s": 777}
    assert "openai_api_key" not in created, "the key travels on standard input"
    install = step_inputs(rec.resources["job-install"]["create"])
    assert install == {"workspace": "/ws", "version": "0.21.0",
                       "wheel_sha256": KNOWN_HARBOR_WHEELS["0.21.0"],
                       "python": "/usr/bin/python3.13", "wheel_path": None, "extras": []}
    default = declare(RUNNING)
    stop = step_inputs(plain(default.resources["job-launch"]["delete"]))
    assert stop["stop_timeout_s"] == HarborConfig.model_fields["stop_timeout_s"].default == 600
    preflight = step_inputs(default.resources["job-preflight"]["create"])
    assert preflight["resolved_out"] == f"/ws/logs/{default.outputs['job_name']}" \
        ".resolved-config.json"
    assert isinstance(preflight["expected"], list) and preflight["expected"]


def test_outputs_are_paths_and_not_secret() -> None:
    rec = declare(RUNNING)
    name = rec.outputs["job_name"]
    assert name.startswith("tb21-")
    assert rec.outputs["jobs_dir"] == "/ws/results"
    assert rec.outputs["job_dir"] == f"/ws/results/{name}"
    assert rec.outputs["job_log"] == f"/ws/logs/{name}.log"
    assert rec.outputs["pid_file"] == f"/ws/logs/{name}.pid"
    assert rec.outputs["dataset_path"] == "/data/tasks"
    assert rec.outputs["harbor_bin"] == "/ws/harbor-0.21.0/bin/harbor"
    assert rec.outputs["job_state"] == "running"
    assert not any(rec.secret_outputs.values()), rec.secret_outputs


def test_the_api_key_only_reaches_the_launch_with_logging_off() -> None:
    rec = declare(RUNNING)
    holders = [n for n, inputs in rec.resources.items() if SECRET in json.dumps(inputs)]
    assert holders == ["job-launch"]
    assert rec.resources["job-launch"]["logging"] == "none"
    assert SECRET not in json.dumps(rec.outputs)


def test_rendered_configs_are_triggers() -> None:
    a = declare(RUNNING)
    b = declare(RUNNING, top_p=0.9)
    assert a.resources["job-configs"]["triggers"] != b.resources["job-configs"]["triggers"]
    assert a.outputs["job_name"] != b.outputs["job_name"], "a changed config is a new job"
    assert "top_p: 0.9" in step_inputs(b.resources["job-configs"]["create"])["job_config_yaml"]


@pytest.mark.parametrize(
    ("probe", "changes"),
    [
        ({"state": "absent", "token": "start", "pid": None}, "first launch"),
        ({"state": "running", "token": "start", "pid": 42}, "no change"),
        ({"state": "finished", "token": "start", "pid": 42}, "no change"),
        ({"state": "interrupted", "token": "resume-0123456789ab", "pid": 42}, "resume"),
    ],
)
def test_the_probe_decides_the_launch_trigger(probe: dict, changes: str) -> None:
    """A running or finished job keeps the token the launch stored (a second `up` is a no-op);
    an interrupted one gets a new token, so the launch is replaced, i.e. resumed."""
    first_launch = declare({"state": "absent", "token": "start", "pid": None})
    now = declare(probe)
    before = first_launch.resources["job-launch"]["triggers"]
    after = now.resources["job-launch"]["triggers"]
    assert (before == after) is (changes in ("first launch", "no change")), changes
    if changes == "resume":
        assert "resume-0123456789ab" in after
    # The probe ran the status script for this job, read-only.
    (probe_command,) = now.probes
    assert "harbor_status" in probe_command and now.outputs["job_name"] in probe_command


def test_the_rendered_probe_runs(tmp_path) -> None:
    """The probe's command line, run as the invoke runs it, reads a real (absent) job."""
    rec = declare(RUNNING, workspace=str(tmp_path))
    (probe,) = rec.probes
    proc = subprocess.run(["/bin/bash", "-c", probe], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"state": "absent", "token": "start", "pid": None}
    (tmp_path / "results" / rec.outputs["job_name"]).mkdir(parents=True)
    (tmp_path / "results" / rec.outputs["job_name"] / "config.json").write_text("{}")
    proc = subprocess.run(["/bin/bash", "-c", probe], capture_output=True, text=True, timeout=30)
    out = json.loads(proc.stdout)
    assert out["state"] == "interrupted" and out["token"].startswith("resume-")


def test_remote_hosts_probe_over_ssh() -> None:
    rec = declare(RUNNING, host=REMOTE)
    assert rec.types["job-launch"] == "command:remote:Command"
    (probe,) = rec.probes
    assert probe.startswith("set -euo pipefail") and "ssh -n -o BatchMode=yes" in probe
    assert "-p 2222" in probe and "bench@10.0.0.2" in probe
    # The pinned host key and nothing else, as on the remote commands' connection.
    assert f"KnownHostsCommand=/bin/echo [10.0.0.2]:2222 {PINNED_KEY}" in probe
    assert "StrictHostKeyChecking=yes" in probe
    # The connection holds the private key, so all of it is a secret.
    connection = rec.resources["job-launch"]["connection"]["value"]
    assert connection["hostKey"] == PINNED_KEY and connection["privateKey"] == "KEY-SECRET\n"
    # The key file is filled from stdin, with its final newline: the key is in no argument.
    assert "printf '%s\\n' \"$(cat)\" >\"$key\"" in probe and "KEY-SECRET" not in probe


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"api_base": None}, "JobSpec.api_base"),
        ({"model_name": None}, "JobSpec.model_name"),
        ({"dataset_path": None}, "dataset"),
        ({"dataset_path": "data/tasks"}, "JobSpec.dataset_path"),
    ],
)
def test_bad_args_name_the_field(changes: dict, message: str) -> None:
    """What only the wiring can get wrong; the rest is the config's (tests/unit)."""
    with pytest.raises(Exception, match=message):
        declare(RUNNING, **changes)
