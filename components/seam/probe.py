"""The read-only probes: a script of `hostside/probes/` run on a host at program time (every
`up` and `preview`, through `command.local.run`, over ssh for a remote host), before any code
has been copied there. So a probe reaches the host whole: its `# benchstack:include FILE` lines
(paths under the project root) are replaced by those files, and its inputs are exported
variables quoted into its text. Its outputs are its last stdout line, a JSON object.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path

import pulumi

from components.seam import code
from components.seam.host import Host
from components.seam.ssh import parse_outputs, reached, run_here, ssh_command

INCLUDE = "# benchstack:include "


def exports(env: Mapping[str, str]) -> str:
    """`export KEY=value` lines, each value quoted for bash."""
    for key in env:
        if not key.isidentifier():
            raise ValueError(f"script input {key!r} is not a valid environment variable name")
    return "".join(f"export {key}={shlex.quote(str(value))}\n" for key, value in env.items())


def _inlined(path: Path, root: Path) -> str:
    if not path.is_file():
        raise ValueError(f"host probe file {path} not found")
    lines = []
    for line in path.read_text().splitlines(keepends=True):
        if line.startswith(INCLUDE):
            lines.append(_inlined(root / line[len(INCLUDE):].strip(), root))
        else:
            lines.append(line)
    return "".join(lines)


def probes_dir() -> Path:
    return code.PROJECT_ROOT / code.HOSTSIDE / "probes"


def probe_text(probe: str) -> str:
    """A probe's text as it runs on the host, its includes inlined (it cannot `source`)."""
    path = probes_dir() / probe
    if not path.is_file():
        raise ValueError(f"host probe {probe!r} not found in {probes_dir()}")
    return _inlined(path, code.PROJECT_ROOT)


def render(probe: str, env: Mapping[str, str]) -> str:
    """The command line that runs `probe` under bash with `env` as exported variables."""
    name = Path(probe).stem.replace(".", "-")
    return f"bash -c {shlex.quote(exports(env) + probe_text(probe))} benchstack-{name}"


def probe_host(host: Host, probe: str, env: pulumi.Input[dict]) -> pulumi.Output[dict]:
    """A read-only probe's outputs, run on the host now, at program time (every `up` and
    `preview`), through `command.local.run` (over `ssh` for remote hosts)."""
    key = None if host.is_local else host.private_key

    def command_text(env_values: dict) -> str:
        text = render(probe, env_values)
        return text if host.is_local else ssh_command(host, text, with_key=key is not None,
                                                      report_failure=True)

    text = pulumi.Output.from_input(env).apply(command_text)
    # A host ssh cannot reach (or whose key it refuses) fails the program with one line naming
    # it, not with the probe's whole command.
    return run_here(text, stdin=key).apply(lambda out: parse_outputs(reached(host, out)))
