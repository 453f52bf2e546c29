"""The serving plane inside the whole program (`__main__.py` under mocks, the lead's harness):
the stack files' layouts reach the containers, and destroy runs router before workers."""

from __future__ import annotations

import pytest

from tests.graph.program import run_program


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
