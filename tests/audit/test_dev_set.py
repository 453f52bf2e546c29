"""The audit against the experts, on real job dirs from other people's runs (the dev set).

Nine real sources (tests/audit/dev_set.py), each held to the issue's bar on its own: agreement
with the expert of at least 97% (issue #34), not one model failure excused (an expert
`agent_error`/`agent_timeout` that the audit calls `infra`, `verifier_timeout` or `cancelled`
would raise the adjusted score on a failure of the model), and at most 10% of the non-passes
whose agent left a log left `insufficient_evidence` where the expert decided them (the raw
share, beside the expert's own, is held in tests/audit/test_generalization.py). Every rerun
verdict quotes what is in the file it names. The figures and every disagreement are printed
(`pytest -s`).
"""

from __future__ import annotations

import pytest

from tests.audit import dev_set
from tests.audit.proof_check import quoted_in_file

MIN_AGREEMENT = 0.97
MAX_INSUFFICIENT = 0.10


def _source(name: str) -> dev_set.Source:
    source = dev_set.SOURCES.get(name)
    if source is None or not source.labels_file.is_file():
        pytest.fail(f"the dev set is missing: {name} (test data beside the repository)")
    return source


@pytest.mark.parametrize("name", dev_set.REAL_SOURCES)
def test_each_real_source_meets_the_bar(name):
    source = _source(name)
    s = dev_set.score(dev_set.audit_source(source), source.labels(), logs=dev_set.logged(source))
    print(
        f"\n{name}: {s.agree}/{s.labelled} agree ({100 * s.agreement:.1f}%), "
        f"{len(s.excused)} model failures excused, insufficient "
        f"{100 * s.insufficient_share:.1f}% of {s.non_passes} non-passes, "
        f"{100 * s.undecided_share:.1f}% where the expert decided of {s.logged} with agent logs"
    )
    print("\n".join(f"  {d}" for d in s.disagreements) or "  no disagreement")
    assert s.labelled > 0
    assert s.excused == []
    assert s.agreement >= MIN_AGREEMENT, "\n".join(s.disagreements)
    assert s.undecided_share <= MAX_INSUFFICIENT


def test_the_nine_real_sources_are_all_there():
    assert set(dev_set.REAL_SOURCES) == {
        "gemma-harness-tb2",
        "glm5-openclaw-tb20",
        "captaindpt-kill-terminalbench",
        "singhh5050-tbench-eval",
        "argus",
        "hive-swarm-hub",
        "lore-hex",
        "anode",
        "stella",
    }


def test_the_synthetic_wordings_excuse_no_model_failure():
    """new-wording: 40 trials in other tools' words (synthetic, not a bar of the issue's): no
    model failure excused whatever the wording."""
    source = _source("new-wording")
    s = dev_set.score(dev_set.audit_source(source), source.labels())
    print(f"\nnew-wording: {s.agree}/{s.labelled}; " + "; ".join(s.disagreements))
    assert s.labelled == 40
    assert s.excused == []


@pytest.mark.parametrize("name", [*dev_set.REAL_SOURCES, "new-wording"])
def test_every_labelled_trial_is_audited_and_every_rerun_verdict_quotes_its_file(name):
    source = _source(name)
    rows = dev_set.audit_source(source)
    assert set(source.labels()) <= set(rows)
    for key, row in rows.items():
        if row.category not in ("infra", "cancelled"):
            continue
        assert row.evidence and row.proof, f"{key}: {row.signature} without evidence"
        trial_dir = source.trial_dir(key)
        for p in row.proof:
            assert quoted_in_file(trial_dir.parent, trial_dir.name, p.where, p.quote), (key, p)
