"""What every host module shares: its verbs, inputs, outputs, progress and one-line failure.

A module declares each input set as a frozen dataclass without defaults and each verb with the
set it reads:

    @verb(Inputs)
    def create(inputs: Inputs) -> None: ...

On the host, `python3 -m hostside MODULE create` reads the step's inputs into `Inputs`: a missing
or unknown input is the program's bug, refused at once with the key named. Where Pulumi runs,
the program names the same verb (`host_step(..., create=module.create)`), and the seam checks
the inputs it declares against `create.inputs` before anything runs (components/seam/step.py).
Optional inputs are typed `... | None` and still passed (as null), so that no module decides a
value the config model already owns.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from typing import Any, Callable, Generic, TypeVar

INPUTS_VAR = "BENCHSTACK_INPUTS"
# Set when the step's secrets arrive as a JSON object on standard input.
SECRETS_VAR = "BENCHSTACK_SECRETS_ON_STDIN"

T = TypeVar("T")


class HostError(Exception):
    """Why a step failed: the one line the user reads (the module's name is put before it)."""


def raw_inputs() -> dict[str, Any]:
    text = os.environ.get(INPUTS_VAR)
    if text is None:
        raise HostError(f"{INPUTS_VAR} is not set: run this through the host seam")
    try:
        values = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HostError(f"{INPUTS_VAR} is not JSON ({exc})") from None
    if not isinstance(values, dict):
        raise HostError(f"{INPUTS_VAR} must be a JSON object")
    if os.environ.get(SECRETS_VAR) == "1":
        secrets = json.loads(sys.stdin.read() or "{}")
        if not isinstance(secrets, dict):
            raise HostError("the secrets on standard input must be a JSON object")
        values.update(secrets)
    return values


def read(cls: type[T], values: dict[str, Any] | None = None) -> T:
    """`cls` (a dataclass) from the step's inputs: every field given, nothing else.

    A delete is stored in the stack's state with the inputs of the release that created the
    resource, and runs against the host code of the release doing the delete (an upgrade that
    replaces the resource, a destroy after an upgrade): an input renamed since is read under its
    new name, as the Inputs class's `RENAMED` ({old name: new name}) says."""
    values = dict(raw_inputs() if values is None else values)
    for old, new in getattr(cls, "RENAMED", {}).items():
        if old in values and new not in values:
            values[new] = values.pop(old)
    fields = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    missing = sorted(fields - values.keys())
    unknown = sorted(values.keys() - fields)
    if missing:
        raise HostError(f"input {', '.join(missing)} missing: the program must pass it")
    if unknown:
        raise HostError(
            f"unknown input {', '.join(unknown)}: this host code is older than the program"
        )
    return cls(**values)


class Verb(Generic[T]):
    """One verb of a host module (`create`, `delete`, `check`) and the inputs it reads. Called
    with no argument, it reads the step's inputs and runs."""

    def __init__(self, inputs: type[T], body: Callable[[T], None]) -> None:
        self.inputs = inputs
        self.body = body
        self.name = body.__name__
        # "harbor_launch" for hostside/harbor_launch.py, whichever package path imported it.
        self.module = body.__module__.rsplit(".", 1)[-1]

    def __call__(self, values: dict[str, Any] | None = None) -> None:
        self.body(read(self.inputs, values))

    def __repr__(self) -> str:
        return f"<host verb {self.module}.{self.name}({self.inputs.__name__})>"


def verb(inputs: type[T]) -> Callable[[Callable[[T], None]], Verb[T]]:
    """Declare a module's verb and the dataclass of inputs it reads."""
    if not dataclasses.is_dataclass(inputs):
        raise TypeError(f"verb inputs must be a dataclass, got {inputs!r}")

    def declare(body: Callable[[T], None]) -> Verb[T]:
        return Verb(inputs, body)

    return declare


def log(module: str, message: str) -> None:
    print(f"[{module}] {message}", file=sys.stderr, flush=True)


def emit(outputs: dict[str, Any]) -> None:
    """The step's outputs: one JSON object, the last stdout line."""
    print(json.dumps(outputs, sort_keys=True, separators=(",", ":")), flush=True)


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a program a step runs (Harbor, pip, skopeo...): the step's own, less
    what the seam set for the step itself (its inputs, the package on PYTHONPATH), plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if k != "PYTHONPATH" and not k.startswith("BENCHSTACK_")}
    env.update(extra or {})
    return env


def run(cmd: list[str], timeout: float = 120, input: str | None = None
        ) -> subprocess.CompletedProcess:
    """Run a host command, its output captured as text (undecodable bytes replaced), bounded:
    one that hangs past `timeout` is a one-line reason, not a step that never ends."""
    stdin = None if input is not None else subprocess.DEVNULL
    try:
        return subprocess.run(cmd, input=input, stdin=stdin, capture_output=True, text=True,
                              errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        raise HostError(f"`{' '.join(cmd[:3])}` did not answer within {timeout:g}s") from None
