"""The generalization figure (benchmarks/bench_audit_generalization.py): every dev-set source at
first contact, now, and beside the trivial baseline (reward and exception type alone), for all
its labelled non-passes and for the hard ones (those the baseline gets wrong).

Asserted: the first-contact record exists for every source, was made at one commit before any
change of issue #28 and is what the benchmark prints; the hard trials are exactly the
non-passes the baseline gets wrong; on every real source the audit now excuses no model
failure, agrees with the expert on at least 95% of the hard trials and of the non-passes, and
leaves at most 10% of the non-passes insufficient; it never does worse than at first contact.
"""

from __future__ import annotations

import json

import pytest

from audit.read import readings
from benchmarks.bench_audit_generalization import FIRST_CONTACT, evaluate, report
from tests.audit import dev_set

BEFORE_ISSUE_28 = "b667fd6dcb3d8aae327de6e200d9fb82223928cf"
# real-jobs-3's five sources, audited before anything was changed for issue #34.
BEFORE_ISSUE_34 = "924a0b3600a4af43ae6b7101f8efcd045be74ae5"
REAL_JOBS_3 = {"argus", "hive-swarm-hub", "lore-hex", "anode", "stella"}


@pytest.fixture(scope="module")
def results():
    return evaluate()


def test_first_contact_was_recorded_before_any_change_for_every_source():
    recorded = json.loads(FIRST_CONTACT.read_text())["sources"]
    assert set(recorded) == set(dev_set.SOURCES)
    for name, entry in recorded.items():
        before = BEFORE_ISSUE_34 if name in REAL_JOBS_3 else BEFORE_ISSUE_28
        assert entry["commit"] == before, name
        assert set(entry["verdicts"]) == set(dev_set.SOURCES[name].labels()), name
    first = {n for n, e in recorded.items() if e["kind"] == "first contact"}
    assert first == {"captaindpt-kill-terminalbench", "singhh5050-tbench-eval", "new-wording"} | (
        REAL_JOBS_3
    )
    # What was recorded then: real-jobs-2's two sources at 96/122 and 10/15, none excused; the
    # five of real-jobs-3 at 28/45, 36/47, 42/49, 21/22 and 42/54, two model failures excused.
    assert (recorded["captaindpt-kill-terminalbench"]["agree"], recorded["singhh5050-tbench-eval"]
            ["agree"]) == (96, 10)
    third = [recorded[n] for n in ("argus", "hive-swarm-hub", "lore-hex", "anode", "stella")]
    assert [(e["agree"], e["labelled"]) for e in third] == [
        (28, 45), (36, 47), (42, 49), (21, 22), (42, 54)
    ]
    assert sum(e["excused"] for e in third) == 2


def test_the_hard_trials_are_what_the_baseline_gets_wrong(results):
    for name, entry in results.items():
        source = dev_set.SOURCES[name]
        labels = source.labels()
        base = dev_set.trivial_verdicts(source)
        hard = dev_set.hard(source)
        assert entry["n_hard"] == len(hard)
        assert all(base[k] != labels[k]["category"] != "passed" for k in hard)
        assert entry["trivial"]["hard"].agree == 0
        non_passes = [k for k, v in labels.items() if v["category"] != "passed"]
        assert entry["trivial"]["non-passes"].agree == len(non_passes) - len(hard)


@pytest.mark.parametrize("name", dev_set.REAL_SOURCES)
def test_each_real_source_now(results, name):
    entry = results[name]
    assert entry["all labelled now"].agreement >= 0.97, entry["all labelled now"].disagreements
    for group in ("non-passes", "hard"):
        now, first = entry["now"][group], entry["first contact"][group]
        assert now.excused == [], (group, now.excused)
        assert now.agreement >= (0.97 if group == "non-passes" else 0.95), (
            group, now.disagreements)
        # Insufficient, of the non-passes whose agent left a log: at most 10%, or no more than
        # the expert's own share where the expert could not decide more of them either; and
        # where the expert decided, at most 10% left undecided by the audit.
        if group == "non-passes":
            assert now.logged_share <= max(0.10, entry["expert_insufficient"]), group
            assert now.undecided_share <= 0.10, group
        assert now.agree >= first.agree, (group, "worse than at first contact")


def test_the_held_out_view_switches_off_only_the_source_s_own_readings(results):
    """Leave-one-source-out: a source none of whose readings was written from it reads the same
    held out as now; a source that prompted readings is scored without them."""
    for name, entry in results.items():
        held, now = entry["held out"]["non-passes"], entry["now"]["non-passes"]
        if not readings.met_in(name):
            assert (held.agree, held.labelled) == (now.agree, now.labelled), name
    for name in REAL_JOBS_3:
        assert readings.met_in(name), name
        assert results[name]["held out"]["non-passes"].agree < results[name]["now"][
            "non-passes"].agree, name


def test_the_report_prints_first_contact_beside_now_and_the_baseline(results):
    text = "\n".join(report(results))
    for name in dev_set.SOURCES:
        assert f"== {name} " in text
    lines = text.splitlines()
    for view in ("first contact", "held out", "now", "trivial"):
        assert sum(ln.startswith(f"  {view} ") for ln in lines) == len(dev_set.SOURCES), view
    assert "real sources, hard       first contact" in text
