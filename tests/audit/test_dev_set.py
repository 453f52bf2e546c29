"""The audit against an expert, on real job dirs from other people's runs (the dev set).

`../shared/data/real-jobs/` (beside the repository; a read-only copy in CI) holds real Harbor
job dirs from two public repositories and `expert-labels.json`, an expert's category for every
non-passing trial (and some passes). The data is read in place, never copied into the repo.

Two things are asserted: agreement with the expert of at least 95%, and not one model failure
excused (an expert `agent_error`/`agent_timeout` that the audit calls `infra`,
`verifier_timeout` or `cancelled` would raise the adjusted score on a failure of the model).
The agreement and every disagreement are printed (`pytest -s`), so a change that trades one
trial for another shows which.
"""

from __future__ import annotations

import pytest

from audit.output.report import TrialRow
from tests.audit import dev_set
from tests.audit.dev_set import DEV_SET, EXCUSES, LABELS, MODEL_FAILURES
from tests.audit.proof_check import quoted_in_file

MIN_AGREEMENT = 0.95


@pytest.fixture(scope="module")
def audited() -> dict[str, TrialRow]:
    if not LABELS.is_file():
        pytest.fail(
            f"the dev set is missing: {DEV_SET} (expected beside the repository, with "
            "expert-labels.json); it is test data, not optional"
        )
    return dev_set.audit_jobs(dev_set.job_dirs())


@pytest.fixture(scope="module")
def labels() -> dict[str, dict[str, str]]:
    return dev_set.labels()


def test_agreement_with_the_expert(audited, labels):
    disagreements = []
    for key, label in sorted(labels.items()):
        row = audited.get(key)
        got = row.category if row else "not audited"
        if got != label["category"]:
            disagreements.append(
                f"  {key}: expert {label['category']}, audit {got} "
                f"({row.signature if row else '-'}) -- expert: {label['why'][:120]}"
            )
    agreement = 1 - len(disagreements) / len(labels)
    print(
        f"\ndev set: {len(labels) - len(disagreements)}/{len(labels)} labelled trials agree "
        f"({100 * agreement:.1f}%), {len(audited)} trials audited"
    )
    print("\n".join(disagreements) or "  no disagreement")
    assert agreement >= MIN_AGREEMENT, "\n".join(disagreements)


def test_no_model_failure_is_excused(audited, labels):
    excused = [
        f"{key}: expert {label['category']}, audit {audited[key].category} "
        f"({audited[key].signature})"
        for key, label in labels.items()
        if label["category"] in MODEL_FAILURES
        and key in audited
        and audited[key].category in EXCUSES
    ]
    assert excused == []


def test_every_labelled_trial_is_audited_and_every_infra_names_its_evidence(audited, labels):
    assert set(labels) <= set(audited)
    for key, row in audited.items():
        if row.category in ("infra", "cancelled"):
            assert row.evidence, f"{key}: {row.signature} without evidence"
            # The decisive lines carry the file they were read from.
            assert all(":" in line for line in row.evidence), (key, row.evidence)
            # And the proof quotes what really is in that file.
            repo, job, trial = key.split("/")
            assert row.proof, key
            for p in row.proof:
                assert quoted_in_file(DEV_SET / repo / job, trial, p.where, p.quote), (key, p)
