"""Commands run where Pulumi runs that reach a host: over ssh for a remote one (the key on
standard input, never in an argument), as they are on the local one; the host key every path
accepts; pulumi-command's SSH connection."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pulumi
import pulumi_command as command

from contracts import job_copy

if TYPE_CHECKING:  # host.py asks known_host_key for its accepted key: no import cycle
    from components.seam.host import Host

# The accept-new lookup (known_hosts.py), run by the program's own python; the mark names the
# invoke (tests/graph mocks it by it).
KNOWN_HOSTS_PROGRAM = Path(__file__).resolve().with_name("known_hosts.py")
KNOWN_HOST_KEY_MARK = "benchstack-known_host_key"


def parse_outputs(stdout: str) -> dict:
    """A step's or probe's outputs: its last non-empty stdout line, which must be a JSON
    object."""
    lines = [line for line in (stdout or "").splitlines() if line.strip()]
    if not lines:
        return {}
    try:
        value = json.loads(lines[-1])
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


# The private key from standard input into the private temp file $key, with the final newline
# OpenSSH needs (see ssh_command): the one way a command run here gets the stack's key.
KEY_FILE = 'chmod 600 "$key"; printf \'%s\\n\' "$(cat)" >"$key"'
KEY_FROM_STDIN = f"key=$(mktemp); trap 'rm -f \"$key\"' EXIT; {KEY_FILE}"


# The last stdout line of a command made with `ssh_command(..., report_failure=True)` when ssh
# itself failed (exit 255: the host unreachable, its host key refused, the login refused) and
# nothing ran on the host: this mark, then ssh's own words. `reached` turns it into one error
# naming the host.
SSH_FAILED = "benchstack-ssh-failed"


def ssh_command(
    host: Host, remote_command: str, *, with_key: bool, input_command: str | None = None,
    report_failure: bool = False,
) -> str:
    """A bash command that runs `remote_command` on `host` with the local ssh client; with
    `input_command`, that local command's output is the remote command's standard input.

    With `with_key`, the private key arrives on this command's standard input (never in an
    argument, which `ps` shows) and lives in a private temp file for the call. The key is
    written with its final newline: `pulumi config set --secret ... < key` stores it without
    one, and OpenSSH then refuses the file ("error in libcrypto").

    With `report_failure`, a failure of ssh itself is not the command's failure: it prints
    SSH_FAILED and ssh's words as its last stdout line (its stderr still shows them) and exits 0,
    so that the caller can say which host and why (`reached`) instead of the engine printing
    the whole command.
    """
    no_stdin = [] if input_command else ["-n"]
    ssh = " ".join(shlex.quote(o) for o in ["ssh", *no_stdin, *host.ssh_options(),
                                             "-o", "ConnectionAttempts=3", "-p", str(host.port)])
    target = shlex.quote(host.ssh_target)
    remote = shlex.quote(remote_command)
    pipe = f"{input_command} | " if input_command else ""
    identity = ' -i "$key"' if with_key else ""
    call = f"{pipe}{ssh}{identity} {target} {remote}"
    cleanup = []
    if report_failure:
        cleanup.append('"${err:-}"')
        call = (f'err=$(mktemp); rc=0; {call} 2>"$err" || rc=$?; cat "$err" >&2; '
                f'if [ "$rc" -eq 255 ]; then printf \'%s %s\\n\' {SSH_FAILED} '
                '"$(tr -s \'\\r\\n\' \'||\' <"$err")"; rc=0; fi; exit "$rc"')
    if with_key:
        cleanup.insert(0, '"$key"')
    if not cleanup:
        return f"set -euo pipefail; {call}"
    trap = f"trap 'rm -f {' '.join(cleanup)}' EXIT; "
    if not with_key:
        return f"set -euo pipefail; {trap}{call}"
    return f"set -euo pipefail; key=$(mktemp); {trap}{KEY_FILE}; {call}"


def reached(host: Host, stdout: str) -> str:
    """The stdout of a `report_failure` command, once it is known that ssh reached `host`; when
    ssh itself failed, a RunError naming the host and the reason (one line under the CLI)."""
    lines = [line for line in (stdout or "").splitlines() if line.strip()]
    if not lines or not lines[-1].startswith(SSH_FAILED):
        return stdout
    said = [part.strip() for part in lines[-1][len(SSH_FAILED):].split("|") if part.strip()]
    raise pulumi.RunError(ssh_failure(host, said))


def ssh_failure(host: Host, said: list[str]) -> str:
    """Why ssh could not reach `host`, from ssh's own lines, with what to do about it."""
    where = f"host {host.name} ({host.ssh_target} port {host.port})"
    text = " ".join(said)
    last = said[-1] if said else "ssh exited with 255"
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in text or "Host key verification failed" in text:
        if host.host_key:
            return (f"{where}: refused: its SSH host key is not the one pinned in "
                    "benchstack:hosts[].host_key (nothing ran on it); if the host was "
                    "reinstalled, pin its new key (`ssh-keyscan -p "
                    f"{host.port} -t ed25519 {host.address}`)")
        return (f"{where}: refused: its SSH host key is not the one accepted at the first "
                f"contact and recorded in {host.known_hosts} (nothing ran on it); if the host "
                f"was reinstalled, remove the old key (`ssh-keygen -R {host.known_hosts_name} "
                f"-f {host.known_hosts}`) and run again, otherwise something else answers at "
                f"{host.address}")
    if "Permission denied" in text:
        return (f"{where}: the SSH login was refused ({last}): check benchstack:sshPrivateKey "
                f"and the authorized keys of {host.user or 'the user'} there")
    return f"{where}: not reachable over SSH ({last})"


def here_command(
    host: Host, command_text: str, *, input_command: str | None = None
) -> tuple[str, pulumi.Input[str] | None]:
    """The bash command, run here, that runs `command_text` on `host` (itself on the local host,
    over ssh otherwise; with `input_command`, that local command's output is its standard
    input), and what must reach it on its standard input: the private key, or None."""
    if host.is_local:
        pipe = f"{input_command} | " if input_command else ""
        return f"{pipe}{command_text}", None
    key = host.private_key
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


def copy_here_command(host: Host, path: str, copy: Path, *, with_key: bool) -> str:
    """A bash command, run here, that copies the finished job dir `path` of the remote `host` to
    `copy` once: contracts/job_copy.py (the audit's `--stack` makes the same copy), run by the
    program's own python with the seam's ssh access to the host; with `with_key`, the private
    key arrives on standard input and lives in a private temp file for the call."""
    spec = {"host": host.name, "access": host.ssh_access(), "path": path, "dest": str(copy),
            "final": True}
    argv = [sys.executable, "-I", job_copy.__file__, json.dumps(spec, sort_keys=True)]
    call = " ".join(shlex.quote(a) for a in argv)
    if not with_key:
        return f"set -euo pipefail; {call} >/dev/null; "
    return f"set -euo pipefail; {KEY_FROM_STDIN}; {call} \"$key\" >/dev/null; "


def read_dir_here(
    host: Host, path: pulumi.Input[str], then: Callable[[str], str]
) -> pulumi.Output[str]:
    """Run the read-only bash command `then(dir)` here, now (every preview and up), on the
    directory `path` of `host` (one that no longer changes, e.g. a finished job): `dir` is `path`
    itself on the local host; for a remote host, its copy here (contracts/job_copy.py: made once,
    read-only there, the key on standard input). Its stdout; an empty `path` runs nothing and
    reads as an empty stdout."""
    key = None if host.is_local else host.private_key

    def command_text(where: str) -> str:
        if not where:
            return "true"
        if host.is_local:
            return then(where)
        here = job_copy.cache_dir(host.name, where)
        return copy_here_command(host, where, here, with_key=key is not None) + then(str(here))

    text = pulumi.Output.from_input(path).apply(command_text)
    return run_here(text, stdin=key)


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
    preview and up, like the status probes: it changes nothing on the host."""
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
