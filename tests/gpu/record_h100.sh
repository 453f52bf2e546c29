#!/usr/bin/env bash
# Records the GPU fixtures on the device machine (one H100, PyTorch, nvidia-smi; no Docker):
# nvidia-smi idle and busy, and the gpu_check step's runs, under $OUT (8 files at most). Run it
# from the repository root through the device tool, e.g. `bash tests/gpu/record_h100.sh`
# (tests/gpu/record_h100.py says what each file is and where it goes in tests/gpu/fixtures).
set -euo pipefail
: "${OUT:?OUT must name the folder the recordings are written to}"
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
command -v nvidia-smi >/dev/null || { echo "record_h100: no nvidia-smi on this machine" >&2; exit 1; }
nvidia-smi -L >&2
timeout 900 python3 tests/gpu/record_h100.py "$OUT"
ls -l "$OUT" "$OUT/idle" "$OUT/busy" >&2
