"""Which files of the project run on a host, and their digest.

A host runs the package `hostside/` (standard library only) and the modules of `contracts/` it
imports, at their paths under the project root: HostCode (components/host_code.py) copies them
to `<workspace>/.benchstack/code`, and a step's command puts that directory on PYTHONPATH. A
step's command names the digest of the files its module runs (`module_closure`), so an edited
module is an update of exactly the steps that run it.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from collections.abc import Sequence
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
HOSTSIDE = "hostside"
CONTRACTS = "contracts"
# What every module of the host package runs besides itself.
HOSTSIDE_SHARED = ("__init__", "__main__", "step")


def _imports(path: Path) -> list[str]:
    """The project files `path` imports: `hostside/<module>.py` for its relative imports,
    `contracts/<module>.py` for the contracts it names."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names = [node.module] if node.module else [a.name for a in node.names]
            found += [f"{HOSTSIDE}/{name}.py" for name in names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            parts = node.module.split(".")
            if parts[0] == CONTRACTS:
                names = parts[1:2] or [a.name for a in node.names]
                found += [f"{CONTRACTS}/__init__.py", *(f"{CONTRACTS}/{n}.py" for n in names)]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == CONTRACTS and len(parts) > 1:
                    found += [f"{CONTRACTS}/__init__.py", f"{CONTRACTS}/{parts[1]}.py"]
    return found


def _closure(start: Sequence[str], root: Path) -> tuple[str, ...]:
    seen: set[str] = set()
    todo = list(start)
    while todo:
        rel = todo.pop()
        if rel in seen:
            continue
        path = root / rel
        if not path.is_file():
            raise ValueError(f"host code {rel!r} not found in {root}")
        seen.add(rel)
        todo += _imports(path)
    return tuple(sorted(seen))


def module_closure(module: str) -> tuple[str, ...]:
    """The files (paths under the project root) that `python3 -m hostside MODULE` runs: the
    package's shared files, the module, and, transitively, what they import of the project."""
    return _module_closure(module, PROJECT_ROOT)


@functools.cache
def _module_closure(module: str, root: Path) -> tuple[str, ...]:
    if not (root / HOSTSIDE / f"{module}.py").is_file():
        raise ValueError(f"host module {module!r} not found in {root / HOSTSIDE}")
    return _closure([f"{HOSTSIDE}/{name}.py" for name in (module, *HOSTSIDE_SHARED)], root)


def code_files() -> list[str]:
    """What HostCode copies to a host: every module of `hostside/` and the contracts they
    import, as paths under the project root, sorted."""
    root = PROJECT_ROOT
    package = sorted(f"{HOSTSIDE}/{p.name}" for p in (root / HOSTSIDE).glob("*.py"))
    return sorted(set(_closure(package, root)))


def code_digest(files: Sequence[str]) -> str:
    """The digest of these files of the host's code (names and contents), 16 hex digits."""
    root = PROJECT_ROOT
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(rel.encode() + b"\0" + (root / rel).read_bytes() + b"\0")
    return digest.hexdigest()[:16]
