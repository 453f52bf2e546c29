"""The serving plane's own record as proof, and time per trial (audit/read/serving.py,
audit/read/timing.py, audit/judge/detectors/serving.py, audit/score/time_split.py).

Real trials: Harbor 0.21.0's Terminus-2 runs of the reference samples (a timeout, a dead
endpoint, a finished one), with a serving record written beside them in the sampler's shape
(hostside/serving_sampler.py), aligned to the trials' own times. The record's lines are the
shapes smg 1.13.0 and the stand-in's SGLang metrics give (read for real in
tests/unit/test_serving_sampler.py and tests/e2e). Per case: excused only on the plane's own
words, overlapping the trial's model waits, the read quoted where it is; a timeout while the
model generated normally is never excused; a graded trial keeps its grade.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from audit.judge.classify import classify
from audit.judge.context import JobContext
from audit.judge.rules import load_rules
from audit.output.render import render
from audit.pipeline import build_report
from audit.read import layout as L
from audit.read.evidence import TrialEvidence
from audit.read.layout import JobLayout
from audit.read.serving import read_record
from audit.read.timing import trial_time
from tests.audit.proof_check import quoted_in_file
from tests.conftest import SAMPLE_JOBS

TIMEOUT, TRIAL = "terminus2-timeout", "hello-file__bggx4a9"
DEAD, DEAD_TRIAL = "terminus2-dead-endpoint", "hello-file__yFzzmsN"
# The timeout trial's agent ran 09:36:25.887-09:36:40.900 UTC (epoch seconds).
AGENT_START, AGENT_END = 1796031385.887, 1796031400.901
WORKER = "http://127.0.0.1:30001"
GATEWAY = "http://127.0.0.1:29000/metrics"


def job(tmp_path: Path, sample: str = TIMEOUT) -> Path:
    dest = tmp_path / sample
    shutil.copytree(SAMPLE_JOBS / sample, dest)
    return dest


def last_call_unanswered(job_dir: Path) -> None:
    """As a trial whose third call never returned: two durations, three episodes begun."""
    path = job_dir / TRIAL / "result.json"
    result = json.loads(path.read_text())
    result["agent_result"]["metadata"] = {"n_episodes": 3,
                                          "api_request_times_msec": [174.7, 12.7]}
    path.write_text(json.dumps(result))


def worker_read(t: float, generated: float, queued: float = 0, ok: bool = True) -> dict:
    line = {"t": t, "at": f"t{t:.0f}", "source": "worker", "url": f"{WORKER}/metrics", "ok": ok}
    if not ok:
        return {**line, "error": "ConnectionRefusedError: [Errno 111] Connection refused"}
    return {**line, "status": 200, "values": {
        'sglang:generation_tokens_total{model_name="m"}': generated,
        'sglang:num_queue_reqs{model_name="m",dp_rank="0"}': queued,
        'sglang:num_running_reqs{model_name="m",dp_rank="0"}': 2.0,
        'sglang:gen_throughput{model_name="m",dp_rank="0"}': 30.0}}


def gateway_read(t: float, no_workers: float = 0, errors_500: float = 0) -> dict:
    values = {f'smg_worker_health{{worker="{WORKER}@0"}}': 1.0,
              f'smg_worker_cb_state{{worker="{WORKER}@0"}}': 0.0}
    if no_workers:
        values['smg_router_request_errors_total{endpoint="chat",error_type="unavailable"}'] = \
            no_workers
    if errors_500:
        values['smg_http_responses_total{path="/v1/chat/completions",status_code="500",'
               'error_code="call_upstream_connection_failed"}'] = errors_500
    return {"t": t, "at": f"t{t:.0f}", "source": "gateway", "url": GATEWAY, "ok": True,
            "status": 200, "values": values}


def write_record(job_dir: Path, lines: list[dict]) -> None:
    start = {"t": AGENT_START - 30, "kind": "start", "interval_s": 1.0, "targets": [],
             "until_pid": 1}
    (job_dir / L.SERVING_RECORD).write_text(
        "".join(json.dumps(x) + "\n" for x in [start, *lines]))


def worker_dies_at(t_dead: float) -> list[dict]:
    """Healthy and generating until `t_dead`, then the worker's endpoint refuses and the
    gateway fails requests for want of a worker."""
    lines, generated, failed = [], 0.0, 0.0
    for second in range(int(AGENT_START) - 5, int(AGENT_END) + 3):
        t = float(second)
        if t < t_dead:
            generated += 40
            lines.append(worker_read(t, generated))
            lines.append(gateway_read(t))
        else:
            failed += 2
            lines.append(worker_read(t, generated, ok=False))
            lines.append(gateway_read(t, no_workers=failed))
    return lines


def verdict(job_dir: Path, trial: str = TRIAL):
    layout = JobLayout.local(job_dir)
    ev = TrialEvidence.load(layout, trial)
    return classify(ev, load_rules(), JobContext()), ev


def test_the_time_of_a_real_terminus_trial_is_split_from_its_own_record() -> None:
    ev = TrialEvidence.load(JobLayout.local(SAMPLE_JOBS / TIMEOUT), TRIAL)
    time = trial_time(ev.result, ev.json(L.AGENT_TRAJECTORY), want_windows=True)
    assert time is not None and time.calls == 3 and not time.waiting_at_end
    # Its three calls took 174.7 + 12.7 + 10.5 ms; the rest of its 15 s ran commands.
    assert round(time.model_s, 2) == 0.2 and round(time.commands_s, 1) == 14.8
    assert round(time.setup_s, 1) == 11.1 and round(time.verification_s, 2) == 0.39
    # Each call from the step that sent it: the first prompt, then each agent step.
    assert [round(a, 2) for a, _ in time.windows] == [1796031386.17, 1796031391.78,
                                                      1796031397.08]


def test_a_timeout_whose_last_call_waited_on_a_dead_worker_is_infra_quoting_the_record(
        tmp_path: Path) -> None:
    job_dir = job(tmp_path)
    last_call_unanswered(job_dir)
    write_record(job_dir, worker_dies_at(AGENT_START + 9))  # before the third call (37.08)
    c, ev = verdict(job_dir)
    assert (c.category, c.signature) == ("infra", "serving_worker_down"), c
    plane = [p for p in c.proof if p.cause == "serving_record"]
    assert plane and plane[0].where.startswith(f"../{L.SERVING_RECORD}:")
    assert "Connection refused" in plane[0].quote
    assert "did not answer the sampler" in plane[0].reading
    assert "while the trial waited on the model (09:36:37Z-09:36:40Z)" in plane[0].reading
    for proof in c.proof:
        assert quoted_in_file(job_dir, TRIAL, proof.where, proof.quote), proof
    time = trial_time(ev.result, ev.json(L.AGENT_TRAJECTORY))
    assert time is not None and time.waiting_at_end
    assert round(time.model_s, 1) == 4.0  # 0.19 s answered + the last call, 37.08 to 40.90


def test_a_timeout_is_never_excused_while_the_model_generated(tmp_path: Path) -> None:
    """A burst of 5xx overlaps the trial's last wait, but the worker's generation counter kept
    rising: the plane was serving, the time was the agent's."""
    job_dir = job(tmp_path)
    last_call_unanswered(job_dir)
    lines, generated = [], 0.0
    for i, second in enumerate(range(int(AGENT_START) - 5, int(AGENT_END) + 3)):
        generated += 40
        lines += [worker_read(float(second), generated, queued=3),
                  gateway_read(float(second), errors_500=10.0 * max(0, i - 15))]
    write_record(job_dir, lines)
    assert read_record(JobLayout.local(job_dir)).failures(), "the burst is in the record"
    c, _ = verdict(job_dir)
    assert (c.category, c.signature) == ("agent_timeout", "agent_timeout"), c


def test_a_timeout_whose_calls_were_answered_is_the_agents(tmp_path: Path) -> None:
    """The real timeout: its three calls answered in 0.2 s, its time ran out in a command.
    A dead worker after its last answer does not make its time the plane's."""
    job_dir = job(tmp_path)
    write_record(job_dir, worker_dies_at(AGENT_START + 12))
    c, _ = verdict(job_dir)
    assert c.category == "agent_timeout", c


def test_an_endpoint_verdict_carries_the_record_beside_the_agents_words(tmp_path: Path) -> None:
    job_dir = job(tmp_path, DEAD)
    result = json.loads((job_dir / DEAD_TRIAL / "result.json").read_text())
    start = trial_time_of(result)
    lines = []
    for i in range(-3, 45):
        t = start + i
        lines += [worker_read(t, 0, ok=False), gateway_read(t, no_workers=2.0 * (i + 4))]
    write_record(job_dir, lines)
    c, _ = verdict(job_dir, DEAD_TRIAL)
    assert c.category == "infra" and c.signature.startswith("model_endpoint"), c
    causes = [p.cause for p in c.proof]
    assert causes[0] == "endpoint_response" and "serving_record" in causes
    for proof in c.proof:
        assert quoted_in_file(job_dir, DEAD_TRIAL, proof.where, proof.quote), proof


def trial_time_of(result: dict) -> float:
    from audit.read.models import parse_time

    at = parse_time(result["agent_execution"]["started_at"])
    assert at is not None
    return at.timestamp()


def test_a_graded_trial_keeps_its_grade_whatever_the_plane_did(tmp_path: Path) -> None:
    job_dir = job(tmp_path, "terminus2-mock-logged")
    trial = "hello-file__eXFFZV3"
    path = job_dir / trial / "result.json"
    result = json.loads(path.read_text())
    result["verifier_result"]["rewards"]["reward"] = 0.0
    path.write_text(json.dumps(result))
    start = trial_time_of(result)
    write_record(job_dir, [worker_read(start + i, 0, ok=False) for i in range(-2, 5)])
    c, _ = verdict(job_dir, trial)
    assert c.category == "agent_error", c


def test_every_report_gives_time_per_trial_and_the_plane(tmp_path: Path) -> None:
    job_dir = job(tmp_path)
    last_call_unanswered(job_dir)
    lines, generated = [], 0.0
    for second in range(int(AGENT_START) - 5, int(AGENT_END) + 3):
        generated += 40
        lines += [worker_read(float(second), generated, queued=4), gateway_read(float(second))]
    write_record(job_dir, lines)
    report = build_report(JobLayout.local(job_dir))
    row = report.trials[0]
    assert row.category == "agent_timeout" and row.time is not None
    # 0.19 s answered and the last call unanswered from 37.08 to 40.90, of 15.01 s.
    assert row.time.waiting_at_end and row.time.model_share == 0.267
    assert row.time.serving is not None
    assert row.time.serving.startswith("queue max 4; running max 2; generating 30.0 tokens/s")
    assert report.serving is not None and len(report.serving.points) >= 15
    data = json.loads(render(report, "json"))
    assert data["trials"][0]["time"]["model_s"] == row.time.model_s
    markdown = render(report, "markdown")
    assert "## Time per trial" in markdown
    assert f"{TRIAL}: waited on the model 27% of its agent's time (2 calls; the last one " \
           "unanswered when time ran out); the serving plane meanwhile: queue max 4" in markdown
    table = render(report, "table", width=200)
    assert "Time per trial" in table and "agent timeout:" in table
    html = render(report, "html")
    assert "The serving plane, with the trials" in html and "<polyline" in html
    assert f"{TRIAL}: agent_timeout" in html  # the trial's window on the timeline


def test_without_a_record_nothing_changes(tmp_path: Path) -> None:
    job_dir = job(tmp_path)
    last_call_unanswered(job_dir)
    c, _ = verdict(job_dir)
    assert c.category == "agent_timeout"
    report = build_report(JobLayout.local(job_dir))
    assert report.serving is None and report.trials[0].time is not None
    assert "No serving record beside the job" in render(report, "html")


CAPTURE = Path(__file__).with_name("captures") / "serving" / "dead-worker-smg"


def test_a_real_job_whose_worker_died_is_infra_on_the_planes_own_words() -> None:
    """The capture (captures/serving/README.md): real Harbor, Terminus-2, smg and sampler, the
    worker stopped before any call was answered. The timeout whose only call never came back is
    the plane's (the worker down, quoted); the two that ended on smg's 503 are the endpoint's,
    with the plane's reads beside its words; every proof is in the file it names."""
    report = build_report(JobLayout.local(CAPTURE))
    rows = {t.task: t for t in report.trials}
    slow = rows["hello-file-slow"]
    assert (slow.category, slow.signature) == ("infra", "serving_worker_down")
    assert slow.time is not None and slow.time.waiting_at_end and slow.time.calls == 0
    for task in ("hello-file", "hello-file-wrong"):
        row = rows[task]
        assert (row.category, row.signature) == ("infra", "model_endpoint_server_error")
        causes = [p.cause for p in row.proof]
        assert causes[0] == "endpoint_response" and "serving_record" in causes
    for row in rows.values():
        plane = [p for p in row.proof if p.cause == "serving_record"]
        assert plane[0].quote == "ConnectionRefusedError: [Errno 111] Connection refused"
        for proof in row.proof:
            assert quoted_in_file(CAPTURE, row.trial, proof.where, proof.quote), proof
    kinds = [f.kind for f in report.serving.failures] if report.serving else []
    assert kinds == ["worker_down", "burst_5xx", "circuit_open", "no_workers", "no_workers",
                     "circuit_open"], kinds
    record = read_record(JobLayout.local(CAPTURE))
    # 500s before the circuit opened, 503s after: 57 failed answers on the model routes.
    assert record.failed_requests(record.reads[0].t, record.reads[-1].t) == 57
