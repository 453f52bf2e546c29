"""The host seam: the one place that decides how a script runs on a host.

A host is either the machine running Pulumi (`address: local`) or a server reached over SSH.
Components call `host_script` and never branch on which: local hosts get a
`command.local.Command`, remote hosts a `command.remote.Command`. Either way the script's
inputs are rendered into the command text with `shlex.quote` (an SSH server only passes the
environment it `AcceptEnv`s, so the provider's `environment` cannot be relied on), and the
script runs under `bash -c` so it behaves the same whatever the login shell is.

By convention a script's last stdout line is a JSON object with its outputs; `ScriptRun.outputs`
parses it.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_command as command

SCRIPTS_DIR = Path(__file__).resolve().parent / "scripts"
LOCAL_ADDRESS = "local"


@dataclass(frozen=True, kw_only=True)
class Host:
    """Where scripts and containers run; `private_key` is a Pulumi secret (None: ssh agent)."""

    name: str
    address: str
    user: str | None = None
    port: int = 22
    private_key: pulumi.Input[str] | None = None
    # A host still booting refuses connections: retry with a pause, not in a tight loop.
    dial_error_limit: int = 20
    per_dial_timeout: int = 15

    @property
    def is_local(self) -> bool:
        return self.address == LOCAL_ADDRESS

    @property
    def docker_host(self) -> str:
        """The Docker endpoint for pulumi-docker's provider (it shells out to the local ssh)."""
        if self.is_local:
            return "unix:///var/run/docker.sock"
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port != 22 else ""
        return f"ssh://{user}{self.address}{port}"


INCLUDE = "# benchstack:include "


def script_text(script: str) -> str:
    """A script's text as it runs on the host, with its `# benchstack:include FILE` lines
    replaced by those files: a script reaches the host as one string, so it cannot `source`."""
    path = SCRIPTS_DIR / script
    if not path.is_file():
        raise ValueError(f"host script {script!r} not found in {SCRIPTS_DIR}")
    lines = []
    for line in path.read_text().splitlines(keepends=True):
        if line.startswith(INCLUDE):
            lines.append(script_text(line[len(INCLUDE):].strip()))
        else:
            lines.append(line)
    return "".join(lines)


def _exports(env: Mapping[str, str]) -> str:
    for key in env:
        if not key.isidentifier():
            raise ValueError(f"script input {key!r} is not a valid environment variable name")
    return "".join(f"export {key}={shlex.quote(str(value))}\n" for key, value in env.items())


def render(script: str, env: Mapping[str, str], secret_env: Sequence[str] = ()) -> str:
    """The command line that runs `script` with `env` as exported variables, under bash.

    Keys in `secret_env` are left out of the command line (anyone on the host can read a
    process's arguments): the script reads them from standard input instead, see `secret_stdin`.
    """
    plain = {k: v for k, v in env.items() if k not in secret_env}
    prelude = _exports(plain)
    if any(k in env for k in secret_env):
        prelude += 'eval "$(cat)"\n'
    name = Path(script).stem.replace(".", "-")
    return f"bash -c {shlex.quote(prelude + script_text(script))} benchstack-{name}"


def secret_stdin(env: Mapping[str, str], secret_env: Sequence[str]) -> str:
    """The secret inputs as `export` lines, fed to the script's standard input."""
    return _exports({k: v for k, v in env.items() if k in secret_env})


def content_hash(*parts: str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def _resolved(env: Mapping[str, pulumi.Input[str]], to_text) -> pulumi.Output[str]:
    keys = list(env)
    values = [env[key] for key in keys]
    return pulumi.Output.all(*values).apply(
        lambda resolved: to_text(dict(zip(keys, resolved, strict=True)))
    )


def parse_outputs(stdout: str) -> dict:
    """The script's outputs: its last non-empty stdout line, which must be a JSON object."""
    lines = [line for line in (stdout or "").splitlines() if line.strip()]
    if not lines:
        return {}
    try:
        value = json.loads(lines[-1])
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class ScriptRun:
    command: pulumi.CustomResource
    outputs: pulumi.Output[dict]


def host_script(
    resource_name: str,
    *,
    host: Host,
    script: str,
    env: Mapping[str, pulumi.Input[str]] | None = None,
    delete_script: str | None = None,
    delete_env: Mapping[str, pulumi.Input[str]] | None = None,
    triggers: Sequence[pulumi.Input] = (),
    secret_env: Sequence[str] = (),
    opts: pulumi.ResourceOptions | None = None,
) -> ScriptRun:
    """Declare one script run on `host`; see the module docstring for the contract."""
    env = dict(env or {})
    secret_keys = tuple(k for k in secret_env if k in env)
    create = _resolved(env, lambda values: render(script, values, secret_keys))
    # A delete runs without standard input: it gets no secrets at all.
    delete_values = {
        k: v for k, v in (delete_env if delete_env is not None else env).items()
        if k not in secret_keys
    }
    delete = (
        _resolved(delete_values, lambda values: render(delete_script, values))
        if delete_script
        else None
    )
    # The script text is a trigger too: an edited script re-runs on the next `up`.
    all_triggers = [content_hash(script_text(script)), *triggers]
    has_secret = bool(secret_keys)
    extra: dict = {}
    if has_secret:
        extra["stdin"] = pulumi.Output.secret(
            _resolved(env, lambda values: secret_stdin(values, secret_keys))
        )
        # A secret rendered into the script must not reach the logs or plain state.
        logging = command.local.Logging.NONE if host.is_local else command.remote.Logging.NONE
        extra["logging"] = logging
        create = pulumi.Output.secret(create)
        delete = pulumi.Output.secret(delete) if delete is not None else None
        opts = pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(additional_secret_outputs=["stdout", "stderr"])
        )
    if host.is_local:
        resource = command.local.Command(
            resource_name,
            create=create,
            delete=delete,
            triggers=all_triggers,
            opts=opts,
            **extra,
        )
    else:
        resource = command.remote.Command(
            resource_name,
            connection=command.remote.ConnectionArgs(
                host=host.address,
                user=host.user,
                port=host.port,
                private_key=host.private_key,
                dial_error_limit=host.dial_error_limit,
                per_dial_timeout=host.per_dial_timeout,
            ),
            create=create,
            delete=delete,
            triggers=all_triggers,
            opts=opts,
            **extra,
        )
    return ScriptRun(command=resource, outputs=resource.stdout.apply(parse_outputs))
