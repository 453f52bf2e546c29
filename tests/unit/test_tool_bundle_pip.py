"""The tool bundle's asciinema download on a host whose python3 has no pip (found by the two-host
rehearsal: a Debian server with the seed's packages has `python3` and `python3-venv` but no
`python3-pip`, and the bundle's build stopped there, telling the user to set an input no stack
key reaches)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hostside import tool_bundle
from hostside.step import HostError


@pytest.fixture
def python_without_pip(tmp_path: Path) -> str:
    """A python that runs but has no pip module (a venv made without one)."""
    venv = tmp_path / "no-pip"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    assert subprocess.run([python, "-m", "pip", "--version"], capture_output=True).returncode != 0
    return python


def test_a_python_with_pip_downloads_with_its_own(tmp_path: Path):
    assert tool_bundle.pip_of(sys.executable, str(tmp_path)) == [sys.executable, "-m", "pip"]
    assert not (tmp_path / "pip-venv").exists()


def test_a_python_without_pip_downloads_with_the_pip_of_a_venv_of_it(
    python_without_pip: str, tmp_path: Path
):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    pip = tool_bundle.pip_of(python_without_pip, str(scratch))
    assert pip[0] == str(scratch / "pip-venv" / "bin" / "python")
    version = subprocess.run([*pip, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("pip ")


def test_no_pip_and_no_venv_names_what_to_install(tmp_path: Path):
    fake = tmp_path / "python3"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(HostError, match="install python3-pip or python3-venv"):
        tool_bundle.pip_of(str(fake), str(tmp_path))
