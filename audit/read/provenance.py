"""The provenance manifest the Pulumi program writes beside the job: what a reader needs to
repeat the run (Harbor wheel, dataset commit, images, serving, the resolved config).

Every key but `schema` is optional to the audit: it shows what the manifest has and says
nothing about what it lacks, so an older or partial manifest still renders.
"""

from __future__ import annotations

import json
from pathlib import Path

from contracts.outputs import PROVENANCE_SCHEMA

FILE_NAME = "provenance.json"
# Where `python -m audit archive` puts it; an audit of the archived prefix picks it up there.
ARCHIVED = f"_audit/{FILE_NAME}"


class ProvenanceError(ValueError):
    """The manifest is unreadable or not a benchstack provenance manifest."""


def parse(text: str, where: str) -> dict:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProvenanceError(f"provenance manifest {where} is not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ProvenanceError(
            f"provenance manifest {where} is a JSON {type(data).__name__}, not an object"
        )
    schema = data.get("schema")
    if schema != PROVENANCE_SCHEMA:
        got = 'has no "schema" key' if schema is None else f"has schema {schema!r}"
        raise ProvenanceError(
            f"provenance manifest {where} {got}; expected {PROVENANCE_SCHEMA!r} (is it the "
            "provenance.json the benchstack program wrote?)"
        )
    return data


def load(path: Path) -> dict:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ProvenanceError(
            f"cannot read provenance manifest {path}: {exc.strerror or exc}"
        ) from exc
    return parse(text, str(path))


def dumps(data: dict) -> str:
    """The manifest as written beside a report: sorted keys, so the same manifest gives the
    same bytes (the archive then skips it on a second run)."""
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def _get(data: dict, *keys: str) -> object:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)  # type: ignore[assignment]
    return data


def key_facts(data: dict) -> list[tuple[str, str]]:
    """The facts a reader looks for first, in order; only those the manifest has."""
    facts: list[tuple[str, object]] = [
        ("stack", _get(data, "stack")),
        ("created at", _get(data, "created_at")),
        ("Harbor version", _get(data, "harbor", "version")),
        ("Harbor wheel sha256", _get(data, "harbor", "wheel_sha256")),
        ("dataset repo", _get(data, "dataset", "repo")),
        ("dataset commit", _get(data, "dataset", "commit")),
        ("dataset path", _get(data, "dataset", "path")),
        ("dataset task count", _get(data, "dataset", "task_count")),
        ("SGLang image id", _get(data, "serving", "image_id")),
        ("model name", _get(data, "serving", "model_name")),
        ("model path", _get(data, "serving", "model_path")),
        ("job", _get(data, "job", "name")),
        ("job dir", _get(data, "job", "dir")),
    ]
    workers = _get(data, "serving", "workers")
    if isinstance(workers, list) and workers:
        urls = [str(w.get("url")) for w in workers if isinstance(w, dict) and w.get("url")]
        facts.append(
            ("serving workers", f"{len(workers)}: {', '.join(urls)}" if urls else str(len(workers)))
        )
    images = _get(data, "task_images")
    if isinstance(images, dict) and images:
        facts.append(("task images", f"{len(images)} pinned by digest"))
    reruns = _get(data, "reruns")
    if isinstance(reruns, list) and reruns:
        names = [str(r.get("name")) for r in reruns if isinstance(r, dict) and r.get("name")]
        facts.append(("reruns", ", ".join(names) or str(len(reruns))))
    return [(k, str(v)) for k, v in facts if v not in (None, "", [], {})]
