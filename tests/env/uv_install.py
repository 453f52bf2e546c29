"""`python -m tests.env.uv_install VENV STATE_DIR PACKAGE...`: PACKAGE... (pip's arguments, `-e`
included) into the venv VENV with uv, as Harbor's install step does it (hostside/uv_installer.py:
its pinned uv, built once under STATE_DIR, given this machine's pip settings). tests/env/venv.sh
makes the tests' .venv with it; run by a bare python (the project's path on PYTHONPATH)."""

from __future__ import annotations

import os
import subprocess
import sys

from hostside.uv_installer import uv_command, uv_python


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        raise SystemExit("usage: python -m tests.env.uv_install VENV STATE_DIR PACKAGE...")
    venv, state, *packages = argv
    uv = uv_python(state, step="venv")
    if uv is None:
        raise SystemExit("pip could not install uv (see above)")
    command, env = uv_command(uv, f"{venv}/bin/python", packages)
    return subprocess.run(command, env={**os.environ, **env}, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
