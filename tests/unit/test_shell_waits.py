"""The tool bundle's shell waits: a deadline in seconds, not a count of sleeps, so a pane or a cast
that a loaded host starts late is still waited for; the wait gives up at its deadline."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from hostside.tool_bundle import SHELL_WAITS


def bash(script: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", SHELL_WAITS + script], capture_output=True, text=True,
                          timeout=30)


def test_a_condition_that_holds_late_is_waited_for(tmp_path: Path) -> None:
    flag = tmp_path / "late"
    res = bash(f"(sleep 1.5; touch {flag}) & wait_until 10 test -e {flag} && echo SEEN")
    assert res.stdout.strip() == "SEEN", res.stderr


def test_the_wait_ends_at_its_deadline_and_fail_names_it() -> None:
    started = time.monotonic()
    res = bash("set -eu; wait_until 1 false || fail 'no marker within 1 s' 4; echo NOT_HERE")
    took = time.monotonic() - started
    assert (res.returncode, res.stdout, res.stderr.strip()) == (4, "", "no marker within 1 s")
    assert 1 <= took < 10
