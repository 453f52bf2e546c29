"""How the host-plane tests run a host step: the exact command the seam gives it (render_step,
`python3 -m hostside MODULE VERB` from this checkout's code), run with `sh -c` as the providers
run it, optionally inside a wrapper (a network namespace, a pty, another umask).

`build_tool_bundle` is here, not in a conftest, because the Harbor tests build a bundle too.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from components.config import ToolBundleConfig
from components.seam.step import render_step
from components.tool_bundle import step_inputs
from tests.conftest import CODE, ScriptResult


def step_command(module: str, verb: str, inputs: Mapping[str, Any],
                 secret_inputs: Sequence[str] = ()) -> str:
    """The command the seam gives the step on a host whose code is this checkout's."""
    return render_step(module, verb, inputs, CODE, secret_inputs)


def run_step(module: str, verb: str, inputs: Mapping[str, Any], *, wrap: Sequence[str] = (),
             secrets: Mapping[str, Any] | None = None, timeout: float = 600) -> ScriptResult:
    """Run one verb of a host module as its step does (secrets as JSON on standard input)."""
    command = step_command(module, verb, inputs, tuple(secrets or ()))
    proc = subprocess.run(
        [*wrap, "sh", "-c", command], capture_output=True, text=True, timeout=timeout,
        input=json.dumps(dict(secrets)) if secrets else None,
        stdin=None if secrets else subprocess.DEVNULL,
    )
    return ScriptResult(proc.returncode, proc.stdout, proc.stderr)


def tool_bundle_inputs(tools_dir: Path | str, canary_image: str | None = None,
                       **over: Any) -> dict[str, Any]:
    """The tool bundle's inputs as the component renders them from the default config."""
    return {**step_inputs(ToolBundleConfig(), str(tools_dir), canary_image), **over}


def build_tool_bundle(tools_dir: Path | str, canary_image: str | None = None,
                      **over: Any) -> ScriptResult:
    return run_step("tool_bundle", "create", tool_bundle_inputs(tools_dir, canary_image, **over))
