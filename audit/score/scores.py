"""The base of every report model. No score is computed here: audit/score/conventions.py is the
one place that computes one."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Out(BaseModel):
    """Base of every report model: an unknown field is a bug in the audit, not in the input."""

    model_config = ConfigDict(extra="forbid")
