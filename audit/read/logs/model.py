"""What an agent's own logs say, in one shape whatever agent wrote them.

Each reader (one module per log format in this package) turns the files an agent left into an
`AgentLog`: its model calls and the commands it ran, in the order they happened, and how the
run ended in the agent's own words. Every item keeps `where` it was read (`file:line`,
`file step N`, or a file and the JSON path), so a detector can quote it as evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Usage:
    """The token counts a model reply carried; no prompt count at all (`prompt_tokens` 0 or
    None, and no cached tokens either): no usage block."""

    prompt_tokens: int | None
    completion_tokens: int | None
    # Prompt tokens served from the cache, where the log counts them apart from prompt_tokens.
    cached_tokens: int | None = None

    @property
    def missing(self) -> bool:
        # A non-empty prompt always costs tokens: 0 means the endpoint sent no count. A prompt
        # read whole from the cache may show 0 uncached tokens: it was counted.
        return not self.prompt_tokens and not self.cached_tokens


@dataclass(frozen=True)
class Call:
    """One model call as the agent recorded it."""

    where: str
    text: str  # what the reply said ("" when empty)
    acted: bool  # it carried a tool call or a command
    usage: Usage | None = None  # None: this log records no usage for any call
    finish_reason: str | None = None
    error: str | None = None  # the endpoint error recorded instead of a reply
    usage_at: str | None = None  # where the usage was read, when not `where` itself
    at: str | None = None  # when it was answered (ISO time), when the log says
    status: int | None = None  # the HTTP status, when the log kept it

    @property
    def answered(self) -> bool:
        """The endpoint replied with model output: tokens generated, or text or a tool call."""
        if self.error:
            return False
        tokens = self.usage.completion_tokens if self.usage else None
        return bool(tokens) or bool(self.text.strip()) or self.acted

    @property
    def usage_where(self) -> str:
        return self.usage_at or self.where


@dataclass(frozen=True)
class Action:
    """One command the agent sent to the environment, and what came back."""

    where: str
    command: str
    output: str | None = None
    output_where: str | None = None
    # The per-command cap, when the log says the command ran past it: seconds, and the line.
    cap_seconds: float | None = None
    cap_quote: str | None = None
    exit_code: int | None = None
    started: str | None = None  # ISO times, when the log says
    ended: str | None = None


@dataclass(frozen=True)
class RunEnd:
    """How the run ended, in the agent's own words (an exit status and its message)."""

    where: str
    status: str
    message: str = ""
    is_error: bool = False


@dataclass
class AgentLog:
    source: str  # the reader: atif, terminus-episodes, claude-code, openhands, mini-swe-agent...
    events: list[Call | Action] = field(default_factory=list)
    end: RunEnd | None = None
    # Where the log records a file the agent changed (Codex's `file_change` items): the work a
    # run kept, whatever ended it.
    changes: list[str] = field(default_factory=list)

    @property
    def calls(self) -> list[Call]:
        return [e for e in self.events if isinstance(e, Call)]

    @property
    def actions(self) -> list[Action]:
        return [e for e in self.events if isinstance(e, Action)]

    def last(self) -> Call | Action | None:
        return self.events[-1] if self.events else None
