"""The rendered Harbor job config, compose override and preflight checks (no Harbor needed).

They render the stack's own `harbor` and `dataset` sections; what those sections accept is
tests/unit/test_config.py's."""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from components.config import KNOWN_HARBOR_WHEELS, DatasetConfig, HarborConfig
from components.harbor_config import (
    compose_override,
    job_config,
    preflight_expectations,
)
from components.job_spec import render_plan


def harbor_section(**changes) -> HarborConfig:
    """A stack's `harbor:` section (the seed's), parsed by the stack config's model."""
    section = {
        "version": "0.21.0", "wheel_sha256": KNOWN_HARBOR_WHEELS["0.21.0"],
        "n_concurrent_trials": 25, "agent_timeout_multiplier": 6.0,
        "agent_setup_timeout_multiplier": 5.0, "job_name_prefix": "tb21",
        "agent": {"name": "terminus-2", "n_concurrent": 20, "temperature": 1.0, "top_p": 0.95,
                  "max_input_tokens": 262144, "max_output_tokens": 65536,
                  "record_terminal_session": True},
    }
    return HarborConfig.model_validate(section | changes)


SEED = harbor_section()
MODEL = "openai/Qwen/Qwen3.8-27B"
TB21 = DatasetConfig(repo="file:///srv/tb21.git", commit="7131e4375048a0e408a8fb404b5f499d726b695b",
                     expected_tasks=89, manifest_path="datasets/tb21")
API = "http://127.0.0.1:30000/v1"


def test_seed_settings_render_the_seed_job_config() -> None:
    config = job_config(SEED, jobs_dir="/ws/results", dataset_path="/ws/tb/tasks", dataset=TB21,
                        model_name=MODEL, api_base=API)
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
    settings = harbor_section(agent={**SEED.agent.model_dump(), "top_k": 20})
    config = job_config(settings, jobs_dir="/r", dataset_path="/d", dataset=TB21,
                        model_name=MODEL, api_base=API)
    assert config["agents"][0]["kwargs"]["llm_call_kwargs"]["extra_body"] == {"top_k": 20}
    oracle = harbor_section(n_concurrent_trials=1, agent={"name": "oracle", "n_concurrent": 1})
    oracle_config = job_config(oracle, jobs_dir="/r", dataset_path="/d", dataset=TB21,
                               model_name=None, api_base=None)
    assert oracle_config["agents"] == [{"name": "oracle", "n_concurrent": 1}]


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
    offline = harbor_section(container_network="none")
    main = compose_override(offline, tools_dir="/t", proxy_url=None)["services"]["main"]
    assert main["network_mode"] == "none" and "extra_hosts" not in main
    with pytest.raises(ValueError, match="container_network"):
        compose_override(offline, tools_dir="/t", proxy_url="http://host.docker.internal:1")


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"agent": {"name": "terminus-1", "n_concurrent": 1}}, "agent.name"),
        ({"n_concurrent_trials": 0}, "n_concurrent_trials"),
        ({"agent_timeout_multiplier": 0}, "agent_timeout_multiplier"),
    ],
)
def test_bad_harbor_sections_name_the_field(changes: dict, field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        harbor_section(**changes)


@pytest.mark.parametrize(("model_name", "api_base", "field"),
                         [(None, API, "model_name"), (MODEL, None, "api_base")])
def test_a_model_agent_without_its_endpoint_names_the_field(
        model_name: str | None, api_base: str | None, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        job_config(SEED, jobs_dir="/r", dataset_path="/d", dataset=TB21, model_name=model_name,
                   api_base=api_base)


def _plan(**changes):
    inputs = {"workspace": "/ws", "tasks_dir": "/ws/tasks", "api_base": API,
              "tools_dir": "/ws/tools", "proxy_url": None, "model_name": MODEL} | changes
    return render_plan(SEED, TB21, **inputs)


def test_job_name_follows_the_config() -> None:
    first = _plan()
    assert first.job_name == _plan().job_name, "same config, same name: the job is resumed"
    assert first.job_name.startswith("tb21-") and len(first.job_name) == len("tb21-") + 10
    assert _plan(api_base="http://127.0.0.1:30001/v1").job_name != first.job_name
    assert _plan(tools_dir="/other").job_name != first.job_name
    assert _plan(job_name="fixed").job_name == "fixed"
    pinned = render_plan(harbor_section(job_name="pinned"), TB21, model_name=MODEL,
                         workspace="/ws", tasks_dir="/ws/tasks", api_base=API, tools_dir=None,
                         proxy_url=None)
    assert pinned.job_name == "pinned", "harbor.job_name replaces the digest"
    assert first.compose_path == f"/ws/configs/{first.job_name}.compose.yaml"
    assert yaml.safe_load(first.config_yaml)["jobs_dir"] == "/ws/results"


def test_preflight_checks_cover_the_seed_fields() -> None:
    checks = preflight_expectations(SEED, dataset_path="/d", dataset=TB21, model_name=MODEL,
                                    api_base=API, compose_path="/c.yaml")
    paths = {".".join(map(str, c["path"])) for c in checks}
    for field in ("n_concurrent_trials", "agent_timeout_multiplier",
                  "agent_setup_timeout_multiplier", "agents.0.name", "agents.0.n_concurrent",
                  "agents.0.kwargs.api_base", "agents.0.kwargs.temperature",
                  "agents.0.kwargs.llm_call_kwargs", "agents.0.kwargs.model_info",
                  "environment.type", "datasets.0.path", "environment.extra_docker_compose"):
        assert field in paths, field


def test_the_021_rendering_is_the_one_stacks_already_run() -> None:
    """An in-place upgrade resumes the same job only if 0.21.0's config and name are the same
    bytes as before the profiles (tests/e2e/test_upgrade.py): this name was the one then."""
    plan = render_plan(SEED, TB21, model_name=MODEL, workspace="/ws", tasks_dir="/ws/tb/tasks",
                       api_base=API, tools_dir="/ws/tools",
                       proxy_url="http://host.docker.internal:27891")
    assert plan.job_name == "tb21-fdad5c08a1" and plan.flags == ()


LATEST = harbor_section(version="0.26.0", wheel_sha256=KNOWN_HARBOR_WHEELS["0.26.0"])


def test_026_takes_the_endpoint_through_its_own_flags() -> None:
    config = job_config(LATEST, jobs_dir="/ws/results", dataset_path="/ws/tb/tasks",
                        dataset=TB21, model_name=MODEL, api_base=API)
    (agent,) = config["agents"]
    assert "api_base" not in agent["kwargs"] and "base_url" not in agent
    # Everything else as 0.21.0 renders it.
    seed = job_config(SEED, jobs_dir="/ws/results", dataset_path="/ws/tb/tasks", dataset=TB21,
                      model_name=MODEL, api_base=API)
    seed["agents"][0]["kwargs"].pop("api_base")
    assert config == seed
    plan = _plan()
    latest = render_plan(LATEST, TB21, model_name=MODEL, workspace="/ws", tasks_dir="/ws/tasks",
                         api_base=API, tools_dir="/ws/tools", proxy_url=None)
    assert latest.flags == ("--base-url", API, "--api-key-name", "OPENAI_API_KEY",
                            "--api-format", "openai_chat_completions")
    assert latest.job_name != plan.job_name
    # Another endpoint is another job, although the config file is the same text.
    moved = render_plan(LATEST, TB21, model_name=MODEL, workspace="/ws", tasks_dir="/ws/tasks",
                        api_base="http://127.0.0.1:31000/v1", tools_dir="/ws/tools",
                        proxy_url=None)
    assert moved.config_yaml == latest.config_yaml and moved.job_name != latest.job_name
    # A model-free agent calls no endpoint: no flags.
    oracle = harbor_section(version="0.26.0", wheel_sha256=KNOWN_HARBOR_WHEELS["0.26.0"],
                            agent={"name": "oracle", "n_concurrent": 2})
    assert render_plan(oracle, TB21, model_name=None, workspace="/ws", tasks_dir="/ws/tasks",
                       api_base=None, tools_dir=None, proxy_url=None).flags == ()


def test_026_preflight_checks_the_flags_fields_and_harbors_own_error_table() -> None:
    checks = {".".join(map(str, c["path"])): c["expect"] for c in preflight_expectations(
        LATEST, dataset_path="/d", dataset=TB21, model_name=MODEL, api_base=API,
        compose_path="/c.yaml")}
    assert checks["agents.0.base_url"] == API
    assert checks["agents.0.model_api_key_name"] == "OPENAI_API_KEY"
    assert checks["agents.0.model_api_format"] == "openai_chat_completions"
    assert checks["agents.0.kwargs.api_base"] is None
    assert checks["override_error_policy"] == {}
    seed = {".".join(map(str, c["path"])) for c in preflight_expectations(
        SEED, dataset_path="/d", dataset=TB21, model_name=MODEL, api_base=API,
        compose_path="/c.yaml")}
    assert not {"agents.0.base_url", "override_error_policy"} & seed
