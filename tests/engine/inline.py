"""Run one Pulumi operation on a project copy with the real CLI, the program given inline.

The Python language host (`pulumi-language-python`) cannot be built here (the module proxy
refuses its module; tests/env/engine/build.sh), so the CLI cannot start the program itself.
The Automation API's inline programs are the supported way around that: the Python SDK serves
the language runtime in this process and the real CLI drives it (`--client`), with the
project's Pulumi.yaml, its stack file, its file:// backend and the passphrase secrets manager.
Everything after the program's evaluation (config encoding, secrets, state, plan, outputs) is
the real engine's.

One operation per process: Pulumi's runtime keeps global state. Prints one JSON line:
{"ok", "error", "outputs", "summary"}.

Usage: python inline.py PROJECT_DIR STACK OPERATION PROGRAM
  OPERATION: preview | up | destroy
  PROGRAM:   main (the project's __main__.py) | config (load the config, export what it read)
             | outputs (export the JSON object in $BENCHSTACK_TEST_OUTPUTS: recorded outputs)
"""

from __future__ import annotations

import hashlib
import json
import runpy
import sys
from pathlib import Path


def config_program() -> None:
    """Exports what `load_pulumi_config` read, and the raw strings the CLI handed over."""
    import pulumi
    from pulumi.runtime.config import CONFIG

    from components.config import NAMESPACE, load_pulumi_config

    cfg, secrets = load_pulumi_config()
    pulumi.export("decoded", cfg.model_dump(mode="json"))
    # What the engine handed the language runtime, before any decoding of ours.
    raw = {k: v for k, v in CONFIG.get().items() if k.startswith(f"{NAMESPACE}:")}
    pulumi.export("raw", {k: v for k, v in raw.items() if k != f"{NAMESPACE}:sshPrivateKey"})
    if secrets.ssh_private_key is not None:
        pulumi.export("ssh_key", secrets.ssh_private_key)
        pulumi.export(
            "ssh_key_sha256",
            pulumi.Output.unsecret(secrets.ssh_private_key).apply(
                lambda k: hashlib.sha256(k.encode()).hexdigest()
            ),
        )


def outputs_program() -> None:
    """Exports the values of the JSON file BENCHSTACK_TEST_OUTPUTS names, as stack outputs."""
    import os

    import pulumi

    for key, value in json.loads(Path(os.environ["BENCHSTACK_TEST_OUTPUTS"]).read_text()).items():
        pulumi.export(key, value)


def main(argv: list[str]) -> int:
    project, stack_name, operation, program_name = argv
    project_dir = Path(project).resolve()
    # The copy's components, not the checkout the venv's editable install points at.
    sys.path.insert(0, str(project_dir))

    from pulumi import automation as auto

    from tests.engine.paths import engine_root

    def program() -> None:
        if program_name == "main":
            runpy.run_path(str(project_dir / "__main__.py"), run_name="__main__")
        elif program_name == "outputs":
            outputs_program()
        else:
            config_program()

    stack = auto.create_or_select_stack(
        stack_name=stack_name,
        project_name="benchstack",
        program=program,
        opts=auto.LocalWorkspaceOptions(
            work_dir=str(project_dir),
            pulumi_command=auto.PulumiCommand(root=str(engine_root())),
        ),
    )
    result: dict = {"ok": True, "error": "", "outputs": {}, "summary": {}}
    try:
        if operation == "preview":
            res = stack.preview(color="never")
            result["summary"] = dict(res.change_summary)
        elif operation == "up":
            res = stack.up(color="never")
            result["summary"] = dict(res.summary.resource_changes or {})
            result["outputs"] = {
                k: ("[secret]" if v.secret else v.value) for k, v in res.outputs.items()
            }
        elif operation == "destroy":
            res = stack.destroy(color="never")
            result["summary"] = dict(res.summary.resource_changes or {})
        else:
            raise SystemExit(f"inline.py: unknown operation {operation!r}")
    except auto.CommandError as error:
        result.update(ok=False, error=str(error))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
