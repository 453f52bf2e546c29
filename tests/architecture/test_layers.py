"""The layout is the architecture: three packages by where they run, and one seam between them.

- `components/` (the Pulumi program) reaches the host side only through the typed seam: it
  imports host modules by name (`from hostside import harbor_launch`) and uses nothing of them
  but their verbs (`harbor_launch.create`), which it hands to `host_step`;
- `hostside/` (run on the hosts' own python3) imports the standard library, its own modules and
  `contracts/`, nothing else;
- `contracts/` (what the program, the host side and the audit share) imports only the standard
  library;
- `audit/` (its own CLI) imports no part of the program or the host side: only `contracts/`.

Each rule is also shown finding the violation it is for, in a source written to have it.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tests.architecture.host_logic import Finding as Violation
from tests.conftest import ROOT

PROJECT = {"components", "hostside", "contracts", "audit", "tests", "benchmarks"}
VERBS = {"create", "delete", "check"}
# The seam itself knows what a verb is (hostside/step.py's contract).
SEAM_STEP = "components/seam/step.py"
# Host programs run by a step with the python of a venv it builds (hostside/pinned_venv.py),
# not imported by the package: their third-party imports are theirs.
VENV_PROGRAMS = {"hostside/readiness.py": {"httpx"}, "hostside/s3_fetch.py": {"boto3", "botocore"}}


def imports(tree: ast.AST) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of each absolute import; `import a.b` gives ("a.b", [])."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module, [a.name for a in node.names]))
    return found


def top(module: str) -> str:
    return module.split(".")[0]


def program_violations(path: str, source: str) -> list[Violation]:
    """components/: host modules imported by name, and only their verbs used."""
    tree = ast.parse(source)
    found, host_modules = [], set()
    for line, module, names in imports(tree):
        if top(module) != "hostside":
            continue
        if path == SEAM_STEP and module == "hostside.step" and names == ["Verb"]:
            continue
        if module != "hostside" or not names:
            found.append(Violation(path, line, f"imports {module} {names}: name host modules "
                                               "with `from hostside import MODULE`"))
            continue
        host_modules |= {n for n in names}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in host_modules and node.attr not in VERBS):
            found.append(Violation(path, node.lineno, f"uses {node.value.id}.{node.attr}: only "
                                                      "a host module's verbs cross the seam"))
    return found


def allowed_imports(package: str) -> set[str]:
    return {"hostside": {"contracts"}, "contracts": set(),
            "audit": {"contracts", "audit"}}[package]


def package_violations(package: str, path: str, source: str) -> list[Violation]:
    """hostside/ and contracts/: the standard library (and what the rule allows) only; audit/:
    no part of the program or the host side."""
    found = []
    for line, module, _ in imports(ast.parse(source)):
        name = top(module)
        if name == "__future__" or name in allowed_imports(package):
            continue
        if name in VENV_PROGRAMS.get(path, set()):
            continue
        if package == "audit":
            if name in PROJECT:
                found.append(Violation(path, line, f"imports {module}: the audit reads the "
                                                   "program only through contracts/"))
        elif name not in sys.stdlib_module_names:
            found.append(Violation(path, line, f"imports {module}: {package}/ runs on the "
                                               "standard library only"))
    return found


def sources(package: str) -> list[tuple[str, str]]:
    return [(str(p.relative_to(ROOT)), p.read_text())
            for p in sorted((ROOT / package).rglob("*.py"))]


def test_the_program_reaches_the_host_side_only_through_the_typed_seam():
    found = [v for path, text in sources("components") for v in program_violations(path, text)]
    assert found == [], "\n".join(map(str, found))
    # And it does reach it: every component with a host step names its module's verbs.
    using = [path for path, text in sources("components") if "from hostside import" in text]
    assert len(using) >= 9, using


@pytest.mark.parametrize("package", ["hostside", "contracts", "audit"])
def test_each_package_imports_only_what_its_runtime_has(package: str):
    found = [v for path, text in sources(package)
             for v in package_violations(package, path, text)]
    assert found == [], "\n".join(map(str, found))


def test_the_host_programs_with_their_own_venv_are_the_ones_pinned_venv_runs():
    runs = (ROOT / "hostside" / "pinned_venv.py").read_text()
    for path in VENV_PROGRAMS:
        assert Path(path).name in runs or Path(path).stem in runs, path
        assert "\nfrom ." not in (ROOT / path).read_text(), f"{path} must run standalone"


def test_the_main_program_is_the_program_too():
    assert program_violations("__main__.py", (ROOT / "__main__.py").read_text()) == []


@pytest.mark.parametrize("source", [
    "from hostside.harbor_launch import create\n",
    "import hostside.jobdir\n",
    "from hostside import harbor_launch\nx = harbor_launch.stop_bound(1, 2, 3)\n",
    "from hostside import harbor_launch\nI = harbor_launch.Inputs\n",
])
def test_the_seam_rule_finds_a_program_reaching_past_it(source: str):
    assert program_violations("components/x.py", source) != [], source


def test_the_seam_rule_lets_verbs_through():
    ok = ("from hostside import harbor_launch, waiting\n"
          "a = (harbor_launch.create, harbor_launch.delete, waiting.create)\n")
    assert program_violations("components/x.py", ok) == []


@pytest.mark.parametrize(("package", "source"), [
    ("contracts", "from contracts import outputs\n"),
    ("contracts", "import yaml\n"),
    ("contracts", "from components.config import StackConfig\n"),
    ("hostside", "import httpx\n"),
    ("hostside", "from components.seam.step import host_step\n"),
    ("audit", "from components.harbor_job import HarborJob\n"),
    ("audit", "from hostside import jobdir\n"),
    ("audit", "import components\n"),
])
def test_the_package_rule_finds_an_import_its_runtime_lacks(package: str, source: str):
    assert package_violations(package, f"{package}/x.py", source) != [], (package, source)


def test_the_package_rule_lets_the_standard_library_and_contracts_through():
    assert package_violations("hostside", "hostside/x.py",
                              "import json\nfrom contracts import jobdir\n") == []
    assert package_violations("audit", "audit/x.py",
                              "import yaml\nfrom contracts import outputs\n") == []
    assert package_violations("contracts", "contracts/x.py", "import hashlib\n") == []
