"""The signature rules: loaded from `rules.yaml`, validated, compiled, and matched.

The rules are data so that a new failure mode is a YAML entry plus a test snippet, not code.
A rule file with a typo fails loudly with the rule's name and the offending key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from audit.judge.signatures import lookup
from audit.judge.verdict import OUTSIDE_CAUSES
from audit.read.evidence import SOURCES, TrialEvidence

# Beside the package's other data (audit/adjudications.seed.yaml), where the README names it.
RULES_FILE = Path(__file__).resolve().parent.parent / "rules.yaml"
MAX_EVIDENCE_LINES = 3
_MAX_LINE = 240

RuleCategory = Literal["infra", "agent_error", "verifier_timeout", "insufficient_evidence"]


class Condition(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    sources: list[str] = Field(min_length=1)
    patterns: list[str] = Field(min_length=1)
    min_matches: int = Field(default=1, ge=1)

    @field_validator("sources")
    @classmethod
    def _known_sources(cls, value: list[str]) -> list[str]:
        unknown = [s for s in value if s not in SOURCES]
        if unknown:
            raise ValueError(f"unknown source(s) {unknown}; known: {list(SOURCES)}")
        return value

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"pattern {pattern!r} is not a valid regex: {exc}") from exc
        return value


class Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z0-9_]+$")
    category: RuleCategory
    phase: Literal["environment", "agent_setup", "agent", "model", "verifier"]
    exception_types: list[str] | None = None
    reward: Literal["none", "zero"] | None = None
    all: list[Condition] = Field(default_factory=list)
    none: list[Condition] = Field(default_factory=list)
    explanation: str = Field(min_length=10)
    # `first`: tried before the built-in detectors (audit/judge/detectors/); `last`: after them.
    stage: Literal["first", "last"] = "first"
    # What the matched lines prove for an infra rule (audit/judge/verdict.py OUTSIDE_CAUSES): an
    # infra verdict without it would be dropped to insufficient_evidence by admit().
    proof: str | None = None
    @model_validator(mode="after")
    def _proof_and_provenance(self) -> Rule:
        if self.category == "infra":
            if self.proof not in OUTSIDE_CAUSES:
                raise ValueError(
                    f"an infra rule must name what its lines prove (proof: one of "
                    f"{sorted(OUTSIDE_CAUSES)}), got {self.proof!r}"
                )
            if not self.all:
                raise ValueError(
                    "an infra rule needs `all` conditions: its proof is what they match"
                )
        registered = lookup(self.name)
        if registered is None or registered.family:
            raise ValueError(
                f"signature {self.name!r} is not in the registry (audit/judge/signatures.py): "
                "register it with its category and meaning"
            )
        if registered.category != self.category:
            raise ValueError(
                f"the registry gives {self.name!r} the category {registered.category!r}, "
                f"the rule {self.category!r}"
            )
        return self


class RuleFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rules: list[Rule] = Field(min_length=1)


@dataclass(frozen=True)
class Match:
    """Where a condition matched: 'file:line' (or 'file step N') and the line's text."""

    where: str
    text: str

    def __str__(self) -> str:
        return f"{self.where}: {self.text}"


@dataclass(frozen=True)
class _Compiled:
    condition: Condition
    regex: re.Pattern[str]

    def find(self, ev: TrialEvidence) -> list[Match]:
        """Distinct matching lines across the condition's sources, up to min_matches + a few."""
        found: dict[tuple[int, int], Match] = {}
        need = max(self.condition.min_matches, MAX_EVIDENCE_LINES)
        chunks = [c for source in self.condition.sources for c in ev.source(source)]
        for index, chunk in enumerate(chunks):
            for m in self.regex.finditer(chunk.text):
                line_no = chunk.text.count("\n", 0, m.start()) + 1
                if (index, line_no) not in found:
                    found[(index, line_no)] = Match(
                        chunk.where(line_no), _line_at(chunk.text, m.start())
                    )
                if len(found) >= need:
                    break
            if len(found) >= need:
                break
        # Report in file order: the first lines tell the story.
        return [found[k] for k in sorted(found)]


@dataclass(frozen=True)
class CompiledRule:
    rule: Rule
    all: tuple[_Compiled, ...]
    none: tuple[_Compiled, ...]

    def match(self, ev: TrialEvidence, exception_type: str | None, reward: float | None):
        """The evidence lines if the rule applies to this trial, else None."""
        rule = self.rule
        if rule.exception_types is not None:
            wanted = exception_type if exception_type is not None else "none"
            if wanted not in rule.exception_types:
                return None
        if rule.reward == "none" and reward is not None:
            return None
        if rule.reward == "zero" and reward is None:
            return None
        evidence: list[Match] = []
        for cond in self.all:
            matches = cond.find(ev)
            if len(matches) < cond.condition.min_matches:
                return None
            evidence.extend(matches[:MAX_EVIDENCE_LINES])
        for cond in self.none:
            if cond.find(ev):
                return None
        return evidence


def _line_at(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    line = text[start : end if end != -1 else len(text)].strip()
    return line if len(line) <= _MAX_LINE else line[: _MAX_LINE - 3] + "..."


_LEADING_FLAGS = re.compile(r"^\(\?([aiLmsux]+)\)")


def _scoped(pattern: str) -> str:
    """`(?i)abc` -> `(?i:abc)`: leading flags scoped, so patterns can be joined with `|`."""
    m = _LEADING_FLAGS.match(pattern)
    return f"(?{m.group(1)}:{pattern[m.end() :]})" if m else f"(?:{pattern})"


def _compile(cond: Condition) -> _Compiled:
    # One alternation per condition: a single scan of each evidence text instead of one per
    # pattern (the audit's hot loop on jobs of thousands of failing trials).
    joined = "|".join(_scoped(p) for p in cond.patterns)
    return _Compiled(cond, re.compile(joined, re.MULTILINE))


_CACHE: dict[tuple[str, int], list[CompiledRule]] = {}


def load_rules(path: Path = RULES_FILE) -> list[CompiledRule]:
    """Load and compile a rules file; errors name the file and the offending rule.

    Compiled rules are immutable, so a file is parsed once per process (per modification):
    an audit of many jobs would otherwise spend more time in YAML than in its trials."""
    try:
        key = (str(Path(path).resolve()), Path(path).stat().st_mtime_ns)
    except OSError:
        key = None
    if key is not None and key in _CACHE:
        return list(_CACHE[key])
    rules = _load(path)
    if key is not None:
        _CACHE[key] = rules
    return list(rules)


def _load(path: Path) -> list[CompiledRule]:
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"cannot read rules file {path}: {exc}") from exc
    try:
        parsed = RuleFile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = list(err["loc"])
        if len(loc) >= 2 and loc[0] == "rules" and isinstance(loc[1], int):
            rules = (data or {}).get("rules") or []
            name = rules[loc[1]].get("name") if isinstance(rules[loc[1]], dict) else None
            loc[1] = f"{loc[1]} ({name})" if name else loc[1]
        where = ".".join(str(p) for p in loc)
        raise ValueError(f"{path}: {where}: {err['msg']}") from exc
    names = [r.name for r in parsed.rules]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"{path}: duplicate rule names {dupes}")
    return [
        CompiledRule(r, tuple(_compile(c) for c in r.all), tuple(_compile(c) for c in r.none))
        for r in parsed.rules
    ]
