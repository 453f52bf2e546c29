"""uv is given the host's pip settings: read from the real `pip config list` (a pip.conf and the
PIP_* environment, pip's own precedence), handed over as uv's flags and variables. The hosts are
reserved names (.invalid) that nothing here contacts: `pip config list` only reads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hostside.uv_installer import pip_settings, uv_arguments

# Every setting the translation reads, empty unless a test sets it: the machine's own pip.conf
# (which pip reads before PIP_CONFIG_FILE's) cannot leak into a test's expectations.
BLANK = dict.fromkeys(("index-url", "extra-index-url", "find-links", "trusted-host", "proxy",
                       "cert"), "") | {"no-index": "false"}


def uv_gets(tmp_path: Path, glob: dict[str, str], install: dict[str, str] | None = None,
            **env: str) -> tuple[list[str], dict[str, str]]:
    """uv's flags and variables for a pip.conf of these [global] and [install] sections and
    these PIP_* variables."""
    path = tmp_path / "pip.conf"
    sections = {"global": BLANK | glob, "install": install or {}}
    path.write_text("".join(f"[{name}]\n" + "".join(f"{k} = {v}\n" for k, v in values.items())
                            for name, values in sections.items()))
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                            text=True, timeout=60, check=True,
                            env={**clean, "PIP_CONFIG_FILE": str(path), **env}).stdout
    return uv_arguments(pip_settings(listed))


def test_a_mirror_a_proxy_and_a_ca_bundle_reach_uv(tmp_path: Path) -> None:
    flags, env = uv_gets(tmp_path, {
        "index-url": "https://mirror.invalid/simple", "proxy": "http://127.0.0.1:3128",
        "cert": "/etc/ssl/corp.pem", "trusted-host": "mirror.invalid other.invalid",
    }, {"extra-index-url": "https://extra.invalid/simple"})
    assert flags == ["--default-index", "https://mirror.invalid/simple",
                     "--index", "https://extra.invalid/simple",
                     "--allow-insecure-host", "mirror.invalid",
                     "--allow-insecure-host", "other.invalid"]
    assert env == {"HTTPS_PROXY": "http://127.0.0.1:3128", "HTTP_PROXY": "http://127.0.0.1:3128",
                   "SSL_CERT_FILE": "/etc/ssl/corp.pem"}


def test_the_environment_wins_over_the_sections_as_it_does_for_pip(tmp_path: Path) -> None:
    flags, env = uv_gets(tmp_path, {"index-url": "https://global.invalid/simple"},
                         {"index-url": "https://install.invalid/simple",
                          "cert": "/etc/ssl/install.pem"},
                         PIP_CERT="/etc/ssl/env.pem", PIP_FIND_LINKS="/opt/wheels",
                         PIP_NO_INDEX="1")
    assert flags == ["--default-index", "https://install.invalid/simple",
                     "--find-links", "/opt/wheels", "--no-index"]
    assert env == {"SSL_CERT_FILE": "/etc/ssl/env.pem"}


def test_no_settings_give_uv_its_defaults(tmp_path: Path) -> None:
    assert uv_gets(tmp_path, {}) == ([], {})
