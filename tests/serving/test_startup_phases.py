"""The worker's readiness wait follows SGLang's startup phase by phase from the container's log
(hostside/readiness.py StartupWatch), on SGLang's own published log lines (sglang_logs.py) and
on the startup the CPU stand-in replays (demo/gpu_standin/sglang_startup.json)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import httpx
import pytest

from components.config import ModelConfig, ServingConfig
from components.sglang_worker import startup_timeout_s
from demo.gpu_standin import sglang_worker as standin
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


def test_a_probe_started_after_the_first_lines_names_every_phase_with_no_negative_time(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The container started first and logged its first phases before the probe's watch began
    (a busy host): the phase the watch began in took 0 s, every phase is named as entered, and
    the next phases are timed from their own lines."""
    log, now = Log(), [10.0]
    w = watch(log, now)
    log.add(2, *sglang_logs.STARTUP[:4])  # the chat template's line, then torch distributed
    log.add(4, sglang_logs.STARTUP[4])  # Load weight begin
    now[0] = 11
    w.check("worker http://10.0.0.11:30001")
    entered = re.findall(r"benchstack-sglang-worker-a: (.+) \((.+) took ([\d.]+)s\)",
                         capsys.readouterr().err)
    assert entered[0] == ("initialising torch distributed", "starting", "0.0")
    assert [phase for phase, _, _ in entered] == ["initialising torch distributed",
                                                  "loading weights"]
    assert entered[1][2] == "2.0"
    assert w.finished()[0] == {"phase": "starting", "seconds": 0.0}


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


# --- the stand-in's replay (demo/gpu_standin/sglang_startup.json): a published SGLang startup -

def replayed(log: Log, failure: str | None = None, offset: float = 0.0) -> None:
    """The stand-in's startup log as docker logs it: each line at its recorded second."""
    for line in standin.load_startup(standin.STARTUP_LOG, failure).lines:
        log.add(offset + line.at_s, line.render("10.0.0.11:30001"))


def test_the_replayed_startup_gives_its_published_phase_durations():
    """Qwen3-32B on one H100 (PROVENANCE.md beside the file): the watch reads back the
    published weights (100.34 s), KV cache (0.41 s), decode and prefill CUDA graph captures
    (5.69 s, 55.92 s) and warm-up (7.29 s) from SGLang's own lines."""
    log, now = Log(), [0.0]
    w = watch(log, now)
    replayed(log)
    now[0] = 294.04
    w.check("worker http://10.0.0.11:30001")
    assert w.phase == "ready"
    assert w.finished() == [
        {"phase": "starting", "seconds": 106.2},
        {"phase": "initialising torch distributed", "seconds": 14.8},
        {"phase": "loading weights", "seconds": 100.3},
        {"phase": "allocating the KV cache", "seconds": 0.4},
        {"phase": "capturing CUDA graphs", "seconds": 5.7},
        {"phase": "starting the server", "seconds": 0.0},
        {"phase": "capturing CUDA graphs", "seconds": 55.9},
        {"phase": "starting the server", "seconds": 2.4},
        {"phase": "warming up", "seconds": 7.3},
        {"phase": "ready", "seconds": 1.0},
    ]


@pytest.mark.parametrize(("failure", "phase", "line"), [
    ("oom-in-capture", "capturing CUDA graphs (1s in it)",
     "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 448.00 MiB."),
    ("nccl-at-init", "initialising torch distributed (0s in it)",
     "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"),
])
def test_a_replayed_failure_names_its_phase_and_the_exception_not_the_schedulers_header(
        failure: str, phase: str, line: str):
    log, now = Log(), [0.0]
    w = watch(log, now)
    replayed(log, failure)
    now[0] = 230
    with pytest.raises(ProbeError) as err:
        w.check("worker http://10.0.0.11:30001")
    assert (f"worker http://10.0.0.11:30001: container benchstack-sglang-worker-a failed while "
            f"{phase}: {line}") in str(err.value)
    assert "Traceback" not in str(err.value)


# SGLang's scheduler header, as sgl-project/sglang#5014 publishes it.
HEADER = ("[2025-04-03 01:13:53 DP4 TP4] Scheduler hit an exception: Traceback (most recent call "
          "last):")


def test_a_traceback_split_over_two_reads_is_named_by_its_exception():
    """SGLang logs the failure as one record; a read may still fall between its lines."""
    log, now = Log(), [0.0]
    w = watch(log, now)
    log.add(1, sglang_logs.STARTUP[10])
    log.add(5, HEADER, sglang_logs.OOM_IN_CAPTURE[2])
    w.check("worker")  # the header: the wait holds on for the line that says why
    log.add(5.1, *sglang_logs.OOM_IN_CAPTURE[3:])
    with pytest.raises(ProbeError, match=r"failed while capturing CUDA graphs \(4s in it\): "
                       r"Exception: Capture cuda graph failed: CUDA out of memory"):
        w.check("worker")


def test_a_sigquit_before_the_ranks_traceback_is_named_by_the_exception():
    """Several ranks: the launcher's sigquit may come first (sgl-project/sglang#3460)."""
    log, now = Log(), [0.0]
    w = watch(log, now)
    log.add(2, sglang_logs.NCCL_AT_INIT[0])
    log.add(4, sglang_logs.NCCL_AT_INIT[3], HEADER, *sglang_logs.NCCL_AT_INIT[1:3])
    with pytest.raises(ProbeError, match=r"failed while initialising torch distributed \(2s in "
                       r"it\): RuntimeError: NCCL error: unhandled system error"):
        w.check("worker")


def test_a_fatal_line_without_its_exception_is_named_itself_one_check_later():
    log, now = Log(), [0.0]
    w = watch(log, now)
    log.add(1, sglang_logs.STARTUP[10])
    log.add(9, HEADER)
    w.check("worker")
    with pytest.raises(ProbeError, match=r"failed while capturing CUDA graphs \(8s in it\): "
                       r"\[2025-04-03 01:13:53 DP4 TP4\] Scheduler hit an exception"):
        w.check("worker")


def test_the_startup_logged_since_the_last_check_is_read_once_healthy():
    """A startup shorter than the wait's interval: its lines come between two polls, the
    second answered 200; the result still has every phase, not none."""
    log, now = Log(), [0.0]
    w = watch(log, now)
    answers = iter([503, 200])

    def health(_request: httpx.Request) -> httpx.Response:
        code = next(answers)
        if code == 200:
            replayed(log)  # the whole startup, logged while the wait slept
            now[0] = 294.04
        return httpx.Response(code)

    with httpx.Client(transport=httpx.MockTransport(health)) as client:
        readiness.wait_healthy(client, "http://10.0.0.11:30001", 60, interval_s=0, watch=w)
    assert w.phase == "ready"
    assert [p["phase"] for p in w.finished()][:3] == [
        "starting", "initialising torch distributed", "loading weights"]


def test_the_launchers_older_sigquit_spelling_fails_the_wait():
    """Releases of early 2025 wrote "child proces." (sgl-project/sglang#3460): a wait that
    missed it would sit out its whole bound on a worker whose scheduler is dead."""
    log, now = Log(), [0.0]
    w = watch(log, now)
    log.add(1, sglang_logs.NCCL_AT_INIT[0])
    log.add(3, "[2025-02-09 21:23:00] Received sigquit from a child proces. It usually means "
               "the child failed.")
    w.check("worker")
    with pytest.raises(ProbeError, match=r"failed while initialising torch distributed \(2s in "
                       r"it\): \[2025-02-09 21:23:00\] Received sigquit from a child proces\."):
        w.check("worker")


def test_the_derived_health_timeout_covers_the_replayed_startup_with_room():
    """The bound the wait gets when serving.health_timeout_s is unset, for the published run's
    model and layout (Qwen3-32B in bf16, tp 1, dp 1): 16 minutes, over three times the 298 s
    that run took from its pod's scheduling to serving (the replay's 293 s and 5 s of image
    pull and container start)."""
    serving = ServingConfig(image="lmsysorg/sglang:v0.5.19", tp_size=1, dp_size=1,
                            context_length=8192, max_running_requests=8,
                            mem_fraction_static=0.9)
    model = ModelConfig(name="Qwen/Qwen3-32B", path="/models/Qwen3-32B", params_billion=32)
    published = standin.load_startup(standin.STARTUP_LOG, None).lines[-1].at_s + 5.0
    assert published == pytest.approx(298.04)
    assert startup_timeout_s(serving, model) == 960 > 3 * published
