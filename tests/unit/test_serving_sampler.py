"""hostside/serving_sampler.py: what it keeps of an exposition, its bound, and a run against a
stand-in worker on loopback (the launch's part: tests/unit/test_harbor_launch.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from contracts import jobdir
from hostside import serving_sampler
from tests.conftest import ROOT, until_stdin_closes
from tests.serving.conftest import MODEL, Processes, processes  # noqa: F401

pytestmark = pytest.mark.no_docker

# What smg 1.13.0 serves on its metrics port (a cut of a real read, one line shortened below).
GATEWAY = """# HELP smg_worker_health Worker health
# TYPE smg_worker_health gauge
smg_worker_health{worker="http://10.0.0.11:30001@0"} 1
smg_worker_health{worker="http://10.0.0.11:30001@1"} 0
smg_worker_retries_total{worker_type="regular",endpoint="chat"} 0
smg_worker_retries_total{worker_type="regular",endpoint="generate"} 3
smg_http_responses_total{path="/v1/chat/completions",status_code="503",error_code="{code}"} 5
smg_router_request_duration_seconds_bucket{le="0.1"} 4
smg_router_request_duration_seconds_sum{endpoint="chat"} 1.5
smg_router_request_duration_seconds_count{endpoint="chat"} 4
smg_tokio_alive_tasks 27
smg_allocator_resident_bytes 8130560
""".replace("{code}", "no_available_workers")


def test_only_the_series_the_audit_reads_are_kept() -> None:
    assert serving_sampler.kept(GATEWAY) == {
        'smg_worker_health{worker="http://10.0.0.11:30001@0"}': 1.0,
        'smg_worker_health{worker="http://10.0.0.11:30001@1"}': 0.0,  # a gauge at 0 is news
        'smg_worker_retries_total{worker_type="regular",endpoint="generate"}': 3.0,
        'smg_http_responses_total{path="/v1/chat/completions",status_code="503",'
        'error_code="no_available_workers"}': 5.0,
        'smg_router_request_duration_seconds_sum{endpoint="chat"}': 1.5,
        'smg_router_request_duration_seconds_count{endpoint="chat"}': 4.0,
    }


def test_the_record_slows_down_then_stops_at_its_bound(tmp_path: Path) -> None:
    record = serving_sampler.Record(str(tmp_path), max_bytes=1000)
    line = {"t": 1.0, "pad": "x" * 80}
    assert record.slowdown() == 1
    for _ in range(6):
        record.put(line)
    assert record.slowdown() == 2  # past half
    record.put(line)
    record.put(line)
    assert record.slowdown() == 4  # past three quarters
    for _ in range(5):
        record.put(line)
    record.close()
    lines = [json.loads(x) for x in (tmp_path / jobdir.SERVING_RECORD).read_text().splitlines()]
    assert lines[-1]["kind"] == "capped" and record.capped
    assert (tmp_path / jobdir.SERVING_RECORD).stat().st_size <= 1000 + 100


def test_a_run_reads_a_worker_and_records_an_endpoint_that_does_not_answer(
        processes: Processes, tmp_path: Path) -> None:  # noqa: F811
    worker = processes.standin("--enable-metrics")
    httpx.post(f"{worker.url}/v1/chat/completions", timeout=10,
               json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}]})
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    harbor = until_stdin_closes()  # Harbor, as the sampler watches it: it ends when told
    spec = {"targets": [{"source": "worker", "url": f"{worker.url}/metrics"},
                        {"source": "gateway", "url": "http://127.0.0.1:9/metrics"}],
            # A read times out at the interval: 3 s, as a loaded machine's stand-in answers late.
            "interval_s": 3, "max_bytes": 10_000_000}
    sampler = subprocess.Popen([sys.executable, "-m", "hostside.serving_sampler", "run",
                                str(job_dir), json.dumps(spec), str(harbor.pid)], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # Three rounds read while Harbor runs, however long the machine takes to read them.
        deadline = time.monotonic() + 60
        while len([x for x in record(job_dir) if x.get("source") == "worker"]) < 3:
            assert sampler.poll() is None, "it ended while the process it watched still ran"
            assert time.monotonic() < deadline, (
                f"not three reads of the worker within 60 s while Harbor ran: {record(job_dir)}")
            time.sleep(0.2)
    finally:
        harbor.stdin.close()
        harbor.wait(timeout=10)
    # It ends with the process it watched (a sampler that did not would run on: the bound).
    output, _ = sampler.communicate(timeout=30)
    assert sampler.returncode == 0, output
    lines = record(job_dir)
    assert lines[0]["kind"] == "start" and lines[0]["until_pid"] == harbor.pid
    reads = lines[1:]
    workers = [x for x in reads if x["source"] == "worker"]
    gateways = [x for x in reads if x["source"] == "gateway"]
    assert len(workers) >= 3 and len(workers) == len(gateways)  # each round reads both
    assert all(x["ok"] and x["status"] == 200 for x in workers)
    values = workers[-1]["values"]
    assert values[f'sglang:num_requests_total{{model_name="{MODEL}"}}'] == 1.0
    assert any(k.startswith("sglang:num_queue_reqs{") for k in values)
    assert not [k for k in values if "_bucket" in k]
    assert all(not x["ok"] and "refused" in x["error"] for x in gateways)


def record(job_dir: Path) -> list[dict]:
    """The serving record's complete lines so far (the sampler may be writing the next)."""
    path = job_dir / jobdir.SERVING_RECORD
    text = path.read_text() if path.exists() else ""
    return [json.loads(line) for line in text.splitlines(keepends=True) if line.endswith("\n")]
