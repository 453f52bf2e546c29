"""hostside/harbor_preflight.py against the real Harbor 0.21.0 `--print-config`: the rendered files
resolve to what the stack asked for, and each kind of bad input stops before anything runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.harbor.conftest import JobFactory, harbor_section

SEED_LIKE = harbor_section(
    {"name": "terminus-2", "n_concurrent": 20, "temperature": 1.0, "top_p": 0.95, "top_k": 20,
     "max_input_tokens": 262144, "max_output_tokens": 65536},
    n_concurrent_trials=25, agent_timeout_multiplier=6.0, agent_setup_timeout_multiplier=5.0,
)
MODEL = "openai/Qwen/Qwen3.8-27B"
API = "http://127.0.0.1:30000/v1"


def test_seed_settings_pass_the_preflight(jobs: JobFactory, demo_dataset: Path,
                                          tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    (tools / "bin").mkdir(parents=True)
    for tool in ("tmux", "asciinema"):
        (tools / "bin" / tool).touch()
    job = jobs.plan(demo_dataset, SEED_LIKE, model_name=MODEL, api_base=API,
                    tools_dir=str(tools), proxy_url="http://host.docker.internal:27891")
    result = job.preflight()
    assert result.returncode == 0, result.stderr
    assert result.outputs["checked_fields"] == len(json.loads(job.plan.expected))
    resolved = json.loads(Path(result.outputs["resolved_config"]).read_text())
    assert resolved["job_name"] == job.name and resolved["jobs_dir"] == str(job.jobs_dir)
    assert resolved["agents"][0]["kwargs"]["model_info"]["max_input_tokens"] == 262144
    assert not job.dir.exists(), "print-config runs nothing and writes no job dir"


def test_a_changed_field_is_named(jobs: JobFactory, demo_dataset: Path) -> None:
    job = jobs.plan(demo_dataset, SEED_LIKE, model_name=MODEL, api_base=API)
    config = Path(job.plan.config_path)
    # Someone edits the file on the host after it was rendered.
    config.write_text(config.read_text().replace(API, "http://127.0.0.1:30999/v1"))
    result = job.preflight()
    assert result.returncode != 0
    assert "field agents[0].kwargs.api_base" in result.reason
    assert "30999" in result.reason and "30000" in result.reason
    assert not job.dir.exists()


def test_a_dropped_field_falls_back_to_harbors_default_and_is_caught(
    jobs: JobFactory, demo_dataset: Path
) -> None:
    job = jobs.plan(demo_dataset, SEED_LIKE, model_name=MODEL, api_base=API)
    config = Path(job.plan.config_path)
    config.write_text(config.read_text().replace("agent_timeout_multiplier: 6.0\n", ""))
    result = job.preflight()
    assert result.returncode != 0
    assert "field agent_timeout_multiplier is null" in result.reason
    assert "asks for 6.0" in result.reason


def test_harbor_rejects_the_config(jobs: JobFactory, demo_dataset: Path) -> None:
    job = jobs.plan(demo_dataset, SEED_LIKE, model_name=MODEL, api_base=API)
    config = Path(job.plan.config_path)
    # n_concurrent above n_concurrent_trials: Harbor's own validation refuses it.
    config.write_text(config.read_text().replace("n_concurrent: 20", "n_concurrent: 30"))
    result = job.preflight()
    assert result.returncode != 0 and "harbor run --print-config rejected" in result.reason
    assert "cannot exceed n_concurrent_trials" in result.reason


def test_a_missing_tool_bundle_is_caught(jobs: JobFactory, demo_dataset: Path,
                                         tmp_path: Path) -> None:
    job = jobs.plan(demo_dataset, SEED_LIKE, model_name=MODEL, api_base=API,
                    tools_dir=str(tmp_path / "nope"))
    result = job.preflight()
    assert result.returncode != 0
    assert f"mount source {tmp_path / 'nope'}" in result.reason


def test_an_existing_job_name_with_another_config(jobs: JobFactory, demo_dataset: Path,
                                                  canary_image: str) -> None:
    first = jobs.plan(demo_dataset, harbor_section(n_concurrent_trials=1),
                      include=("hello-file",), job_name="pinned")
    assert first.preflight().returncode == 0
    assert first.launch().returncode == 0, first.log_tail()
    before = first.wait_finished(timeout=120)
    assert before["rewards"] == {"1.0": 1}
    result_id = json.loads((first.dir / "result.json").read_text())["id"]

    # Only the trials change (the agents' limit stays 1): the refusal names that field.
    second = jobs.plan(demo_dataset,
                       harbor_section({"name": "oracle", "n_concurrent": 1}, n_concurrent_trials=2),
                       include=("hello-file",), job_name="pinned")
    result = second.preflight()
    assert result.returncode != 0
    assert "job pinned already exists" in result.reason
    assert "field n_concurrent_trials" in result.reason
    # Nothing was launched: the job dir is untouched.
    assert json.loads((first.dir / "result.json").read_text())["id"] == result_id
    assert len([p for p in first.dir.iterdir() if p.is_dir()]) == 1
    # The same config under the same name is fine (that is a resume).
    again = jobs.plan(demo_dataset, harbor_section(n_concurrent_trials=1),
                      include=("hello-file",), job_name="pinned")
    assert again.preflight().returncode == 0


def test_every_problem_is_listed_the_first_is_the_reason(jobs: JobFactory, demo_dataset: Path,
                                                          tmp_path: Path) -> None:
    job = jobs.plan(demo_dataset, SEED_LIKE, model_name=MODEL, api_base=API,
                    tools_dir=str(tmp_path / "nope"))
    config = Path(job.plan.config_path)
    config.write_text(config.read_text().replace(API, "http://127.0.0.1:30999/v1"))
    result = job.preflight()
    assert result.returncode != 0
    assert "field agents[0].kwargs.api_base" in result.reason
    assert re.search(r"\(and [0-9]+ more above\)$", result.reason), result.reason
    assert f"also: mount source {tmp_path / 'nope'}" in result.stderr
    assert not job.dir.exists()
