"""Documentation that cannot drift: every repository path the project's prose names exists.

The prose: README.md, audit/RULES.md and every other Markdown file, the Makefile, the docstrings
and comments of every Python file, the comments of the shell scripts, stack files, TOML and env
files and Dockerfiles. A path is one rooted at a folder of the repository (`components/seam/
ssh.py`, `tests/env/`), a file at its root (`README.md`, `Pulumi.a100.yaml`), or a module in
dotted form (`components.seam.step.render_step`: a module of it must exist). A placeholder
(`<job>`, `{name}`, `$VAR`) is no path; a glob (`components/config*.py`) must match something.
The provenance records of outside data (`SOURCE.md`, `PROVENANCE.md`) cite paths of other
repositories, and are not read.
A file that moves, or goes, fails this until the prose that names it says where it is now.

Each rule is also shown finding the stale path it is for.
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

FOLDERS = ("components", "hostside", "contracts", "audit", "tests", "benchmarks", "setup", "demo",
           "docs", "datasets", r"\.ci")
PACKAGES = ("components", "hostside", "contracts", "audit", "tests", "benchmarks", "demo")
# Not preceded by what would make it part of a longer path (`~/.cache/benchstack/jobs`, `../x`).
BEFORE = r"(?<![\w./~$-])"
ROOTED = re.compile(BEFORE + rf"((?:{'|'.join(FOLDERS)})/[\w./*<>{{}}\[\]$-]*)")
TOP = re.compile(BEFORE + r"(README\.md|Makefile|pyproject\.toml|requirements\.txt|__main__\.py"
                 r"|Pulumi\.[\w.<>-]+\.yaml)")
DOTTED = re.compile(BEFORE + rf"((?:{'|'.join(PACKAGES)})(?:\.[A-Za-z_]\w*)+)")
# A dotted name ending so is a file name (`report.html`), not a module.
FILE_SUFFIXES = {"py", "md", "json", "jsonl", "yaml", "yml", "html", "txt", "sh", "toml", "log",
                 "png", "env"}
PLACEHOLDER = re.compile(r"[<>{}$\[\]]")
# Files whose `#` lines are comments.
HASH_COMMENTED = (".sh", ".yaml", ".yml", ".toml", ".env")
HASH_COMMENTED_NAMES = {"Dockerfile", "sglang", "run", ".gitignore"}
# Where outside data came from: their paths are the other repositories'.
OUTSIDE_PROVENANCE = {"SOURCE.md", "PROVENANCE.md"}


def repository_files() -> list[str]:
    """The tracked files and the new ones git does not ignore."""
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return sorted({line for line in out.splitlines() if (ROOT / line).is_file()})


def python_prose(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of a Python file's docstrings and comments."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                yield body[0].lineno, body[0].value.value
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def hash_comments(text: str) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(text.splitlines(), 1):
        if "#" in line:
            yield number, line[line.index("#"):]


def prose(path: str, text: str) -> Iterator[tuple[int, str]]:
    name = Path(path).name
    if path.endswith(".py"):
        yield from python_prose(text)
    elif path.endswith(".md") or name == "Makefile":
        yield 1, text
    elif path.endswith(HASH_COMMENTED) or name in HASH_COMMENTED_NAMES:
        yield from hash_comments(text)


def exists(root: Path, name: str) -> bool:
    name = name.rstrip(".,:;)'\"`")
    if PLACEHOLDER.search(name):
        return True
    if "*" in name:
        return any(root.glob(name))
    return (root / name).exists()


def module_exists(root: Path, dotted: str) -> bool:
    """A dotted name names a module of the repository: some prefix of at least two parts is a
    module or package (the rest is what it defines)."""
    parts = dotted.split(".")
    for end in range(len(parts), 1, -1):
        base = root.joinpath(*parts[:end])
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            return True
    return False


def stale_paths(root: Path, path: str, text: str) -> list[str]:
    found = []
    for line, chunk in prose(path, text):
        for pattern in (ROOTED, TOP):
            for match in pattern.finditer(chunk):
                if not exists(root, match.group(1)):
                    found.append(f"{path}:{line}: {match.group(1)}")
        for match in DOTTED.finditer(chunk):
            name = match.group(1)
            if name.rsplit(".", 1)[-1] not in FILE_SUFFIXES and not module_exists(root, name):
                found.append(f"{path}:{line}: {name}")
    return found


def test_every_path_the_prose_names_exists() -> None:
    files = repository_files()
    assert "README.md" in files and "audit/RULES.md" in files and "Makefile" in files
    found = [stale for path in files if Path(path).suffix not in (".png", ".safetensors")
             and Path(path).name not in OUTSIDE_PROVENANCE
             for stale in stale_paths(ROOT, path, (ROOT / path).read_text(errors="replace"))]
    assert found == [], "\n".join(found)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "components" / "seam").mkdir(parents=True)
    (tmp_path / "components" / "__init__.py").write_text("")
    (tmp_path / "components" / "seam" / "__init__.py").write_text("")
    (tmp_path / "components" / "seam" / "step.py").write_text("")
    (tmp_path / "README.md").write_text("")
    return tmp_path


@pytest.mark.parametrize(("path", "text"), [
    ("x.py", '"""The seam (components/host.py) decides."""\n'),
    ("x.py", "x = 1  # see components/seam/gone.py\n"),
    ("x.py", '"""Run `components.host.render_step`."""\n'),
    ("x.sh", "# the peers: tests/env/setup.sh\n"),
    ("README.md", "Every default in `Pulumi.local.yaml`.\n"),
    ("Makefile", "lint:\n\truff check components/old\n"),
])
def test_a_stale_path_is_found(tree: Path, path: str, text: str) -> None:
    assert stale_paths(tree, path, text) != [], text


@pytest.mark.parametrize(("path", "text"), [
    ("x.py", '"""The seam (components/seam/step.py, `components.seam.step.render_step`)."""\n'),
    ("x.py", '"""Its copy: `~/.cache/benchstack/jobs/<host>/<job>`, then README.md."""\n'),
    ("x.py", '"""One per module: `components/<module>.py`, `components/seam/*.py`."""\n'),
    ("x.py", 'X = "components/gone.py"  # a string is code, not prose\n'),
    ("x.sh", 'cp "$ROOT/components/gone.py" .\n'),
    ("README.md", "The report: `audit.html` and `components.seam`.\n"),
])
def test_what_is_no_stale_path_passes(tree: Path, path: str, text: str) -> None:
    assert stale_paths(tree, path, text) == [], text
