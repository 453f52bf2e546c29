"""Markdown report: the summary, categories, adjudications, reruns and every non-passing trial."""

from __future__ import annotations

import audit.output.render.time_plane as time_plane
from audit.output.render.text import (
    board_cell,
    families,
    headline,
    merge_headline,
    policy_cell,
    policy_detail,
    reward,
    trial_reached,
)
from audit.read import provenance as prov
from audit.score.merge import Merge
from audit.score.report import Report
from audit.score.rows import TrialRow


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(report: Report) -> str:
    out = [f"# Audit of `{report.job.name}`", ""]
    out += ["| | |", "|---|---|"]
    out += [f"| {k} | {_cell(v)} |" for k, v in headline(report)]
    out += ["", f"> **Scoring rule.** {report.scoring_rule}", ""]
    out += _categories(report)
    out += ["", "## Adjudications", "", *_adjudications(report)]
    out += ["", "## Rerun (infra)", "", *_rerun(report)]
    out += ["", "## Where the board and the audit disagree", "", *_disagreements(report)]
    out += ["", *time_plane.markdown(report.trials)]
    out += ["", "## Trials that did not pass cleanly", "", *_trials(report)]
    if report.merge:
        out += ["", *_merge(report.merge, report.convention)]
    if report.provenance is not None:
        out += ["", *_provenance(report.provenance)]
    if report.problems:
        out += ["", "## Evidence problems", ""]
        out += [f"- {_cell(p)}" for p in report.problems]
    return "\n".join(out).rstrip() + "\n"


def _categories(report: Report) -> list[str]:
    out = ["## Outcomes by category", "", "| category | trials |", "|---|---:|"]
    out += [f"| {c} | {n} |" for c, n in report.categories.items()]
    if report.signatures:
        out += ["", "## Signatures", "", "| signature | trials | meaning |", "|---|---:|---|"]
        out += [
            f"| {s} | {n} | {_cell(report.signature_meanings.get(s, ''))} |"
            for s, n in report.signatures.items()
        ]
    return out


def _adjudications(report: Report) -> list[str]:
    if not report.adjudications:
        return ["None: the adjusted scores apply the audit's verdicts alone."]
    return ["| task | decision | raw outcome | reason |", "|---|---|---|---|"] + [
        f"| {_cell(a.task)} | {a.decision} | {_cell(', '.join(a.raw_outcome))} | "
        f"{_cell(a.reason)} |"
        for a in report.adjudications
    ]


def _rerun(report: Report) -> list[str]:
    if not report.rerun:
        return ["No trial was classified infra."]
    return [f"- `{t}`" for t in report.rerun] + [
        "", "Harbor task filters:", "", "```", " ".join(report.rerun_args), "```"]


def _disagreements(report: Report) -> list[str]:
    if not report.disagreements:
        return ["None: the board counts exactly the trials the audit judges on the model."]
    return ["| trial | task | exception | category | board | audit |",
            "|---|---|---|---|---|---|"] + [
        f"| {_cell(d.trial)} | {_cell(d.task)} | {d.exception or ''} | {d.category} | "
        f"{_cell(d.board)} | {_cell(d.audit)} |" for d in report.disagreements]


def _trials(report: Report) -> list[str]:
    rows = [t for t in report.trials if t.category != "passed" or t.adjudication]
    if not rows:
        return ["Every trial passed."]
    out = [
        "| task | trial | reward | exception | category | signature | model reached "
        "| counted as | board | Harbor 0.26 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    out += [
        f"| {_cell(t.task)} | {_cell(t.trial)} | {reward(t.reward)} | "
        f"{t.exception or ''} | {t.category} | {t.signature or ''} | "
        f"{t.model_reached} | {t.counted_as} | {_cell(board_cell(t))} | {policy_cell(t)} |"
        for t in rows
    ]
    out.append("")
    for t in rows:
        out += _trial(t)
    return out


def _trial(t: TrialRow) -> list[str]:
    out = [f"### {t.trial}", "", f"*{t.category}* / `{t.signature}`: {t.explanation}", ""]
    out += [f"Model reached: {_cell(trial_reached(t.model_reached_detail))}", ""]
    out += [f"Evidence: {_cell(families(t))}", ""]
    if t.harbor_policy is not None:
        out += [_cell(policy_detail(t)), ""]
    if t.adjudication:
        adj = t.adjudication
        out += [f"**Adjudicated {adj['decision']}:** {adj['reason']}", ""]
    if t.evidence:
        out += ["```text", *t.evidence, "```", ""]
    return out


def _merge(m: Merge, convention: str) -> list[str]:
    out = ["## Merged with reruns", "", f"> **Merge rule.** {m.rule}", ""]
    out += ["| | |", "|---|---|"]
    out += [f"| {k} | {_cell(v)} |" for k, v in merge_headline(m, convention)]
    out += ["", "### Attempts per task", ""]
    out += ["| task | attempts (job/trial category, reward) | merged outcome | counted as |"]
    out += ["|---|---|---|---|"]
    for t in m.tasks:
        chain = "<br>".join(
            f"{i}. {_cell(a.job)}/{_cell(a.trial)} **{a.category}** (reward {reward(a.reward)}, "
            f"{a.status})"
            for i, a in enumerate(t.attempts, 1)
        )
        out.append(f"| {_cell(t.task)} | {chain} | {t.outcome} | {t.counted_as} |")
    several = [t for t in m.tasks if len(t.attempts) > 1]
    if several:
        out += ["", "### Every attempt of the tasks with more than one", ""]
        for t in several:
            out += [f"#### {t.task}", ""]
            for i, a in enumerate(t.attempts, 1):
                out += [
                    f"{i}. `{a.job}` / `{a.trial}`: *{a.category}* / `{a.signature or '-'}`, "
                    f"reward {reward(a.reward)}, {a.status}: {a.explanation}",
                    "",
                ]
                if a.evidence:
                    out += ["```text", *a.evidence, "```", ""]
    if m.problems:
        out += ["", "### Merge problems", ""]
        out += [f"- {_cell(p)}" for p in m.problems]
    return out


def _provenance(data: dict) -> list[str]:
    out = ["## Provenance", ""]
    facts = prov.key_facts(data)
    if facts:
        out += ["| | |", "|---|---|"]
        out += [f"| {k} | {_cell(v)} |" for k, v in facts]
        out.append("")
    out += ["<details><summary>Full manifest</summary>", "", "```json"]
    out += [prov.dumps(data).rstrip(), "```", "", "</details>"]
    return out
