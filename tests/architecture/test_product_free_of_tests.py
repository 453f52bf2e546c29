"""The product stands without tests/: what `make up` runs and what the program imports name
nothing under tests/, the operator's defaults are the operator's, and the tests name the team's
shared material in one place.

- the product's Python (components/, hostside/, contracts/, audit/, __main__.py) imports no
  module of tests/, benchmarks/ or demo/ (the demo's stand-in for a GPU server is data the
  serving image is built from, never code the program runs);
- what `make up` runs (setup/ but the developer's setup/dev.sh, the Makefile's stack targets,
  the local stack files) names no path under tests/;
- every key of setup/defaults.env is read by setup/ or the Makefile, and none is in
  tests/env/defaults.env too (the tests' own keys are there);
- exactly one module of tests/ spells the path of ../shared (tests/machine.py: SHARED).

Each rule is also shown finding the violation it is for.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

PRODUCT = ("components", "hostside", "contracts", "audit")
NOT_PRODUCT = {"tests", "benchmarks", "demo"}
# What `make up` runs besides the program: setup/ (the developer's dev.sh aside).
DEVELOPER_ONLY = {"setup/dev.sh"}
STACK_TARGET = re.compile(r"^up preview destroy refresh:\n((?:\t.*\n)+)", re.MULTILINE)
SHARED_OWNER = "tests/machine.py"


def product_sources() -> dict[str, str]:
    paths = [p for package in PRODUCT for p in sorted((ROOT / package).rglob("*.py"))]
    paths.append(ROOT / "__main__.py")
    return {str(p.relative_to(ROOT)): p.read_text() for p in paths}


def imports_of_non_product(path: str, source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0
                 and node.module else [])
        found += [f"{path}:{node.lineno}: imports {name}" for name in names
                  if name.split(".")[0] in NOT_PRODUCT]
    return found


def code_lines(text: str) -> list[tuple[int, str]]:
    """(number, line) of a script's or stack file's lines that are not a comment."""
    return [(n, line) for n, line in enumerate(text.splitlines(), 1)
            if line.strip() and not line.lstrip().startswith("#")]


def names_tests(path: str, text: str) -> list[str]:
    return [f"{path}:{n}: {line.strip()}" for n, line in code_lines(text)
            if re.search(r"(^|[^\w.])tests/", line)]


def up_sources() -> dict[str, str]:
    """setup/ as `make up` runs it, the Makefile's stack targets, the local stack files."""
    found = {str(p.relative_to(ROOT)): p.read_text()
             for p in sorted((ROOT / "setup").rglob("*"))
             if p.is_file() and p.suffix in (".sh", ".py", ".env", "")
             and str(p.relative_to(ROOT)) not in DEVELOPER_ONLY}
    recipe = STACK_TARGET.search((ROOT / "Makefile").read_text())
    assert recipe is not None, "the Makefile's `up preview destroy refresh` target"
    found["Makefile (up preview destroy refresh)"] = recipe.group(1)
    for stack in sorted(ROOT.glob("Pulumi.local*.yaml")):
        found[stack.name] = stack.read_text()
    return found


def defaults(path: Path) -> list[str]:
    return [line.partition("=")[0] for line in path.read_text().splitlines()
            if line.strip() and not line.startswith("#")]


def operator_default_problems(operator: list[str], tests: list[str], readers: str) -> list[str]:
    problems = [f"{key}: in both setup/defaults.env and tests/env/defaults.env"
                for key in sorted(set(operator) & set(tests))]
    problems += [f"{key}: read by nothing under setup/ nor the Makefile: a test's key belongs "
                 f"in tests/env/defaults.env" for key in operator
                 if key not in readers and key.removeprefix("BENCHSTACK_") not in readers]
    return problems


def shared_spellings(path: str, source: str) -> list[str]:
    """`X / "shared"`, or a path (a string without spaces) holding `../shared`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
                and isinstance(node.right, ast.Constant) and node.right.value == "shared"):
            found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and "../shared" in node.value and not re.search(r"\s", node.value)):
            found.append(f"{path}:{node.lineno}: {node.value!r}")
    return found


def test_the_product_imports_nothing_of_tests_benchmarks_or_demo() -> None:
    found = [v for path, text in product_sources().items()
             for v in imports_of_non_product(path, text)]
    assert found == [], "\n".join(found)


def test_what_make_up_runs_names_nothing_under_tests() -> None:
    sources = up_sources()
    assert "setup/setup.sh" in sources and "setup/serving_image.sh" in sources
    found = [v for path, text in sources.items() for v in names_tests(path, text)]
    assert found == [], "\n".join(found)


def test_the_serving_image_is_built_from_the_demo_stand_in() -> None:
    script = (ROOT / "setup" / "serving_image.sh").read_text()
    for part in ("sglang_worker.py", "sglang_startup.json", "sglang"):
        assert f"$ROOT/demo/gpu_standin/{part}\n" in script, part
        assert (ROOT / "demo" / "gpu_standin" / part).is_file(), part


def test_setup_defaults_hold_the_operators_keys_only() -> None:
    readers = "\n".join(text for path, text in up_sources().items()
                        if not path.endswith("defaults.env"))
    readers += (ROOT / "Makefile").read_text()
    problems = operator_default_problems(defaults(ROOT / "setup" / "defaults.env"),
                                         defaults(ROOT / "tests" / "env" / "defaults.env"),
                                         readers)
    assert problems == [], "\n".join(problems)


def test_one_place_in_tests_names_the_shared_material() -> None:
    # This file spells it as the rule's needle and in its examples.
    found = [v for p in sorted((ROOT / "tests").rglob("*.py")) if p != Path(__file__)
             for v in shared_spellings(str(p.relative_to(ROOT)), p.read_text())]
    assert found and all(v.startswith(f"{SHARED_OWNER}:") for v in found), "\n".join(found)
    assert len(found) == 1, found


@pytest.mark.parametrize("source", [
    "from tests.conftest import ROOT\n",
    "import benchmarks.bench_audit\n",
    "from demo.gpu_standin import sglang_worker\n",
])
def test_the_import_rule_finds_the_product_importing_tests(source: str) -> None:
    assert imports_of_non_product("components/x.py", source) != []


def test_the_tests_rule_finds_a_script_naming_tests_but_not_in_a_comment() -> None:
    assert names_tests("setup/x.sh", 'bash "$ROOT/tests/env/setup.sh"\n') != []
    assert names_tests("setup/x.sh", "# the tests' peers are tests/env/setup.sh's\n") == []
    assert names_tests("setup/x.sh", "echo pytests/ no\n") == []


def test_the_defaults_rule_finds_a_tests_key_among_the_operators() -> None:
    assert operator_default_problems(["BENCHSTACK_STATE", "BENCHSTACK_SSHD_PORT"], [],
                                     "$BENCHSTACK_STATE") == [
        "BENCHSTACK_SSHD_PORT: read by nothing under setup/ nor the Makefile: a test's key "
        "belongs in tests/env/defaults.env"]
    assert operator_default_problems(["BENCHSTACK_STATE"], ["BENCHSTACK_STATE"],
                                     "$BENCHSTACK_STATE") != []


@pytest.mark.parametrize("source", [
    'from pathlib import Path\nX = Path(__file__).parents[2] / "shared" / "data"\n',
    'X = "../shared/data"\n',
    'X = ROOT / "../shared"\n',
])
def test_the_shared_rule_finds_a_second_spelling(source: str) -> None:
    assert shared_spellings("tests/x.py", source) != []
