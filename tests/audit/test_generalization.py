"""Leave-one-source-out: the audit scored on each dev-set source with the knowledge learned
only from that source switched off (benchmarks/bench_audit_generalization.py has the design).

Issue #20's bar: at least 95% agreement with the expert and not one model failure excused, on
every held-out source. The `strict` view (also without what was learned from the source but
grounded elsewhere) is a lower bound the benchmark prints; here it is only checked to run and
to switch knowledge off, since its point is to show what rests on the dev set, not to pass.
"""

from __future__ import annotations

import pytest

from benchmarks.bench_audit_generalization import evaluate, knowledge
from tests.audit.dev_set import LABELS

MIN_AGREEMENT = 0.95


@pytest.fixture(scope="module")
def loso():
    if not LABELS.is_file():
        pytest.fail(f"the dev set is missing: {LABELS.parent} (test data, not optional)")
    return evaluate("loso")


def test_leave_one_source_out_agreement_and_no_excuse(loso):
    overall = loso["overall"]
    print(f"\nLOSO: {overall.agree}/{overall.labelled} ({100 * overall.agreement:.1f}%)")
    for source, fold in loso["folds"].items():
        s = fold["score"]
        print(
            f"  {source}: {100 * s.agreement:.1f}%, excused {len(s.excused)}, "
            f"off {fold['disabled']}"
        )
        assert s.excused == [], (source, s.excused)
    assert overall.agreement >= MIN_AGREEMENT, "\n".join(overall.disagreements)


def test_every_piece_of_knowledge_says_where_it_came_from():
    items = knowledge()
    names = [k.name for k in items]
    assert len(names) == len(set(names)), "a knowledge name is used twice"
    for k in items:
        assert k.learned_from or k.grounded_in, k.name


def test_strict_view_switches_the_dev_first_knowledge_off():
    result = evaluate("strict")
    off = {source: set(f["disabled"]) for source, f in result["folds"].items()}
    assert "model_reply_cut_off" in off["glm5-openclaw-tb20"]
    assert "endpoint:unparseable_phrases" in off["gemma-harness-tb2"]
    # Whatever is off, the rerun verdicts that remain still carry proof.
    assert result["overall"].labelled == evaluate("dev")["overall"].labelled
