"""Complexity held by lint: ruff's C901 (max 10) and PLR0915 (50 statements) are on, and the
functions over those bounds when they came in are listed once, in pyproject.toml's
per-file-ignores, each line naming its functions after a `#`.

ruff ignores a rule for a whole file, so a second complex function in a listed file would pass
ruff alone: this holds the names to what ruff finds with the ignores off. A new offender fails,
in a listed file or not, and a function cleaned up fails until its name (and its line, with the
last name) is deleted. `make lint` runs this file too.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

RULES = ("C901", "PLR0915")
# What `make lint` gives ruff, read from the Makefile so that the two cannot drift apart.
LINTED = re.search(r"-m ruff check (.+)$", (ROOT / "Makefile").read_text(), re.M).group(1).split()
# `"path" = ["C901", ...]  # name, name` inside [tool.ruff.lint.per-file-ignores].
IGNORE_LINE = re.compile(r'^"(?P<path>[^"]+)"\s*=\s*\[(?P<codes>[^\]]*)\]\s*#\s*(?P<names>.+)$')

Offenders = dict[str, tuple[set[str], set[str]]]


def listed(pyproject: str) -> Offenders:
    """{path: (codes, function names)} from the per-file-ignores section's lines."""
    section = pyproject.split("[tool.ruff.lint.per-file-ignores]", 1)[1].split("\n[", 1)[0]
    found: Offenders = {}
    for line in section.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        match = IGNORE_LINE.match(line)
        if match is None:
            raise ValueError(f"pyproject.toml per-file-ignores: {line!r} names no function "
                             f"after a '#'")
        codes = set(re.findall(r'"([^"]+)"', match["codes"]))
        found[match["path"]] = (codes, {n.strip() for n in match["names"].split(",")})
    return found


def function_at(source: str, line: int) -> str:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno == line:
            return node.name
    raise ValueError(f"no function defined on line {line}")


def offenders(targets: list[str], stdin: str | None = None, stdin_path: str = "") -> Offenders:
    """What ruff finds for RULES with every per-file ignore off, by file: (codes, names)."""
    command = [sys.executable, "-m", "ruff", "check", "--select", ",".join(RULES),
               "--config", "lint.per-file-ignores = {}", "--output-format", "json", "--no-cache"]
    command += ["--stdin-filename", stdin_path, "-"] if stdin is not None else targets
    run = subprocess.run(command, cwd=ROOT, input=stdin, capture_output=True, text=True,
                         check=False)
    if run.returncode not in (0, 1):
        raise RuntimeError(run.stderr)
    found: Offenders = {}
    for finding in json.loads(run.stdout):
        path = str(Path(finding["filename"]).resolve().relative_to(ROOT))
        source = stdin if stdin is not None else (ROOT / path).read_text()
        codes, names = found.setdefault(path, (set(), set()))
        codes.add(finding["code"])
        names.add(function_at(source, finding["location"]["row"]))
    return found


def differences(listed: Offenders, found: Offenders) -> list[str]:
    problems = []
    for path in sorted(found.keys() - listed.keys()):
        codes, names = found[path]
        problems.append(f"{path}: {sorted(names)} over the bounds ({sorted(codes)}): split it "
                        f"where its steps have names")
    for path in sorted(listed.keys() - found.keys()):
        problems.append(f"{path}: no longer over the bounds: delete its per-file-ignores line")
    for path in sorted(listed.keys() & found.keys()):
        (want_codes, want_names), (codes, names) = listed[path], found[path]
        if names - want_names:
            problems.append(f"{path}: {sorted(names - want_names)} over the bounds: split it")
        if want_names - names:
            problems.append(f"{path}: {sorted(want_names - names)} no longer over the bounds: "
                            f"delete the name from its per-file-ignores line")
        if codes != want_codes:
            problems.append(f"{path}: ignores {sorted(want_codes)}, ruff finds {sorted(codes)}")
    return problems


def pyproject() -> str:
    return (ROOT / "pyproject.toml").read_text()


def test_the_ignore_list_names_exactly_the_offenders() -> None:
    problems = differences(listed(pyproject()), offenders(LINTED))
    assert problems == [], "\n".join(problems)


COMPLEX = "\n\ndef tangled(x):\n" + "".join(
    f"    if x == {i}:\n        return {i}\n" for i in range(11)) + "    return -1\n"


def test_ruff_fails_a_new_complex_function_outside_the_list() -> None:
    run = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--stdin-filename",
                          "components/new_module.py", "-"], cwd=ROOT, input=COMPLEX,
                         capture_output=True, text=True, check=False)
    assert run.returncode == 1 and "C901" in run.stdout, run.stdout


def test_a_new_complex_function_in_a_listed_file_is_found() -> None:
    path = sorted(listed(pyproject()))[0]
    source = (ROOT / path).read_text() + COMPLEX
    problems = differences(listed(pyproject()), {
        **offenders(LINTED), path: offenders([], stdin=source, stdin_path=path)[path]})
    assert f"{path}: ['tangled'] over the bounds: split it" in problems, problems


def test_a_function_cleaned_up_but_still_listed_is_found() -> None:
    found = offenders(LINTED)
    path = sorted(listed(pyproject()))[0]
    codes, names = found[path]
    cleaned = {**found, path: (codes, names - {sorted(names)[0]})}
    assert differences(listed(pyproject()), cleaned) == [
        f"{path}: ['{sorted(names)[0]}'] no longer over the bounds: delete the name from its "
        f"per-file-ignores line"]
    gone = {k: v for k, v in found.items() if k != path}
    assert differences(listed(pyproject()), gone) == [
        f"{path}: no longer over the bounds: delete its per-file-ignores line"]
