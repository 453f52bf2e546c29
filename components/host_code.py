"""HostCode: the code every step on a host runs, copied there once per version.

The package `hostside/` and the contracts it imports go to `<workspace>/.benchstack/code` on the
host, at their paths under the project root (components/seam/code.py), so a step's command is a
short call of a module that is there already (components/seam/step.py). The copy runs
where Pulumi runs: `tar` of the project's files, unpacked on the host (over the seam's ssh for
a remote one, the key on standard input). A new version of benchstack is an update of this one
resource: the files are replaced in place (never a create-then-delete, which would remove the
directory the steps just started using), and only the steps whose own files changed re-run.
Every step depends on it, so destroy removes it last, with the caches the steps kept beside it
(`<workspace>/.benchstack`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace

import pulumi
import pulumi_command as command

from components.seam.code import PROJECT_ROOT, code_digest, code_files
from components.seam.host import Host, ShippedCode
from components.seam.ssh import here_command
from contracts.hostlayout import CODE_DIR, OWN_DIR


@dataclass(frozen=True, kw_only=True)
class HostCodeArgs:
    host: Host
    workspace: str


def install_script(code_dir: str, digest: str) -> str:
    """Unpack the tar on standard input into `code_dir` (on the host): a new version replaces the
    old one whole, and the same version is not written again."""
    dest = shlex.quote(code_dir)
    return (
        "set -euo pipefail\n"
        f"dest={dest}\n"
        f'if [ "$(cat "$dest/.digest" 2>/dev/null)" = {digest} ]; then\n'
        "  cat >/dev/null; exit 0\n"
        "fi\n"
        'mkdir -p "$(dirname "$dest")"\n'
        'new=$(mktemp -d "$dest.new.XXXXXX")\n'
        'if ! tar -C "$new" -xf -; then\n'
        '  rm -rf "$new"; echo "host code: the copy to $dest failed" >&2; exit 1\n'
        "fi\n"
        f'echo {digest} >"$new/.digest"\n'
        'rm -rf "$dest"\n'
        'mv "$new" "$dest"\n'
    )


def remove_script(own_dir: str) -> str:
    """Remove benchstack's own directory on the host: the code and the caches steps built there
    (the probe and staging venvs)."""
    return f"rm -rf {shlex.quote(own_dir)}\n"


class HostCode(pulumi.ComponentResource):
    """The copy of the host's code; `host` is the same host with `code` set, for the steps."""

    path: pulumi.Output[str]
    digest: pulumi.Output[str]

    def __init__(
        self, name: str, args: HostCodeArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("benchstack:components:HostCode", name, None, opts)
        host = args.host
        code_dir = f"{args.workspace.rstrip('/')}/{CODE_DIR}"
        files = code_files()
        digest = code_digest(files)
        pack = "tar -C {} -cf - {}".format(
            shlex.quote(str(PROJECT_ROOT)), " ".join(shlex.quote(f) for f in files)
        )
        install = "bash -c " + shlex.quote(install_script(code_dir, digest))
        remove = "bash -c " + shlex.quote(
            remove_script(f"{args.workspace.rstrip('/')}/{OWN_DIR}"))
        # Local or over ssh: the seam decides (the key, if any, on standard input).
        create, key = here_command(host, install, input_command=pack)
        delete, _ = here_command(host, remove)
        extra: dict = {}
        if key is not None:
            extra = {"stdin": pulumi.Output.secret(key), "logging": command.local.Logging.NONE}
        copy = command.local.Command(
            f"{name}-copy",
            create=create,
            delete=delete,
            interpreter=["/bin/bash", "-c"],
            **extra,
            # The directory is fixed: a replacement's delete would remove what its create made.
            opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
        )
        self.host = replace(host, code=ShippedCode(path=code_dir, resource=copy))
        self.path = pulumi.Output.from_input(code_dir)
        self.digest = pulumi.Output.from_input(digest)
        self.register_outputs({"path": self.path, "digest": self.digest})
