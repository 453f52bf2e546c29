#!/usr/bin/env bash
# Checks that a model directory holds a complete Hugging Face checkpoint before SGLang loads it:
# config.json, a tokenizer, and every weight shard the index lists (present, non-empty, and
# together at least the index's total_size), all readable by the container's user.
# A worker that finds a missing shard only fails minutes into loading; this fails at once.
#
# Inputs (environment):
#   MODEL_PATH   the checkpoint directory on this host (required)
#   MODEL_USER   "uid:gid" the container runs as; files must be readable by it (default: unset)
# Output: {"model_path", "files", "shards", "bytes", "index_total_size"} on the last stdout line.
# Read-only: it changes nothing on the host. Needs python3 (stdlib only).
set -euo pipefail

die() { printf 'model_check: %s\n' "$*" >&2; exit 1; }
[[ -n "${MODEL_PATH:-}" ]] || die "MODEL_PATH is empty: set it to the checkpoint directory"
[[ -d "$MODEL_PATH" ]] || die "MODEL_PATH=$MODEL_PATH is not a directory on $(hostname): copy the checkpoint there or fix model.path"
command -v python3 >/dev/null || die "python3 not found on $(hostname): install python3"

printf '[model_check] checking %s\n' "$MODEL_PATH" >&2
MODEL_PATH=$MODEL_PATH MODEL_USER=${MODEL_USER:-} python3 - <<'PY'
import json, os, stat, sys
from pathlib import Path

root = Path(os.environ["MODEL_PATH"])
user = os.environ.get("MODEL_USER", "")
problems = []

def fail(message):
    print(f"model_check: {root}: {message}", file=sys.stderr)
    sys.exit(1)

def load_json(name):
    path = root / name
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        problems.append(f"{name} is missing")
    except (OSError, ValueError) as exc:
        problems.append(f"{name} is unreadable or not JSON ({exc})")
    return None

config = load_json("config.json")
if config is not None and not isinstance(config, dict):
    problems.append("config.json is not a JSON object")

# tokenizer.json (fast) or a slow tokenizer's files; tokenizer_config.json in every case.
if not (root / "tokenizer_config.json").is_file():
    problems.append("tokenizer_config.json is missing")
if not any((root / n).is_file() for n in ("tokenizer.json", "tokenizer.model", "vocab.json")):
    problems.append("no tokenizer (tokenizer.json, tokenizer.model or vocab.json)")

index_total = None
index_name = next((n for n in ("model.safetensors.index.json", "pytorch_model.bin.index.json")
                   if (root / n).is_file()), None)
if index_name:
    index = load_json(index_name) or {}
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        problems.append(f"{index_name} has no weight_map")
        shards = []
    else:
        shards = sorted(set(weight_map.values()))
    index_total = (index.get("metadata") or {}).get("total_size") if isinstance(index, dict) else None
elif (root / "model.safetensors").is_file():
    shards = ["model.safetensors"]
else:
    problems.append("no weights: neither model.safetensors.index.json nor model.safetensors")
    shards = []

missing = [s for s in shards if not (root / s).is_file()]
empty = [s for s in shards if (root / s).is_file() and (root / s).stat().st_size == 0]
if missing:
    problems.append(f"{len(missing)} of {len(shards)} shard(s) missing: {', '.join(missing[:5])}"
                    + (" ..." if len(missing) > 5 else ""))
if empty:
    problems.append(f"empty shard(s): {', '.join(empty[:5])}")
shard_bytes = sum((root / s).stat().st_size for s in shards if (root / s).is_file())
# Each shard is its tensors plus a small header, so a truncated download shows up as less.
if isinstance(index_total, int) and not missing and shard_bytes < index_total:
    problems.append(f"shards hold {shard_bytes} bytes, less than the index's total_size "
                    f"{index_total}: a download was cut short")

if user:
    try:
        uid, gid = (int(x) for x in user.split(":", 1))
    except ValueError:
        fail(f"MODEL_USER={user!r} is not uid:gid")
    def readable(path, want_exec=False):
        st = path.stat()
        bits = (stat.S_IRUSR | (stat.S_IXUSR if want_exec else 0),
                stat.S_IRGRP | (stat.S_IXGRP if want_exec else 0),
                stat.S_IROTH | (stat.S_IXOTH if want_exec else 0))
        if uid == 0:
            return True
        need = bits[0] if st.st_uid == uid else bits[1] if st.st_gid == gid else bits[2]
        return st.st_mode & need == need
    if not readable(root, want_exec=True):
        problems.append(f"the directory is not readable by {user} (the container's user)")
    else:
        names = ["config.json", "tokenizer_config.json", *shards]
        unreadable = [n for n in names if (root / n).is_file() and not readable(root / n)]
        if unreadable:
            problems.append(f"not readable by {user} (the container's user): "
                            f"{', '.join(unreadable[:5])}")

if problems:
    fail("incomplete checkpoint: " + "; ".join(problems))

files = sum(1 for p in root.rglob("*") if p.is_file())
print(json.dumps({"model_path": str(root), "files": files, "shards": len(shards),
                  "bytes": shard_bytes, "index_total_size": index_total}))
PY
