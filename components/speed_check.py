"""SpeedCheck: the serving plane measured at the job's agent concurrency before the job launches.

Once the router has proven the serving plane ready, one host step on the Harbor host
(hostside/speed_check.py) sends a short load through the gateway: `harbor.agent.n_concurrent`
clients, `serving.speed_check.rounds` streamed completions each, prompts of the tasks' typical
first-prompt length, bounded by `timeout_s`. Its figures (decode tokens/s per request, time to
first token) are an output the provenance manifest records; a floor or ceiling the config sets
and the measurement misses stops `up` there, with both figures, before Harbor starts.

It runs again when the gateway or a worker is replaced (their readiness outputs are its
trigger) or when what it measures changes; a resume of the job does not re-run it.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pulumi

from components.config import SpeedCheckConfig
from components.seam.host import Host
from components.seam.step import content_hash, host_step
from hostside import speed_check

# Terminus-2's first prompt (Harbor 0.21.0's terminus-json-plain.txt: 2,916 characters) wraps
# the task's instruction and the terminal's first screen; about 4 characters make a token.
AGENT_TEMPLATE_CHARS = 2916
TERMINAL_CHARS = 600
CHARS_PER_TOKEN = 4
# A task dir without its instruction (a manifest of task.toml files alone): a typical one.
TYPICAL_INSTRUCTION_CHARS = 1500


def typical_prompt_tokens(tasks_dir: str | None) -> int:
    """The median first prompt of the dataset's tasks, in tokens: the agent's template around
    each task's instruction.md (TYPICAL_INSTRUCTION_CHARS where none is there to read)."""
    sizes = []
    if tasks_dir:
        sizes = [len(p.read_text(errors="replace"))
                 for p in sorted(Path(tasks_dir).glob("*/instruction.md"))]
    instruction = statistics.median(sizes) if sizes else TYPICAL_INSTRUCTION_CHARS
    return int((AGENT_TEMPLATE_CHARS + TERMINAL_CHARS + instruction) // CHARS_PER_TOKEN)


@dataclass(frozen=True, kw_only=True)
class SpeedCheckArgs:
    host: Host
    check: SpeedCheckConfig
    # The gateway's base URL on the Harbor host, resolved once it is proven ready.
    router_url: pulumi.Input[str]
    model: str
    concurrency: int
    # The dataset's task dirs where Pulumi runs (the typical prompt is read from them).
    tasks_dir: str | None = None
    # What a new one must be measured again after: the router's and workers' readiness.
    ready: Sequence[pulumi.Input[str]] = ()


class SpeedCheck(pulumi.ComponentResource):
    """The measured figures (`figures`: the step's outputs), or a failed `up`."""

    figures: pulumi.Output[dict]

    def __init__(self, name: str, args: SpeedCheckArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("benchstack:components:SpeedCheck", name, None, opts)
        if args.concurrency < 1:
            raise ValueError("SpeedCheckArgs.concurrency: at least one client is needed")
        check = args.check
        inputs = {
            "url": args.router_url,
            "model": args.model,
            "concurrency": args.concurrency,
            "rounds": check.rounds,
            "prompt_tokens": check.prompt_tokens or typical_prompt_tokens(args.tasks_dir),
            "output_tokens": check.output_tokens,
            "timeout_s": check.timeout_s,
            "min_decode_tokens_per_s": check.min_decode_tokens_per_s,
            "max_time_to_first_token_s": check.max_time_to_first_token_s,
        }
        measured = {k: v for k, v in inputs.items() if k != "url"}
        run = host_step(
            f"{name}-measure",
            host=args.host,
            create=speed_check.create,
            inputs=inputs,
            # A new gateway or worker is another serving plane to measure; so is another load.
            triggers=[content_hash(json.dumps(measured, sort_keys=True)), *args.ready],
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.figures = run.outputs.apply(lambda out: dict(out or {}))
        self.register_outputs({"figures": self.figures})
