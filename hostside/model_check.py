"""Proof that a model directory holds a complete Hugging Face checkpoint before SGLang loads it
(SGLangWorker's `-model-check`): config.json, a tokenizer, and every weight shard the index lists
(present, non-empty, and together at least the index's total_size), all readable by the
container's user. A worker that finds a missing shard only fails minutes into loading; this
fails at once, naming every problem.

create: checks `model_path` (readable by `user`, "uid:gid", when given); outputs model_path,
files, shards, bytes, index_total_size. Read-only: it changes nothing on the host.
"""

from __future__ import annotations

import json
import socket
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .step import HostError, emit, log, verb

INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
TOKENIZERS = ("tokenizer.json", "tokenizer.model", "vocab.json")


@dataclass(frozen=True)
class Inputs:
    model_path: str
    user: str | None


def _load_json(root: Path, name: str, problems: list[str]) -> Any:
    try:
        return json.loads((root / name).read_text())
    except FileNotFoundError:
        problems.append(f"{name} is missing")
    except (OSError, ValueError) as exc:
        problems.append(f"{name} is unreadable or not JSON ({exc})")
    return None


def _shards(root: Path, problems: list[str]) -> tuple[list[str], Any]:
    """The weight files the checkpoint lists, and the index's total_size (None without one)."""
    index_name = next((n for n in INDEXES if (root / n).is_file()), None)
    if index_name:
        index = _load_json(root, index_name, problems) or {}
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(weight_map, dict) or not weight_map:
            problems.append(f"{index_name} has no weight_map")
            shards: list[str] = []
        else:
            shards = sorted(set(weight_map.values()))
        total = (index.get("metadata") or {}).get("total_size") if isinstance(index, dict) else None
        return shards, total
    if (root / "model.safetensors").is_file():
        return ["model.safetensors"], None
    problems.append("no weights: neither model.safetensors.index.json nor model.safetensors")
    return [], None


def _readable_by(uid: int, gid: int, path: Path, want_exec: bool = False) -> bool:
    if uid == 0:
        return True
    st = path.stat()
    bits = (stat.S_IRUSR | (stat.S_IXUSR if want_exec else 0),
            stat.S_IRGRP | (stat.S_IXGRP if want_exec else 0),
            stat.S_IROTH | (stat.S_IXOTH if want_exec else 0))
    need = bits[0] if st.st_uid == uid else bits[1] if st.st_gid == gid else bits[2]
    return st.st_mode & need == need


def _config_and_tokenizer(root: Path, problems: list[str]) -> None:
    config = _load_json(root, "config.json", problems)
    if config is not None and not isinstance(config, dict):
        problems.append("config.json is not a JSON object")
    # tokenizer.json (fast) or a slow tokenizer's files; tokenizer_config.json in every case.
    if not (root / "tokenizer_config.json").is_file():
        problems.append("tokenizer_config.json is missing")
    if not any((root / n).is_file() for n in TOKENIZERS):
        problems.append("no tokenizer (tokenizer.json, tokenizer.model or vocab.json)")


def _shard_problems(root: Path, shards: list[str], index_total: object,
                    problems: list[str]) -> int:
    """Every shard present, not empty, and together at least the index's total; their bytes."""
    missing = [s for s in shards if not (root / s).is_file()]
    empty = [s for s in shards if (root / s).is_file() and (root / s).stat().st_size == 0]
    if missing:
        problems.append(f"{len(missing)} of {len(shards)} shard(s) missing: "
                        f"{', '.join(missing[:5])}" + (" ..." if len(missing) > 5 else ""))
    if empty:
        problems.append(f"empty shard(s): {', '.join(empty[:5])}")
    shard_bytes = sum((root / s).stat().st_size for s in shards if (root / s).is_file())
    # Each shard is its tensors plus a small header, so a truncated download shows up as less.
    if isinstance(index_total, int) and not missing and shard_bytes < index_total:
        problems.append(f"shards hold {shard_bytes} bytes, less than the index's total_size "
                        f"{index_total}: a download was cut short")
    return shard_bytes


def _access_problems(root: Path, user: str, shards: list[str], problems: list[str]) -> None:
    """The directory and the files the server reads, readable by the container's uid:gid."""
    try:
        uid, gid = (int(x) for x in user.split(":", 1))
    except ValueError:
        raise HostError(f"{root}: user {user!r} is not uid:gid") from None
    if not _readable_by(uid, gid, root, want_exec=True):
        problems.append(f"the directory is not readable by {user} (the container's user)")
        return
    names = ["config.json", "tokenizer_config.json", *shards]
    unreadable = [n for n in names
                  if (root / n).is_file() and not _readable_by(uid, gid, root / n)]
    if unreadable:
        problems.append(f"not readable by {user} (the container's user): "
                        f"{', '.join(unreadable[:5])}")


def check_checkpoint(root: Path, user: str | None) -> dict[str, Any]:
    """The checkpoint's outputs, or HostError naming every problem at once."""
    problems: list[str] = []
    _config_and_tokenizer(root, problems)
    shards, index_total = _shards(root, problems)
    shard_bytes = _shard_problems(root, shards, index_total, problems)
    if user:
        _access_problems(root, user, shards, problems)
    if problems:
        raise HostError(f"{root}: incomplete checkpoint: " + "; ".join(problems))
    files = sum(1 for p in root.rglob("*") if p.is_file())
    return {"model_path": str(root), "files": files, "shards": len(shards),
            "bytes": shard_bytes, "index_total_size": index_total}


@verb(Inputs)
def create(inputs: Inputs) -> None:
    root = Path(inputs.model_path)
    if not root.is_dir():
        raise HostError(f"{root} is not a directory on {socket.gethostname()}: copy the "
                        "checkpoint there or fix model.path")
    log("model_check", f"checking {root}")
    emit(check_checkpoint(root, inputs.user))
