"""One score across a main job and its reruns: the merge rule on generated jobs, on a real main
job with its real rerun (gemma-harness-tb2, read in place), and through the real CLI."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from audit.output.render import render
from audit.pipeline import build_report
from audit.read.layout import JobLayout
from audit.read.layout import task_of as dir_task
from audit.score.adjudications import Adjudication
from audit.score.merge import MERGE_RULE, SUPERSEDED, merge_reports
from audit.score.reference import PublishedScore
from audit.score.report import Report
from contracts import outputs as K
from tests.audit.audit_jobgen import PYTEST_FAIL, PYTEST_PASS, TrialSpec, apt_502, write_job
from tests.audit.dev_set import DEV_SET
from tests.audit.test_cli import _fake_pulumi

GEMMA = DEV_SET / "gemma-harness-tb2"
GEMMA_MAIN = GEMMA / "full_benchmark_2026-04-22__13-52-38"
GEMMA_RERUN = GEMMA / "rerun_failed2_2026-04-22__20-33-03"
H21 = "harbor-0.21"


def _infra(task: str) -> TrialSpec:
    # rules.yaml's verifier_proxy_5xx: the verifier's apt-get met a 502 from the proxy.
    return TrialSpec(task, reward=0.0, verifier_stdout=apt_502("coq"))


def _fail(task: str) -> TrialSpec:
    return TrialSpec(task, reward=0.0, verifier_stdout=PYTEST_FAIL)


def _pass(task: str) -> TrialSpec:
    return TrialSpec(task, reward=1.0, verifier_stdout=PYTEST_PASS)


def _job(root: Path, name: str, specs: list[TrialSpec], seed: int = 7) -> Path:
    return write_job(root, name, specs, concurrency=len(specs), seed=seed)


def _audit(job: Path, adjudications: list[Adjudication] | None = None) -> Report:
    return build_report(JobLayout.local(job), adjudications=adjudications)


def _rule_in(text: str) -> bool:
    return " ".join(MERGE_RULE.split()) in " ".join(html.unescape(text).split())


@pytest.fixture
def abc(tmp_path):
    """Main: A infra, B a graded failure, C passed. Rerun: A and B pass, D is not in main."""
    main = _job(tmp_path, "main-job", [_infra("a-task"), _fail("b-task"), _pass("c-task")])
    rerun = _job(tmp_path, "rerun-1", [_pass("a-task"), _pass("b-task"), _pass("d-task")], seed=8)
    return main, rerun


def test_rerun_supersedes_infra_but_never_a_graded_failure(abc):
    main, rerun = abc
    m, r = _audit(main), _audit(rerun)
    assert [(t.task, t.category) for t in m.trials] == [
        ("a-task", "infra"),
        ("b-task", "agent_error"),
        ("c-task", "passed"),
    ]
    merge = merge_reports(m, [r])
    tasks = {t.task: t for t in merge.tasks}
    assert sorted(tasks) == ["a-task", "b-task", "c-task"]

    a = tasks["a-task"]
    assert [(x.job, x.category, x.status) for x in a.attempts] == [
        ("main-job", "infra", "superseded"),
        ("rerun-1", "passed", "counted"),
    ]
    assert (a.outcome, a.counted_as) == ("passed", "pass")
    b = tasks["b-task"]
    assert [(x.job, x.category, x.status) for x in b.attempts] == [
        ("main-job", "agent_error", "counted"),
        ("rerun-1", "passed", "unused"),
    ]
    assert (b.outcome, b.counted_as) == ("agent_error", "fail")
    assert [(x.category, x.status) for x in tasks["c-task"].attempts] == [("passed", "counted")]

    assert (m.score(H21).passed, m.score(H21).counted) == (1, 3)
    raw, adjusted = merge.score(H21), merge.score(H21, "adjusted")
    assert (raw.passed, raw.counted) == (2, 3)
    assert (adjusted.passed, adjusted.counted) == (2, 3)
    assert raw.score == 66.67 and raw.low is not None
    # The board's rule over the merged slots: three tasks of one trial each, 2/3.
    assert merge.score("leaderboard").shown == "66.7% ± N/A (leaderboard)"
    assert merge.superseded == 1
    assert merge.rerun == [] and m.rerun == ["a-task"]
    assert merge.problems == [
        "rerun job rerun-1 ran task d-task that the main job does not have; ignored"
    ]
    # Each attempt carries what a reader needs to judge it.
    infra = a.attempts[0]
    assert infra.signature == "verifier_proxy_5xx" and infra.evidence and infra.explanation
    assert infra.trial.startswith("a-task__")


def test_every_format_states_the_rule_and_both_scores(abc):
    main, rerun = abc
    report = _audit(main)
    report.merge = merge_reports(report, [_audit(rerun)])
    data = json.loads(render(report, "json"))
    assert data["merge"]["rule"] == MERGE_RULE
    assert [t["task"] for t in data["merge"]["tasks"]] == ["a-task", "b-task", "c-task"]
    assert data["merge"]["scores"][H21]["rows"][0]["raw"]["passed"] == 2
    assert data["scores"][H21]["rows"][0]["raw"]["passed"] == 1
    for fmt in ("table", "markdown", "html"):
        text = render(report, fmt)
        assert _rule_in(text), fmt
        flat = " ".join(html.unescape(text).split())
        assert "1/3 = 33.33" in flat and "2/3 = 66.67" in flat, fmt
        assert "ran task d-task that the main job does not have; ignored" in flat, fmt
        assert "superseded" in flat and "unused" in flat, fmt
    page = render(report, "html")
    # Each attempt of a task has its own category badge in the merged table.
    merged = page[page.index("<h2>Merged with reruns</h2>") : page.index("<h2>Outcomes")]
    assert merged.count('class="cat"') >= 5 + 3  # 5 attempts, 3 merged outcomes


def test_a_task_infra_in_every_attempt_stays_for_rerun(tmp_path):
    main = _job(tmp_path, "m", [_infra("a-task"), _pass("c-task")])
    r1 = _job(tmp_path, "r1", [_infra("a-task")], seed=9)
    r2 = _job(tmp_path, "r2", [_infra("a-task")], seed=10)
    merge = merge_reports(_audit(main), [_audit(r1), _audit(r2)])
    a = next(t for t in merge.tasks if t.task == "a-task")
    assert [(x.job, x.status) for x in a.attempts] == [
        ("m", "superseded"),
        ("r1", "superseded"),
        ("r2", "superseded"),
    ]
    assert (a.outcome, a.counted_as) == ("infra", "fail")
    assert merge.rerun == ["a-task"] and merge.rerun_args == ["-i", "a-task"]
    assert (merge.score(H21).passed, merge.score(H21).counted) == (1, 2)
    # Adjusted: a-task is still infra, so it leaves the denominator: 1/1.
    assert (merge.score(H21, "adjusted").passed, merge.score(H21, "adjusted").counted) == (1, 1)
    assert merge.superseded == 2


def test_reruns_apply_in_the_order_given(tmp_path):
    main = _job(tmp_path, "m", [_infra("a-task")])
    r1 = _job(tmp_path, "r1", [_infra("a-task")], seed=9)
    r2 = _job(tmp_path, "r2", [_pass("a-task")], seed=10)
    r3 = _job(tmp_path, "r3", [_fail("a-task")], seed=11)
    merge = merge_reports(_audit(main), [_audit(r1), _audit(r2), _audit(r3)])
    (a,) = merge.tasks
    assert [(x.job, x.status) for x in a.attempts] == [
        ("m", "superseded"),
        ("r1", "superseded"),
        ("r2", "counted"),
        ("r3", "unused"),
    ]
    assert a.counted_as == "pass"


def test_slots_with_several_main_attempts(tmp_path):
    """Two main attempts of A (infra, agent_error) and two rerun passes: the first rerun pass
    replaces the infra slot; the agent_error slot stands; the second rerun pass is unused."""
    main = _job(tmp_path, "m", [_infra("a-task"), _fail("a-task")])
    rerun = _job(tmp_path, "r", [_pass("a-task"), _pass("a-task")], seed=9)
    m = _audit(main)
    merge = merge_reports(m, [_audit(rerun)])
    (a,) = merge.tasks
    infra_slot = next(x.slot for x in a.attempts if x.category == "infra")
    assert [(x.job, x.category, x.status, x.slot) for x in a.attempts if x.job == "r"] == [
        ("r", "passed", "counted", infra_slot),
        ("r", "passed", "unused", None),
    ]
    assert (a.passed, a.total, a.counted_as) == (1, 2, "mixed")
    assert sorted(s.category for s in a.slots) == ["agent_error", "passed"]
    assert (merge.score(H21).passed, merge.score(H21).counted) == (1, 2)
    # pass@k on merged outcomes: one task, n=2, c=1.
    assert merge.score(H21).pass_at_k == {"1": 50.0, "2": 100.0}


def test_adjudications_apply_to_the_merged_outcome(abc):
    main, rerun = abc
    adj = [
        Adjudication(task="a-task", decision="exclude", reason="task broken upstream"),
        Adjudication(task="b-task", decision="pass", reason="grader bug, checked by hand"),
    ]
    m = _audit(main, adj)
    merge = merge_reports(m, [_audit(rerun)], PublishedScore(score=50.0, convention=H21))
    assert sorted(t.task for t in merge.tasks if t.counted_as == "excluded") == ["a-task"]
    adjusted = merge.score(H21, "adjusted")
    assert (adjusted.passed, adjusted.counted) == (2, 2)  # b by adjudication, c
    assert (merge.score(H21).passed, merge.score(H21).counted) == (2, 3)  # raw: none applied
    # Compared in the reference's convention: raw 66.67 - 50, adjusted 100 - 50.
    assert [c.difference for c in merge.reference.comparisons] == [16.67, 50.0]


# --- the real main job and its real rerun -----------------------------------------------


@pytest.fixture(scope="module")
def gemma() -> tuple[Report, Report]:
    if not (GEMMA_MAIN.is_dir() and GEMMA_RERUN.is_dir()):
        pytest.fail(f"the dev set is missing: {GEMMA} (test data beside the repository)")
    return _audit(GEMMA_MAIN), _audit(GEMMA_RERUN)


def test_gemma_main_and_rerun_merge(gemma):
    main, rerun = gemma
    assert (main.score(H21).passed, main.job.n_trials, main.score(H21).counted) == (16, 88, 89)
    assert (rerun.score(H21).passed, rerun.job.n_trials) == (1, 41)
    merge = merge_reports(main, [rerun])

    # The rerun's own config names the 41 tasks it reran. 40 of its trials have a result.json;
    # password-recovery__cCN38eB has none, so its task is known only from its dir name, and
    # it still lines up with the main job's terminal-bench/password-recovery.
    config = json.loads((GEMMA_RERUN / "config.json").read_text())
    rerun_tasks = set(config["datasets"][0]["task_names"])
    assert len(rerun_tasks) == 41
    attempts = {t.task: len(t.attempts) for t in merge.tasks}
    assert len(attempts) == 88
    assert {t for t, n in attempts.items() if n == 2} == rerun_tasks
    assert all(n == 1 for t, n in attempts.items() if t not in rerun_tasks)
    assert merge.problems and all(p.startswith("rerun job ") for p in merge.problems)
    assert not any("does not have" in p for p in merge.problems)

    # The rule, computed here from the two single-job reports' categories alone.
    main_by_task = {r.task: r for r in main.trials}
    by_prefix = {dir_task(r.trial): r.task for r in main.trials}
    rerun_of = {by_prefix[dir_task(r.trial)]: r for r in rerun.trials}
    expected_pass = 0
    for task, row in main_by_task.items():
        counted = row
        if row.category in SUPERSEDED and task in rerun_of:
            if rerun_of[task].category not in SUPERSEDED:
                counted = rerun_of[task]
        passed = counted.category not in SUPERSEDED and (counted.reward or 0) >= 1
        expected_pass += passed
        got = next(t for t in merge.tasks if t.task == task)
        assert got.counted_as == ("pass" if passed else "fail"), task
        assert got.outcome == counted.category, task
    # No main attempt was infra or cancelled, so the rerun changes nothing: its one pass
    # (fix-code-vulnerability) comes after a graded failure and does not count.
    assert expected_pass == 16 and merge.superseded == 0
    fix = next(t for t in merge.tasks if t.task == "terminal-bench/fix-code-vulnerability")
    assert [(a.category, a.status) for a in fix.attempts] == [
        ("agent_error", "counted"),
        ("passed", "unused"),
    ]
    raw, adjusted = merge.score(H21), merge.score(H21, "adjusted")
    assert (raw.passed, raw.counted, raw.score) == (16, 89, 17.98)
    assert (raw.low, raw.high) == (11.38, 27.23)
    assert (adjusted.passed, adjusted.counted) == (16, 89)
    assert merge.rerun == []
    print(f"\ngemma merge: main {main.score(H21).shown}, {main.score().shown}; merged "
          f"{raw.shown}, adjusted {adjusted.shown}, {merge.score().shown}")

    main.merge = merge
    for fmt in ("json", "table", "markdown", "html"):
        assert _rule_in(render(main, fmt)), fmt


# --- the CLI --------------------------------------------------------------------------------


def test_cli_merges_reruns(abc, run_cli):
    main, rerun = abc
    res = run_cli(str(main), "--rerun", str(rerun), "--format", "json", "--reference-score", "60")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert [j["name"] for j in data["merge"]["jobs"]] == ["main-job", "rerun-1"]
    # In the reference's convention (the board's): merged 2/3 raw and adjusted; the main job
    # alone 1/3 raw, and 1/2 adjusted (a-task's infra trial out).
    merged = data["merge"]["scores"]["leaderboard"]["rows"][0]
    assert merged["adjusted"]["score"] == 66.67
    assert [c["difference"] for c in data["merge"]["reference"]["comparisons"]] == [6.67, 6.67]
    assert [c["difference"] for c in data["reference"]["comparisons"]] == [-26.67, -10.0]


def test_cli_without_rerun_has_no_merge(abc, run_cli):
    main, _ = abc
    data = json.loads(run_cli(str(main), "--format", "json").stdout)
    assert data["merge"] is None and data["provenance"] is None


@pytest.mark.parametrize(
    "args, message",
    [
        (["{main}", "--rerun", "/nonexistent/rerun"], "--rerun /nonexistent/rerun: job dir"),
        (["{main}", "--rerun", "{parent}"], "is not a Harbor job dir"),
        (["{main}", "--rerun", "{main}"], "is the main job again"),
        (["{main}", "--rerun", "{rerun}", "--rerun", "{rerun}/"], "again: give each job once"),
    ],
)
def test_cli_rerun_errors(abc, run_cli, args, message):
    main, rerun = abc
    subs = {"{main}": str(main), "{rerun}": str(rerun), "{parent}": str(main.parent)}
    argv = []
    for a in args:
        for k, v in subs.items():
            a = a.replace(k, v)
        argv.append(a)
    res = run_cli(*argv)
    assert res.returncode == 2, res.stdout
    assert message in res.reason
    assert res.reason.startswith("audit: error: ") and "Traceback" not in res.stderr


def test_cli_stack_takes_reruns_from_the_outputs(abc, run_cli, tmp_path):
    main, rerun = abc
    outputs = {K.JOB_DIR: str(main), K.RERUN_JOB_DIRS: [str(rerun)], K.RERUN_WAITING: ""}
    res = run_cli("--stack", "s", "--format", "json", env=_fake_pulumi(tmp_path, outputs))
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert [j["location"] for j in data["merge"]["jobs"]] == [str(main), str(rerun)]
    assert data["merge"]["scores"][H21]["rows"][0]["raw"]["passed"] == 2


def test_cli_stack_waiting_for_a_rerun_warns_and_audits(abc, run_cli, tmp_path):
    main, _ = abc
    outputs = {
        K.JOB_DIR: str(main),
        K.RERUN_JOB_DIRS: [],
        K.RERUN_WAITING: "the main job is still running",
    }
    res = run_cli("--stack", "s", "--format", "json", env=_fake_pulumi(tmp_path, outputs))
    assert res.returncode == 0, res.stderr
    assert "audit: stack s has no rerun job yet: the main job is still running" in res.stderr
    assert json.loads(res.stdout)["merge"] is None


@pytest.mark.parametrize(
    "reruns, message",
    [
        ("jobs/r1", "'rerun_job_dirs' is not a list of job dirs"),
        (["/nonexistent/r1"], "names rerun job dir /nonexistent/r1 on the Harbor host gpu-a"),
    ],
)
def test_cli_stack_rerun_errors(abc, run_cli, tmp_path, reruns, message):
    main, _ = abc
    outputs = {K.JOB_DIR: str(main), K.RERUN_JOB_DIRS: reruns, K.HARBOR_HOST: "gpu-a"}
    res = run_cli("--stack", "s", env=_fake_pulumi(tmp_path, outputs))
    assert res.returncode == 2
    assert message in res.reason and "Traceback" not in res.stderr
