"""tests/run.sh's stages (tests/stages.py): every real test in exactly one, none that restarts this
machine's Docker engine beside another test, and run.sh runs each stage once, in its lane."""

from __future__ import annotations

import re
from itertools import combinations

from tests.conftest import ROOT
from tests.stages import STAGES, TWO_HOSTS

MARKERS = ("engine", "cluster", "k8s_provider", "restarts_docker")
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


def test_a_test_that_restarts_the_engine_never_runs_in_a_lane() -> None:
    for marks, path in kinds_of_real_test():
        if "restarts_docker" in marks:
            lanes = [stage.lane for stage in STAGES if stage.selects(marks, path)]
            assert lanes == [None], (sorted(marks), path, lanes)


def test_a_fast_test_is_in_no_stage() -> None:
    assert not [stage.name for stage in STAGES if stage.selects(set(), "tests/unit/x.py")]


def test_run_sh_runs_each_stage_once_in_its_lane() -> None:
    run_lines = [line for line in RUN_SH.splitlines() if not line.lstrip().startswith("#")]
    lanes = dict(re.findall(r"^lane_(\w+)\(\) \{ (.*) \}$", "\n".join(run_lines), re.M))
    in_lanes = {name: lane for lane, body in lanes.items()
                for name in re.findall(r"test_stage ([\w-]+);", body)}
    alone = re.findall(r"^test_stage ([\w-]+)$", "\n".join(run_lines), re.M)
    assert re.search(r"^beside " + " ".join(f"lane_{lane}" for lane in lanes) + "$",
                     RUN_SH, re.M), lanes
    assert sorted([*in_lanes, *alone]) == sorted(stage.name for stage in STAGES)
    for stage in STAGES:
        assert in_lanes.get(stage.name) == stage.lane, stage.name
