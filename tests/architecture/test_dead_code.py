"""No dead code in the product: every function, method and class of components/, hostside/,
contracts/, audit/ and __main__.py is named somewhere in the product besides its own definition.

A name counts as used where product code says it (a name, an attribute, an import), in a string
literal that is not a docstring (a verb named in a command, a key of a dispatch table), in a
product file that is not Python (a probe's inlined module, rules.yaml), or, for a method looked
up as `getattr(obj, f"_load_{name}")`, by that prefix. What only the tests use is dead for the
product (a test of it tests nothing the product does). Not asked: dunder methods, and functions
a decorator hands to a framework that calls them by itself (pydantic's validators, the audit's
`by_text` registry, `functools.wraps`). Names are matched across the product, not by scope: two
functions of one name keep each other alive (a tool to find the dead, not a proof of the living).
A function the product keeps for its own measurement only is listed below with the reason.

    .venv/bin/python -m tests.architecture.test_dead_code     # lists what it finds
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import ROOT

PRODUCT = ("components", "hostside", "contracts", "audit")
REGISTERING = {"field_validator", "model_validator", "by_text", "wraps"}
# Product code kept for the audit's own measurement, which the tests and benchmarks run.
MEASUREMENT_ONLY = {
    ("audit/read/readings.py", "switched_off"):
        "the leave-one-source-out measure (tests/audit/dev_set.py) turns readings off with it",
}
IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class Definition:
    path: str
    line: int
    name: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.name}"


def product_files(root: Path) -> dict[str, str]:
    paths = [p for package in PRODUCT for p in sorted((root / package).rglob("*"))
             if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]
    paths.append(root / "__main__.py")
    return {str(p.relative_to(root)): p.read_text(errors="replace") for p in paths}


def _decorator_name(node: ast.expr) -> str:
    node = node.func if isinstance(node, ast.Call) else node
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def definitions(path: str, tree: ast.AST) -> list[Definition]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if node.name.startswith("__") and node.name.endswith("__"):
            continue
        if {_decorator_name(d) for d in node.decorator_list} & REGISTERING:
            continue
        found.append(Definition(path, node.lineno, node.name))
    return found


def uses(tree: ast.AST) -> tuple[set[str], set[str]]:
    """(the names a module uses, the prefixes it looks attributes up by)."""
    names, prefixes = set(), set()
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.ImportFrom):
            names.update(alias.name for alias in node.names)
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and id(node) not in skip):
            names.update(IDENTIFIER.findall(node.value))
        elif (isinstance(node, ast.Call) and _decorator_name(node.func) == "getattr"
              and len(node.args) > 1 and isinstance(node.args[1], ast.JoinedStr)
              and node.args[1].values and isinstance(node.args[1].values[0], ast.Constant)):
            prefixes.add(str(node.args[1].values[0].value))
    return names, prefixes


def dead(files: dict[str, str]) -> list[Definition]:
    defined: list[Definition] = []
    used: set[str] = set()
    prefixes: set[str] = set()
    for path, text in files.items():
        if not path.endswith(".py"):
            used.update(IDENTIFIER.findall(text))
            continue
        tree = ast.parse(text)
        defined += definitions(path, tree)
        names, looked_up = uses(tree)
        used |= names
        prefixes |= looked_up
    return [d for d in defined
            if d.name not in used and not any(d.name.startswith(p) for p in prefixes if p)]


def test_the_product_has_no_dead_code() -> None:
    found = dead(product_files(ROOT))
    exempt = [d for d in found if (d.path, d.name) in MEASUREMENT_ONLY]
    assert len(exempt) == len(MEASUREMENT_ONLY), ("an exemption no longer needed", exempt)
    found = [d for d in found if d not in exempt]
    assert found == [], "named by nothing in the product:\n" + "\n".join(map(str, found))


def test_a_function_only_its_definition_names_is_found() -> None:
    files = {
        "components/a.py": ('"""Uses `helper` in prose only."""\n'
                            "def helper():\n    return 1\n\n"
                            "def used():\n    return 2\n\n"
                            "class Loader:\n    def _load_x(self):\n        return 3\n\n"
                            "    def _gone(self):\n        return 4\n\n"
                            "    def load(self, name):\n"
                            "        return getattr(self, f'_load_{name}')()\n"),
        "audit/b.py": "from components.a import used\nprint(used(), Loader().load('x'))\n",
    }
    assert [d.name for d in dead(files)] == ["helper", "_gone"]


def test_a_name_in_a_command_string_or_a_probe_keeps_it() -> None:
    files = {
        "hostside/m.py": "def create():\n    pass\n\ndef status():\n    pass\n",
        "components/c.py": 'STEP = "python3 -m hostside m create"\n',
        "hostside/probes/p.sh": "python3 - <<'PY'\nstatus()\nPY\n",
    }
    assert dead(files) == []


if __name__ == "__main__":
    for definition in dead(product_files(ROOT)):
        print(definition)
    sys.exit(0)
