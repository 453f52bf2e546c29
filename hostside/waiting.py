"""A step that waits for something on the host the program cannot change (a rerun waiting for
its main job to finish, components/harbor_rerun.py): it runs nothing, says why, and a later
`up` replaces it with the real step once the reason is gone."""

from __future__ import annotations

from dataclasses import dataclass

from .step import emit, log, verb


@dataclass(frozen=True)
class Inputs:
    waiting: str
    step: str


@verb(Inputs)
def create(inputs: Inputs) -> None:
    log(inputs.step, f"not run yet: {inputs.waiting}")
    emit({"waiting": inputs.waiting})
