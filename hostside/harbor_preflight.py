"""HarborJob preflight: Harbor resolves the job as the launch will, and the stack's fields match.

Seed step "Run the full-run preflight". `harbor run --print-config` with the launch's flags
resolves the job (nothing runs), then every field the stack decides (`expected`: a list of
{path, expect, default} from components/harbor_config.py) is compared with what the stack asked
for; a field Harbor's output leaves out counts as Harbor's default. Also refused, as
print-config does not check them: a missing dataset dir, a missing bind-mount source, and an
existing job dir with another config (Harbor would refuse to resume it hours later, or two
configs would mix in one job). Where the version has it (0.26.0, contracts/harbor_profiles.py),
Harbor then checks the job itself with `harbor run --dry-run` and the same flags: the
config strictly (an unknown key is refused, which print-config lets through), the agent's
kwargs against its options, the endpoint and that the key's variable is set (never the key
itself: it stays with the launch), the environment's own preflight and every task's metadata,
running nothing.

create: the checks; Harbor's resolved config is saved to `resolved_out` (the job layout's
place for it, contracts/jobdir.py). Outputs: resolved_config, resolved_sha256,
checked_fields, dry_run (null, or Harbor's trial count and warnings). The compose override is
read with the Harbor venv's python (it has PyYAML: the host's python3 may not).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from contracts import harbor_profiles, jobdir

from .harbor import compose_flags, harbor_env
from .step import HostError, emit, log, verb

NAME = "harbor_preflight"
HARBOR_TIMEOUT_S = 120
# "Dry run OK — 3 trial(s); nothing was run."
DRY_RUN_TRIALS = re.compile(r"Dry run OK\W+(\d+) trial")
# The compose override as JSON, read by the Harbor venv's python (PyYAML).
YAML_TO_JSON = (
    "import json, sys, yaml; "
    "print(json.dumps(yaml.safe_load(open(sys.argv[1])), default=str))"
)


@dataclass(frozen=True)
class Inputs:
    harbor_bin: str
    job_config: str
    compose_path: str
    job_name: str
    jobs_dir: str
    # [{path, expect, default}] (components/harbor_config.py preflight_expectations)
    expected: list[Any]
    # Where Harbor's resolved config is saved (jobdir.resolved_config).
    resolved_out: str
    # `harbor run`'s flags beside the config, as the launch passes them.
    harbor_flags: list[str]
    # Its profile says which checks Harbor makes itself (contracts/harbor_profiles.py).
    harbor_version: str


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()
Step = Union[str, int]


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


def config_drift(old: Mapping, new: Mapping,
                 ignored: frozenset = harbor_profiles.PROFILES["0.21.0"].resume_ignored,
                 ) -> list[str]:
    """The top-level fields an existing job dir's config differs in (what Harbor compares:
    all but the fields its version ignores)."""
    keys = sorted((set(old) | set(new)) - ignored)
    return [key for key in keys if old.get(key) != new.get(key)]


# Where Harbor's own words start in what it prints (wrapped, boxed, after a traceback).
REASON_MARKERS = ("Dry run failed", "Error")


def harbor_reason(output: str, limit: int = 400) -> str:
    """Harbor's error, which it prints wrapped (and boxed) on stdout or stderr, as one line."""
    flat = re.sub(r"[ \n]+", " ", output)
    starts = [i for i in (flat.find(marker) for marker in REASON_MARKERS) if i >= 0]
    return flat[min(starts):][:limit].strip() if starts else ""


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
    ignored: frozenset = harbor_profiles.PROFILES["0.21.0"].resume_ignored,
) -> None:
    """Every refusal, in the order the user should fix them; the first one is raised."""
    problems = [
        *field_mismatches(resolved, checks),
        *missing_datasets(resolved, is_dir),
        *missing_mounts(override, compose_path, exists),
    ]
    if existing is not None:
        drift = config_drift(existing, resolved, ignored)
        if drift:
            problems.append(
                f"job {job_name} already exists in {jobs_dir} with a different config (field "
                f"{drift[0]}): choose another job name; results are kept"
            )
    for problem in problems[1:]:
        log(NAME, f"also: {problem}")
    if problems:
        more = f" (and {len(problems) - 1} more above)" if len(problems) > 1 else ""
        raise HostError(problems[0] + more)


def parse_checks(checks: object) -> list[dict]:
    if not isinstance(checks, list) or not all(
        isinstance(c, dict) and isinstance(c.get("path"), list) and "expect" in c for c in checks
    ):
        raise HostError("expected must be a JSON list of {path, expect, default}")
    return checks


def venv_python(harbor_bin: str) -> str:
    """The python of Harbor's venv, beside its harbor."""
    python = str(Path(harbor_bin).parent / "python")
    if not os.access(python, os.X_OK):
        raise HostError(f"{python} is not executable: harbor_bin must be the harbor of its venv")
    return python


# The key's variable is set as at launch; --dry-run checks it is set, never its value ("Keys and
# model availability were not verified"), so the secret itself stays with the launch.
PREFLIGHT_KEY = "benchstack-preflight-key-not-used"


def run_harbor(inputs: Inputs, mode: str) -> subprocess.CompletedProcess:
    """`harbor run MODE` (--print-config, --dry-run) with exactly the launch's flags and
    environment (a key under the name the flags give); a refusal is Harbor's own words."""
    argv = [inputs.harbor_bin, "run", "--config", inputs.job_config,
            *compose_flags(inputs.compose_path), *inputs.harbor_flags,
            "--job-name", inputs.job_name, "--jobs-dir", inputs.jobs_dir, "--yes", mode]
    env = harbor_env({"LITELLM_LOCAL_MODEL_COST_MAP": "True",
                      harbor_profiles.API_KEY_VAR: PREFLIGHT_KEY})
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=HARBOR_TIMEOUT_S,
                              stdin=subprocess.DEVNULL, env=env)
    except subprocess.TimeoutExpired:
        raise HostError(
            f"harbor run {mode} did not finish in {HARBOR_TIMEOUT_S}s: check the Harbor "
            f"install at {inputs.harbor_bin}"
        ) from None
    if proc.returncode != 0:
        why = harbor_reason((proc.stdout + proc.stderr).decode(errors="replace"))
        raise HostError(
            f"harbor run {mode} rejected {inputs.job_config} ({why or 'no message'}): fix the "
            "job settings in the stack config"
        )
    return proc


def resolve(inputs: Inputs) -> bytes:
    """Harbor's resolved job config (JSON on stdout), with exactly the launch's flags."""
    return run_harbor(inputs, "--print-config").stdout


def dry_run(inputs: Inputs) -> dict[str, Any]:
    """Harbor's own check of the job, nothing run: its trial count and its warnings."""
    proc = run_harbor(inputs, "--dry-run")
    out = proc.stdout.decode(errors="replace")
    found = DRY_RUN_TRIALS.search(re.sub(r"\s+", " ", out))
    warnings = [line[len("Warning: "):] for line in
                proc.stderr.decode(errors="replace").splitlines()
                if line.startswith("Warning: ")]
    return {"trials": int(found.group(1)) if found else None, "warnings": warnings}


def load_yaml(python: str, path: str) -> Mapping | None:
    """The YAML file as an object, read by `python` (the Harbor venv's: Harbor needs PyYAML)."""
    proc = subprocess.run([python, "-c", YAML_TO_JSON, path], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, env=harbor_env(), timeout=HARBOR_TIMEOUT_S)
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        raise HostError(f"cannot read {path} as YAML: {lines[-1] if lines else 'no message'}")
    value = json.loads(proc.stdout)
    return value if isinstance(value, dict) else None


def _preflight_profile(inputs: Inputs) -> harbor_profiles.HarborProfile:
    """The inputs a preflight needs, and the Harbor version's profile; a HostError naming what
    is missing."""
    for key in ("harbor_bin", "job_config", "job_name", "jobs_dir", "resolved_out"):
        if not getattr(inputs, key):
            raise HostError(f"{key} is empty: the component must pass it")
    try:
        profile = harbor_profiles.profile(inputs.harbor_version)
    except KeyError as exc:
        raise HostError(f"harbor_version: {exc.args[0]}") from None
    if not os.access(inputs.harbor_bin, os.X_OK):
        raise HostError(f"harbor_bin={inputs.harbor_bin} is not executable: run the install "
                        "step first")
    files = {"job config": inputs.job_config, "compose override": inputs.compose_path}
    for what, path in files.items():
        # No compose override for trials as pods (an empty path).
        if path and not Path(path).is_file():
            raise HostError(f"{what} {path} does not exist: run the configs step first")
    return profile


def _existing_config(inputs: Inputs) -> dict | None:
    """The config of the job dir a resume would reuse, None when there is none."""
    existing_file = Path(jobdir.job_dir(inputs.jobs_dir, inputs.job_name)) / jobdir.JOB_CONFIG
    if not existing_file.is_file():
        return None
    try:
        return json.loads(existing_file.read_text())
    except ValueError:
        raise HostError(
            f"{existing_file} is not JSON: choose another job name (results are kept)"
        ) from None


def _harbor_dry_run(inputs: Inputs) -> dict:
    """Harbor's own --dry-run (0.26.0 on), its warnings logged."""
    harbor_check = dry_run(inputs)
    for warning in harbor_check["warnings"]:
        log(NAME, f"harbor --dry-run: {warning}")
    log(NAME, f"harbor --dry-run: OK, {harbor_check['trials']} trial(s); nothing run")
    return harbor_check


@verb(Inputs)
def create(inputs: Inputs) -> None:
    profile = _preflight_profile(inputs)
    python = venv_python(inputs.harbor_bin)
    checks = parse_checks(inputs.expected)
    raw = resolve(inputs)
    try:
        resolved = json.loads(raw)
    except ValueError:
        raise HostError(
            f"harbor run --print-config printed no JSON config: is {inputs.harbor_bin} "
            "Harbor 0.21 or newer?"
        ) from None
    existing = _existing_config(inputs)
    check(
        resolved, checks,
        override=load_yaml(python, inputs.compose_path) if inputs.compose_path else None,
        compose_path=inputs.compose_path,
        job_name=inputs.job_name,
        existing=existing,
        jobs_dir=inputs.jobs_dir,
        ignored=profile.resume_ignored,
    )
    harbor_check = _harbor_dry_run(inputs) if profile.dry_run else None
    out = Path(inputs.resolved_out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(raw)
    log(NAME, f"{len(checks)} fields match; resolved config saved to {out}")
    emit({
        "resolved_config": str(out),
        "resolved_sha256": hashlib.sha256(raw).hexdigest(),
        "checked_fields": len(checks),
        "dry_run": harbor_check,
    })
