"""A request that did not fit the model's context window: the agent's doing, or a server
configured shorter than the window the agent was told?

An agent manages its context against the window it is told (Terminus-2's
`model_info.max_input_tokens`, litellm's model info, an agent's own `max_context`...). When the
serving plane serves less (SGLang `--context-length`, vLLM `--max-model-len`, llama.cpp
`--ctx-size`), a request the agent had every reason to send is rejected: a serving
misconfiguration (the seed's pitfall), and the report names both numbers. When the request
was larger than the window it was told too, or nothing says what it was told, the agent let
its prompt outgrow the window: its failure.

Three numbers are read, each with the place it was read from:
- served: the server's own words in the error ("maximum context length is N", "must be <= N",
  llama.cpp's "exceeds the available context size (N tokens)" and "'n_ctx': N"...);
- request: the size of the rejected request, when the error names it;
- told: configs (job and trial `config.json`: any agent kwarg or env named like a context
  window) and logs (`job.log` "Registered custom model ... {'max_input_tokens': N}", agent logs).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from audit.judge.verdict import Proof, short


@dataclass(frozen=True)
class Window:
    tokens: int
    where: str
    quote: str


# Config keys and env vars that tell an agent its model's window (not the server's flags).
_TOLD_KEY = re.compile(
    r"(?i)^(?:max_input_tokens|max_context(?:_length|_tokens|_window|_size)?|context_window(?:_size)?|"
    r"context_length|context_size|max_prompt_tokens|model_context_window|num_ctx|"
    r"(?:llm_|litellm_|openai_)?max_input_tokens|context_window_tokens)$"
)
_TOLD_TEXT = re.compile(
    r"(?i)['\"]?(?:max_input_tokens|context_window|max_context_(?:tokens|size)|model_context_window)"
    r"['\"]?"
    r"\s*[:=]\s*(\d{3,8})|"
    # Terminus-2 without model info: "... Using fallback context limit: 1000000" (the limit it
    # manages its context against, Harbor reference §5.1).
    r"\bfallback context limit\W{0,3}(\d{3,8})"
)
_SERVED = re.compile(
    r"(?i)(?:maximum context length is|context (?:length|window)[^\d\n]{0,20}|"
    r"must be <=\s*|max_model_len[^\d\n]{0,12}|maximum allowed length "
    r"\(?|tokens? > |model'?s context length \()(\d{3,8})"
)
_REQUEST = re.compile(
    r"(?i)(?:you requested (\d+) tokens|input \((\d+) tokens\)|"
    r"Given:\s*(\d+)\s*`?inputs`? tokens|"
    r"prompt is too long:\s*(\d+) tokens|(\d+) input tokens)"
)
# llama.cpp's words ("request (N tokens) exceeds the available context size (M tokens)",
# `n_ctx`, `n_prompt_tokens`).
_SERVED_LLAMA = re.compile(r"(?i)(?:context size[^\d\n]{0,20}|'?n_ctx'?\s*[:=]\s*)(\d{3,8})")
_REQUEST_LLAMA = re.compile(r"(?i)(?:request \((\d+) tokens\)|'?n_prompt_tokens'?\s*[:=]\s*(\d+))")


def _first_number(patterns: list[re.Pattern[str]], text: str) -> int | None:
    found = [m for p in patterns if (m := p.search(text))]
    if not found:
        return None
    m = min(found, key=lambda m: m.start())
    return next(int(g) for g in m.groups() if g)


def served_in(text: str) -> int | None:
    return _first_number([_SERVED, _SERVED_LLAMA], text)


def request_in(text: str) -> int | None:
    return _first_number([_REQUEST, _REQUEST_LLAMA], text)


def told_in_json(text: str | None, where: str) -> list[Window]:
    """Every context-window setting in a JSON config, with its key path."""
    try:
        data = json.loads(text) if text else None
    except ValueError:
        return []
    return told_in_mapping(data, where)


def told_in_mapping(data: object, where: str) -> list[Window]:
    """Every context-window setting in parsed config (a dict or list), with its key path
    (`where` is the file and the path to `data` in it)."""
    found: list[Window] = []
    file, _, base = where.partition(" ")

    def walk(node: object, path: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                sub = f"{path}.{key}" if path else str(key)
                if isinstance(value, (dict, list)):
                    walk(value, sub)
                elif _TOLD_KEY.match(str(key)):
                    number = _number(value)
                    if number:
                        found.append(Window(number, f"{file} {sub}", f"{key}: {value}"))
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{path}[{i}]")

    walk(data, base)
    return found


def told_in_text(text: str | None, where: str) -> list[Window]:
    """Context-window settings a log prints (e.g. litellm's model registration)."""
    found: list[Window] = []
    for n, line in enumerate((text or "").splitlines(), 1):
        m = _TOLD_TEXT.search(line)
        if m:
            found.append(Window(int(m.group(1) or m.group(2)), f"{where}:{n}", short(line)))
            if m.group(2):
                break  # repeated at every call: the first says it
    return found


def _number(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 256 else None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value) if int(value) >= 256 else None
    return None


@dataclass(frozen=True)
class Judgement:
    misconfigured: bool  # True: the server serves less than the agent was told
    served: int | None
    told: Window | None
    request: int | None
    proof: list[Proof]

    def numbers(self) -> str:
        parts = []
        if self.told:
            parts.append(f"told {self.told.tokens}")
        if self.served:
            parts.append(f"served {self.served}")
        if self.request:
            parts.append(f"request {self.request}")
        return ", ".join(parts)


def judge(error: str, error_where: str, told: list[Window]) -> Judgement:
    """Weigh an overflow error against what the agent was told (the largest told window)."""
    served = served_in(error)
    request = request_in(error)
    window = max(told, key=lambda w: w.tokens) if told else None
    if window is None or served is None or window.tokens <= served:
        return Judgement(False, served, window, request, [])
    if request is not None and request > window.tokens:
        # Even the window it was told would not have held this request: it outgrew both.
        return Judgement(False, served, window, request, [])
    line = next((ln for ln in error.splitlines() if str(served) in ln), error)
    return Judgement(
        True,
        served,
        window,
        request,
        [
            Proof(
                "serving_config",
                window.where,
                window.quote,
                f"the agent was told {window.tokens} tokens",
            ),
            Proof("serving_config", error_where, short(line), f"the server serves {served}"),
        ],
    )
