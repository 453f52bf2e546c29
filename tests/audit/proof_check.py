"""Check a verdict's proof against the files it names: is the quoted line really there?

A proof's `where` is relative to the trial dir (`file:line`, `file step N`, `file <JSON path>`,
`../<job file>`, `trial dir listing`); its `quote` is verbatim from that file, possibly cut
with "..." (audit/judge/verdict.py short()). JSON files are compared by their content: every string,
and every `key: value` of a scalar, as the audit quotes structural facts that way; result.json
also as `exception_type: exception_message`, which is how Harbor prints the exception.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

_ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])")
LISTING = "trial dir listing"


def _flatten(node: object, out: list[str], key: str | None = None) -> None:
    if isinstance(node, dict):
        info = node.get("exception_type"), node.get("exception_message")
        if isinstance(info[0], str):
            out.append(f"{info[0]}: {info[1] or ''}")
        for k, v in node.items():
            _flatten(v, out, str(k))
    elif isinstance(node, list):
        for v in node:
            _flatten(v, out, key)
    else:
        text = (
            "null" if node is None else str(node).lower() if isinstance(node, bool) else str(node)
        )
        out.append(text)
        if key is not None:
            out.append(f"{key}: {text}")


def file_text(job: Path, trial: str, where: str) -> str | None:
    """The searchable text of the file a proof names, or None if there is no such file."""
    if where == LISTING:
        base = job / trial
        return "\n".join(p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file())
    base, rel = (job, where[3:]) if where.startswith("../") else (job / trial, where)
    name = re.split(r"[ :]", rel, maxsplit=1)[0]
    path = base / name
    if not path.is_file():
        return None
    raw = path.read_text(errors="replace")
    parts: list[str] = []
    try:
        _flatten(json.loads(raw), parts)
    except ValueError:
        for line in raw.splitlines():
            try:
                _flatten(json.loads(line), parts)
            except ValueError:
                parts.append(line)
    return _ANSI.sub("", "\n".join(parts))


def quoted_in_file(job: Path, trial: str, where: str, quote: str) -> bool:
    text = file_text(job, trial, where)
    if text is None:
        return False
    if where == LISTING:
        cut = quote.endswith("...")
        names = re.sub(r" \(\+\d+\)$", "", quote[:-3] if cut else quote).split(", ")
        if cut:  # the last name was cut short with the line
            names = names[:-1]
        return bool(names) and all(n in text.splitlines() for n in names)
    wanted = quote[:-3] if quote.endswith("...") else quote
    return " ".join(wanted.split()) in " ".join(text.split())
