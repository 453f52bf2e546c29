"""What the whole job says that one trial's verdict depends on.

Phase medians (is this setup far slower than the others?), whether a proxy or a model
endpoint was configured (read through the job config's model, audit/read/models.py), the
context windows the job told its agents, whether the job finished (audit/judge/job_state.py),
and, read only when a detector asks, whether the job's model endpoint reports usage at all.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from audit.judge import network as N
from audit.judge.context_window import Window, told_in_mapping, told_in_text
from audit.judge.job_state import JobRun
from audit.judge.verdict import Proof
from audit.read import layout as L
from audit.read.evidence import TrialEvidence
from audit.read.models import JobConfig, model_endpoints

# Other trials searched for a model call that carried usage before concluding the endpoint
# never sends it: enough for any job, bounded for huge ones.
_USAGE_SCAN = 50


@dataclass
class JobContext:
    phase_medians: dict[str, float] = field(default_factory=dict)
    model_hosts: set[str] = field(default_factory=set)
    told: tuple[Window, ...] = ()
    job_run: JobRun = field(default_factory=lambda: JobRun(None))
    evidences: list[TrialEvidence] = field(default_factory=list, repr=False)
    _usage: list[tuple[str, Proof]] | None = field(default=None, repr=False)
    # What a detector read across the job's trials, read once per job (keyed by the detector).
    memo: dict[str, object] = field(default_factory=dict, repr=False)

    @classmethod
    def from_trials(
        cls,
        evidences: list[TrialEvidence],
        config: JobConfig | None,
        job_run: JobRun | None = None,
        job_log: str | None = None,
    ) -> JobContext:
        phases: dict[str, list[float]] = {}
        for ev in evidences:
            if ev.result is None:
                continue
            for phase, seconds in ev.result.phase_seconds().items():
                if seconds is not None and seconds > 0:
                    phases.setdefault(phase, []).append(seconds)
        medians = {p: statistics.median(v) for p, v in phases.items() if len(v) >= 5}
        hosts = {h for url in model_endpoints(config) if (h := N.host_in(url))}
        told: list[Window] = []
        for i, agent in enumerate((config.agents if config else None) or []):
            for part in ("kwargs", "env"):
                told += told_in_mapping(
                    getattr(agent, part), f"../{L.JOB_CONFIG} agents[{i}].{part}"
                )
        told += told_in_text(job_log, f"../{L.JOB_LOG}")
        return cls(
            medians,
            hosts,
            tuple(told),
            job_run or JobRun(None),
            evidences,
        )

    @property
    def max_input_tokens(self) -> int | None:
        return max((w.tokens for w in self.told), default=None)

    def usage_reported(self, besides: TrialEvidence) -> Proof | None:
        """A model call of another trial of this job that carried usage: the endpoint sends it.

        Read lazily, once per job, and only when a detector needs to know.
        """
        if self._usage is None:
            self._usage = []
            for ev in self.evidences[:_USAGE_SCAN]:
                found = _first_usage(ev)
                if found is not None:
                    self._usage.append((ev.trial_dir, found))
                if len(self._usage) >= 2:
                    break
        return next((p for trial, p in self._usage if trial != besides.trial_dir), None)


def _first_usage(ev: TrialEvidence) -> Proof | None:
    for log in ev.agent_logs():
        for call in log.calls:
            if call.usage is not None and not call.usage.missing:
                return Proof(
                    "endpoint_response",
                    f"../{ev.trial_dir}/{call.usage_where}",
                    f"prompt_tokens: {call.usage.prompt_tokens}",
                    "the same endpoint reports usage for a complete reply",
                )
    return None
