"""The host seam: the one place that decides how a step runs on a host.

A host is either the machine running Pulumi (`address: local`) or a server reached over SSH.
Components call `host_step` and never branch on which: local hosts get a
`command.local.Command`, remote hosts a `command.remote.Command`.

The code a step runs is on the host already. `HostCode` (components/host_code.py) copies the
host's code (the package components/hostside and the probes' scripts) to
`<workspace>/.benchstack/code` once per version, and each step's command is a short call of it:
`python3 -m hostside MODULE VERB`, its inputs one JSON object in an exported variable rendered
with `shlex.quote` (an SSH server only passes the environment it `AcceptEnv`s, so the
provider's `environment` cannot be relied on), its secrets as JSON on standard input. So a
failing step prints its reason, not its source, and the state holds no code. The command also
names the digest of the files the module runs, so an edited module is an update of exactly the
steps that run it.

The read-only probes run at program time (`command.local.run`, every preview and up) are the
exception: they run before anything is copied, so their script reaches the host whole, with its
`# benchstack:include FILE` lines replaced by those files (`render`).

By convention a step's last stdout line is a JSON object with its outputs; `ScriptRun.outputs`
parses it.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import re
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import pulumi
import pulumi_command as command

CODE_ROOT = Path(__file__).resolve().parent
SCRIPTS_DIR = CODE_ROOT / "scripts"
LOCAL_ADDRESS = "local"
# How a script names a file of the host's code: "$BENCHSTACK_CODE/<path under components/>".
CODE_REFERENCE = re.compile(r"\$\{?BENCHSTACK_CODE\}?/([A-Za-z0-9_./-]+)")


HostKeyPolicy = Literal["pinned", "accept-new"]


@dataclass(frozen=True)
class ShippedCode:
    """The host's code as the steps find it: its directory there, and the resource that copied
    it (every step depends on it, so it is there before the first create and after the last
    delete)."""

    path: str
    resource: pulumi.Resource


@dataclass(frozen=True, kw_only=True)
class Host:
    """Where scripts and containers run, and how every SSH path reaches it.

    `private_key` is a Pulumi secret (None: the ssh agent; unused on the local host, where
    nothing goes over ssh); `key_path` is a key file for the paths that run the local OpenSSH
    client with no way to take key material (pulumi-docker).

    Host keys, the same on every path (remote commands, the status probe, the Docker
    provider): `host_key` ("ssh-ed25519 AAAA...") pins the one key accepted; without it,
    `accept-new` trusts the first key seen, records it in `known_hosts` (as OpenSSH's own
    `StrictHostKeyChecking=accept-new` does) and accepts only that key from then on.
    """

    name: str
    address: str
    user: str | None = None
    port: int = 22
    private_key: pulumi.Input[str] | None = None
    key_path: str | None = None
    host_key: str | None = None
    known_hosts: str = "~/.ssh/known_hosts"
    # A host still booting refuses connections: retry with a pause, not in a tight loop.
    dial_error_limit: int = 20
    per_dial_timeout: int = 15
    # Set by __main__ once HostCode is declared for the host; host_step requires it.
    code: ShippedCode | None = None

    @property
    def is_local(self) -> bool:
        return self.address == LOCAL_ADDRESS

    @property
    def host_key_policy(self) -> HostKeyPolicy:
        return "pinned" if self.host_key else "accept-new"

    @property
    def known_hosts_name(self) -> str:
        """The host as known_hosts names it (`[addr]:port` off port 22)."""
        return self.address if self.port == 22 else f"[{self.address}]:{self.port}"

    def ssh_options(self) -> list[str]:
        """Options for every run of the local OpenSSH client toward this host (no `-p`: the
        Docker provider takes the port from its ssh:// URL)."""
        opts = ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={self.per_dial_timeout}",
                "-o", "ServerAliveInterval=30"]
        if self.host_key:
            # The pinned key and nothing else: no known_hosts file is read or written.
            opts += ["-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=/dev/null",
                     "-o", f"KnownHostsCommand=/bin/echo {self.known_hosts_name} {self.host_key}"]
        else:
            opts += ["-o", "StrictHostKeyChecking=accept-new",
                     "-o", f"UserKnownHostsFile={self.known_hosts}"]
        if self.key_path:
            opts += ["-i", self.key_path, "-o", "IdentitiesOnly=yes"]
        return opts

    @property
    def ssh_target(self) -> str:
        return f"{self.user}@{self.address}" if self.user else self.address

    @functools.cached_property
    def accepted_host_key(self) -> pulumi.Output[str]:
        """The one host key every path accepts (looked up once per program run)."""
        return known_host_key(self)

    @property
    def docker_ssh_opts(self) -> list[str] | None:
        """pulumi-docker's `ssh_opts` toward this host: none for the local engine's socket."""
        return None if self.is_local else self.ssh_options()

    @property
    def docker_host(self) -> str:
        """The Docker endpoint for pulumi-docker's provider (it shells out to the local ssh)."""
        if self.is_local:
            return "unix:///var/run/docker.sock"
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port != 22 else ""
        return f"ssh://{user}{self.address}{port}"


def code_files() -> list[str]:
    """What HostCode copies to a host: paths under components/, sorted."""
    scripts = sorted(str(p.relative_to(CODE_ROOT)) for p in SCRIPTS_DIR.rglob("*.sh"))
    package = sorted(str(p.relative_to(CODE_ROOT)) for p in (CODE_ROOT / "hostside").glob("*.py"))
    return scripts + package


def code_digest(files: Sequence[str]) -> str:
    """The digest of these files of the host's code (names and contents), 16 hex digits."""
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(rel.encode() + b"\0" + (CODE_ROOT / rel).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


@functools.cache
def script_closure(script: str) -> tuple[str, ...]:
    """The files of the host's code that `script` (a name under scripts/) runs: itself and,
    transitively, every `$BENCHSTACK_CODE/...` file it names."""
    seen: list[str] = []
    todo = [f"scripts/{script}"]
    while todo:
        rel = todo.pop()
        if rel in seen:
            continue
        path = CODE_ROOT / rel
        if not path.is_file():
            raise ValueError(f"host code {rel!r} not found in {CODE_ROOT}")
        seen.append(rel)
        if rel.endswith(".sh"):
            todo += CODE_REFERENCE.findall(path.read_text())
    return tuple(sorted(seen))


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


HOSTSIDE = "hostside"
# What every module of the host package runs besides itself.
HOSTSIDE_SHARED = ("__init__", "__main__", "step")


@functools.cache
def module_closure(module: str) -> tuple[str, ...]:
    """The files (paths under components/) that `python3 -m hostside MODULE` runs: the package's
    shared files, the module, and, transitively, the package modules it imports."""
    seen: set[str] = set()
    todo = [module, *HOSTSIDE_SHARED]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = CODE_ROOT / HOSTSIDE / f"{name}.py"
        if not path.is_file():
            raise ValueError(f"host module {name!r} not found in {CODE_ROOT / HOSTSIDE}")
        seen.add(name)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                todo += [node.module] if node.module else [a.name for a in node.names]
    return tuple(sorted(f"{HOSTSIDE}/{name}.py" for name in seen))


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
    call = f"exec python3 -m {HOSTSIDE} {module} {verb}"
    digest = code_digest(module_closure(module))
    return (f"bash -c {shlex.quote(_exports(env) + call)} benchstack-{module}-{verb}"
            f" # code {digest}")


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


def _resolved_any(
    values: Mapping[str, pulumi.Input[Any]], to_text: Callable[[dict], str]
) -> pulumi.Output[str]:
    keys = list(values)
    return pulumi.Output.all(*[values[k] for k in keys]).apply(
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


def ssh_command(
    host: Host, remote_command: str, *, with_key: bool, input_command: str | None = None
) -> str:
    """A bash command that runs `remote_command` on `host` with the local ssh client; with
    `input_command`, that local command's output is the remote command's standard input.

    With `with_key`, the private key arrives on this command's standard input (never in an
    argument, which `ps` shows) and lives in a private temp file for the call. The key is
    written with its final newline: `pulumi config set --secret ... < key` stores it without
    one, and OpenSSH then refuses the file ("error in libcrypto").
    """
    no_stdin = [] if input_command else ["-n"]
    ssh = " ".join(shlex.quote(o) for o in ["ssh", *no_stdin, *host.ssh_options(),
                                             "-o", "ConnectionAttempts=3", "-p", str(host.port)])
    target = shlex.quote(host.ssh_target)
    remote = shlex.quote(remote_command)
    pipe = f"{input_command} | " if input_command else ""
    if not with_key:
        return f"set -euo pipefail; {pipe}{ssh} {target} {remote}"
    return (
        "set -euo pipefail; key=$(mktemp); trap 'rm -f \"$key\"' EXIT; chmod 600 \"$key\"; "
        f"printf '%s\\n' \"$(cat)\" >\"$key\"; {pipe}{ssh} -i \"$key\" {target} {remote}"
    )


def here_command(
    host: Host, command_text: str, *, input_command: str | None = None
) -> tuple[str, pulumi.Input[str] | None]:
    """The bash command, run here, that runs `command_text` on `host` (itself on the local host,
    over ssh otherwise; with `input_command`, that local command's output is its standard
    input), and what must reach it on its standard input: the private key, or None."""
    key = None if host.is_local else host.private_key
    if host.is_local:
        pipe = f"{input_command} | " if input_command else ""
        return f"{pipe}{command_text}", None
    return ssh_command(host, command_text, with_key=key is not None,
                       input_command=input_command), key


def run_here(
    text: pulumi.Input[str], *, stdin: pulumi.Input[str] | None = None
) -> pulumi.Output[str]:
    """Run a read-only bash command on the machine running Pulumi, now, at program time (every
    preview and up): its stdout. `stdin` (a key, say) is a secret. Its stderr is shown (why a
    probe could not tell), its stdout only read: an answer is data, not a message."""
    result = command.local.run_output(
        command=text,
        # bash, not the invoke's default /bin/sh (dash on Debian has no `pipefail`).
        interpreter=["/bin/bash", "-c"],
        stdin=pulumi.Output.secret(stdin) if stdin is not None else None,
        logging=command.local.Logging.STDERR,
    )
    return result.stdout


def probe_host(host: Host, script: str, env: pulumi.Input[dict]) -> pulumi.Output[dict]:
    """A read-only host script's outputs, run on the host now, at program time (every `up`
    and `preview`), through `command.local.run` (over `ssh` for remote hosts)."""
    key = None if host.is_local else host.private_key

    def command_text(env_values: dict) -> str:
        text = render(script, env_values)
        return text if host.is_local else ssh_command(host, text, with_key=key is not None)

    text = pulumi.Output.from_input(env).apply(command_text)
    return run_here(text, stdin=key).apply(parse_outputs)


def copy_here_command(host: Host, path: str, copy: Path, *, with_key: bool) -> str:
    """A bash command, run here, that copies the directory `path` of the remote `host` to
    `copy` once (`tar` over ssh, read-only there; a `.copied` mark makes the copy final)."""
    parent, name = str(PurePosixPath(path).parent), PurePosixPath(path).name
    tmp = copy.with_name(f"{copy.name}.partial")
    fetch = ssh_command(host, f"tar -C {shlex.quote(parent)} -czf - -- {shlex.quote(name)}",
                        with_key=with_key)
    q = shlex.quote
    return (
        f"set -euo pipefail; if [ ! -f {q(str(copy / '.copied'))} ]; then "
        f"rm -rf {q(str(tmp))}; mkdir -p {q(str(tmp))}; "
        f"echo 'copying {host.name}:{path} to {copy}' >&2; "
        f"( {fetch} ) | tar -xzf - -C {q(str(tmp))}; "
        f"rm -rf {q(str(copy))}; mv {q(str(tmp / name))} {q(str(copy))}; rm -rf {q(str(tmp))}; "
        f"touch {q(str(copy / '.copied'))}; fi; "
    )


def read_dir_here(
    host: Host, path: pulumi.Input[str], copy: Callable[[str], Path], then: Callable[[str], str]
) -> pulumi.Output[str]:
    """Run the read-only bash command `then(dir)` here, now (every preview and up), on the
    directory `path` of `host` (one that no longer changes, e.g. a finished job): `dir` is `path`
    itself on the local host; for a remote host, a copy at `copy(path)` made once with `tar`
    over ssh (read-only there, the key on standard input). Its stdout; an empty `path` runs
    nothing and reads as an empty stdout."""
    key = None if host.is_local else host.private_key

    def command_text(where: str) -> str:
        if not where:
            return "true"
        if host.is_local:
            return then(where)
        here = copy(where)
        return copy_here_command(host, where, here, with_key=key is not None) + then(str(here))

    text = pulumi.Output.from_input(path).apply(command_text)
    return run_here(text, stdin=key)


# The accept-new lookup (components/known_hosts.py), run by the program's own python; the mark
# names the invoke (tests/graph mocks it by it).
KNOWN_HOSTS_PROGRAM = CODE_ROOT / "known_hosts.py"
KNOWN_HOST_KEY_MARK = "benchstack-known_host_key"


def known_host_key_command(host: Host) -> str:
    """The command that prints (as `{"host_key": ...}`) the key `known_hosts` records for `host`,
    recording it at a first contact when there is none: ssh with the seam's options (accept-new)
    and no authentication method, so only the key exchange happens."""
    contact = ["ssh", "-n", *host.ssh_options(), "-o", "PreferredAuthentications=none",
               "-o", "ConnectionAttempts=2", "-p", str(host.port), host.address]
    spec = {"name": host.known_hosts_name, "known_hosts": host.known_hosts, "contact": contact}
    argv = [sys.executable, "-I", str(KNOWN_HOSTS_PROGRAM), json.dumps(spec, sort_keys=True)]
    return f"{' '.join(shlex.quote(a) for a in argv)} # {KNOWN_HOST_KEY_MARK}"


def known_host_key(host: Host) -> pulumi.Output[str]:
    """The host key every path accepts: the pinned one, or (accept-new) the one recorded in
    `known_hosts` at the first contact, which this makes now if there was none. Read at every
    preview and up, like the status probe: it changes nothing on the host."""
    if host.host_key:
        return pulumi.Output.from_input(host.host_key)
    return run_here(known_host_key_command(host)).apply(lambda out: _host_key_line(host, out))


def _host_key_line(host: Host, stdout: str) -> str:
    key = parse_outputs(stdout).get("host_key", "")
    if not isinstance(key, str) or not key.startswith(("ssh-", "ecdsa-")):
        raise pulumi.RunError(
            f"host {host.name} ({host.known_hosts_name}): no host key could be read or recorded "
            f"in {host.known_hosts}; pin one with benchstack:hosts[].host_key "
            f"(`ssh-keyscan -p {host.port} {host.address}`)"
        )
    return key


def remote_connection(host: Host) -> command.remote.ConnectionArgs:
    """pulumi-command's SSH connection to `host`: its key (with the final newline OpenSSH
    keys need), and the host key the other paths accept too (unset, the provider would accept
    any)."""
    key = host.private_key
    if key is not None:
        key = pulumi.Output.secret(key).apply(lambda k: k if k.endswith("\n") else k + "\n")
    return command.remote.ConnectionArgs(
        host=host.address,
        user=host.user,
        port=host.port,
        private_key=key,
        host_key=host.accepted_host_key,
        dial_error_limit=host.dial_error_limit,
        per_dial_timeout=host.per_dial_timeout,
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
        create = pulumi.Output.all(reason, create).apply(
            lambda v: render_step("waiting", "create", {"waiting": v[0], "step": resource_name},
                                  code.path) if v[0] else v[1]
        )
        if delete is not None:
            delete = pulumi.Output.all(reason, delete).apply(lambda v: None if v[0] else v[1])
    # pulumi-command replaces only when `triggers` change, creating the new resource first and
    # deleting the old one after. So the code's text is no trigger: an edited script or module
    # (any upgrade of benchstack) is an update, which runs the idempotent create again and
    # deletes nothing. Where a trigger does replace, the old delete would remove the fixed
    # paths, unit or config the new create just made: it runs first.
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
            triggers=list(triggers), opts=opts, **extra,
        )
    return ScriptRun(command=resource, outputs=resource.stdout.apply(parse_outputs))


def host_step(
    resource_name: str,
    *,
    host: Host,
    module: str,
    inputs: Mapping[str, pulumi.Input[Any]],
    delete_inputs: Mapping[str, pulumi.Input[Any]] | None = None,
    has_delete: bool = False,
    triggers: Sequence[pulumi.Input] = (),
    secret_inputs: Sequence[str] = (),
    waiting: pulumi.Input[str] | None = None,
    opts: pulumi.ResourceOptions | None = None,
) -> ScriptRun:
    """Declare one step on `host`: `python3 -m hostside MODULE create` from the host code, its
    `inputs` one JSON object (components/hostside). With `has_delete` (or `delete_inputs`),
    destroy runs `MODULE delete` with `delete_inputs` (default: the same inputs but secrets).
    `secret_inputs` travel as JSON on the step's standard input, never in its command.

    `waiting`: while it resolves to a non-empty reason, the step only says why it does not run
    (hostside/waiting.py) and has nothing to delete; its triggers must change when the reason
    goes, so that the next `up` replaces it with the real step.
    """
    code = _code_of(host, resource_name)
    values = dict(inputs)
    secret_keys = tuple(k for k in secret_inputs if k in values)
    plain = {k: v for k, v in values.items() if k not in secret_keys}
    create = _resolved_any(
        plain, lambda v: render_step(module, "create", v, code.path, secret_keys))
    delete: pulumi.Output[Any] | None = None
    if has_delete or delete_inputs is not None:
        gone = {k: v for k, v in (delete_inputs if delete_inputs is not None else plain).items()
                if k not in secret_keys}
        delete = _resolved_any(gone, lambda v: render_step(module, "delete", v, code.path))
    stdin = (
        _resolved_any({k: values[k] for k in secret_keys},
                      lambda v: json.dumps(v, sort_keys=True))
        if secret_keys else None
    )
    return _declare(
        resource_name, host=host, create=create, delete=delete, triggers=triggers, stdin=stdin,
        waiting=waiting, opts=opts,
    )
