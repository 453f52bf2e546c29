"""Where each piece of the audit's knowledge came from, so that its generalization can be measured.

Every rule of rules.yaml, every built-in detector and the few phrase tables detectors consult
carry tags:

- `learned_from`: the dev-set sources (real job dirs an expert labelled,
  `../shared/data/real-jobs`) in which it was first met: a *refinement*, written or tuned on
  those sources' trials (a tool's wording, a failure first seen there);
- `grounded_in`: every document it claims to rest on (GROUNDS), verifiable here or not, with
  `why` naming it;
- `prompted_by`: for a *general rule* (no `learned_from`): the dev-set sources whose trials
  prompted writing it down. It is written from what a status class, a traceback or a trial's
  own record means and names nothing of those sources;
- `standard`: part of the proof standard (audit/RULES.md §1, "what is not proof"): a rule that
  only ever withholds an excuse. It is never switched off: without it the audit would excuse
  more, so switching it off would not show what the audit knows of a source but only a laxer
  audit.

And one record kept here, in RESTS_ON, for every piece by name: the provenance it rests on
that can be checked on this machine, each a `Cite` with the words it rests on:

- `issue-20`: the lines of issue #20 (written from the HELD-OUT jobs, not the dev set), quoted
  in audit/RULES.md §0, the source of record;
- `seed`: the seed's hand-run audit and its pitfalls (`../shared/seed/000_cd7590facf49fd89.txt`);
- `harbor`: Harbor 0.21's own facts (`../shared/reference/harbor-0.21.0.md`), with the section;
- `captures`: tool output captured here against failing loopback servers
  (`tests/audit/captures/`), with the capture file;
- `general`: a general rule whose reasoning was already written in the audit's rules of
  judgement before this record was kept (audit/RULES.md §1-2 as of commit BASE), stated in
  terms any source shares. Only a piece learned from no source can rest on it: what a source
  taught does not become general by being written down.

Documentation claimed from memory (`docs`: RFCs, servers' sources, Docker's manual) is kept in
`grounded_in` and `why` but is no provenance here: it cannot be checked on this machine.
tests/audit/test_knowledge_provenance.py checks every quote against its file.

The leave-one-source-out evaluation (benchmarks/bench_audit_generalization.py) scores each
dev-set source with knowledge switched off (`disabled_for`), in three views:

- `checked` (the figure): in each fold, a piece stays on only if it rests on a provenance of
  RESTS_ON (or is of the proof standard). Whatever rests only on a dev-set source or on
  unverifiable documents is off, in every fold: a tag that says "learned from no source" is as
  unverifiable as a document cited from memory;
- `strict` (a lower bound): every refinement first met in the held-out source is off, whatever
  else justifies it;
- `lenient` (an upper bound): only what was first met in the held-out source and names no
  document at all, verifiable or not, is off.

A detector checks `ctx.knows(name)` (audit/job_context.py) before using a tagged piece; the
classifier does the same for rules and detectors. Nothing here changes a normal audit: there
nothing is disabled.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

GROUNDS: dict[str, str] = {
    "harbor": "Harbor 0.21's code and the reference (shared/reference): its exceptions, files, "
    "sample jobs",
    "seed": "the seed's hand-run audit and its pitfalls (shared/seed)",
    "captures": "tools run here against failing loopback servers (tests/audit/captures)",
    "issue-20": "the expert reasoning written in issue #20, read on held-out jobs",
    "general": "a general rule of the audit's rules of judgement (audit/RULES.md §1-2)",
    "docs": "public documentation or source code of the servers, agents, Docker, shells and "
    "protocols (named in `why`), cited from memory: not checkable here",
}
DEV_SOURCES: dict[str, str] = {
    "glm5-openclaw-tb20": "one job: GLM-5 with the openclaw agent, Docker Desktop on arm64 macOS",
    "gemma-harness-tb2": "24 jobs: a custom agent on a local llama.cpp server, oracle and nop",
}
VIEWS = ("checked", "strict", "lenient")

# The files a Cite names, relative to the repository root, and the commit whose RULES.md a
# `general` quote must already be in (the branch tip before this record was kept).
CITED_FILES: dict[str, str] = {
    "issue-20": "audit/RULES.md",
    "seed": "../shared/seed/000_cd7590facf49fd89.txt",
    "harbor": "../shared/reference/harbor-0.21.0.md",
    "captures": "tests/audit/captures",
    "general": "audit/RULES.md",
}
BASE = "6ba4da3"


@dataclass(frozen=True)
class Cite:
    """One provenance checkable here: the words a piece of knowledge rests on, verbatim (up to
    whitespace) in the file CITED_FILES names; `at` is the reference's section (`§5.3`), the
    capture file (`tls_eof/curl.txt`) or the RULES.md section of a general rule (`§1`)."""

    on: str
    quote: str
    at: str = ""

    def __post_init__(self) -> None:
        if self.on not in CITED_FILES:
            raise ValueError(f"cite on {self.on!r}: one of {sorted(CITED_FILES)}")
        if self.on in ("harbor", "captures", "general") and not self.at:
            raise ValueError(f"a {self.on} cite names its section or file (`at`)")
        if len(self.quote.split()) < 3:
            raise ValueError(f"quote the words it rests on, not a word: {self.quote!r}")

    def __str__(self) -> str:
        where = f" {self.at}" if self.at else ""
        return f'{self.on}{where}: "{self.quote}"'


def _issue(quote: str) -> Cite:
    return Cite("issue-20", quote)


def _seed(quote: str) -> Cite:
    return Cite("seed", quote)


def _harbor(section: str, quote: str) -> Cite:
    return Cite("harbor", quote, section)


def _capture(path: str, quote: str) -> Cite:
    return Cite("captures", quote, path)


def _general(section: str, quote: str) -> Cite:
    return Cite("general", quote, section)


# What every piece of knowledge rests on, by name. `()`: nothing checkable here (a dev-set
# source, or documents from memory, named in the piece's `why`). Split where only part of a
# piece is general: the general reading rests on its cite, the refinement (a source's wording)
# is its own piece, tagged with the source.
RESTS_ON: dict[str, tuple[Cite, ...]] = {
    # --- the model endpoint (audit/detectors/endpoint.py, audit/model_endpoint.py) ---------
    "model_endpoint": (
        _issue("HTTP 402 (credits), 401/403 keys, provider outages"),
        _issue("The trigger is the endpoint, so it is infra (a rerun can pass)"),
        _harbor(
            "§3.4",
            "raw litellm/openai errors from Terminus-2 (`InternalServerError`, "
            "`APIConnectionError`, `RateLimitError`, `BadRequestError`, `AuthenticationError` …)",
        ),
        _harbor("§3.4", '`InternalServerError` / "litellm.InternalServerError: … OpenAIException'),
    ),
    "endpoint:surfaced_in_harness": (
        _issue(
            "The model endpoint failing, surfacing as a crash of the agent's harness: a response "
            "body that is not JSON, a response without `usage`"
        ),
        _issue("even when the traceback ends in the agent's code"),
    ),
    "endpoint:agent_log_run_end": (
        _issue(
            "with the endpoint's words as evidence, even when the traceback ends in the agent's"
        ),
    ),
    # First met in glm5-openclaw-tb20, and all of it general: the run ended on a reply that
    # carried no usage (no prompt count at all) from an endpoint shown to send it. No wording
    # of that source is read; the log is Harbor's ATIF.
    "model_reply_cut_off": (
        _issue("a response without `usage`"),
        _harbor(
            "§5.4", "`observation.results[].content`, `metrics{prompt_tokens, completion_tokens}`"
        ),
        _harbor("§5.2", "`usage.prompt_tokens` and `usage.completion_tokens` feed"),
    ),
    "endpoint:unparseable_phrases": (),  # llama.cpp's wording, first met in gemma-harness-tb2
    "endpoint:context_size_words": (),  # llama.cpp's wording, first met in gemma-harness-tb2
    "endpoint:generated_markup": (),  # chat-template tokens, Gemma's met in gemma-harness-tb2
    "endpoint:parse_names_the_generation": (
        _general(
            "§1",
            "When the body names the model's generation (a tool call, its arguments, the chat "
            "template's markup) it is the model's",
        ),
    ),
    "endpoint:bad_request_is_agents": (
        _general("§1", "the request the agent's harness built, whatever its body says"),
    ),
    "endpoint:context_overflow_is_agents": (
        _issue("A served context window smaller than the one the agent was told"),
        _harbor("§5.2", "Context-length errors from the server (phrases such as"),
        _general("§1", "a request past the context window the agent was told."),
    ),
    "endpoint:one_request_5xx": (
        _general(
            "§1",
            "it excuses only when other trials of the job ended on the endpoint's 5xx within 10 "
            "minutes",
        ),
    ),
    "endpoint:parse_failure_5xx": (
        _general("§1", "what it was given: caused by its input, not by an outage."),
    ),
    # --- the agent's own code, the environment --------------------------------------------
    "agent_harness_crash": (
        _general("§1", "a crash whose innermost frame is the agent's own code): never `infra`."),
    ),
    "command_cap": (
        _issue("A command of the agent's own that ran past the harness's per-command cap"),
        _issue(
            "A container counts as hung only with evidence that the environment failed (trivial "
            "commands hanging too, the container or daemon gone, the exec never starting)."
        ),
        _harbor(
            "§5.3", 'The docker env raises `RuntimeError("Command timed out after 120 seconds")`'
        ),
        _general(
            "§2",
            "A blocking read, a foreground server, `tail -f`, an interactive program, a `sleep`, "
            "a long install or build, or the agent's own program: the agent's failure.",
        ),
    ),
    "out_of_memory": (),  # the kernel OOM killer's messages, from memory
    "disk_full": (),  # ENOSPC, from memory
    "container_killed": (),  # a SIGKILL (exit 137) and an empty verifier: first met in glm5
    "emulation_unsupported": (),  # Rosetta's own words: first met in glm5-openclaw-tb20
    "container_killed:own_build": (
        _general(
            "§1",
            "a kill (SIGKILL, the OOM killer) while the agent's own build ran with no bound on "
            "its parallelism",
        ),
    ),
    "setup_hung": (
        _harbor("§2.2", "agent setup: base = `agents[].override_setup_timeout_sec` or 360 s."),
        _seed("network instability or concurrent rate limits can cause setup timeouts"),
    ),
    "agent_setup_failed": (
        _harbor("§5.3", "All of this runs inside agent setup (360 s × multiplier)."),
        _seed("eventually exhausting the setup timeout before the agent actually began working"),
    ),
    # --- networks (audit/detectors/network_failures.py, audit/network.py) ------------------
    "verifier_network": (
        _seed(
            "The proxy kept returning HTTP 502 while the verifier installed dependencies, so the "
            "tests never actually ran"
        ),
        _capture(
            "tls_eof/curl.txt", "curl: (35) OpenSSL SSL_connect: SSL_ERROR_SYSCALL in connection"
        ),
        _capture(
            "http_502/apt.txt",
            "W: Failed to fetch http://index.mirror.test:37955/debian/dists/bookworm/InRelease "
            "502 Bad Gateway",
        ),
    ),
    "agent_network": (
        _seed("repeatedly returned HTTP 502 while installing the MIPS cross-compilation toolchain"),
        _seed("HTTPS requests first failed with `CERTIFICATE_VERIFY_FAILED`"),
        _capture("proxy_502/pip.txt", "Tunnel connection failed: 502 Bad Gateway"),
    ),
    "network:agent_rewired": (
        _general(
            "§1",
            "it came after the agent rewired `/etc/resolv.conf`, `/etc/hosts`, a proxy variable "
            "or a package manager's configuration",
        ),
        _harbor(
            "§4.3", "inherited by every `docker compose exec`: proxy variables reach apt and pip"
        ),
        _seed("the task container and verifier share the same runtime environment"),
    ),
    "agent_network:contradicted": (
        _general(
            "§1",
            "the same host answered earlier or later; a name did not resolve while other names "
            "did (the resolver works: the name is wrong)",
        ),
    ),
    # --- the Kubernetes cluster (audit/detectors/kubernetes.py, audit/kubernetes.py) -------
    # Captured from Harbor 0.21.0's ack environment on the real test cluster
    # (tests/audit/make_k8s_captures.py); the join of pod and trial is Harbor's code (`why`).
    "k8s_quota_exceeded": (
        _capture(
            "k8s/quota_exceeded/trial/exception.txt",
            "is forbidden: exceeded quota: trial-quota, requested: requests.memory=2Gi, used: "
            "requests.memory=0, limited: requests.memory=1Gi",
        ),
        _capture("k8s/quota_exceeded/trial/exception.txt", "Failed to create pod: (403)"),
    ),
    "k8s_pod_unschedulable": (
        _capture(
            "k8s/unschedulable/events.json",
            '"reason": "FailedScheduling", "reportingComponent": "default-scheduler",',
        ),
        _capture(
            "k8s/unschedulable/events.json",
            "0/1 nodes are available: 1 Insufficient cpu.",
        ),
        _capture("k8s/unschedulable/trial/exception.txt", "Pod not ready after 300 seconds"),
    ),
    "k8s_image_pull_failed": (
        _capture("k8s/image_pull/events.json", '"message": "Error: ErrImagePull"'),
        _capture("k8s/image_pull/events.json", '"message": "Error: ImagePullBackOff"'),
        _capture(
            "k8s/image_pull/trial/exception.txt",
            "RuntimeError: Failed to pull image: rpc error: code = NotFound",
        ),
    ),
    "k8s_pod_evicted": (
        _capture(
            "k8s/pod_evicted/pod.json",
            '"message": "Eviction API: evicting", "reason": "EvictionByEvictionAPI", '
            '"status": "True", "type": "DisruptionTarget"',
        ),
        _capture("k8s/index.json", "the pod is evicted (Eviction API) while the agent runs"),
    ),
    "k8s_pod_deleted": (
        _capture("k8s/pod_deleted/events.json", '"message": "Stopping container main"'),
        _capture(
            "k8s/pod_deleted/pod.json",
            '"deletionGracePeriodSeconds": 0, "deletionTimestamp": "2026-12-02T00:27:41Z",',
        ),
        _capture("k8s/index.json", "the pod is force-deleted (grace 0) while the agent runs"),
    ),
    # --- rules.yaml ------------------------------------------------------------------------
    "agent_killed_tmux": (
        _seed("occurred because the agent ran `tmux kill-server` while executing the task"),
    ),
    "tmux_session_lost": (
        _harbor("§5.3", "Other commands it runs during the loop: `tmux send-keys -t terminus-2"),
    ),
    "docker_address_pools_exhausted": (
        _seed("all predefined address pools have been fully subnetted"),
        _harbor("§7", "`n_concurrent_trials` is bounded by the daemon's `default-address-pools`."),
    ),
    "egress_sidecar_build_failed": (
        _harbor(
            "§3.4",
            '"Failed to build Docker image harbor-prebuilt:harbor-docker-egress-control-sidecar',
        ),
        _harbor("§4.4", "Offline hosts need the buildx plugin"),
    ),
    "image_pull_failed": (
        _harbor(
            "§7", "a missing `docker_image` fails immediately at `up` (RuntimeError, pull error)."
        ),
        _harbor("§3.4", "image absent, pull impossible (`pitfall-missing-image`)"),
    ),
    "environment_start_failed": (
        _harbor("§3.4", '"Docker compose command failed … up --detach --wait'),
        _harbor(
            "§3.4",
            "Other type names in the code: `AgentSetupTimeoutError`, "
            "`EnvironmentStartTimeoutError`,",
        ),
    ),
    "tool_install_failed": (
        _harbor("§3.4", '`RuntimeError` / "Failed to start tmux session. Error: None"'),
        _seed("so the harness tried to install them over the network"),
    ),
    "verifier_timeout_running_tests": (
        _seed("passed the first four tests and timed out during the last one"),
    ),
    "verifier_timeout_installing_dependencies": (
        _seed("exhausted its budget during dependency downloads before pytest began"),
    ),
    "verifier_timeout": (
        _harbor(
            "§3.4", '`VerifierTimeoutError` / "Verifier execution timed out after 0.06 seconds"'
        ),
        _seed("A timeout in the verifier itself;"),
    ),
    "agent_exec_failed": (
        _harbor("§7", "breaks every exec (exit 126): oracle writes `exit-code.txt` 126"),
    ),
    "reward_file_missing": (_harbor("§4.1", "If neither exists you get RewardFileNotFoundError"),),
}


@dataclass(frozen=True)
class Knowledge:
    name: str
    learned_from: tuple[str, ...] = ()
    grounded_in: tuple[str, ...] = ()
    why: str = ""
    prompted_by: tuple[str, ...] = ()
    standard: bool = False
    # Set only for pieces made up in tests; a real piece's cites are RESTS_ON[name].
    cites: tuple[Cite, ...] | None = None

    def __post_init__(self) -> None:
        unknown = [s for s in self.learned_from + self.prompted_by if s not in DEV_SOURCES]
        unknown += [g for g in self.grounded_in if g not in GROUNDS]
        if unknown:
            raise ValueError(f"knowledge {self.name!r}: unknown provenance tag(s) {unknown}")
        if not self.learned_from and not self.grounded_in:
            raise ValueError(f"knowledge {self.name!r}: say where it came from")
        if self.prompted_by and (self.learned_from or not self.grounded_in):
            raise ValueError(
                f"knowledge {self.name!r}: a general rule (prompted_by) is grounded in a "
                "document and learned from no source; a refinement says learned_from"
            )
        if self.standard and self.learned_from:
            raise ValueError(
                f"knowledge {self.name!r}: the proof standard holds in every fold, so it can "
                "know nothing of one source (learned_from)"
            )

    @property
    def rests_on(self) -> tuple[Cite, ...]:
        """The provenance checkable here (RESTS_ON): what keeps it on in the checked view."""
        return self.cites if self.cites is not None else RESTS_ON.get(self.name, ())


_REGISTRY: dict[str, Knowledge] = {}


def register(item: Knowledge) -> Knowledge:
    """Declare a piece of knowledge (at import time of the module that uses it)."""
    if _REGISTRY.get(item.name, item) != item:
        raise ValueError(f"knowledge {item.name!r} declared twice, differently")
    _REGISTRY[item.name] = item
    return item


def registered() -> dict[str, Knowledge]:
    return dict(_REGISTRY)


def disabled_for(
    items: Iterable[Knowledge], held_out: str, view: str = "checked"
) -> frozenset[str]:
    """Names to switch off when `held_out` is the source being scored, in one of VIEWS."""
    if held_out not in DEV_SOURCES:
        raise ValueError(f"unknown dev-set source {held_out!r}; known: {sorted(DEV_SOURCES)}")
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}; one of {VIEWS}")

    def off(k: Knowledge) -> bool:
        if k.standard:
            return False
        if view == "checked":
            return not k.rests_on
        if held_out not in k.learned_from:
            return False
        return view == "strict" or not k.grounded_in

    return frozenset(k.name for k in items if off(k))


def prompted_rules(items: Iterable[Knowledge], source: str) -> list[Knowledge]:
    """The general rules (and standard) that `source`'s trials prompted: kept in its fold."""
    return sorted((k for k in items if source in k.prompted_by), key=lambda k: k.name)
