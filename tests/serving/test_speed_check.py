"""The speed check before launch (hostside/speed_check.py, components/speed_check.py): the real
gateway (smg) in front of a stand-in worker whose decode speed is set, the step run as the seam
runs it. Passing, it returns the figures the provenance records; failing, it names the measured
and the required figure and the key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from components.speed_check import typical_prompt_tokens
from tests.conftest import ROOT
from tests.serving.conftest import MODEL, Processes, chat, free_port, run_step

pytestmark = pytest.mark.no_docker


def check_inputs(url: str, **changes) -> dict:
    return {"url": url, "model": MODEL, "concurrency": 3, "rounds": 2, "prompt_tokens": 200,
            "output_tokens": 24, "timeout_s": 60, "min_decode_tokens_per_s": None,
            "max_time_to_first_token_s": None, **changes}


@pytest.fixture(scope="module")
def slow_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """smg over one stand-in worker (dp 2, 2 slots a rank) decoding 40 tokens/s per request,
    once for the module."""
    processes = Processes(tmp_path_factory.mktemp("plane"))
    try:
        worker = processes.standin("--dp-size", "2", "--max-running-requests", "2",
                                   "--decode-tokens-per-s", "40", "--prefill-tokens-per-s",
                                   "4000")
        yield processes.router([worker.url])
    finally:
        processes.close()


def test_the_check_passes_and_reports_what_it_measured(slow_plane: str) -> None:
    done = run_step("speed_check", check_inputs(slow_plane, min_decode_tokens_per_s=20,
                                                max_time_to_first_token_s=10))
    assert done.returncode == 0, done.stderr
    figures = done.outputs
    assert (figures["requests"], figures["errors"], figures["concurrency"]) == (6, 0, 3)
    # 40 tokens/s per request, set in the stand-in: measured through the gateway's stream. The
    # band is wide as a loaded machine's sleeps and reads run late; an unpaced stand-in is far out.
    assert 20 < figures["decode_tokens_per_s"] <= 44, figures
    assert figures["decode_tokens_per_s_p10"] <= figures["decode_tokens_per_s"]
    # A 200-token prompt at 4000 tokens/s: about 50 ms before the first token.
    assert 0.03 < figures["time_to_first_token_s"] < 10, figures
    assert figures["required"] == {"min_decode_tokens_per_s": 20,
                                   "max_time_to_first_token_s": 10}


def test_a_floor_the_plane_misses_stops_with_both_figures(slow_plane: str) -> None:
    done = run_step("speed_check", check_inputs(slow_plane, min_decode_tokens_per_s=100))
    assert done.returncode == 1
    reason = done.reason
    assert reason.startswith("speed_check: the serving plane is too slow for the job: decode ")
    assert "tokens/s per request (median of 6 requests at concurrency 3, 200-token prompts), " \
           "below the required 100 (benchstack:serving.speed_check.min_decode_tokens_per_s)" \
           in reason
    measured = float(reason.split("decode ")[1].split(" tokens/s")[0])
    assert 20 < measured <= 44


def test_a_ttft_ceiling_and_a_dead_gateway_fail_naming_why(slow_plane: str) -> None:
    slow = run_step("speed_check", check_inputs(slow_plane, max_time_to_first_token_s=0.001))
    assert slow.returncode == 1
    assert "above the allowed 0.001 s (benchstack:serving.speed_check.max_time_to_first_token_s)" \
        in slow.reason
    dead = run_step("speed_check", check_inputs("http://127.0.0.1:9", timeout_s=5))
    assert dead.returncode == 1
    assert dead.reason.startswith("speed_check: the gateway http://127.0.0.1:9 routed no "
                                  "completion to a worker within 5s: ConnectionRefusedError")


def test_the_load_waits_for_the_gateway_to_take_a_replaced_worker_back(
        processes: Processes) -> None:
    """A worker `up` replaced is ready on its port before the gateway routes to it again: the
    check waits for the gateway (the two-host and local rehearsals' `up` after a lost worker
    failed here on smg's 503), then measures only its own load."""
    port = free_port()
    flags = ("--dp-size", "2", "--decode-tokens-per-s", "200")
    worker = processes.standin(*flags, port=port)
    # smg's circuit breaker as by default (60 s open after 10 failures), only shorter: still open
    # through a stand-in's start and the step's, which take seconds on a loaded machine.
    gateway = processes.router([worker.url], "--cb-failure-threshold", "2",
                               "--cb-timeout-duration-secs", "25")
    assert chat(gateway).status_code == 200
    worker.stop()
    answers = [chat(gateway).status_code for _ in range(8)]
    assert answers[-1] == 503, answers  # the circuit open: "All workers are unavailable"
    processes.standin(*flags, port=port)
    assert chat(gateway).status_code == 503, "the gateway took the worker back at once"
    done = run_step("speed_check", check_inputs(gateway))
    assert done.returncode == 0, done.stderr
    assert "the gateway routes to no worker yet (HTTP 503" in done.stderr
    assert (done.outputs["requests"], done.outputs["errors"]) == (6, 0), done.outputs


def test_the_typical_prompt_is_read_from_the_tasks(tmp_path: Path) -> None:
    # The demo tasks' instructions are short: the agent's template dominates.
    assert typical_prompt_tokens(str(ROOT / "demo" / "tasks")) == (2916 + 600 + 75) // 4
    for i, size in enumerate((1000, 3000, 8000)):
        (tmp_path / f"t{i}").mkdir()
        (tmp_path / f"t{i}" / "instruction.md").write_text("x" * size)
    assert typical_prompt_tokens(str(tmp_path)) == (2916 + 600 + 3000) // 4
    assert typical_prompt_tokens(None) == (2916 + 600 + 1500) // 4
