"""Was the model reached? A fact of every trial, read before any verdict and shown in every report.

Three records answer it, each where it was read:
- result.json's token counts (`agent_result.n_input_tokens`, `n_output_tokens`): output tokens
  mean the model generated;
- the agent's own log of its model calls (audit/read/logs/): a call answered with text, a tool
  call or generated tokens is a reply; a call recorded with an error is a failed call;
- the first call's outcome: answered, failed (with the endpoint's words), or not recorded.

The answer:
- `yes`: a reply, or output tokens;
- `no`: calls were recorded and every one failed; or none was recorded and the agent never ran
  (result.json has no agent execution: its setup or the environment failed first); or none was
  recorded, the counts are an explicit zero and the chain's root cause arose in the model
  client (the run ended on its first call);
- `no model`: the agent asks no model (Harbor's oracle and nop);
- `unknown`: nothing records it either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from audit.read.evidence import TrialEvidence
from audit.read.logs import Call

NO_MODEL_AGENTS = ("oracle", "nop")

Answer = Literal["yes", "no", "unknown", "no model"]


@dataclass(frozen=True)
class Reached:
    answer: Answer
    replies: int | None  # None: not counted (output tokens already answered it)
    failed_calls: int | None
    input_tokens: int | None
    output_tokens: int | None
    first_call: str  # "answered", "failed: <words>", "not recorded"
    first_where: str | None  # where the first call was read
    first_error: str | None = None  # the first failed call's words, verbatim

    def line(self) -> str:
        tokens = (
            "no token counts"
            if self.input_tokens is None and self.output_tokens is None
            else f"tokens in {self.input_tokens or 0:,} / out {self.output_tokens or 0:,}"
        )
        at = f" ({self.first_where})" if self.first_where else ""
        if self.replies is None:
            return f"{self.answer}: {tokens} (the model generated; its log not read)"
        return (
            f"{self.answer}: {self.replies} replies, {self.failed_calls} failed calls, {tokens}; "
            f"first call {self.first_call}{at}"
        )


def model_reached(ev: TrialEvidence) -> Reached:
    """The trial's answer, read once."""
    found = ev.facts.get("reached")
    if isinstance(found, Reached):
        return found
    ev.facts["reached"] = out = _read(ev)
    return out


def _read(ev: TrialEvidence) -> Reached:
    result = ev.result
    agent = result.agent_result if result else None
    tokens_in = agent.n_input_tokens if agent else None
    tokens_out = agent.n_output_tokens if agent else None
    if (tokens_out or 0) > 0:
        # Output tokens are a model's generation: reached, without reading any log (most
        # trials; the audit of a passing trial reads result.json alone).
        return Reached("yes", None, None, tokens_in, tokens_out, "answered", None)
    name = (ev.agent().name or "").lower()
    no_model = name in NO_MODEL_AGENTS and not ev.agent().import_path
    calls: list[Call] = [c for log in ev.agent_logs() for c in log.calls]
    replies = sum(1 for c in calls if c.answered)
    failed = [c for c in calls if c.error]
    first = calls[0] if calls else None
    first_call = (
        "not recorded"
        if first is None
        else "answered"
        if first.answered
        else f"failed: {_short(first.error)}"
        if first.error
        else "empty"
    )

    def said(answer: Answer) -> Reached:
        return Reached(
            answer,
            replies,
            len(failed),
            tokens_in,
            tokens_out,
            first_call,
            first.where if first else None,
            failed[0].error if failed else None,
        )

    if no_model:
        return said("no model")
    if replies or (tokens_out or 0) > 0:
        return said("yes")
    if calls and len(failed) == len(calls):
        return said("no")
    span = result.agent_execution if result else None
    if not calls and result is not None and not ev.result_missing and span is None:
        return said("no")  # the agent never ran (its setup or the environment failed first)
    found = ev.origin()
    ended_on_first_call = found is not None and found.layer == "model_client"
    if not calls and tokens_in == 0 and tokens_out == 0 and ended_on_first_call:
        return said("no")
    return said("unknown")


def _short(text: str | None, limit: int = 120) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
