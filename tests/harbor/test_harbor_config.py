"""The rendered Harbor job config, compose override and preflight checks (no Harbor needed)."""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from components.harbor_config import (
    DatasetSpec,
    JobSettings,
    compose_override,
    job_config,
    preflight_expectations,
)
from components.harbor_job import render_plan

SEED = JobSettings(
    agent="terminus-2", n_concurrent_trials=25, n_concurrent_agents=20,
    model_name="openai/Qwen/Qwen3.8-27B", temperature=1.0, top_p=0.95,
    max_input_tokens=262144, max_output_tokens=65536, record_terminal_session=True,
    agent_timeout_multiplier=6.0, agent_setup_timeout_multiplier=5.0,
)
TB21 = DatasetSpec(git_url="file:///srv/tb21.git",
                   commit="7131e4375048a0e408a8fb404b5f499d726b695b", expected_tasks=89)
API = "http://127.0.0.1:30000/v1"


def test_seed_settings_render_the_seed_job_config() -> None:
    config = job_config(SEED, jobs_dir="/ws/results", dataset_path="/ws/tb/tasks", dataset=TB21,
                        api_base=API)
    assert config["n_concurrent_trials"] == 25
    assert config["agent_timeout_multiplier"] == 6.0
    assert config["agent_setup_timeout_multiplier"] == 5.0
    assert "verifier_timeout_multiplier" not in config, "unset stays Harbor's default"
    (agent,) = config["agents"]
    assert agent["name"] == "terminus-2" and agent["n_concurrent"] == 20
    assert agent["model_name"] == "openai/Qwen/Qwen3.8-27B"
    assert agent["kwargs"]["api_base"] == API
    assert agent["kwargs"]["temperature"] == 1.0
    assert agent["kwargs"]["record_terminal_session"] is True
    assert agent["kwargs"]["llm_call_kwargs"] == {"top_p": 0.95}
    assert agent["kwargs"]["model_info"] == {
        "max_input_tokens": 262144, "max_output_tokens": 65536,
        "input_cost_per_token": 0, "output_cost_per_token": 0,
    }
    assert config["datasets"] == [{"path": "/ws/tb/tasks"}]
    assert config["environment"]["type"] == "docker"


def test_top_k_goes_through_extra_body_and_oracle_has_no_model() -> None:
    settings = SEED.model_copy(update={"top_k": 20})
    config = job_config(settings, jobs_dir="/r", dataset_path="/d", dataset=TB21, api_base=API)
    assert config["agents"][0]["kwargs"]["llm_call_kwargs"]["extra_body"] == {"top_k": 20}
    oracle = job_config(JobSettings(agent="oracle", n_concurrent_trials=1), jobs_dir="/r",
                        dataset_path="/d",
                        dataset=TB21, api_base=None)
    assert oracle["agents"] == [{"name": "oracle"}]


def test_compose_override_mounts_the_bundle_and_sets_the_proxy() -> None:
    main = compose_override(SEED, tools_dir="/ws/tools/", proxy_url="http://host.docker.internal:27891")
    main = main["services"]["main"]
    assert "/ws/tools:/opt/harbor-tools:ro" in main["volumes"]
    assert "/ws/tools/bin/tmux:/usr/local/bin/tmux:ro" in main["volumes"]
    assert "/ws/tools/bin/asciinema:/usr/local/bin/asciinema:ro" in main["volumes"]
    assert main["extra_hosts"] == ["host.docker.internal:host-gateway"]
    for key in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        assert main["environment"][key] == "http://host.docker.internal:27891"
    assert main["environment"]["NO_PROXY"] == "127.0.0.1,localhost"


def test_no_network_containers_refuse_a_proxy() -> None:
    offline = SEED.model_copy(update={"container_network": "none"})
    main = compose_override(offline, tools_dir="/t", proxy_url=None)["services"]["main"]
    assert main["network_mode"] == "none" and "extra_hosts" not in main
    with pytest.raises(ValueError, match="container_network"):
        compose_override(offline, tools_dir="/t", proxy_url="http://host.docker.internal:1")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"agent": "terminus-2", "model_name": None}, "model_name"),
        ({"agent": "terminus-1"}, "agent"),
        ({"n_concurrent_trials": 0}, "n_concurrent_trials"),
    ],
)
def test_bad_job_settings_name_the_field(kwargs: dict, field: str) -> None:
    base = {"agent": "oracle", "n_concurrent_trials": 1} | kwargs
    with pytest.raises(ValidationError, match=field):
        JobSettings(**base)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"path": "/d", "git_url": "file:///r"}, "exactly one"),
        ({"git_url": "file:///r"}, "dataset.commit"),
        ({"git_url": "file:///r", "commit": "7131e43"}, "40-hex"),
        ({"path": "relative/tasks"}, "absolute"),
    ],
)
def test_bad_dataset_specs_name_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        DatasetSpec(expected_tasks=3, **kwargs)


def _plan(**changes):
    inputs = {"workspace": "/ws", "tasks_dir": "/ws/tasks", "api_base": API,
              "tools_dir": "/ws/tools", "proxy_url": None, "job_name_prefix": "tb21"} | changes
    return render_plan(SEED, TB21, **inputs)


def test_job_name_follows_the_config() -> None:
    first = _plan()
    assert first.job_name == _plan().job_name, "same config, same name: the job is resumed"
    assert first.job_name.startswith("tb21-") and len(first.job_name) == len("tb21-") + 10
    assert _plan(api_base="http://127.0.0.1:30001/v1").job_name != first.job_name
    assert _plan(tools_dir="/other").job_name != first.job_name
    assert _plan(job_name="fixed").job_name == "fixed"
    assert first.compose_path == f"/ws/configs/{first.job_name}.compose.yaml"
    assert yaml.safe_load(first.config_yaml)["jobs_dir"] == "/ws/results"


def test_preflight_checks_cover_the_seed_fields() -> None:
    checks = preflight_expectations(SEED, dataset_path="/d", dataset=TB21, api_base=API,
                                    compose_path="/c.yaml")
    paths = {".".join(map(str, c["path"])) for c in checks}
    for field in ("n_concurrent_trials", "agent_timeout_multiplier",
                  "agent_setup_timeout_multiplier", "agents.0.name", "agents.0.n_concurrent",
                  "agents.0.kwargs.api_base", "agents.0.kwargs.temperature",
                  "agents.0.kwargs.llm_call_kwargs", "agents.0.kwargs.model_info",
                  "environment.type", "datasets.0.path", "environment.extra_docker_compose"):
        assert field in paths, field
