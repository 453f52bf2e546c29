"""A readiness probe of the serving plane, run on this host (components/serving.py: a worker's and
the router's `-ready`, the router's `-reach`): readiness.py with httpx.

create: runs the probe `spec` describes (readiness.py `run_spec`) with `python` (a python that
imports httpx, from the config) or with the probe venv, built once under `venvs_dir`; outputs
the probe's result. Its own waits are bounded; `hard_timeout_s` is the backstop should a
connection hang past them. Failure: the probe's reason (readiness.py's last stderr line).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .pinned_venv import python_with, run_program
from .step import HostError, verb

if TYPE_CHECKING:
    # Not imported: run as a program by the venv's python (it needs httpx). Named here so that
    # the step's code digest (host.module_closure) covers it.
    from . import readiness  # noqa: F401

NAME = "serving_probe"
# The httpx the probe venv pins: the version readiness.py is written and tested against.
HTTPX_VERSION = "0.28.1"
VENV_NAME = f"probe-httpx-{HTTPX_VERSION}"
PIP_TIMEOUT_S = 300


@dataclass(frozen=True)
class Inputs:
    spec: dict[str, Any]
    python: str | None
    venvs_dir: str
    pip_args: list[str]
    hard_timeout_s: int


@verb(Inputs)
def create(inputs: Inputs) -> None:
    python = python_with(
        "httpx", inputs.python, key="serving.probe_python",
        venv=Path(inputs.venvs_dir) / VENV_NAME, requirement=f"httpx=={HTTPX_VERSION}",
        pip_timeout_s=PIP_TIMEOUT_S, pip_args=inputs.pip_args, step=NAME,
    )
    code = run_program(python, "readiness.py", ["spec", json.dumps(inputs.spec)],
                       timeout_s=inputs.hard_timeout_s)
    if code == -1:
        raise HostError(f"probe still running after its hard timeout of {inputs.hard_timeout_s}s:"
                        " killed; check the endpoint by hand")
    if code != 0:
        # readiness.py said why on its last stderr line: that is the step's reason.
        raise SystemExit(code)
