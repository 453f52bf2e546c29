"""One registry of signatures (audit/judge/signatures.py): every verdict the audit gives is in it
with its category, audit/RULES.md lists exactly it, and reports carry each signature's meaning."""

from __future__ import annotations

import re

import pytest

from audit.judge.signatures import SIGNATURES, lookup, table
from audit.pipeline import build_report
from audit.read.layout import JobLayout
from tests.audit import dev_set
from tests.audit.audit_jobgen import seed_final_run, write_job
from tests.conftest import ROOT, SAMPLE_JOBS

RULES_MD = ROOT / "audit" / "RULES.md"


def test_rules_md_lists_exactly_the_registry():
    text = RULES_MD.read_text()
    section = text[text.index("## 7. Every signature") : text.index("## 8.")]
    rows = [ln for ln in section.splitlines() if ln.startswith("| ")]
    assert rows == table()
    assert len(rows) == len(SIGNATURES) + 2  # the header and its rule


def test_every_entry_has_a_category_and_one_line_of_meaning():
    categories = {"agent_error", "agent_timeout", "verifier_timeout", "infra", "cancelled",
                  "insufficient_evidence"}
    for name, sig in SIGNATURES.items():
        assert sig.category in categories, name
        assert sig.meaning and "\n" not in sig.meaning, name
        assert re.fullmatch(r"[a-z0-9_]+\*?", name), name
    assert lookup("graded_fail_RewardFileNotFoundError").name == "graded_fail_*"
    assert lookup("unproven_container_killed").category == "insufficient_evidence"
    assert lookup("nothing_like_this") is None


def _rows(seed):
    yield from build_report(JobLayout.local(seed)).trials
    for job in sorted(p for p in SAMPLE_JOBS.iterdir() if p.is_dir() and p.name[0] != "_"):
        yield from build_report(JobLayout.local(job)).trials
    for name in dev_set.SOURCES:
        yield from dev_set.audit_source(dev_set.SOURCES[name]).values()


@pytest.fixture(scope="module")
def seed(tmp_path_factory):
    return write_job(tmp_path_factory.mktemp("seed"), "seed", seed_final_run())


def test_every_verdict_given_is_registered_with_its_category(seed):
    seen = set()
    for row in _rows(seed):
        if row.category == "passed":
            assert row.signature is None
            continue
        registered = lookup(row.signature)
        assert registered is not None, f"{row.trial}: {row.signature} is not registered"
        assert registered.category == row.category, (row.trial, row.signature, row.category)
        assert row.meaning == registered.meaning
        seen.add(registered.name)
    assert len(seen) >= 30  # the dev set, the seed and Harbor's samples use most of them


def test_every_report_carries_the_meaning_of_its_signatures(seed):
    report = build_report(JobLayout.local(seed))
    assert report.signatures
    assert set(report.signature_meanings) == set(report.signatures)
    assert all(report.signature_meanings.values())
