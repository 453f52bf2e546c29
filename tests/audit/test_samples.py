"""Every trial of every real Harbor 0.21.0 sample job gets the category it deserves."""

from __future__ import annotations

import pytest

from audit.pipeline import build_report
from audit.read.layout import JobLayout
from tests.conftest import SAMPLE_JOBS

# trial dir -> (category, signature), for every trial of every sample job.
EXPECTED = {
    # Harbor's nop asks no model: its 0 is what a nop run is for, not a model failure.
    "nop-fail": {"hello-file__dULNQZw": ("agent_error", "nop_no_attempt")},
    "oracle-attempts": {
        # The oracle's reference solution failed: the task is broken, no model was asked.
        "hello-file-wrong__URSpSsG": ("insufficient_evidence", "oracle_solution_failed"),
        "hello-file-wrong__v8sQTyr": ("insufficient_evidence", "oracle_solution_failed"),
        "hello-file__BiEg75b": ("passed", None),
        "hello-file__hMR7zym": ("passed", None),
    },
    "oracle-dataset": {
        "hello-file-slow__WVN9tAJ": ("agent_timeout", "agent_timeout"),
        "hello-file-wrong__KsbnDGs": ("insufficient_evidence", "oracle_solution_failed"),
        "hello-file__W75FR65": ("passed", None),
    },
    "oracle-extra-compose": {"hello-file-overlay__JB59s2g": ("passed", None)},
    "oracle-pass": {"hello-file__A2GnMRL": ("passed", None)},
    "oracle-verifier-timeout": {"hello-file__X8ahwSR": ("verifier_timeout", "verifier_timeout")},
    "pitfall-missing-image": {"hello-missing-image__V8WsqjE": ("infra", "image_pull_failed")},
    "pitfall-no-internet-sidecar": {
        "hello-nonet__hZmxPSd": ("infra", "egress_sidecar_build_failed")
    },
    "pitfall-tee-killed": {"hello-file-slow__gfBriG6": ("passed", None)},
    "pitfall-workdir-missing": {"hello-workdir__X8Wp2ct": ("infra", "agent_exec_failed")},
    "sigint-demo": {"hello-file-slow__9qFhtBt": ("cancelled", "cancelled")},
    "sigkill-demo": {"hello-file-slow__FMwNSJA": ("passed", None)},
    "sigterm-demo": {"hello-file-slow__jtEnnpu": ("passed", None)},
    "terminus2-dead-endpoint": {"hello-file__yFzzmsN": ("infra", "model_endpoint_unreachable")},
    "terminus2-mock": {"hello-file__8Y8Dfb8": ("passed", None)},
    "terminus2-mock-logged": {"hello-file__eXFFZV3": ("passed", None)},
    "terminus2-no-tmux": {"hello-file__pVCqD6K": ("infra", "tool_install_failed")},
    "terminus2-timeout": {"hello-file__bggx4a9": ("agent_timeout", "agent_timeout")},
}


def test_every_sample_job_is_covered():
    on_disk = {p.name for p in SAMPLE_JOBS.iterdir() if p.is_dir() and not p.name.startswith("_")}
    assert on_disk == set(EXPECTED), "a sample job was added or removed: update EXPECTED"


@pytest.mark.parametrize("job", sorted(EXPECTED))
def test_sample_job_categories(job):
    report = build_report(JobLayout.local(SAMPLE_JOBS / job))
    got = {t.trial: (t.category, t.signature) for t in report.trials}
    assert got == EXPECTED[job]
    for trial in report.trials:
        if trial.category != "passed":
            assert trial.evidence, f"{trial.trial}: a non-pass must show its evidence"
            assert trial.explanation
    h21 = report.score("harbor-0.21")
    assert h21.counted == len(EXPECTED[job])
    assert h21.passed == sum(1 for c, _ in EXPECTED[job].values() if c == "passed")


def test_interrupted_jobs_are_flagged():
    for job in ("sigint-demo", "pitfall-tee-killed"):
        report = build_report(JobLayout.local(SAMPLE_JOBS / job))
        assert report.job.finished is False
        assert any("finished_at: null" in p for p in report.problems)
        # Job timestamps are naive local time and finished_at is null: the wall time comes
        # from the trials' UTC timestamps instead.
        assert report.job.wall_source == "trial timestamps"
        assert report.job.wall_seconds and report.job.wall_seconds > 0


def test_sample_tokens_and_timings():
    report = build_report(JobLayout.local(SAMPLE_JOBS / "terminus2-timeout"))
    assert (report.tokens.input, report.tokens.output) == (3000, 150)
    trial = report.trials[0]
    assert trial.durations["agent_execution"] == pytest.approx(15.01, abs=0.05)
    assert report.job.wall_seconds == pytest.approx(41.2, abs=0.5)


def test_agent_error_reward_stands_and_rerun_lists_infra():
    report = build_report(JobLayout.local(SAMPLE_JOBS / "terminus2-no-tmux"))
    assert report.rerun == ["hello-file"]
    assert report.rerun_args == ["-i", "hello-file"]
    assert report.score("harbor-0.21").score == 0.0
    # Its one trial is listed for rerun, so the adjusted score has no trial left to count.
    assert report.score("harbor-0.21", "adjusted").score is None
