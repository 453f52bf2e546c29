"""The worker's readiness wait follows SGLang's startup phase by phase from the container's log
(hostside/readiness.py StartupWatch), on SGLang's own published log lines (sglang_logs.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from hostside import readiness
from hostside.readiness import ProbeError, StartupWatch
from tests.serving import sglang_logs

T0 = 1_700_000_000.0


def stamp(seconds: float) -> str:
    """A `docker logs --timestamps` stamp `seconds` after T0 (nanoseconds, as docker writes)."""
    at = datetime.fromtimestamp(T0 + seconds, tz=UTC)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{int((T0 + seconds) % 1 * 1e9):09d}Z"


class Log:
    """A container's log as `docker logs --since` answers it, growing as the test says."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []
        self.asked: list[str | None] = []
        self.dead: str | None = None

    def add(self, at: float, *texts: str) -> None:
        self.lines += [(stamp(at), text) for text in texts]

    def read(self, _container: str, since: str | None) -> list[tuple[str, str]]:
        self.asked.append(since)
        if since is None:
            return list(self.lines)
        start = readiness.log_time(since)
        return [(s, t) for s, t in self.lines if readiness.log_time(s) >= start]


def watch(log: Log, now: list[float]) -> StartupWatch:
    return StartupWatch("benchstack-sglang-worker-a", read=log.read,
                        failure=lambda _name: log.dead, clock=lambda: T0 + now[0])


def test_the_phases_and_their_durations_from_sglangs_own_lines():
    log, now = Log(), [0.0]
    w = watch(log, now)
    startup = sglang_logs.STARTUP
    # Seconds after the wait began at which each line was logged: a 27B model's pace.
    at = [2, 3, 3, 4, 5, 40, 90, 131, 140, 141, 142, 190, 191, 192, 200]
    for when, text in zip(at, startup, strict=True):
        log.add(when, text)
        now[0] = when + 1
        w.check("worker http://10.0.0.11:30001")
        if when == 90:
            assert w.phase == "loading weights"
            assert w.progress() == "loading weights for 86s"
        if when == 142:
            assert w.progress() == "capturing CUDA graphs for 1s"
    assert w.phase == "ready"
    now[0] = 201
    assert w.finished() == [
        {"phase": "starting", "seconds": 3.0},
        {"phase": "initialising torch distributed", "seconds": 2.0},
        {"phase": "loading weights", "seconds": 126.0},
        {"phase": "allocating the KV cache", "seconds": 11.0},
        {"phase": "capturing CUDA graphs", "seconds": 48.0},
        {"phase": "starting the server", "seconds": 2.0},
        {"phase": "warming up", "seconds": 8.0},
        {"phase": "ready", "seconds": 1.0},
    ]


def test_each_read_asks_only_for_what_is_new():
    log, now = Log(), [10.0]
    w = watch(log, now)
    log.add(1, sglang_logs.STARTUP[1])
    w.check("worker")
    log.add(1, "[2025-12-23 14:18:00] Init torch distributed ends. mem usage=0.00 GB")
    log.add(5, sglang_logs.STARTUP[4])
    w.check("worker")
    w.check("worker")
    assert log.asked == [None, stamp(1), stamp(5)]
    # The line sharing the last stamp of a read is not read twice (docker's --since includes
    # it), and no phase is entered twice.
    assert [p["phase"] for p in w.phases] == ["starting", "initialising torch distributed"]


def test_out_of_memory_in_cuda_graph_capture_fails_at_once_naming_phase_and_line():
    log, now = Log(), [0.0]
    w = watch(log, now)
    log.add(100, sglang_logs.STARTUP[10])
    for i, text in enumerate(sglang_logs.OOM_IN_CAPTURE):
        log.add(160 + i, text)
    now[0] = 170
    with pytest.raises(ProbeError) as err:
        w.check("worker http://10.0.0.11:30001")
    assert str(err.value) == (
        "worker http://10.0.0.11:30001: container benchstack-sglang-worker-a failed while "
        "capturing CUDA graphs (64s in it): Exception: Capture cuda graph failed: CUDA out of "
        "memory. Tried to allocate 448.00 MiB. GPU 7 has a total capacity of 95.00")


def test_an_nccl_error_names_the_error_not_the_tracebacks_source_line():
    log, now = Log(), [0.0]
    w = watch(log, now)
    for i, text in enumerate(sglang_logs.NCCL_AT_INIT):
        log.add(3 + i, text)
    log.dead = "container benchstack-sglang-worker-a exited (exit code 1); last log lines: ..."
    with pytest.raises(ProbeError) as err:
        w.check("worker http://10.0.0.11:30001")
    message = str(err.value)
    assert "failed while initialising torch distributed (2s in it): RuntimeError: NCCL error: " \
           "unhandled system error" in message
    assert message.endswith("(container benchstack-sglang-worker-a exited (exit code 1); last "
                            "log lines: ...)")


def test_a_container_dying_without_a_known_line_names_its_phase():
    log, now = Log(), [0.0]
    w = watch(log, now)
    log.add(5, sglang_logs.STARTUP[4])
    now[0] = 65
    log.dead = "container benchstack-sglang-worker-a exited (exit code 137); last log lines: x"
    with pytest.raises(ProbeError, match=r"worker will not become healthy: died while loading "
                       r"weights \(60s in it\): container benchstack-sglang-worker-a exited "
                       r"\(exit code 137\)"):
        w.check("worker")


def test_a_log_without_sglangs_startup_reports_no_phases():
    """A worker already serving when the probe runs again, or the CPU stand-in."""
    log, now = Log(), [0.0]
    w = watch(log, now)
    log.add(1, '{"path": "/health", "status": 200}')
    w.check("worker")
    assert w.finished() == []


def test_docker_timestamps_with_nanoseconds_sort_in_time():
    out = (f"{stamp(2.5)} second\n{stamp(1.25)} first\nnot a stamped line\n"
           f"{stamp(10)} third\n")
    assert [t for _, t in readiness.stamped(out)] == ["first", "second", "third"]
    assert readiness.log_time("2024-07-31T05:52:57.891234567Z") == pytest.approx(
        1722405177.891234567)
