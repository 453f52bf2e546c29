"""Run `__main__.py` for a stack file under Pulumi mocks and record what it declares.

Mocks validate nothing: they record every registration (type, name, inputs) and every
resource's options (parent, depends_on), and the tests assert on those records. The config
comes from the stack file itself, never retyped in a test.
"""

from __future__ import annotations

import json
import runpy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi.runtime
from pulumi.runtime import settings as pulumi_settings
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from components.config import NAMESPACE, split_stack_file
from components.host_code import HostCode, HostCodeArgs
from components.seam.host import Host
from tests.conftest import ROOT


def shipped(host: Host, workspace: str = "/ws", name: str | None = None) -> Host:
    """`host` with its HostCode declared, as __main__.py hands every component its hosts.
    Call it inside the program (under mocks); one per host and program unless `name` differs."""
    if host.code is not None:
        return host
    return HostCode(name or f"{host.name}-code", HostCodeArgs(host=host, workspace=workspace)).host


@dataclass
class Registration:
    type: str
    name: str
    inputs: dict[str, Any]
    provider: str | None


@dataclass
class Declared:
    resource: pulumi.Resource
    type: str
    name: str
    depends_on: list[pulumi.Resource]
    parent: pulumi.Resource | None


@dataclass
class ProgramRun:
    registrations: list[Registration] = field(default_factory=list)
    declared: list[Declared] = field(default_factory=list)
    exports: dict[str, Any] = field(default_factory=dict)
    export_outputs: dict[str, Any] = field(default_factory=dict)
    secret_exports: dict[str, bool] = field(default_factory=dict)

    def of_type(self, type_: str) -> list[Registration]:
        return [r for r in self.registrations if r.type == type_]

    def named(self, name: str) -> Registration:
        matches = [r for r in self.registrations if r.name == name]
        if len(matches) != 1:
            raise AssertionError(f"{len(matches)} registrations named {name!r}")
        return matches[0]

    def component(self, name: str) -> Declared:
        matches = [d for d in self.declared if d.name == name]
        if len(matches) != 1:
            raise AssertionError(f"{len(matches)} resources named {name!r}")
        return matches[0]

    def children(self, name: str) -> list[Declared]:
        parent = self.component(name).resource
        return [d for d in self.declared if d.parent is parent]


class RecordingMocks(pulumi.runtime.Mocks):
    """Records every registration; answers itself, or passes on to `delegate` (a real runner)."""

    def __init__(
        self,
        run: ProgramRun,
        stdout_for: Callable[[str, dict], str] | None = None,
        delegate: pulumi.runtime.Mocks | None = None,
    ):
        self.run = run
        self.stdout_for = stdout_for or (lambda name, inputs: "{}")
        self.delegate = delegate

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        inputs = dict(args.inputs)
        self.run.registrations.append(Registration(args.typ, args.name, inputs, args.provider))
        if self.delegate is not None:
            return self.delegate.new_resource(args)
        outputs = dict(inputs)
        if args.typ in ("command:local:Command", "command:remote:Command"):
            outputs["stdout"] = self.stdout_for(args.name, inputs)
            outputs["stderr"] = ""
        if args.typ == "docker:index/remoteImage:RemoteImage":
            outputs["imageId"] = f"sha256:{'0' * 64}"
            outputs["repoDigest"] = f"{inputs.get('name', 'image')}@sha256:{'1' * 64}"
        return [f"{args.name}-id", outputs]

    def call(self, args: pulumi.runtime.MockCallArgs):
        if self.delegate is not None:
            return self.delegate.call(args)
        if args.token == "command:local:run":
            return mock_local_run(args.args.get("command", ""))
        return {}


KNOWN_HOST_KEY_MARK = "benchstack-known_host_key"
MOCK_HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGJlbmNoc3RhY2stbW9jay1ob3N0LWtleS0wMDAwMA"


def mock_local_run(text: str) -> dict:
    """`command:local:run` under mocks: the accept-new host-key lookup (host.known_host_key)
    gets a key as if recorded at first use; anything else no outputs."""
    stdout = "{}"
    if KNOWN_HOST_KEY_MARK in text:
        stdout = json.dumps({"host_key": MOCK_HOST_KEY})
    return {"stdout": stdout, "stderr": "", "command": text}


def cli_encoded(value: Any) -> str:
    """A config value as the Pulumi CLI hands it to a program: a plain string as it is,
    anything else (object, list, number, boolean) as JSON. tests/engine checks this against
    what the real CLI passes."""
    if isinstance(value, str):
        return value
    # Go's encoding/json: compact, keys sorted, whole floats without ".0", non-ASCII kept,
    # and <, >, & escaped.
    text = json.dumps(_go_numbers(value), separators=(",", ":"), sort_keys=True,
                      ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _go_numbers(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _go_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_go_numbers(v) for v in value]
    return value


def stack_config(stack: str, overrides: dict[str, Any] | None = None) -> dict[str, str]:
    """The stack file's `benchstack:*` values as the Pulumi CLI passes them to a program."""
    values, secrets = split_stack_file(ROOT / f"Pulumi.{stack}.yaml")
    values.update(overrides or {})
    config = {f"{NAMESPACE}:{k}": cli_encoded(v) for k, v in values.items()}
    for key, value in secrets.items():
        config[f"{NAMESPACE}:{key}"] = cli_encoded(value)
    return config


def run_program(
    stack: str,
    *,
    overrides: dict[str, Any] | None = None,
    secrets: dict[str, str] | None = None,
    stdout_for: Callable[[str, dict], str] | None = None,
    mocks: pulumi.runtime.Mocks | None = None,
    on_declare: Callable[[Declared, pulumi.ResourceOptions | None], None] | None = None,
) -> ProgramRun:
    """Evaluate __main__.py for `stack` under mocks; returns what it declared."""
    run = ProgramRun()
    pulumi_settings.reset_options()
    pulumi.runtime.set_mocks(
        RecordingMocks(run, stdout_for, mocks), project="benchstack", stack=stack, preview=False
    )
    config = stack_config(stack, overrides)
    secret_keys = []
    for key, value in (secrets or {}).items():
        config[f"{NAMESPACE}:{key}"] = value
        secret_keys.append(f"{NAMESPACE}:{key}")
    pulumi.runtime.set_all_config(config, secret_keys)

    original_init = pulumi.Resource.__init__

    def recording_init(self, t, name, custom=False, props=None, opts=None, *args, **kwargs):
        deps = list((opts.depends_on or []) if opts else [])
        if not isinstance(deps, list):
            deps = [deps]
        parent = opts.parent if opts else None
        declared = Declared(self, t, name, deps, parent)
        run.declared.append(declared)
        if on_declare is not None:
            on_declare(declared, opts)
        original_init(self, t, name, custom, props, opts, *args, **kwargs)

    def recording_export(name: str, value: Any) -> None:
        run.export_outputs[name] = value

    async def program() -> None:
        runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")
        for name, value in run.export_outputs.items():
            output = pulumi.Output.from_input(value)
            run.exports[name] = await output.future()
            run.secret_exports[name] = await output.is_secret()

    pulumi.Resource.__init__ = recording_init
    original_export = pulumi.export
    pulumi.export = recording_export
    try:
        # The same driver as @pulumi.runtime.test: waits for every queued registration.
        _sync_await(run_pulumi_func(program))
    finally:
        pulumi.Resource.__init__ = original_init
        pulumi.export = original_export
    return run


def manifest_size(stack: str) -> int:
    values, _ = split_stack_file(ROOT / f"Pulumi.{stack}.yaml")
    path = Path(values["dataset"]["manifest_path"])
    return len(list((path if path.is_absolute() else ROOT / path).glob("*/task.toml")))
