"""What the whole job says that one trial's verdict depends on.

Phase medians (is this setup far slower than the others?), whether a proxy or a model
endpoint was configured, the context windows the job told its agents, whether the job
finished (audit/job_state.py), what knowledge is switched off (audit/learned.py; nothing in a
normal audit), and, read only when a detector asks, whether the job's model endpoint reports
usage at all.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field

from audit.judge import network as N
from audit.judge.context_window import Window, told_in_json, told_in_text
from audit.judge.job_state import JobRun
from audit.judge.verdict import Proof
from audit.read import layout as L
from audit.read.evidence import TrialEvidence

# Other trials searched for a model call that carried usage before concluding the endpoint
# never sends it: enough for any job, bounded for huge ones.
_USAGE_SCAN = 50


@dataclass
class JobContext:
    phase_medians: dict[str, float] = field(default_factory=dict)
    proxy_configured: bool = False
    model_hosts: set[str] = field(default_factory=set)
    told: tuple[Window, ...] = ()
    job_run: JobRun = field(default_factory=lambda: JobRun(None))
    disabled: frozenset[str] = frozenset()
    evidences: list[TrialEvidence] = field(default_factory=list, repr=False)
    _usage: list[tuple[str, Proof]] | None = field(default=None, repr=False)
    # What a detector read across the job's trials, read once per job (keyed by the detector).
    memo: dict[str, object] = field(default_factory=dict, repr=False)

    @classmethod
    def from_trials(
        cls,
        evidences: list[TrialEvidence],
        config_text: str | None,
        job_run: JobRun | None = None,
        job_log: str | None = None,
        disabled: frozenset[str] = frozenset(),
    ) -> JobContext:
        phases: dict[str, list[float]] = {}
        for ev in evidences:
            if ev.result is None:
                continue
            for phase, seconds in ev.result.phase_seconds().items():
                if seconds is not None and seconds > 0:
                    phases.setdefault(phase, []).append(seconds)
        medians = {p: statistics.median(v) for p, v in phases.items() if len(v) >= 5}
        text = config_text or ""
        proxy = bool(re.search(r'(?i)"(?:https?|all)_proxy"\s*:\s*"[^"]+"', text))
        hosts = {
            h
            for m in re.finditer(r'"api_base"\s*:\s*"([^"]+)"', text)
            if (h := N.host_in(m.group(1)))
        }
        told = told_in_json(config_text, f"../{L.JOB_CONFIG}") + told_in_text(
            job_log, f"../{L.JOB_LOG}"
        )
        return cls(
            medians,
            proxy,
            hosts,
            tuple(told),
            job_run or JobRun(None),
            disabled,
            evidences,
        )

    @property
    def job_interrupted(self) -> bool:
        return self.job_run.finished is False

    @property
    def max_input_tokens(self) -> int | None:
        return max((w.tokens for w in self.told), default=None)

    def knows(self, name: str) -> bool:
        """False when the evaluation switched this piece of knowledge off (audit/learned.py)."""
        return name not in self.disabled

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
