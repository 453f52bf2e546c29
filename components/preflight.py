"""HarborJob preflight: Harbor resolves the job as the launch will, and the stack's fields match.

Seed step "Run the full-run preflight". This file is shipped to the Harbor host:
`components/scripts/harbor_preflight.sh` inlines it (a `# benchstack:include` line) and runs it
with the Harbor venv's python, which has PyYAML for the compose override. It imports nothing
from the project and runs standalone, its inputs in the environment:

  HARBOR_BIN     the harbor executable in its venv                           (required)
  JOB_CONFIG     rendered job config file                                    (required)
  COMPOSE_PATH   rendered compose override file                              (required)
  JOB_NAME       the job name the launch will use                            (required)
  JOBS_DIR       Harbor's jobs dir (results)                                 (required)
  EXPECTED       JSON list of {path, expect, default} (harbor_config.py)     ([])
  RESOLVED_OUT   where the resolved config is saved
                 (JOBS_DIR/../logs/JOB_NAME.resolved-config.json)

`harbor run --print-config` with the launch's flags resolves the job (nothing runs), then every
field the stack decides is compared with what the stack asked for; a field Harbor's output
leaves out counts as Harbor's default. Also refused, as print-config does not check them: a
missing dataset dir, a missing bind-mount source, and an existing job dir with another config
(Harbor would refuse to resume it hours later, or two configs would mix in one job).

Progress goes to stderr; the result is ONE JSON object on the last stdout line:
{"resolved_config", "resolved_sha256", "checked_fields"}. On failure the last stderr line
(`harbor_preflight: ...`) says what to change and the exit code is 1.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

HARBOR_TIMEOUT_S = 120
# What Harbor itself ignores when it compares a job dir's config with a new one.
RESUME_IGNORED = frozenset({"job_name", "debug"})
REQUIRED = ("HARBOR_BIN", "JOB_CONFIG", "COMPOSE_PATH", "JOB_NAME", "JOBS_DIR")


class PreflightError(Exception):
    """A refusal whose message is the one line the user reads (after `harbor_preflight: `)."""


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()
Step = str | int


def show(path: Sequence[Step]) -> str:
    """A field path as the user reads it: agents[0].kwargs.api_base, datasets (count)."""
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else ("." if out else "") + str(step)
    return out.replace(".#len", " (count)")


def walk(value: object, path: Sequence[Step]) -> object:
    """The value at `path` (`#len` is the length of the list there), or MISSING."""
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


def field_mismatches(resolved: Mapping, checks: Sequence[Mapping]) -> list[str]:
    """Every checked field whose resolved value (or Harbor's default, when it is left out)
    differs from what the stack asks for, as one sentence each."""
    found = []
    for check in checks:
        got = walk(resolved, check["path"])
        if got is MISSING:
            got = check.get("default")
        if got != check["expect"]:
            found.append(
                f"field {show(check['path'])} is {json.dumps(got)} in Harbor's resolved config, "
                f"but the stack config asks for {json.dumps(check['expect'])}: fix the stack "
                "config or the Harbor version"
            )
    return found


def missing_datasets(resolved: Mapping, is_dir: Callable[[str], bool] = os.path.isdir) -> list[str]:
    return [
        f"dataset path {dataset['path']} does not exist on the Harbor host: run the dataset step"
        for dataset in resolved.get("datasets") or []
        if isinstance(dataset, dict) and dataset.get("path") and not is_dir(dataset["path"])
    ]


def mount_sources(override: Mapping | None) -> list[str]:
    """The absolute host paths the compose override bind-mounts into the main service."""
    services = (override or {}).get("services") or {}
    volumes = (services.get("main") or {}).get("volumes") or []
    sources = []
    for volume in volumes:
        source = volume.split(":")[0] if isinstance(volume, str) else volume.get("source", "")
        if isinstance(source, str) and source.startswith("/"):
            sources.append(source)
    return sources


def missing_mounts(
    override: Mapping | None, compose_path: str,
    exists: Callable[[str], bool] = os.path.exists,
) -> list[str]:
    return [
        f"mount source {source} in {compose_path} does not exist: build the tool bundle first"
        for source in mount_sources(override)
        if not exists(source)
    ]


def config_drift(old: Mapping, new: Mapping) -> list[str]:
    """The top-level fields an existing job dir's config differs in (what Harbor compares)."""
    keys = sorted((set(old) | set(new)) - RESUME_IGNORED)
    return [key for key in keys if old.get(key) != new.get(key)]


def harbor_reason(output: str, limit: int = 400) -> str:
    """Harbor's error, which it prints wrapped (and boxed) on stdout, as one line."""
    flat = re.sub(r"[ \n]+", " ", output)
    start = flat.find("Error")
    return flat[start:][:limit].strip() if start >= 0 else ""


def check(
    resolved: Mapping,
    checks: Sequence[Mapping],
    *,
    override: Mapping | None,
    compose_path: str,
    job_name: str,
    existing: Mapping | None,
    jobs_dir: str,
    is_dir: Callable[[str], bool] = os.path.isdir,
    exists: Callable[[str], bool] = os.path.exists,
) -> None:
    """Every refusal, in the order the user should fix them; the first one is raised."""
    problems = [
        *field_mismatches(resolved, checks),
        *missing_datasets(resolved, is_dir),
        *missing_mounts(override, compose_path, exists),
    ]
    if existing is not None:
        drift = config_drift(existing, resolved)
        if drift:
            problems.append(
                f"job {job_name} already exists in {jobs_dir} with a different config (field "
                f"{drift[0]}): choose another job name; results are kept"
            )
    for problem in problems[1:]:
        print(f"[harbor_preflight] also: {problem}", file=sys.stderr, flush=True)
    if problems:
        more = f" (and {len(problems) - 1} more above)" if len(problems) > 1 else ""
        raise PreflightError(problems[0] + more)


def inputs(env: Mapping[str, str]) -> dict[str, str]:
    values = {}
    for key in REQUIRED:
        if not env.get(key):
            raise PreflightError(f"{key} is empty: the component must pass it")
        values[key] = env[key]
    jobs_dir = values["JOBS_DIR"]
    values["EXPECTED"] = env.get("EXPECTED") or "[]"
    values["RESOLVED_OUT"] = env.get("RESOLVED_OUT") or str(
        Path(jobs_dir).parent / "logs" / f"{values['JOB_NAME']}.resolved-config.json"
    )
    return values


def parse_checks(text: str) -> list[dict]:
    try:
        checks = json.loads(text)
    except ValueError as exc:
        raise PreflightError(
            f"EXPECTED is not JSON ({exc}): the component must pass a list"
        ) from None
    if not isinstance(checks, list) or not all(
        isinstance(c, dict) and isinstance(c.get("path"), list) and "expect" in c for c in checks
    ):
        raise PreflightError("EXPECTED must be a JSON list of {path, expect, default}")
    return checks


def resolve(values: Mapping[str, str]) -> bytes:
    """Harbor's resolved job config (JSON on stdout), with exactly the launch's flags."""
    argv = [values["HARBOR_BIN"], "run", "--config", values["JOB_CONFIG"],
            "--extra-docker-compose", values["COMPOSE_PATH"], "--job-name", values["JOB_NAME"],
            "--jobs-dir", values["JOBS_DIR"], "--yes", "--print-config"]
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=HARBOR_TIMEOUT_S,
                              stdin=subprocess.DEVNULL,
                              env={**os.environ, "HARBOR_TELEMETRY": "0"})
    except subprocess.TimeoutExpired:
        raise PreflightError(
            f"harbor run --print-config did not finish in {HARBOR_TIMEOUT_S}s: check the Harbor "
            f"install at {values['HARBOR_BIN']}"
        ) from None
    if proc.returncode != 0:
        why = harbor_reason((proc.stdout + proc.stderr).decode(errors="replace"))
        raise PreflightError(
            f"harbor rejected {values['JOB_CONFIG']} ({why or 'no message'}): fix the job "
            "settings in the stack config"
        )
    return proc.stdout


def load_yaml(path: Path) -> Mapping | None:
    import yaml  # the Harbor venv's (Harbor depends on PyYAML)

    value = yaml.safe_load(path.read_text())
    return value if isinstance(value, dict) else None


def run(env: Mapping[str, str]) -> dict:
    values = inputs(env)
    checks = parse_checks(values["EXPECTED"])
    raw = resolve(values)
    try:
        resolved = json.loads(raw)
    except ValueError:
        raise PreflightError(
            f"harbor run --print-config printed no JSON config: is {values['HARBOR_BIN']} "
            "Harbor 0.21 or newer?"
        ) from None
    existing_file = Path(values["JOBS_DIR"]) / values["JOB_NAME"] / "config.json"
    existing = None
    if existing_file.is_file():
        try:
            existing = json.loads(existing_file.read_text())
        except ValueError:
            raise PreflightError(
                f"{existing_file} is not JSON: choose another job name (results are kept)"
            ) from None
    check(
        resolved, checks,
        override=load_yaml(Path(values["COMPOSE_PATH"])),
        compose_path=values["COMPOSE_PATH"],
        job_name=values["JOB_NAME"],
        existing=existing,
        jobs_dir=values["JOBS_DIR"],
    )
    out = Path(values["RESOLVED_OUT"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(raw)
    print(f"[harbor_preflight] {len(checks)} fields match; resolved config saved to {out}",
          file=sys.stderr, flush=True)
    return {
        "resolved_config": str(out),
        "resolved_sha256": hashlib.sha256(raw).hexdigest(),
        "checked_fields": len(checks),
    }


def main() -> int:
    try:
        result = run(os.environ)
    except PreflightError as exc:
        print(f"harbor_preflight: {exc}", file=sys.stderr, flush=True)
        return 1
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
