"""The audit's shape: it links to the rest of the project only through four contracts, its rooms
import downwards only (read < judge < score < output; the pipeline and the CLI on top), no module
imports another that imports it back, directly or through others (TYPE_CHECKING imports
included), and one module computes scores (audit/score/conventions.py)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

AUDIT = ROOT / "audit"
# The job layout, the stack output names, the Harbor versions' facts (their score conventions
# and 0.26's error-policy table), and the copy of a remote host's job dir (the program's too).
CONTRACTS = {"contracts.jobdir", "contracts.outputs", "contracts.harbor_profiles",
             "contracts.job_copy"}
ROOMS = ("read", "judge", "score", "output")


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every module `path` imports (absolute names; `from a import b` counts `a.b` when b is a
    module of the audit)."""
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                if _exists(candidate):
                    out.add(candidate)
    return out


def _exists(module: str) -> bool:
    base = ROOT.joinpath(*module.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _graph() -> dict[str, set[str]]:
    modules = {_module(p): p for p in AUDIT.rglob("*.py")}
    return {
        name: {m for m in _imports(path) if m in modules and m != name}
        for name, path in modules.items()
    }


def test_the_audit_imports_only_the_four_contracts_of_the_project():
    for path in AUDIT.rglob("*.py"):
        for module in _imports(path):
            top = module.split(".")[0]
            assert top not in ("components", "hostside", "tests", "benchmarks"), (path, module)
            if top == "contracts":
                assert module in CONTRACTS | {"contracts"}, (path, module)


def test_rooms_import_downwards_only():
    for name, deps in _graph().items():
        parts = name.split(".")
        if len(parts) < 2 or parts[1] not in ROOMS:
            continue  # the package itself and the CLI sit above the rooms
        rank = ROOMS.index(parts[1])
        for dep in deps:
            dparts = dep.split(".")
            if len(dparts) < 2 or dparts[1] not in ROOMS:
                assert dep == "audit", (name, dep)
                continue
            assert ROOMS.index(dparts[1]) <= rank, f"{name} (room {parts[1]}) imports {dep}"


def test_no_import_cycle():
    graph = _graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycle = stack[stack.index(dep) :] + [dep]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_the_rooms_exist_and_nothing_is_left_flat():
    # Above the rooms: the package, the CLI and the pipeline (read -> judge -> score -> the
    # report model) that the CLI runs and output/ never imports (the rooms' rule above).
    flat = sorted(p.name for p in AUDIT.glob("*.py"))
    assert flat == ["__init__.py", "__main__.py", "pipeline.py"]
    for room in ROOMS:
        assert (AUDIT / room / "__init__.py").is_file(), room


def test_one_module_computes_scores():
    """The interval and the registry's scoring are called from conventions.py alone (the
    quotable verdict, the merge and the pipeline ask it); output/ renders what it is given."""
    scoring = {"wilson", "score_rows", "score_all"}
    allowed = {
        "wilson": {"audit.score.conventions"},
        "score_rows": {"audit.score.conventions", "audit.score.quotable"},
        "score_all": {"audit.score.conventions", "audit.score.submission"},
    }
    for path in AUDIT.rglob("*.py"):
        name = _module(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                called = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
                if called in scoring:
                    assert name in allowed[called], f"{name} calls {called}"
        if name.startswith("audit.output"):
            assert "audit.score.stats" not in _imports(path), name
