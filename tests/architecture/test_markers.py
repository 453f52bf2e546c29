"""The markers tests/conftest.py gives a test from its fixtures: the stages of tests/run.sh rest
on them (tests/stages.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.conftest import pytest_collection_modifyitems


def markers(fixturenames: list[str], params: dict | None = None) -> set[str]:
    given: list = []
    item = SimpleNamespace(fixturenames=fixturenames, add_marker=given.append,
                           **({"callspec": SimpleNamespace(params=params)} if params else {}))
    pytest_collection_modifyitems(None, [item])
    return {mark.name for mark in given}


def test_a_peer_fixture_makes_a_test_real_and_the_local_stack_restarts_the_engine() -> None:
    assert markers(["registry", "tmp_path"]) == {"real"}
    assert markers(["local", "engine", "tmp_path"]) == {"real", "engine", "restarts_docker"}
    assert markers(["k8s_cluster"]) == {"real", "cluster"}
    assert markers(["tmp_path"]) == set()


@pytest.mark.parametrize("names", [["registry", "local"], ["local"], ["engine"]])
def test_a_parametrized_argument_named_like_a_fixture_marks_nothing(names: list[str]) -> None:
    assert markers([*names, "tmp_path"], {name: "x" for name in names}) == set()
