"""The host seam: how a script and its inputs reach a host, run for real with bash."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from components.host import (
    CODE_ROOT,
    SCRIPTS_DIR,
    code_digest,
    code_files,
    render,
    render_call,
    script_closure,
    script_text,
    secret_stdin,
)


@pytest.fixture
def probe_script():
    """A throwaway script in components/scripts (the seam only runs scripts from there)."""
    path = SCRIPTS_DIR / "_seam_probe.sh"
    path.write_text(
        "set -euo pipefail\n"
        'printf \'{"plain": "%s", "secret": "%s"}\\n\' "$PLAIN" "$TOKEN"\n'
        "tr '\\0' ' ' </proc/$$/cmdline >&2\n"
    )
    yield path.name
    path.unlink()


def run(command: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(["/bin/sh", "-c", command], input=stdin, capture_output=True, text=True)


def test_inputs_are_quoted_and_secrets_travel_on_stdin_only(probe_script):
    env = {"PLAIN": "it's $HOME; `x`", "TOKEN": "s3cr3t-value"}
    command = render(probe_script, env, secret_env=("TOKEN",))
    assert "s3cr3t-value" not in command
    proc = run(command, secret_stdin(env, ("TOKEN",)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == '{"plain": "it\'s $HOME; `x`", "secret": "s3cr3t-value"}'
    # What `ps` shows of the running script: the plain input, never the secret.
    assert "s3cr3t-value" not in proc.stderr and "PLAIN=" in proc.stderr


def test_bad_input_name_is_refused(probe_script):
    with pytest.raises(ValueError, match="'BAD-NAME'"):
        render(probe_script, {"BAD-NAME": "x"})


def test_unknown_script_is_refused():
    with pytest.raises(ValueError, match="nope.sh"):
        script_text("nope.sh")


def test_includes_are_expanded_once_where_they_stand():
    """For the probes run before any code is on the host (an invoke at every preview)."""
    text = script_text("harbor_status.sh")
    assert text.count("def status(") == 1
    assert not [ln for ln in text.splitlines() if ln.startswith("# benchstack:include")]


def test_a_step_calls_its_script_from_the_host_code_and_names_its_digest(probe_script):
    env = {"PLAIN": "it's $HOME; `x`", "TOKEN": "s3cr3t-value"}
    command = render_call(probe_script, env, str(CODE_ROOT), secret_env=("TOKEN",))
    # Short: the call, not the script's text.
    assert "printf" not in command and len(command) < 400
    assert "s3cr3t-value" not in command
    proc = run(command, secret_stdin(env, ("TOKEN",)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == '{"plain": "it\'s $HOME; `x`", "secret": "s3cr3t-value"}'
    assert "s3cr3t-value" not in proc.stderr
    assert command.endswith(f"# code {code_digest(script_closure(probe_script))}")


def test_the_digest_covers_the_files_a_script_names_and_only_those():
    """An edited module is an update of exactly the steps whose scripts run it."""
    assert script_closure("serving_probe.sh") == (
        "readiness.py", "scripts/lib/pinned_venv.sh", "scripts/serving_probe.sh")
    assert script_closure("harbor_status.sh") == ("scripts/harbor_status.sh",)
    # What HostCode ships covers every file any step names.
    shipped = set(code_files())
    for script in SCRIPTS_DIR.glob("*.sh"):
        assert set(script_closure(script.name)) <= shipped, script.name


def test_an_unknown_file_of_the_host_code_is_refused(tmp_path):
    path = SCRIPTS_DIR / "_seam_missing.sh"
    path.write_text('python3 "$BENCHSTACK_CODE/no_such_module.py"\n')
    try:
        with pytest.raises(ValueError, match="no_such_module.py"):
            script_closure.__wrapped__("_seam_missing.sh")
    finally:
        path.unlink()


def test_pinned_venv_builds_once_reuses_and_leaves_nothing_on_failure(tmp_path: Path):
    script = (
        "set -euo pipefail\n"
        "die() { printf 'probe: %s\\n' \"$*\" >&2; exit 1; }\n"
        "log() { printf '[probe] %s\\n' \"$*\" >&2; }\n"
        + (SCRIPTS_DIR / "lib" / "pinned_venv.sh").read_text()
        + 'pinned_venv "$VENV" "$MODULE" "$REQ" 300 PIP_ARGS ""\n'
    )

    def pinned(venv: Path, module: str, req: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", "-c", script],
            env={"PATH": "/usr/bin:/bin", "VENV": str(venv), "MODULE": module, "REQ": req},
            capture_output=True, text=True, timeout=600,
        )

    venv = tmp_path / "venv"
    first = pinned(venv, "idna", "idna")
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == f"{venv}/bin/python" and "building the venv" in first.stderr
    again = pinned(venv, "idna", "idna")
    assert again.returncode == 0 and "building" not in again.stderr

    bad = pinned(tmp_path / "bad", "nosuchmodule", "benchstack-no-such-package==9.9.9")
    assert bad.returncode != 0
    assert bad.stderr.strip().splitlines()[-1].startswith(
        "probe: pip could not install benchstack-no-such-package==9.9.9"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["venv"], "a half-built venv was left"
