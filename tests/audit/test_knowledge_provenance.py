"""What each piece of the audit's knowledge rests on (audit/learned.py RESTS_ON), checked here.

The provenance-checked leave-one-source-out view keeps a piece on only if it rests on something
this machine can check: issue #20's lines (quoted in audit/RULES.md §0, the source of record),
the seed, the Harbor 0.21 reference (in the section named), the captures (in the file named),
or a general rule whose reasoning audit/RULES.md §1-2 already stated before the record was kept
(commit BASE). Every quote must be in its file, word for word up to whitespace; a tag that
claims one of those documents must be backed by a quote, and a quote by its tag.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from audit.judge.learned import BASE, CITED_FILES, RESTS_ON, Cite, Knowledge
from benchmarks.bench_audit_generalization import knowledge
from tests.conftest import ROOT

CHECKABLE = {"issue-20", "seed", "harbor", "captures", "general"}


def _flat(text: str) -> str:
    return " ".join(text.split())


def _file(on: str) -> str:
    path = (ROOT / CITED_FILES[on]).resolve()
    if not path.exists():
        pytest.fail(f"{on}: {path} is missing (shared test data, not optional)")
    return path.read_text()


def _rules_section(text: str, number: str) -> str:
    """`## N.` of audit/RULES.md, up to the next `## ` heading."""
    m = re.search(rf"(?ms)^## {re.escape(number)}\. .*?(?=^## |\Z)", text)
    assert m, f"audit/RULES.md has no section {number}"
    return m.group(0)


def _issue_lines() -> str:
    """The quoted lines of issue #20 in RULES.md §0 (the blockquote, not the prose around it)."""
    section = _rules_section(_file("issue-20"), "0")
    return _flat("\n".join(ln[1:] for ln in section.splitlines() if ln.startswith(">")))


def _reference_section(at: str) -> str:
    """`§N` or `§N.M` of the Harbor reference, up to its next numbered heading."""
    number = at.removeprefix("§")
    text = _file("harbor")
    m = re.search(
        rf"(?ms)^#{{2,3}} {re.escape(number)}[. ].*?(?=^#{{2,3}} \d|\Z)",
        text,
    )
    assert m, f"the Harbor reference has no section {at}"
    return m.group(0)


def _base_rules() -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{BASE}:audit/RULES.md"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout


def _where(cite: Cite) -> str:
    """The text a cite's quote must be in."""
    if cite.on == "issue-20":
        return _issue_lines()
    if cite.on == "seed":
        return _flat(_file("seed"))
    if cite.on == "harbor":
        return _flat(_reference_section(cite.at))
    if cite.on == "captures":
        path = ROOT / CITED_FILES["captures"] / cite.at
        assert path.is_file(), f"no capture {cite.at}"
        return _flat(path.read_text())
    assert cite.at in ("§1", "§2"), f"a general rule is one of RULES.md §1-2, not {cite.at}"
    return _flat(_rules_section(_file("general"), cite.at.removeprefix("§")))


ALL = [(name, cite) for name, cites in RESTS_ON.items() for cite in cites]


@pytest.mark.parametrize(("name", "cite"), ALL, ids=[f"{n}:{c.on}" for n, c in ALL])
def test_every_quote_is_in_its_file(name, cite):
    assert _flat(cite.quote) in _where(cite), f"{name}: {cite} is not in {CITED_FILES[cite.on]}"


def test_a_general_rule_was_already_written_before_this_record():
    """A `general` quote was in RULES.md at BASE: no rule becomes general by writing it now."""
    base = _base_rules()
    if base is None:
        pytest.skip(f"git cannot show {BASE} here")
    for name, cite in ALL:
        if cite.on == "general":
            section = _flat(_rules_section(base, cite.at.removeprefix("§")))
            assert _flat(cite.quote) in section, f"{name}: {cite} was not in RULES.md at {BASE}"


def test_every_piece_has_its_record_and_every_record_its_piece():
    names = {k.name for k in knowledge()}
    assert names == set(RESTS_ON), (
        f"no record for {sorted(names - set(RESTS_ON))}; "
        f"records for nothing: {sorted(set(RESTS_ON) - names)}"
    )


def test_the_tags_claim_exactly_what_is_quoted():
    """`grounded_in` names a checkable document only with a quote from it, and every quote's
    document is named there; `docs` (from memory) is the only claim without a quote."""
    for k in knowledge():
        cited = {c.on for c in k.rests_on}
        claimed = set(k.grounded_in) & CHECKABLE
        assert claimed == cited, (k.name, sorted(claimed), sorted(cited))


def test_what_a_source_taught_does_not_become_general():
    """A refinement (first met in a dev-set source) can rest on the issue, the seed, the
    reference or the captures, never on a general rule: split the general reading off."""
    for k in knowledge():
        if k.learned_from:
            assert all(c.on != "general" for c in k.rests_on), k.name


def test_the_record_names_what_rests_on_nothing_checkable():
    """These rest on a dev-set source or on documents from memory only: off in every fold of
    the checked view. Written out, so that a change to the record is a visible change here."""
    bare = sorted(k.name for k in knowledge() if not k.rests_on)
    assert bare == [
        "container_killed",
        "disk_full",
        "emulation_unsupported",
        "endpoint:context_size_words",
        "endpoint:generated_markup",
        "endpoint:unparseable_phrases",
        "out_of_memory",
    ]
    # A general rule and the proof standard are general because of what they rest on.
    for k in knowledge():
        if k.prompted_by or k.standard:
            assert k.rests_on, k.name


def test_a_cite_names_its_place():
    with pytest.raises(ValueError, match="section or file"):
        Cite("harbor", "a quote of three words")
    with pytest.raises(ValueError, match="one of"):
        Cite("docs", "the RFC says so")
    with pytest.raises(ValueError, match="not a word"):
        Cite("seed", "proxy")
    k = Knowledge("made_up", grounded_in=("seed",), cites=(Cite("seed", "a quote here"),))
    assert k.rests_on == (Cite("seed", "a quote here"),)
