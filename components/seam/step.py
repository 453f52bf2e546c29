"""`host_step`: one step of a host module, declared as a command resource on its host.

A component names the verbs a step runs by the host module's own functions
(`create=harbor_launch.create`, `delete=harbor_launch.delete`: hostside/step.py `verb`) and
gives their inputs as a mapping; the seam checks that mapping against the verb's `Inputs`
dataclass when the program runs (every preview, every unit test), so a wrong key, a missing
one, a plain value of the wrong type or a function that is no host verb fails `pulumi preview`
naming the step, the module and the key, not a host minutes into an `up`.

The command (local, or over SSH through the seam's one connection) is a short call of the code
HostCode copied to the host: `python3 -m hostside MODULE VERB`, its inputs one JSON object in
an exported variable rendered with `shlex.quote` (an SSH server only passes the environment it
`AcceptEnv`s, so the provider's `environment` cannot be relied on), its secrets as JSON on
standard input. So a failing step prints its reason, not its source, and the state holds no
code. The command ends with the digest of the files the module runs, so an edited module is an
update of exactly the steps that run it. By convention a step's last stdout line is a JSON
object with its outputs; `ScriptRun.outputs` parses it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shlex
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_command as command

from components.seam import code as host_code
from components.seam.host import Host, ShippedCode
from components.seam.probe import exports
from components.seam.ssh import parse_outputs, remote_connection
from hostside import waiting as waiting_step
from hostside.step import Verb

HOSTSIDE = host_code.HOSTSIDE


class StepError(pulumi.RunError, ValueError):
    """A step declared against its host module's contract: the step, the module, the key (one
    line under the CLI, no traceback: a RunError)."""


def _accepts(hint: Any, value: Any) -> bool:
    """Whether a plain value fits an `Inputs` field's type (the JSON shapes a host reads:
    str, int, float, bool, None, list, dict and unions of them); anything else passes."""
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_accepts(arg, value) for arg in typing.get_args(hint))
    if hint is type(None):
        return value is None
    base = origin or hint
    if base is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if base is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if base in (str, bool, list, dict):
        return isinstance(value, base | tuple) if base is list else isinstance(value, base)
    return True


def check_inputs(step: str, verb: Verb, inputs: Mapping[str, Any]) -> None:
    """`inputs` against what `verb` reads: every field given, nothing else, plain values of
    the field's type. Raises StepError naming the step, the module and the keys."""
    if not isinstance(verb, Verb):
        raise StepError(f"{step}: {verb!r} is not a host step verb (a function of a hostside "
                        "module declared with @verb(Inputs))")
    where = f"{step}: hostside/{verb.module}.py {verb.name}"
    fields = {f.name for f in dataclasses.fields(verb.inputs)}
    missing, unknown = sorted(fields - inputs.keys()), sorted(inputs.keys() - fields)
    wrong = ([f"needs input {', '.join(missing)}"] if missing else []) + (
        [f"has no input {', '.join(unknown)}"] if unknown else [])
    if wrong:
        raise StepError(f"{where} {' and '.join(wrong)} ({verb.inputs.__name__})")
    hints = typing.get_type_hints(verb.inputs)
    for key, value in inputs.items():
        if isinstance(value, pulumi.Output | pulumi.Resource) or hasattr(value, "__await__"):
            continue
        if not _accepts(hints[key], value):
            raise StepError(f"{where}: input {key} must be {hints[key]}, "
                            f"got {type(value).__name__} {value!r:.80}")


def render_step(
    module: str, verb: str, inputs: Mapping[str, Any], code_dir: str,
    secret_inputs: Sequence[str] = (),
) -> str:
    """The command line of one host step: `python3 -m hostside MODULE VERB` from the host code in
    `code_dir`, its inputs one JSON object (those in `secret_inputs` left out: they come on
    standard input). It ends with the digest of the files the module runs."""
    plain = {k: v for k, v in inputs.items() if k not in secret_inputs}
    env = {"BENCHSTACK_CODE": code_dir, "PYTHONPATH": code_dir,
           "BENCHSTACK_INPUTS": json.dumps(plain, sort_keys=True, separators=(",", ":"))}
    if secret_inputs:
        env["BENCHSTACK_SECRETS_ON_STDIN"] = "1"
    # From the code dir: `-m` puts the working directory first on sys.path, and on the local
    # host that is the project, whose own hostside/ is not the copy the step must run.
    call = f'cd "$BENCHSTACK_CODE" && exec python3 -m {HOSTSIDE} {module} {verb}'
    digest = host_code.code_digest(host_code.module_closure(module))
    return (f"bash -c {shlex.quote(exports(env) + call)} benchstack-{module}-{verb}"
            f" # code {digest}")


def content_hash(*parts: str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def _resolved(
    values: Mapping[str, pulumi.Input[Any]], to_text: typing.Callable[[dict], str]
) -> pulumi.Output[str]:
    keys = list(values)
    return pulumi.Output.all(*[values[k] for k in keys]).apply(
        lambda resolved: to_text(dict(zip(keys, resolved, strict=True)))
    )


@dataclass(frozen=True)
class ScriptRun:
    command: pulumi.CustomResource
    outputs: pulumi.Output[dict]


def _code_of(host: Host, resource_name: str) -> ShippedCode:
    if host.code is None:
        raise ValueError(
            f"{resource_name}: host {host.name} has no code shipped: declare its HostCode first"
        )
    return host.code


def _declare(
    resource_name: str,
    *,
    host: Host,
    create: pulumi.Output[str],
    delete: pulumi.Output[Any] | None,
    triggers: Sequence[pulumi.Input],
    stdin: pulumi.Output[str] | None,
    waiting: pulumi.Input[str] | None,
    opts: pulumi.ResourceOptions | None,
) -> ScriptRun:
    """The command resource of one step, local or over SSH: the seam's one decision."""
    code = _code_of(host, resource_name)
    if waiting is not None:
        reason = pulumi.Output.from_input(waiting)
        wait = {"waiting": "", "step": resource_name}
        check_inputs(resource_name, waiting_step.create, wait)
        create = pulumi.Output.all(reason, create).apply(
            lambda v: render_step("waiting", "create", {**wait, "waiting": v[0]},
                                  code.path) if v[0] else v[1]
        )
        if delete is not None:
            delete = pulumi.Output.all(reason, delete).apply(lambda v: None if v[0] else v[1])
    # pulumi-command replaces only when `triggers` change, creating the new resource first and
    # deleting the old one after. So the code's text is no trigger: an edited module (any
    # upgrade of benchstack) is an update, which runs the idempotent create again and deletes
    # nothing. Where a trigger does replace, the old delete would remove the fixed paths, unit
    # or config the new create just made: it runs first.
    # The code is copied before the first create and removed after the last delete.
    opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[code.resource]))
    if delete is not None:
        opts = pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(delete_before_replace=True)
        )
    extra: dict = {}
    if stdin is not None:
        extra["stdin"] = pulumi.Output.secret(stdin)
        # Whatever a step that holds a secret prints stays out of the logs and the plain state.
        logging = command.local.Logging.NONE if host.is_local else command.remote.Logging.NONE
        extra["logging"] = logging
        opts = pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(additional_secret_outputs=["stdout", "stderr"])
        )
    resource: command.local.Command | command.remote.Command
    if host.is_local:
        resource = command.local.Command(
            resource_name, create=create, delete=delete, triggers=list(triggers), opts=opts,
            **extra,
        )
    else:
        resource = command.remote.Command(
            resource_name, connection=remote_connection(host), create=create, delete=delete,
            triggers=list(triggers),
            # No step reads its previous output from the environment, and an SSH server passes
            # only what it `AcceptEnv`s: otherwise every update and delete of every remote step
            # warns "Unable to set 'PULUMI_COMMAND_STDOUT'" (found by the two-host rehearsal),
            # and a server that accepted them would get a secret step's output in its env.
            add_previous_output_in_env=False,
            opts=opts, **extra,
        )
    return ScriptRun(command=resource, outputs=resource.stdout.apply(parse_outputs))


def host_step(
    resource_name: str,
    *,
    host: Host,
    create: Verb,
    inputs: Mapping[str, pulumi.Input[Any]],
    delete: Verb | None = None,
    delete_inputs: Mapping[str, pulumi.Input[Any]] | None = None,
    triggers: Sequence[pulumi.Input] = (),
    secret_inputs: Sequence[str] = (),
    waiting: pulumi.Input[str] | None = None,
    opts: pulumi.ResourceOptions | None = None,
) -> ScriptRun:
    """Declare one step on `host`: `create` (a host module's verb) with `inputs`, and on
    destroy `delete` with `delete_inputs` (default: the same inputs but secrets). Both are
    checked against the verbs' `Inputs` now. `secret_inputs` travel as JSON on the step's
    standard input, never in its command.

    `waiting`: while it resolves to a non-empty reason, the step only says why it does not run
    (hostside/waiting.py) and has nothing to delete; its triggers must change when the reason
    goes, so that the next `up` replaces it with the real step.
    """
    code = _code_of(host, resource_name)
    check_inputs(resource_name, create, inputs)
    values = dict(inputs)
    secret_keys = tuple(k for k in secret_inputs if k in values)
    plain = {k: v for k, v in values.items() if k not in secret_keys}
    module = create.module
    create_text = _resolved(
        plain, lambda v: render_step(module, create.name, v, code.path, secret_keys))
    delete_text: pulumi.Output[Any] | None = None
    if delete is not None:
        if delete.module != module:
            raise StepError(f"{resource_name}: create is hostside/{module}.py's, delete "
                            f"hostside/{delete.module}.py's: one step runs one module")
        gone = dict(delete_inputs if delete_inputs is not None else plain)
        check_inputs(resource_name, delete, gone)
        delete_text = _resolved(gone, lambda v: render_step(module, delete.name, v, code.path))
    elif delete_inputs is not None:
        raise StepError(f"{resource_name}: delete_inputs without a delete verb")
    stdin = (
        _resolved({k: values[k] for k in secret_keys}, lambda v: json.dumps(v, sort_keys=True))
        if secret_keys else None
    )
    return _declare(
        resource_name, host=host, create=create_text, delete=delete_text, triggers=triggers,
        stdin=stdin, waiting=waiting, opts=opts,
    )
