"""Terminus-2's per-episode logs: `agent/episode-N/{prompt.txt, response.txt, debug.json}`.

Each episode is one model call: `response.txt` is the model's reply (the JSON or XML of
Terminus-2's parsers: `commands` with `keystrokes`), the next episode's `prompt.txt` carries the
terminal output those commands produced, and Terminus-2's timeout template ("The previous
command timed out after N seconds") when one outran its duration. `debug.json` is litellm's log
of the request and response, where the usage block is when the endpoint sent one.
"""

from __future__ import annotations

import json
import re

from audit.read.caps import cap_in
from audit.read.logs.common import TrialFiles, load_json, usage_of
from audit.read.logs.model import Action, AgentLog, Call, Usage

_EPISODE = re.compile(r"^episode-(\d+)/")
_XML_KEYS = re.compile(r"<keystrokes[^>]*>(.*?)</keystrokes>", re.DOTALL)


def read(files: TrialFiles) -> AgentLog | None:
    numbers = sorted({int(m.group(1)) for f in files.agent_files() if (m := _EPISODE.match(f))})
    if not numbers:
        return None
    log = AgentLog("terminus-episodes")
    for n in numbers:
        base = f"agent/episode-{n}"
        response = files.text(f"{base}/response.txt")
        if response is None:
            continue
        analysis, commands = _parse(response)
        debug = load_json(files.text(f"{base}/debug.json"))
        sent = debug.get("end_time") if isinstance(debug, dict) else None
        log.events.append(
            Call(
                f"{base}/response.txt",
                analysis or response.strip()[:2000],
                acted=bool(commands),
                usage=_usage(debug),
                usage_at=f"{base}/debug.json",
            )
        )
        following = f"agent/episode-{n + 1}/prompt.txt"
        output = files.text(following)
        cap = cap_in(output)
        for i, keys in enumerate(commands):
            last = i == len(commands) - 1
            named = cap is not None and keys.strip() and keys.strip() in (output or "")
            log.events.append(
                Action(
                    f"{base}/response.txt",
                    keys,
                    output=output if last else None,
                    output_where=following if last and output is not None else None,
                    cap_seconds=cap.seconds if cap and (named or last) else None,
                    cap_quote=cap.quote if cap and (named or last) else None,
                    started=sent if isinstance(sent, str) else None,
                )
            )
    return log if log.events else None


def _parse(response: str) -> tuple[str, list[str]]:
    """(analysis, keystrokes) from a reply: Terminus-2's JSON object (it may sit inside other
    text), its XML, or tool calls in the OpenAI Chat Completions shape (`function.arguments`, a
    JSON string holding the same object) that a Terminus-2 derivative logs instead."""
    analysis, commands = "", []
    for value in _json_values(response):
        for data in _objects(value):
            keys = [
                c["keystrokes"]
                for c in data.get("commands") or []
                if isinstance(c, dict) and isinstance(c.get("keystrokes"), str)
            ]
            if keys or "analysis" in data:
                analysis = analysis or str(data.get("analysis") or "")
                commands += keys
    if analysis or commands:
        return analysis, commands
    return "", [m.strip("\n") + "\n" for m in _XML_KEYS.findall(response)]


def _json_values(text: str) -> list[object]:
    """Every top-level JSON object or array in the text, in order."""
    decoder = json.JSONDecoder()
    out: list[object] = []
    i = 0
    while (i := _next_open(text, i)) != -1:
        try:
            value, end = decoder.raw_decode(text, i)
        except ValueError:
            i += 1
            continue
        out.append(value)
        i = end
    return out


def _next_open(text: str, start: int) -> int:
    found = [j for j in (text.find("{", start), text.find("[", start)) if j != -1]
    return min(found) if found else -1


def _objects(value: object) -> list[dict]:
    """The reply objects in a value: itself, the items of a list, and the arguments of a tool
    call (`function.arguments` as a JSON string)."""
    items = value if isinstance(value, list) else [value]
    out: list[dict] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        out.append(item)
        function = item.get("function")
        arguments = function.get("arguments") if isinstance(function, dict) else None
        if isinstance(arguments, str):
            parsed = load_json(arguments)
            if isinstance(parsed, dict):
                out.append(parsed)
    return out


def _usage(debug: object) -> Usage | None:
    """The first `usage` object with token counts anywhere in litellm's debug log."""
    stack = [debug]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            usage = node.get("usage")
            if isinstance(usage, dict) and {"prompt_tokens", "completion_tokens"} & set(usage):
                return usage_of(usage)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return None
