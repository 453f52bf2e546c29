"""Everything a trial directory says about one trial, read tolerantly and lazily.

Only result.json is read for every trial; logs, verifier output, trajectory and recording are
read the first time a rule asks for them, so a passing trial costs one small file read. A
missing or corrupt file becomes an entry in `problems`, never an exception.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from pydantic import ValidationError

from audit import layout as L
from audit.models import TrialResult

SOURCES = (
    "exception",
    "trial_log",
    "verifier_output",
    "agent_commands",
    "agent_output",
    "agent_exit_code",
)

# Terminal escape sequences in panes and recordings would split words that rules look for.
_ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])")


@dataclass(frozen=True)
class Chunk:
    """A piece of evidence text and where it came from (file, and trajectory step if any)."""

    file: str
    text: str
    step: int | None = None

    def where(self, line: int) -> str:
        if self.step is not None:
            return f"{self.file} step {self.step}"
        return f"{self.file}:{line}"


@dataclass
class TrialEvidence:
    layout: L.JobLayout
    trial_dir: str
    result: TrialResult | None = None
    problems: list[str] = field(default_factory=list)
    _sources: dict[str, list[Chunk]] = field(default_factory=dict, repr=False)
    _traj: tuple[list[Chunk] | None, list[Chunk] | None] | None = field(default=None, repr=False)
    _texts: dict[str, str | None] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, layout: L.JobLayout, trial_dir: str) -> TrialEvidence:
        ev = cls(layout, trial_dir)
        raw = ev._read(L.TRIAL_RESULT, required=True)
        if raw is not None:
            try:
                ev.result = TrialResult.model_validate_json(raw)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first.get("loc", ())) or "file"
                ev.problems.append(
                    f"{trial_dir}/{L.TRIAL_RESULT} is corrupt ({where}: {first['msg']})"
                )
        return ev

    def _read(self, rel: str, required: bool = False) -> str | None:
        if rel in self._texts:
            return self._texts[rel]
        try:
            text = self.layout.read_text(f"{self.trial_dir}/{rel}")
        except OSError as exc:
            self.problems.append(f"{self.trial_dir}/{rel} unreadable: {exc}")
            text = None
        else:
            if text is None and required:
                self.problems.append(f"{self.trial_dir}/{rel} is missing")
        self._texts[rel] = text
        return text

    def text(self, rel: str) -> str | None:
        return self._read(rel)

    def source(self, name: str) -> list[Chunk]:
        if name not in self._sources:
            loader = getattr(self, f"_load_{name}", None)
            if loader is None:
                raise KeyError(f"unknown evidence source {name!r} (known: {', '.join(SOURCES)})")
            self._sources[name] = loader()
        return self._sources[name]

    # --- loaders, one per source ---------------------------------------------------------------
    def _load_exception(self) -> list[Chunk]:
        chunks = []
        info = self.result.exception_info if self.result else None
        if info:
            head = f"{info.exception_type or ''}: {info.exception_message or ''}"
            chunks.append(Chunk(f"{L.TRIAL_RESULT} exception_info", head))
            if info.exception_traceback:
                chunks.append(Chunk(f"{L.TRIAL_RESULT} exception_info", info.exception_traceback))
        if info or self.result is None:
            text = self._read(L.TRIAL_EXCEPTION)
            if text:
                chunks.append(Chunk(L.TRIAL_EXCEPTION, text))
        return chunks

    def _load_trial_log(self) -> list[Chunk]:
        return _one(L.TRIAL_LOG, self._read(L.TRIAL_LOG))

    def _load_verifier_output(self) -> list[Chunk]:
        return _one(L.VERIFIER_STDOUT, self._read(L.VERIFIER_STDOUT))

    def _load_agent_exit_code(self) -> list[Chunk]:
        return _one(L.AGENT_EXIT_CODE, self._read(L.AGENT_EXIT_CODE))

    def _load_agent_commands(self) -> list[Chunk]:
        commands, _ = self._trajectory()
        if commands is not None:
            return commands
        _, inputs = self._recording()
        return inputs

    def _load_agent_output(self) -> list[Chunk]:
        _, observations = self._trajectory()
        chunks = list(observations) if observations is not None else []
        if observations is None:
            pane = self._read(L.AGENT_PANE)
            if pane:
                chunks.append(Chunk(L.AGENT_PANE, _ANSI.sub("", pane)))
            else:
                outputs, _ = self._recording()
                chunks.extend(outputs)
        chunks.extend(_one(L.AGENT_ORACLE_LOG, self._read(L.AGENT_ORACLE_LOG)))
        return chunks

    # --- parsers -------------------------------------------------------------------------------
    def _trajectory(self) -> tuple[list[Chunk] | None, list[Chunk] | None]:
        """(command chunks, observation chunks) from the ATIF trajectory; (None, None) if absent."""
        if self._traj is not None:
            return self._traj
        parsed: tuple[list[Chunk] | None, list[Chunk] | None] = (None, None)
        raw = self._read(L.AGENT_TRAJECTORY)
        if raw is not None:
            try:
                data = json.loads(raw)
                steps = data.get("steps") if isinstance(data, dict) else None
                if not isinstance(steps, list):
                    raise ValueError("no steps list")
                parsed = _trajectory_chunks(steps)
            except (ValueError, AttributeError, TypeError) as exc:
                self.problems.append(f"{self.trial_dir}/{L.AGENT_TRAJECTORY} is corrupt ({exc})")
        self._traj = parsed
        return parsed

    def _recording(self) -> tuple[list[Chunk], list[Chunk]]:
        """(output chunks, input chunks) from the asciinema v2 cast."""
        raw = self._read(L.AGENT_RECORDING)
        if not raw:
            return [], []
        out, inp, bad = [], [], 0
        for line in raw.splitlines()[1:]:
            try:
                _, kind, data = json.loads(line)
            except (ValueError, TypeError):
                bad += 1
                continue
            (out if kind == "o" else inp).append(str(data))
        if bad:
            # A cast cut off by a killed container has a torn last line: worth noting, not fatal.
            self.problems.append(f"{self.trial_dir}/{L.AGENT_RECORDING}: {bad} unreadable lines")
        clean_out = _ANSI.sub("", "".join(out)).replace("\r\n", "\n").replace("\r", "\n")
        clean_in = "".join(inp).replace("\r", "\n")
        return (
            _one(L.AGENT_RECORDING, clean_out),
            _one(L.AGENT_RECORDING, clean_in),
        )


def _one(file: str, text: str | None) -> list[Chunk]:
    return [Chunk(file, text)] if text else []


def _trajectory_chunks(steps: list) -> tuple[list[Chunk], list[Chunk]]:
    commands, observations = [], []
    for step in steps:
        if not isinstance(step, dict) or step.get("source") != "agent":
            continue
        step_id = step.get("step_id")
        keys = []
        for call in step.get("tool_calls") or []:
            args = (call or {}).get("arguments") or {}
            if isinstance(args, dict) and isinstance(args.get("keystrokes"), str):
                keys.append(args["keystrokes"])
        if keys:
            commands.append(Chunk(L.AGENT_TRAJECTORY, "\n".join(keys), step_id))
        results = ((step.get("observation") or {}).get("results")) or []
        texts = [r.get("content") for r in results if isinstance(r, dict)]
        text = "\n".join(t for t in texts if isinstance(t, str))
        if text:
            observations.append(Chunk(L.AGENT_TRAJECTORY, text, step_id))
    return commands, observations
