"""tests/run.sh's stages (tests/stages.py): every real test in exactly one, none that restarts this
machine's Docker engine beside another test, and run.sh runs each stage once, in its lane."""

from __future__ import annotations

import re
import subprocess
import sys
from itertools import combinations
from pathlib import Path

from tests.conftest import ROOT
from tests.stages import NO_ENGINE, STAGES, TWO_HOSTS, by_name

MARKERS = ("engine", "cluster", "k8s_provider", "restarts_docker", "quiet_docker", "no_docker")
# A file of its own stage, and any other.
FILES = (TWO_HOSTS, "tests/e2e/test_local_stack.py")
RUN_SH = (ROOT / "tests" / "run.sh").read_text()


def kinds_of_real_test():
    """Every combination of the stage markers a real test can carry, in either kind of file."""
    for count in range(len(MARKERS) + 1):
        for chosen in combinations(MARKERS, count):
            for path in FILES:
                yield {"real", *chosen}, path


def test_every_real_test_is_in_exactly_one_stage() -> None:
    for marks, path in kinds_of_real_test():
        chosen = [stage.name for stage in STAGES if stage.selects(marks, path)]
        assert len(chosen) == 1, (sorted(marks), path, chosen)


def run_sh_layout() -> tuple[dict[str, str | None], list[list[str]], set[str]]:
    """What run.sh runs: each test stage with its lane (None: at the top level), the groups of
    lanes its `beside` lines run at once, and the stages run `early` in a lane (those whose
    build has ended) or else `late`, at the top level after the restarts."""
    code = "\n".join(line for line in RUN_SH.splitlines() if not line.lstrip().startswith("#"))
    lanes = dict(re.findall(r"^lane_(\w+)\(\) \{ (.*) \}$", code, re.M))
    where: dict[str, str | None] = {}
    early: set[str] = set()
    for lane, body in lanes.items():
        for verb, name in re.findall(r"(test_stage|early) ([\w-]+);", body):
            assert name not in where, f"{name} runs twice"
            where[name] = lane
            if verb == "early":
                early.add(name)
    for name in re.findall(r"^test_stage ([\w-]+)$", code, re.M):
        assert name not in where, f"{name} runs twice"
        where[name] = None
    late = re.findall(r"^late ([\w-]+)$", code, re.M)
    assert sorted(late) == sorted(early), "each early stage has its late line, and no other"
    after_restarts = code.split("\nbeside lane_restarts", 1)[1]
    assert all(f"\nlate {name}\n" in after_restarts for name in late), after_restarts
    groups = [[lane.removeprefix("lane_") for lane in line.split()[1:]]
              for line in re.findall(r"^beside .+$", code, re.M)]
    assert sorted(lane for group in groups for lane in group) == sorted(lanes), (groups, lanes)
    return where, groups, early


def test_run_sh_runs_each_stage_once_in_its_lane() -> None:
    where, _, early = run_sh_layout()
    assert sorted(where) == sorted(stage.name for stage in STAGES)
    for stage in STAGES:
        assert where[stage.name] == stage.lane, stage.name
        assert (stage.name in early) == stage.early, stage.name


def stages_with(marker: str) -> set[str]:
    return {stage.name for stage in STAGES for marks, path in kinds_of_real_test()
            if marker in marks and stage.selects(marks, path)}


def test_a_test_that_restarts_the_engine_runs_beside_no_test_that_reaches_it() -> None:
    _, groups, _ = run_sh_layout()
    restarting = stages_with("restarts_docker")
    assert "restarts" in restarting
    for group in groups:
        beside = [stage for stage in STAGES if stage.lane in group]
        if restarting & {stage.name for stage in beside}:
            reaching = [stage.name for stage in beside if stage.docker]
            assert len(reaching) == 1 and restarting & set(reaching), group
    assert not [stage.name for stage in STAGES if not stage.docker and stage.lane is None]


def test_beside_the_restarts_only_tests_that_reach_no_engine() -> None:
    code = "\n".join(line for line in RUN_SH.splitlines() if not line.lstrip().startswith("#"))
    _, groups, _ = run_sh_layout()
    (group,) = [group for group in groups if "restarts" in group]
    lanes = dict(re.findall(r"^lane_(\w+)\(\) \{ (.*) \}$", code, re.M))
    others = [lanes[lane] for lane in group if lane != "restarts"]
    assert others == [
        "stage unit fast_tests; early cluster; early provider; test_stage nodocker;"], others
    assert not any(by_name(name).docker for name in ("cluster", "provider", "nodocker"))
    fast = re.search(r"^fast_tests\(\) \{\n(.*?)\n\}$", code, re.M | re.S)
    assert fast, "run.sh has no fast_tests"
    assert '-m "not real"' in fast.group(1)
    assert f"DOCKER_HOST={NO_ENGINE} " in fast.group(1), fast.group(1)
    # A stage without Docker gets the same endpoint from tests/stages.py.
    assert re.search(r'DOCKER_HOST=\$\{spec\[1\]\} stage "\$1" after', code)


def test_a_stage_without_docker_names_the_socket_nothing_serves() -> None:
    assert NO_ENGINE.startswith("unix:///run/") and not Path(NO_ENGINE[len("unix://"):]).exists()
    for stage in STAGES:
        printed = subprocess.run([sys.executable, "-m", "tests.stages", stage.name], cwd=ROOT,
                                 capture_output=True, text=True, check=True).stdout.splitlines()
        assert printed[:2] == [stage.build, "default" if stage.docker else NO_ENGINE], printed
        assert printed[2:] == stage.pytest_args()


def test_a_test_that_compares_the_whole_engine_runs_beside_no_test() -> None:
    quiet = stages_with("quiet_docker")
    assert quiet == {"alone"}
    _, groups, early = run_sh_layout()
    for stage in STAGES:
        if stage.name in quiet and stage.lane is not None:
            (group,) = [group for group in groups if stage.lane in group]
            assert [s.name for s in STAGES if s.lane in group] == [stage.name], group
            assert stage.name in early  # else last, alone


def test_a_fast_test_is_in_no_stage_whatever_its_markers() -> None:
    for marks, path in kinds_of_real_test():
        fast = marks - {"real"}
        assert not [stage.name for stage in STAGES if stage.selects(fast, path)], fast
