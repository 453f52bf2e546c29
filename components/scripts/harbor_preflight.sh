#!/usr/bin/env bash
# HarborJob preflight (seed: "Run the full-run preflight"): Harbor resolves the job exactly as
# the launch will (`--print-config`, same flags), and every field the stack decides is compared
# with what the stack asked for. Also refuses what print-config does not check: a missing
# dataset dir, a missing bind-mount source, and an existing job dir with another config (Harbor
# would refuse to resume it hours later, or we would mix two configs in one job). Nothing runs.
#
# Inputs (environment, with defaults):
#   HARBOR_BIN       the harbor executable in its venv              (required)
#   JOB_CONFIG       rendered job config file                       (required)
#   COMPOSE_PATH     rendered compose override file                 (required)
#   JOB_NAME         the job name the launch will use               (required)
#   JOBS_DIR         Harbor's jobs dir (results)                    (required)
#   EXPECTED         JSON list of {path, expect, default} (components/harbor_config.py)  ([])
#   RESOLVED_OUT     where the resolved config is saved   (JOBS_DIR/../logs/JOB_NAME.resolved-config.json)
# Outputs (last stdout line, JSON): resolved_config, resolved_sha256, checked_fields
set -euo pipefail

EXPECTED=${EXPECTED:-[]}
die() { printf 'harbor_preflight: %s\n' "$*" >&2; exit 1; }

for key in HARBOR_BIN JOB_CONFIG COMPOSE_PATH JOB_NAME JOBS_DIR; do
  [[ -n "${!key:-}" ]] || die "$key is empty: the component must pass it"
done
RESOLVED_OUT=${RESOLVED_OUT:-$(dirname "$JOBS_DIR")/logs/$JOB_NAME.resolved-config.json}
[[ -x "$HARBOR_BIN" ]] || die "HARBOR_BIN=$HARBOR_BIN is not executable: run the install step first"
[[ -f "$JOB_CONFIG" ]] || die "job config $JOB_CONFIG does not exist: run the configs step first"
[[ -f "$COMPOSE_PATH" ]] || die "compose override $COMPOSE_PATH does not exist: run the configs step first"
py="$(dirname "$HARBOR_BIN")/python"

resolved=$(mktemp)
trap 'rm -f "$resolved"' EXIT
HARBOR_TELEMETRY=0 timeout 120 "$HARBOR_BIN" run --config "$JOB_CONFIG" \
  --extra-docker-compose "$COMPOSE_PATH" --job-name "$JOB_NAME" --jobs-dir "$JOBS_DIR" --yes \
  --print-config >"$resolved" 2>"$resolved.err" \
  || { # Harbor prints its error, wrapped, on stdout: make it one line for the reason.
       why=$(cat "$resolved" "$resolved.err" | tr -s ' \n' ' ' | grep -o 'Error.*' | cut -c1-400)
       rm -f "$resolved.err"
       die "harbor rejected $JOB_CONFIG (${why:-no message}): fix the job settings in the stack config"; }
rm -f "$resolved.err"

checked=$(EXPECTED="$EXPECTED" JOB_DIR="$JOBS_DIR/$JOB_NAME" JOB_NAME="$JOB_NAME" \
  "$py" - "$resolved" "$COMPOSE_PATH" <<'PY'
import json, os, pathlib, sys
import yaml

resolved = json.loads(pathlib.Path(sys.argv[1]).read_text())
MISSING = object()

def show(path):
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else ("" if not out else ".") + str(step)
    return out.replace(".#len", " (count)")

def walk(value, path):
    for step in path:
        if step == "#len":
            value = len(value) if isinstance(value, list) else 0
        elif isinstance(step, int):
            value = value[step] if isinstance(value, list) and len(value) > step else MISSING
        else:
            value = value.get(step, MISSING) if isinstance(value, dict) else MISSING
        if value is MISSING:
            return MISSING
    return value

def fail(message):
    print(f"harbor_preflight: {message}", file=sys.stderr)
    sys.exit(1)

checks = json.loads(os.environ["EXPECTED"])
for check in checks:
    got = walk(resolved, check["path"])
    if got is MISSING:
        got = check["default"]
    if got != check["expect"]:
        fail(f"field {show(check['path'])} is {json.dumps(got)} in Harbor's resolved config, "
             f"but the stack config asks for {json.dumps(check['expect'])}: fix the stack config "
             "or the Harbor version")

for dataset in resolved.get("datasets", []):
    if dataset.get("path") and not pathlib.Path(dataset["path"]).is_dir():
        fail(f"dataset path {dataset['path']} does not exist on the Harbor host: run the dataset step")
override = yaml.safe_load(pathlib.Path(sys.argv[2]).read_text()) or {}
for volume in override.get("services", {}).get("main", {}).get("volumes", []):
    source = volume.split(":")[0] if isinstance(volume, str) else volume.get("source", "")
    if source.startswith("/") and not pathlib.Path(source).exists():
        fail(f"mount source {source} in {sys.argv[2]} does not exist: build the tool bundle first")

existing = pathlib.Path(os.environ["JOB_DIR"]) / "config.json"
if existing.is_file():
    old = json.loads(existing.read_text())
    ignore = {"job_name", "debug"}  # what Harbor itself ignores when it compares configs
    keys = sorted((set(old) | set(resolved)) - ignore)
    diff = [key for key in keys if old.get(key) != resolved.get(key)]
    if diff:
        fail(f"job {os.environ['JOB_NAME']} already exists in {existing.parent.parent} with a "
             f"different config (field {diff[0]}): choose another job name; results are kept")
print(len(checks))
PY
) || exit 1  # the reason is already the last stderr line
mkdir -p "$(dirname "$RESOLVED_OUT")"
cp "$resolved" "$RESOLVED_OUT"
printf '[harbor_preflight] %s fields match; resolved config saved to %s\n' "$checked" "$RESOLVED_OUT" >&2
printf '{"resolved_config": "%s", "resolved_sha256": "%s", "checked_fields": %d}\n' \
  "$RESOLVED_OUT" "$(sha256sum "$RESOLVED_OUT" | cut -d' ' -f1)" "$checked"
