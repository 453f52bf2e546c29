#!/usr/bin/env bash
# Provenance manifest: one JSON beside the job's log from which a reader can repeat the run.
# The program gives what it knows (pins, images, serving, stack); this adds what only the
# Harbor host has: the config Harbor resolved for the job (saved by the preflight) and the
# compose override as written. Written atomically; kept on destroy, like the results.
#
# Inputs (environment, with defaults):
#   OUT               where the manifest goes                        (required)
#   FACTS_JSON        the program's part, a JSON object               (required)
#   RESOLVED_CONFIG   the preflight's resolved-config file            ("")
#   COMPOSE_PATH      the rendered compose override                   ("")
# Outputs (last stdout line, JSON): provenance_path, sha256
set -euo pipefail

die() { printf 'provenance: %s\n' "$*" >&2; exit 1; }
[[ -n "${OUT:-}" && "$OUT" == /* ]] || die "OUT must be an absolute path, got '${OUT:-}'"
[[ -n "${FACTS_JSON:-}" ]] || die "FACTS_JSON is empty: the component must pass it"
mkdir -p "$(dirname "$OUT")"
python3 - "$OUT" "${RESOLVED_CONFIG:-}" "${COMPOSE_PATH:-}" <<'PY'
import json, os, sys
from datetime import datetime, timezone

out, resolved, compose = sys.argv[1:4]
manifest = json.loads(os.environ["FACTS_JSON"])
manifest["created_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
try:
    manifest["harbor_config"] = json.load(open(resolved)) if resolved else None
except (OSError, ValueError) as exc:
    sys.exit(f"provenance: cannot read the resolved Harbor config {resolved}: {exc}")
try:
    manifest["compose_override"] = open(compose).read() if compose else None
except OSError as exc:
    sys.exit(f"provenance: cannot read the compose override {compose}: {exc}")
tmp = out + ".tmp"
with open(tmp, "w") as f:
    json.dump(manifest, f, indent=2, sort_keys=True)
    f.write("\n")
os.replace(tmp, out)
PY
printf '{"provenance_path": "%s", "sha256": "%s"}\n' "$OUT" "$(sha256sum "$OUT" | cut -d' ' -f1)"
