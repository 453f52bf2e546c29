"""The serving plane inside the whole program (`__main__.py` under mocks, the lead's harness):
the stack files' layouts reach the containers, and destroy runs router before workers."""

from __future__ import annotations

import pytest

from components.config import split_stack_file
from tests.conftest import ROOT
from tests.graph.program import run_program
from tests.graph.test_graph import step_inputs


@pytest.mark.parametrize(
    ("stack", "workers"),
    [("a100", {"worker-a": "10.0.0.11", "worker-b": "10.0.0.12"}), ("h100", {"h100": "10.0.0.21"})],
)
def test_serving_plane_in_the_program(stack: str, workers: dict[str, str]) -> None:
    run = run_program(stack)
    urls = [f"http://{ip}:30001" for ip in workers.values()]

    assert len(run.of_type("benchstack:components:SGLangWorker")) == len(workers)
    for host, ip in workers.items():
        command = run.named(f"{host}-sglang-container").inputs["command"]
        assert command[:2] == ["sglang", "serve"]
        assert command[command.index("--host") + 1] == ip
        assert run.named(f"{host}-sglang-docker").inputs["host"].endswith(f"@{ip}")

    router_command = run.named("router-container").inputs["command"]
    start = router_command.index("--worker-urls") + 1
    assert router_command[start:start + len(urls)] == urls

    # The router waits for every worker (and so is destroyed before them: the seed's order).
    router_deps = run.component("router").depends_on
    for host in workers:
        assert run.component(f"{host}-sglang").resource in router_deps

    assert run.exports["router_url"] == "http://127.0.0.1:30000"
    assert run.exports["worker_urls"] == urls


def test_the_speed_check_comes_before_the_job_and_the_sampler_with_it() -> None:
    """The a100 stack: the speed check runs at the job's agent concurrency through the gateway,
    after the router is ready and before the job's steps; the launch carries the serving
    record's targets (the gateway's metrics listener and each worker's /metrics)."""
    run = run_program("a100")
    speed = step_inputs(run.named("speed-measure").inputs["create"])
    assert speed == {
        "url": "http://127.0.0.1:30000", "model": "Qwen/Qwen3.8-27B", "concurrency": 20,
        "rounds": 2, "prompt_tokens": (2916 + 600 + 1500) // 4,  # no instruction.md there
        "output_tokens": 256, "timeout_s": 600, "min_decode_tokens_per_s": None,
        "max_time_to_first_token_s": None}
    assert run.component("router").resource in run.component("speed").depends_on
    # The job's steps that launch it wait for the check (the component itself for nothing).
    for step in ("job-configs", "job-preflight", "job-launch"):
        assert run.component("speed").resource in run.component(step).depends_on, step
    launch = step_inputs(run.named("job-launch").inputs["create"])
    assert launch["serving_record"] == {
        "targets": [{"source": "gateway", "url": "http://127.0.0.1:29000/metrics"},
                    {"source": "worker", "url": "http://10.0.0.11:30001/metrics"},
                    {"source": "worker", "url": "http://10.0.0.12:30001/metrics"}],
        "interval_s": 10.0, "max_bytes": 256 * 1024 * 1024}


def test_a_stack_without_the_record_or_the_check_declares_neither() -> None:
    serving = split_stack_file(ROOT / "Pulumi.a100.yaml")[0]["serving"]
    run = run_program("a100", overrides={"serving": {
        **serving, "record": {"enabled": False}, "speed_check": {"enabled": False}}})
    assert not [r for r in run.of_type("benchstack:components:SpeedCheck")]
    assert step_inputs(run.named("job-launch").inputs["create"])["serving_record"] is None
