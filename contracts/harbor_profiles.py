"""The Harbor versions benchstack runs, one profile each: what differs between them, in one place.

`harbor.version` in a stack file picks a profile; the program renders the job for it
(components/harbor_config.py), the host side preflights and launches it (hostside/
harbor_preflight.py, harbor_launch.py), and the audit and the progress command read its results
by it. A version without a profile is refused (components/config_models/harbor.py), naming the
known ones.

Every fact below was read from the wheels' sources (paths inside the wheel, `harbor/...`):

- the score. 0.21.0: the job's mean counts every trial and a trial without a reward as 0
  (`harbor/job.py` appends None for a trial without `verifier_result`;
  `harbor/metrics/base.py: aggregate_reward_dicts` turns None into 0), and pass@k counts such a
  trial as a failure (`harbor/utils/pass_at_k.py`). 0.26.0: the mean and pass@k take only trials
  whose reward is valid (`harbor/job.py` appends a reward only `if trial_result.reward_valid`;
  `harbor/utils/pass_at_k.py` skips `not trial_result.reward_valid`), and a trial's result.json
  carries `schema_version`, `reward_valid` and `exception_info.policy` (computed fields of
  `harbor/models/trial/result.py`) from the error-policy table (`ERROR_POLICY_0_26` below).
- the endpoint. 0.26.0 has first-class flags for a self-hosted endpoint, `--base-url`,
  `--api-key-name`, `--api-format` (`harbor/cli/jobs.py`, written into `AgentConfig.base_url`,
  `model_api_key_name`, `model_api_format` of `harbor/models/trial/config.py`); 0.21.0 only
  the agent kwarg `api_base`.
- the preflight. Both print the resolved job config with `--print-config` (0.21.0 without the
  fields at their default, `exclude_defaults`; 0.26.0 all of them, `model_dump`); 0.26.0 also
  has `--dry-run` (`harbor/cli/jobs.py: _execute_job`): the config validated strictly (unknown
  keys refused, `extra="forbid"`), the agent's kwargs against its options model, the endpoint
  and key resolution, the environment's preflight and the tasks' metadata, with nothing run.
- the resume. Both: `harbor job resume -p JOB_DIR` (`-f CancelledError` by default). Harbor
  refuses a job dir whose config.json differs from the new config, ignoring `job_name` and
  `debug` (0.21.0) or `job_name` and `jobs_dir` (0.26.0, `harbor/job.py:
  _maybe_init_existing_job`).
- GPU tasks. 0.21.0's Docker environment reports no GPU capability, so a task with
  `[environment].gpus > 0` fails at its start (`harbor/environments/base.py:
  _validate_gpu_support`, RuntimeError "Task requires N GPU(s) but docker environment does not
  support GPU allocation"); 0.26.0's reserves them with a Compose NVIDIA device request
  (`harbor/environments/docker/docker.py: capabilities`, `gpus=True` for Linux containers;
  `harbor/environments/docker/__init__.py: write_resources_compose_file`). `ack` (generic
  Kubernetes) reports none in either (`EnvironmentCapabilities()`).
- the egress-control sidecar of no-network tasks: the tag Harbor looks up on a linux/amd64
  engine, computed with Harbor's own `docker_build_context_hash` over its bundled build context
  (`harbor/environments/docker/harbor-docker-egress-control-sidecar/`), which changed between
  the two (0.26.0's `bin/network-policy` allows DNS to the resolv.conf nameservers).

Standard library only (the host side imports it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

# The score conventions by name (the name every printed number carries). What each counts and
# how it aggregates is the audit's registry (audit/score/conventions.py), the one place a score
# is computed; a profile names the convention of Harbor's own job mean here, so that the stack
# config, the progress command and the audit agree on the names.
LEADERBOARD = "leaderboard"  # the Terminal-Bench board's SQL, get_agent_scores_v4 as of 2026-05-28
LEADERBOARD_BEFORE_2026_05_28 = "leaderboard-before-2026-05-28"  # without NonZeroAgentExitCodeError
HARBOR_0_21 = "harbor-0.21"  # Harbor 0.21's job mean: every trial, a missing reward as 0
HARBOR_0_26 = "harbor-0.26"  # Harbor 0.26's job mean: valid rewards only

# The environment variable the agent's key is in (the launch sets it; 0.26.0 is told its name
# with --api-key-name).
API_KEY_VAR = "OPENAI_API_KEY"
# The protocol the serving plane speaks (SGLang's router: OpenAI chat completions).
API_FORMAT = "openai_chat_completions"

# What a trial's phases are bounded by when task.toml says nothing, the same in both versions
# (`harbor/models/task/config.py`: [verifier].timeout_sec 600, [environment].build_timeout_sec
# 600, [agent].timeout_sec None: no agent timeout; `harbor/agents/base.py` 0.26.0 and
# `harbor/trial/trial.py` 0.21.0: agent setup 360 s). Each is multiplied by its multiplier.
VERIFIER_TIMEOUT_S = 600.0
BUILD_TIMEOUT_S = 600.0
AGENT_SETUP_TIMEOUT_S = 360.0


# --- Harbor 0.26.0's error-policy table (harbor/models/trial/error_policy.py, verbatim) --------
# Each exception type: (should_retry, should_grade, has_valid_reward). A type not in the table
# gets UNKNOWN_POLICY: Harbor retries it, grades it and trusts its reward; so do bare
# RuntimeErrors (compose failures, "Command timed out after N seconds", ack pod failures).


@dataclass(frozen=True)
class ErrorPolicy:
    should_retry: bool
    should_grade: bool
    has_valid_reward: bool


UNKNOWN_POLICY = ErrorPolicy(should_retry=True, should_grade=True, has_valid_reward=True)
_GROUPS_0_26 = {
    ErrorPolicy(True, False, False): (
        "EnvironmentStartTimeoutError", "SandboxBuildFailedError", "AgentSetupTimeoutError",
        "HealthcheckError", "SandboxLikelyOutOfMemoryError", "MemoryLimitExceededError",
        "SSHAccessError", "GKEExecStreamClosedError", "GKEPodNotFoundError",
        "RuntimeRequestError", "AddTestsDirError", "DownloadVerifierDirError",
    ),
    ErrorPolicy(True, True, False): (
        "ApiError", "ApiRateLimitError", "ApiInternalServerError", "ApiOverloadedError",
        "ApiConnectionClosedError", "ApiResponseStalledError", "UnknownApiError",
        "NetworkConnectionError", "ApiConnectionError", "ApiUsageLimitError",
        "RateLimitError", "InternalServerError", "ServiceUnavailableError",
        "APIConnectionError", "APIError", "Timeout",
    ),
    ErrorPolicy(False, True, False): (
        "UnsupportedModelParametersError", "BadRequestError", "UnprocessableEntityError",
        "UnsupportedParamsError", "APIResponseValidationError", "BudgetExceededError",
        "VerifierTimeoutError", "RewardFileNotFoundError", "RewardFileEmptyError",
        "VerifierOutputParseError",
    ),
    ErrorPolicy(False, False, False): (
        "AgentAuthenticationError", "ModelNotFoundError", "ApiProviderResourceNotFoundError",
        "AuthenticationError", "PermissionDeniedError", "NotFoundError",
        "ServiceOperationsUnsupportedError", "VercelScopeError", "DspyImportError",
        "MissingExtraError", "RegradeError", "CancelledError",
    ),
    ErrorPolicy(False, True, True): (
        "NonZeroAgentExitCodeError", "AgentTimeoutError", "ContextWindowExceededError",
        "OutputTokenExceededError", "ContextLengthExceededError", "OutputLengthExceededError",
        "AgentSafetyRefusalError", "ContentPolicyViolationError",
    ),
}
ERROR_POLICY_0_26: Mapping[str, ErrorPolicy] = MappingProxyType(
    {name: policy for policy, names in _GROUPS_0_26.items() for name in names})



@dataclass(frozen=True)
class HarborProfile:
    version: str
    wheel_sha256: str
    # The convention of the job's own result.json (its `metrics` mean and `pass_at_k`): a name
    # of CONVENTIONS, registered in audit/score/conventions.py.
    score_convention: str
    # The error-policy table its trials' exceptions are judged by (None: the version has none,
    # 0.21.0 retries a fixed list and counts every trial).
    error_policy: Mapping[str, ErrorPolicy] | None
    # Trial result.json carries `reward_valid` and `exception_info.policy`.
    carries_policy: bool
    # The endpoint given with --base-url/--api-key-name/--api-format, not the kwarg api_base.
    endpoint_flags: bool
    # `harbor run --dry-run` exists.
    dry_run: bool
    # `--print-config` (and config.json) leave out the fields at their default.
    print_config_excludes_defaults: bool
    # The top-level config fields Harbor ignores when it compares a job dir's config.json
    # with the config of a run that would resume it.
    resume_ignored: frozenset
    # `harbor ... ` arguments that resume a job dir (its path follows).
    resume_args: tuple
    # Harbor's environment types that run GPU tasks.
    gpu_environments: frozenset
    # The egress-control sidecar's tag on a linux/amd64 engine.
    sidecar_image: str


PROFILES: Mapping[str, HarborProfile] = MappingProxyType({
    profile.version: profile for profile in (
        HarborProfile(
            version="0.21.0",
            wheel_sha256="c77d779a03f1a9e8ecb3c449e17f39a9728b82238832f1fd28632eb9426c0a21",
            score_convention=HARBOR_0_21,
            error_policy=None,
            carries_policy=False,
            endpoint_flags=False,
            dry_run=False,
            print_config_excludes_defaults=True,
            resume_ignored=frozenset({"job_name", "debug"}),
            resume_args=("job", "resume", "-p"),
            gpu_environments=frozenset(),
            sidecar_image="harbor-prebuilt:harbor-docker-egress-control-sidecar--b1e6760734a9e6f6",
        ),
        HarborProfile(
            version="0.26.0",
            wheel_sha256="b7c752c5b51ae2ee1fc2ea30621493c7dc0b5a3d0157295bed4552115027baee",
            score_convention=HARBOR_0_26,
            error_policy=ERROR_POLICY_0_26,
            carries_policy=True,
            endpoint_flags=True,
            dry_run=True,
            print_config_excludes_defaults=False,
            resume_ignored=frozenset({"job_name", "jobs_dir"}),
            resume_args=("job", "resume", "-p"),
            gpu_environments=frozenset({"docker"}),
            sidecar_image="harbor-prebuilt:harbor-docker-egress-control-sidecar--9af3dc172792cee8",
        ),
    )
})
KNOWN_VERSIONS = tuple(PROFILES)
# Every convention a score may be published or computed in: the board's, and each profile's.
CONVENTIONS = tuple(dict.fromkeys(
    (LEADERBOARD, LEADERBOARD_BEFORE_2026_05_28,
     *(p.score_convention for p in PROFILES.values()))))


def profile(version: str) -> HarborProfile:
    """The profile of `version`; a KeyError naming the known versions for any other."""
    try:
        return PROFILES[version]
    except KeyError:
        raise KeyError(f"no Harbor profile for {version!r}; known: "
                       f"{', '.join(KNOWN_VERSIONS)}") from None


def policy_0_26(exception_type: str, override: Mapping[str, Any] | None = None) -> ErrorPolicy:
    """What 0.26.0's table says of an exception type (with a job's per-type override, the
    `policy_override` a 0.26.0 trial records: its non-null fields replace the table's)."""
    policy = ERROR_POLICY_0_26.get(exception_type, UNKNOWN_POLICY)
    if override:
        policy = ErrorPolicy(**{
            key: bool(override[key]) if override.get(key) is not None else getattr(policy, key)
            for key in ("should_retry", "should_grade", "has_valid_reward")})
    return policy


def recorded_exceptions(trial: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The trial's exception first, then its steps' (a multi-step trial records them there)."""
    found = [trial["exception_info"]] if isinstance(trial.get("exception_info"), dict) else []
    for step in trial.get("step_results") or []:
        if isinstance(step, dict) and isinstance(step.get("exception_info"), dict):
            found.append(step["exception_info"])
    return found


def reward_valid(trial: Mapping[str, Any]) -> bool:
    """Whether the trial's reward is valid: what a 0.26.0 result.json says (`reward_valid`),
    else what 0.26.0's table says of it (a reward, and no recorded exception whose policy
    makes it invalid): `harbor/models/trial/result.py: TrialResult.reward_valid`."""
    stated = trial.get("reward_valid")
    if isinstance(stated, bool):
        return stated
    rewards = (trial.get("verifier_result") or {}).get("rewards") if isinstance(
        trial.get("verifier_result"), dict) else None
    if not rewards:
        return False
    return all(
        policy_0_26(str(info.get("exception_type") or ""),
                    info.get("policy_override")).has_valid_reward
        for info in recorded_exceptions(trial))
