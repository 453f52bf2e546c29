"""A stand-in for the Pulumi engine + command provider, for `local` stacks, until the real
provider can run here.

The real Pulumi CLI is built by tests/env/setup.sh and judges what it can (tests/engine), but
the pulumi-command provider cannot be built here (the module proxy refuses its module), so the
whole pipeline's host side is run by this runner. It evaluates `__main__.py` under Pulumi mocks
whose handler follows pulumi-command 1.2's lifecycle for `command:local:Command`:

- create: runs `create` with the interpreter (default `/bin/sh -c`), in `dir`, with the
  process environment plus `environment`; a non-zero exit fails the resource and leaves
  nothing in state; `stdout`/`stderr` become outputs (one trailing newline trimmed);
- unchanged inputs: nothing runs;
- changed `triggers`: a replacement: the new create runs first and the old delete after, or
  the old delete first when the resource asked for delete_before_replace;
- any other changed input (create text, environment, stdin, delete text): an update, which
  runs `create` again (there is no `update` command here) and deletes nothing;
- delete: runs `delete` with PULUMI_COMMAND_STDOUT/STDERR set to the stored outputs; destroy
  runs the stored deletes in reverse order of creation;
- `command:local:run` (an invoke) runs at every evaluation.
Anything else (docker resources) is refused: the local stack must not declare any.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

import pulumi

from tests.graph.program import Declared, ProgramRun, run_program

COMMAND = "command:local:Command"
DIFF_KEYS = ("create", "update", "delete", "dir", "environment", "interpreter", "triggers", "stdin")


class CommandFailed(Exception):
    pass


@dataclass
class StoredCommand:
    name: str
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    delete_before_replace: bool = False


@dataclass
class StackState:
    """What `pulumi up` keeps between runs: each command's inputs and outputs, in order."""

    commands: dict[str, StoredCommand] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    exports: dict[str, Any] = field(default_factory=dict)


@dataclass
class UpResult:
    run: ProgramRun
    created: list[str]
    replaced: list[str]
    updated: list[str]
    unchanged: list[str]
    seconds: dict[str, float]


def _execute(text: str, inputs: dict[str, Any], extra_env: dict[str, str] | None = None):
    interpreter = list(inputs.get("interpreter") or ["/bin/sh", "-c"])
    env = {**os.environ, **(inputs.get("environment") or {}), **(extra_env or {})}
    proc = subprocess.run(
        [*interpreter, text],
        cwd=inputs.get("dir") or None,
        env=env,
        input=inputs.get("stdin") or "",
        capture_output=True,
        text=True,
    )
    return proc.returncode, proc.stdout.removesuffix("\n"), proc.stderr.removesuffix("\n")


SECRET_SIG = "4dabf18193072939515e22adb298388d"


def _plain(value: Any) -> Any:
    """Mocks see secrets in Pulumi's wrapped form; the provider sees plain values."""
    if isinstance(value, dict):
        if SECRET_SIG in value:
            return _plain(value.get("value"))
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _comparable(inputs: dict[str, Any]) -> str:
    return json.dumps({k: inputs.get(k) for k in DIFF_KEYS}, sort_keys=True, default=str)


class LocalEngine(pulumi.runtime.Mocks):
    def __init__(self, state: StackState, dbr: set[str], preview: bool = False):
        self.state = state
        self.dbr = dbr  # names that asked for delete_before_replace
        self.preview = preview  # diff only: run no create or delete (invokes still run)
        self.created: list[str] = []
        self.replaced: list[str] = []
        self.updated: list[str] = []
        self.unchanged: list[str] = []
        self.seconds: dict[str, float] = {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        if not args.custom:
            # A component: nothing runs, the engine only records it.
            return [f"{args.name}-id", {}]
        if args.typ != COMMAND:
            raise CommandFailed(f"{args.typ} {args.name}: only local commands run here")
        inputs = _plain(dict(args.inputs))
        previous = self.state.commands.get(args.name)
        if previous and _comparable(previous.inputs) == _comparable(inputs):
            self.unchanged.append(args.name)
            return [f"{args.name}-id", previous.outputs]
        replace = previous is not None and previous.inputs.get("triggers") != inputs.get("triggers")
        if self.preview:
            kind = self.replaced if replace else self.updated if previous else self.created
            kind.append(args.name)
            return [f"{args.name}-id", previous.outputs if previous else inputs]
        if replace and previous.inputs.get("delete") and (args.name in self.dbr):
            self._delete(previous)
        started = time.monotonic()
        code, stdout, stderr = _execute(inputs["create"], inputs)
        self.seconds[args.name] = time.monotonic() - started
        if code != 0:
            raise CommandFailed(
                f"{args.name}: exit {code}\n--- stderr (tail)\n{stderr[-3000:]}\n"
                f"--- stdout (tail)\n{stdout[-1000:]}"
            )
        outputs = {**inputs, "stdout": stdout, "stderr": stderr}
        if replace:
            self.replaced.append(args.name)
            if previous.inputs.get("delete") and args.name not in self.dbr:
                self._delete(previous)
        elif previous:
            self.updated.append(args.name)
        else:
            self.created.append(args.name)
            self.state.order.append(args.name)
        self.state.commands[args.name] = StoredCommand(args.name, inputs, outputs)
        return [f"{args.name}-id", outputs]

    def call(self, args: pulumi.runtime.MockCallArgs):
        if args.token != "command:local:run":
            raise CommandFailed(f"unexpected invoke {args.token}")
        code, stdout, stderr = _execute(args.args["command"], _plain(dict(args.args)))
        if code != 0:
            raise CommandFailed(f"invoke command:local:run: exit {code}\n{stderr[-3000:]}")
        return {"stdout": stdout, "stderr": stderr}

    @staticmethod
    def _delete(stored: StoredCommand) -> None:
        delete(stored)


def delete(stored: StoredCommand) -> None:
    text = stored.inputs.get("delete")
    if not text:
        return
    code, _, stderr = _execute(
        text,
        stored.inputs,
        {
            "PULUMI_COMMAND_STDOUT": stored.outputs.get("stdout", ""),
            "PULUMI_COMMAND_STDERR": stored.outputs.get("stderr", ""),
        },
    )
    if code != 0:
        raise CommandFailed(f"delete of {stored.name}: exit {code}\n{stderr[-3000:]}")


def run_create(stored: StoredCommand) -> str:
    """Run a stored command's create again, as the provider would on an update."""
    code, stdout, stderr = _execute(stored.inputs["create"], stored.inputs)
    if code != 0:
        raise CommandFailed(f"create of {stored.name}: exit {code}\n{stderr[-3000:]}")
    return stdout


def up(stack: str, state: StackState, overrides: dict[str, Any], preview: bool = False) -> UpResult:
    """One `pulumi up`: evaluate the program, running what changed since `state`. With
    `preview`, `pulumi preview`: the same diff, nothing run and nothing stored."""
    dbr: set[str] = set()

    def on_declare(declared: Declared, opts: pulumi.ResourceOptions | None) -> None:
        if opts is not None and opts.delete_before_replace:
            dbr.add(declared.name)

    engine = LocalEngine(state, dbr, preview=preview)
    run = run_program(stack, overrides=overrides, mocks=engine, on_declare=on_declare)
    if not preview:
        state.exports = dict(run.exports)
    return UpResult(run, engine.created, engine.replaced, engine.updated, engine.unchanged,
                    engine.seconds)


def destroy(state: StackState) -> list[str]:
    """`pulumi destroy`: every stored delete, in reverse order of creation."""
    errors = []
    for name in reversed(state.order):
        stored = state.commands.pop(name, None)
        if stored is None:
            continue
        try:
            delete(stored)
        except CommandFailed as error:
            errors.append(str(error))
    state.order.clear()
    if errors:
        raise CommandFailed("\n".join(errors))
    return []
