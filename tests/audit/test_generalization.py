"""Leave-one-source-out: the audit scored on each dev-set source with knowledge switched off
(benchmarks/bench_audit_generalization.py has the design). The figure is the `checked` view:
in each fold a piece of knowledge stays on only if it rests on a provenance checked here
(audit/learned.py RESTS_ON; tests/audit/test_knowledge_provenance.py checks every quote):
issue #20's lines, the seed, the Harbor 0.21 reference, the captures, or a general rule already
written in audit/RULES.md. `strict` (everything first met in the held-out source off) and
`lenient` (off only what was first met there and names no document) bound it.

Issue #20's bar: at least 95% agreement with the expert and not one model failure excused, on
every held-out source. Not one excuse is asserted first, in every view and every fold, and with
every refinement of every source off at once: excusing a model failure must be the rarest error
the audit makes, so a default that lacks a source's knowledge must fall to
insufficient_evidence or to the model, never to infra.

The 95% is reached by the gemma-harness-tb2 fold (226/226) and not by the glm5-openclaw-tb20
fold, which the test holds to what it reaches: 53/60 (88.3%; 279/286 = 97.6% overall). Of
that source's outside causes first met there, a reply without `usage` is in issue #20's list
(kept: 18 of its expert `infra` labels); a SIGKILL under the trial (4) and Rosetta's missing
syscall (2) rest on nothing checkable, so held out the audit says agent_error or
insufficient_evidence there: it misses those excuses, it never makes one (the 7th
disagreement, install-windows-3.11, is one on the whole dev set too). A change that fits the
held-out source, or that excuses, fails here.
"""

from __future__ import annotations

import pytest

from audit.judge.learned import Cite, Knowledge, disabled_for, prompted_rules
from benchmarks.bench_audit_generalization import MODES, evaluate, knowledge
from tests.audit import dev_set
from tests.audit.dev_set import EXCUSES, LABELS

GEMMA, GLM5 = "gemma-harness-tb2", "glm5-openclaw-tb20"
MIN_AGREEMENT = 0.95  # issue #20's bar
# Per fold: the bar where the checked view reaches it, else what it reaches (a floor: raise it
# only by knowledge with a checked provenance).
CHECKED_FLOOR = {GEMMA: MIN_AGREEMENT, GLM5: 53 / 60}
CHECKED_OVERALL = 279 / 286
STRICT_OVERALL = 261 / 286


@pytest.fixture(scope="module")
def views():
    if not LABELS.is_file():
        pytest.fail(f"the dev set is missing: {LABELS.parent} (test data, not optional)")
    return {mode: evaluate(mode) for mode in MODES}


@pytest.mark.parametrize("mode", MODES)
def test_no_view_excuses_a_model_failure_in_any_fold(views, mode):
    for source, fold in views[mode]["folds"].items():
        assert fold["score"].excused == [], (mode, source, fold["score"].excused)


def test_the_checked_figure(views):
    checked = views["checked"]
    overall = checked["overall"]
    print(f"\nchecked LOSO: {overall.agree}/{overall.labelled} ({100 * overall.agreement:.1f}%)")
    for source, fold in checked["folds"].items():
        s = fold["score"]
        print(
            f"  {source}: {s.agree}/{s.labelled} ({100 * s.agreement:.1f}%), off {fold['disabled']}"
        )
        assert s.excused == [], (source, s.excused)
        assert s.agreement >= CHECKED_FLOOR[source] - 1e-9, "\n".join(s.disagreements)
    assert overall.agreement >= CHECKED_OVERALL - 1e-9, "\n".join(overall.disagreements)
    assert views["strict"]["overall"].agreement >= STRICT_OVERALL - 1e-9


def test_the_views_are_ordered(views):
    agree = {mode: views[mode]["overall"].agree for mode in views}
    assert agree["strict"] <= agree["checked"] <= agree["lenient"] <= agree["dev"]
    # Whatever is off, every labelled trial is still audited.
    assert {views[m]["overall"].labelled for m in views} == {views["dev"]["overall"].labelled}


def test_what_the_checked_view_misses_is_only_an_unproven_outside_cause(views):
    """Every checked disagreement that is not also a dev-set one is an expert infra the audit,
    without knowledge it cannot ground, does not excuse."""
    labels = dev_set.labels()
    dev = set(views["dev"]["overall"].disagreements)
    for line in views["checked"]["overall"].disagreements:
        key = line.split(":", 1)[0]
        if any(d.startswith(key + ":") for d in dev):
            continue
        got = line.split(", audit ", 1)[1].split(" ", 1)[0]
        assert labels[key]["category"] in EXCUSES and got not in EXCUSES, line


def test_the_checked_view_keeps_what_rests_on_the_issue_and_no_more(views):
    checked = views["checked"]["folds"]
    # A reply without `usage`, first met in glm5, is in issue #20's list: kept in its fold.
    assert "model_reply_cut_off" in checked[GLM5]["kept"]
    assert any("issue-20" in c for c in checked[GLM5]["kept"]["model_reply_cut_off"])
    # A SIGKILL under the trial and Rosetta's words rest on nothing checkable: off.
    assert {"container_killed", "emulation_unsupported"} <= set(checked[GLM5]["disabled"])
    assert {"endpoint:unparseable_phrases", "endpoint:context_size_words"} <= set(
        checked[GEMMA]["disabled"]
    )
    # The strict view switches off all that was first met there, the cut-off reply too.
    strict = views["strict"]["folds"]
    assert {"model_reply_cut_off", "container_killed", "emulation_unsupported"} <= set(
        strict[GLM5]["disabled"]
    )
    assert strict[GLM5]["kept"] == {}
    # General rules a source's trials prompted stay on in its fold in every view, and say so.
    for mode in ("checked", "strict", "lenient"):
        kept = set(views[mode]["folds"][GEMMA]["prompted"])
        assert {"agent_harness_crash", "endpoint:bad_request_is_agents"} <= kept
        assert kept == {k.name for k in prompted_rules(knowledge(), GEMMA)}


def test_the_figure_does_not_rest_on_a_tag_either():
    """The checked view switches off, in every fold, whatever rests on nothing checkable, even
    what its tags say was first met in no dev source (the OOM killer's and a full disk's words):
    such a tag is as unverifiable as a document cited from memory. Were only what was first met
    in the held-out source and rests on nothing checkable off, the figure would be the same: it
    does not hang on the reading of a tag."""
    items = knowledge()
    expert = dev_set.labels()
    jobs = dev_set.job_dirs()
    for source in (GEMMA, GLM5):
        held = [j for j in jobs if dev_set.source_of(j) == source]
        keys = [k for k in expert if k.split("/", 1)[0] == source]
        checked = disabled_for(items, source, "checked")
        # Only what was first met in the held-out source and rests on nothing checkable.
        first_met = frozenset(k.name for k in items if source in k.learned_from and not k.rests_on)
        a = dev_set.score(dev_set.audit_jobs(held, checked), expert, keys)
        b = dev_set.score(dev_set.audit_jobs(held, first_met), expert, keys)
        assert (a.agree, a.excused) == (b.agree, b.excused), source


def test_every_refinement_of_every_source_off_at_once_excuses_nothing():
    """The audit's defaults alone (the general rules' blame readings off too; the proof standard
    stays): no model failure excused on the whole dev set."""
    items = knowledge()
    off = frozenset(
        k.name
        for k in items
        if not k.standard and (k.learned_from or k.prompted_by or not k.rests_on)
    )
    rows = dev_set.audit_jobs(dev_set.job_dirs(), off)
    s = dev_set.score(rows, dev_set.labels())
    print(f"\ndefaults only: {s.agree}/{s.labelled}, insufficient {s.insufficient}")
    assert s.excused == [], s.excused


def test_every_piece_of_knowledge_says_where_it_came_from():
    items = knowledge()
    names = [k.name for k in items]
    assert len(names) == len(set(names)), "a knowledge name is used twice"
    for k in items:
        assert k.learned_from or k.grounded_in, k.name
        # A general rule is grounded in a document; the standard knows nothing of one source.
        assert not (k.prompted_by and k.learned_from), k.name
        assert not (k.standard and k.learned_from), k.name


def test_the_views_switch_off_by_provenance():
    g, c = GEMMA, GLM5
    quote = (Cite("issue-20", "a response without `usage`"),)
    items = [
        Knowledge("grounded_here", learned_from=(g,), grounded_in=("issue-20",), cites=quote),
        Knowledge("from_memory", learned_from=(g,), grounded_in=("docs",)),
        Knowledge("only_there", learned_from=(g,)),
        Knowledge("untagged_memory", grounded_in=("docs",)),
        Knowledge("general", grounded_in=("general",), prompted_by=(g,), cites=quote),
        Knowledge("standard", grounded_in=("docs",), prompted_by=(g,), standard=True),
        Knowledge("elsewhere", learned_from=(c,), grounded_in=("docs",)),
    ]
    assert disabled_for(items, g, "checked") == {
        "from_memory",
        "only_there",
        "untagged_memory",
        "elsewhere",
    }
    assert disabled_for(items, g, "strict") == {"grounded_here", "from_memory", "only_there"}
    assert disabled_for(items, g, "lenient") == {"only_there"}
    assert disabled_for(items, c, "strict") == {"elsewhere"}
    with pytest.raises(ValueError, match="general rule"):
        Knowledge("both", learned_from=(g,), grounded_in=("docs",), prompted_by=(c,))
    with pytest.raises(ValueError, match="proof standard"):
        Knowledge("fit", learned_from=(g,), grounded_in=("docs",), standard=True)
    with pytest.raises(ValueError, match="unknown view"):
        disabled_for(items, g, "blind")
