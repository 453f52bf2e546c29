"""The one reader of an HTTP status, wherever a record writes it.

A status reaches the files in many spellings, and every one of them is read here, so that a
model client's exception, an agent's event, a server's JSON body and a gateway's HTML page say
the same thing to the judge (issue #34: "read a status wherever it is written, with one status
parser"):

- a client's words before the number: `Error code: 402` (the OpenAI and Anthropic SDKs),
  `status_code=503` (httpx, requests), `HTTP 429` and `HTTP/1.1 502` (a status line, RFC 9112
  §4), `API Error: 529` (Claude Code), `status: 400`;
- a JSON body's own field: `"status": 400`, `"statusCode": 502`, `'code': 500` (a Python repr
  of one), the number or a string of it;
- the status line's number with its reason phrase (RFC 9110 §15), as gateways' HTML error
  pages title themselves (`<title>502 Bad Gateway</title>`).

Only 1xx-5xx numbers are statuses; a number anywhere else (a port, a count, a line number) is
not read.
"""

from __future__ import annotations

import re

from audit.read import readings

# A client's or a tool's word for it, then the number.
_WORDS = re.compile(
    r"(?i)(?:\berror code|\bstatus(?:[_ ]code)?|\bHTTP|\bAPI Error|['\"]code['\"])[:= ]+\s*"
    r"([1-5]\d\d)\b"
)
# A JSON body's own field (`"status": 400`, `"statusCode": "502"`) and a status line.
_BODY = re.compile(
    r"(?i)(?:['\"](?:status|statusCode|status_code|code)['\"]\s*:\s*['\"]?|"
    r"\bHTTP/\d(?:\.\d)?\s+)([1-5]\d\d)\b"
)
# RFC 9110 §15's reason phrases of the statuses a model endpoint or a sandbox provider answers,
# after the number, as gateways' HTML error pages title themselves.
_REASON = re.compile(
    r"\b([45]\d\d)\s+(?:Bad Request|Unauthorized|Payment Required|Forbidden|Not Found|"
    r"Request Timeout|Conflict|Unprocessable (?:Entity|Content)|Too Many Requests|"
    r"Internal Server Error|Not Implemented|Bad Gateway|Service Unavailable|"
    r"Gateway Time-?out)\b",
    re.IGNORECASE,
)


def status_in(text: str | None) -> int | None:
    """The first HTTP status the text writes, in any of the spellings above; None if none."""
    if not text:
        return None
    patterns = [_WORDS]
    if readings.on("refused_from_a_moment"):
        patterns += [_BODY, _REASON]
    found = [m for p in patterns if (m := p.search(text))]
    if not found:
        return None
    return int(min(found, key=lambda m: m.start()).group(1))


def says_status(text: str | None) -> bool:
    return status_in(text) is not None
