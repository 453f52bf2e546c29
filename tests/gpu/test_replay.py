"""The fixtures and the nvidia-smi replay: every fixture dir's CSV and `-L` files are its `-q`'s
projection (on the dirs recorded on a real H100, h100-recorded-*, this holds the projection
against nvidia-smi's own CSV and `-L`), and the replay answers exactly gpu_check's commands."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hostside import nvidia_smi
from tests.conftest import ROOT
from tests.gpu import nvidia_smi_replay as replay
from tests.gpu import projection
from tests.gpu.fixtures import FIXTURES, SCENARIOS, text

# Every output a dir holds (a recording keeps at most 8 files: the busy H100's has no `-L`).
OUTPUTS = [(scenario, name) for scenario in SCENARIOS for name in sorted(projection.PROJECTIONS)
           if (FIXTURES / scenario / name).is_file()]


def test_every_dir_holds_the_csv_outputs():
    assert {s for s, n in OUTPUTS if n == "query-gpu.csv"} == set(SCENARIOS)
    assert {s for s, n in OUTPUTS if n == "query-compute-apps.csv"} == set(SCENARIOS)


@pytest.mark.parametrize(("scenario", "name"), OUTPUTS)
def test_each_output_is_the_projection_of_the_q_text(scenario, name):
    assert text(scenario, name) == projection.PROJECTIONS[name](text(scenario, "q.txt"))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_fixture_dir_says_where_it_comes_from(scenario):
    note = text(scenario, "PROVENANCE.md")
    assert "recorded" in note.lower() or "derived" in note.lower()


def test_the_replay_answers_the_queries_gpu_check_asks():
    assert replay.GPU_FIELDS == nvidia_smi.GPU_FIELDS
    assert replay.APP_FIELDS == nvidia_smi.APP_FIELDS
    asked = {tuple(cmd[1:]) for cmd in (nvidia_smi.QUERY_GPU, nvidia_smi.QUERY_APPS,
                                        nvidia_smi.QUERY_ALL, nvidia_smi.LIST)}
    assert asked == set(replay.ANSWERS)


def run_replay(*args: str, scenario: str = "h100-busy") -> subprocess.CompletedProcess:
    env = {**os.environ, "NVIDIA_SMI_REPLAY_DIR": str(FIXTURES),
           "NVIDIA_SMI_REPLAY_SCENARIO": scenario}
    return subprocess.run([sys.executable, str(ROOT / "tests/gpu/nvidia_smi_replay.py"), *args],
                          env=env, capture_output=True, text=True, timeout=30)


def test_the_replay_prints_the_recording_and_refuses_other_queries():
    proc = run_replay(*nvidia_smi.QUERY_APPS[1:])
    assert proc.returncode == 0 and proc.stdout == text("h100-busy", "query-compute-apps.csv")
    other = run_replay("--query-gpu=index,name", "--format=csv")
    assert other.returncode == 2
    assert "no recording for --query-gpu=index,name --format=csv" in other.stderr


def test_the_replay_reads_its_scenario_from_its_data_dir(tmp_path):
    (tmp_path / "h100-idle").symlink_to(FIXTURES / "h100-idle")
    (tmp_path / "scenario").write_text("h100-idle\n")
    env = {**os.environ, "NVIDIA_SMI_REPLAY_DIR": str(tmp_path)}
    env.pop("NVIDIA_SMI_REPLAY_SCENARIO", None)
    (tmp_path / "calls.log").write_text("")
    proc = subprocess.run([sys.executable, str(ROOT / "tests/gpu/nvidia_smi_replay.py"), "-L"],
                          env=env, capture_output=True, text=True, timeout=30)
    assert proc.stdout == text("h100-idle", "L.txt")
    assert (tmp_path / "calls.log").read_text() == "-L\n"
