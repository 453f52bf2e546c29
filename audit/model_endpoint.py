"""Model-endpoint failures by kind, read from the exception that ended the trial.

An agent talks to the model through an OpenAI-compatible client (litellm, openai, httpx, or
its own code); the server behind it may be SGLang, vLLM, llama.cpp, TGI or a hosted API. Who
is to blame depends on the kind, not on the exception class:

- the server failed or refused service (5xx, 429, 402/quota, auth, no connection, a body that
  is not JSON): infra, the model never got to answer;
- the call timed out: not proof of either side. A client's own limit also ends a runaway
  generation (the model's doing), so it is insufficient_evidence unless the connection itself
  never opened (a connect timeout: unreachable);
- the request did not fit the context window: the agent's own doing (it let its prompt grow
  past the served context) unless the job told the agent a larger limit than the server has,
  which is a stack misconfiguration;
- the server could not parse what the model generated (llama.cpp "Failed to parse input",
  a tool-call parser error) or rejected a malformed request the agent's harness built (400):
  the model's or the agent's failure, not an outage.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Exception names and messages that mean "this came from the model client".
_CLIENT = re.compile(
    r"(?:litellm|openai|anthropic|httpx|APIError|APIStatusError|APIConnectionError|"
    r"APITimeoutError|InternalServerError|ServiceUnavailableError|BadGatewayError|"
    r"RateLimitError|BadRequestError|AuthenticationError|PermissionDeniedError|"
    r"ContextWindowExceededError|NotFoundError|UnprocessableEntityError|OpenAIException|"
    r"Error code: \d{3}|API Error:?\s*\d{3}|validation errors? for ChatCompletion)"
)

# Context overflow as the servers word it (read from their sources and error pages):
# vLLM/OpenAI "maximum context length is N tokens", SGLang "longer than the model's context
# length" / "exceeds the maximum allowed length", llama.cpp "exceeds the available context
# size" / exceed_context_size_error, TGI "Input validation error: `inputs` tokens +
# `max_new_tokens` must be <= N", litellm ContextWindowExceededError.
_CONTEXT = re.compile(
    r"(?i)(?:maximum context length|context length exceeded|context_length_exceeded|"
    r"longer than the model'?s context length|exceeds? the (?:available|maximum) context|"
    r"exceed_context_size|ContextWindowExceeded|`?inputs`? tokens \+ `?max_new_tokens`? must be"
    r" <=|prompt is too long|input is too long|too many tokens|exceeds the maximum allowed length"
    r"|context window)"
)
_SERVED_CTX = re.compile(
    r"(?i)(?:maximum context length is|context (?:size|length)[^\d]{0,20}|n_ctx'?:\s*|"
    r"must be <=\s*)(\d{3,7})"
)
_PARSE_OUTPUT = re.compile(
    r"(?i)(?:failed to parse (?:input|tool call|the model output|generated)|"
    r"tool[_ ]call[^\n]{0,40}pars(?:e|ing) (?:error|failed)|could not parse tool call|"
    r"invalid tool call)"
)
_STATUS = re.compile(r"(?i)(?:error code|status(?:_code)?|HTTP)[:= ]+\s*(\d{3})\b")
_KINDS: list[tuple[str, re.Pattern[str]]] = [
    (
        "quota",
        re.compile(
            r"(?i)(?:\b402\b|insufficient_quota|exceeded your current quota|billing|"
            r"payment required|out of credits|credit balance|ApiUsageLimitError)"
        ),
    ),
    (
        "auth",
        re.compile(
            r"(?i)(?:AuthenticationError|PermissionDeniedError|\b401\b|invalid api key|"
            r"incorrect api key|unauthorized|invalid_api_key|AgentAuthenticationError)"
        ),
    ),
    ("rate_limit", re.compile(r"(?i)(?:RateLimitError|\b429\b|rate limit|too many requests)")),
    (
        "not_json",
        re.compile(
            r"(?i)(?:JSONDecodeError|Expecting value: line 1 column 1|not valid JSON|"
            r"Unexpected token '?<|invalid json|failed to decode json|unexpected content-type)"
        ),
    ),
    (
        # The client library could not read the reply as the API's schema (pydantic's
        # "validation error for ChatCompletion": `choices` or `usage` missing, an error object).
        "malformed_reply",
        re.compile(
            r"(?i)validation errors? for (?:ChatCompletion\w*|Message|Completion|ModelResponse|"
            r"CreateChatCompletionResponse)\b"
        ),
    ),
    (
        "unreachable",
        re.compile(
            r"(?i)(?:APIConnectionError|Connection error|ConnectTimeout|connect timeout|"
            r"timed out while connecting|connection refused|ConnectError|"
            r"Failed to establish a new connection|Name or service not known|"
            r"Temporary failure in name resolution|RemoteProtocolError|Server disconnected)"
        ),
    ),
    (
        "timeout",
        re.compile(
            r"(?i)(?:APITimeoutError|Request timed out|ReadTimeout|timed out waiting for|"
            r"litellm\.Timeout|Timeout: )"
        ),
    ),
    (
        "server_error",
        re.compile(
            r"(?i)(?:InternalServerError|ServiceUnavailableError|BadGatewayError|"
            r"\b50[0-4]\b|\b529\b|overloaded|No available workers|Service Unavailable|Bad Gateway|"
            r"upstream connect error|no healthy upstream|Provider returned error|"
            r"The server had an error)"
        ),
    ),
]
KIND_TEXT = {
    "quota": "the model API refused for quota or billing (402)",
    "auth": "the model API rejected the credentials (401/403)",
    "rate_limit": "the model endpoint rate-limited the agent (429) until its retries ran out",
    "not_json": "the model endpoint answered with a body that is not JSON (an HTML error page, "
    "an empty or cut-off reply)",
    "malformed_reply": "the model endpoint's reply did not follow the API's schema (a field "
    "such as `choices` or `usage` missing: an error object or a cut-off reply)",
    "timeout": "the model endpoint did not answer in time",
    "unreachable": "the agent could not connect to the model endpoint",
    "server_error": "the model endpoint answered with a server error (5xx)",
}
# A timeout proves nothing by itself (see the module docstring): not an excuse.
INFRA_KINDS = tuple(k for k in KIND_TEXT if k != "timeout")


@dataclass(frozen=True)
class EndpointFailure:
    kind: str  # one of INFRA_KINDS, or context_overflow / bad_request / unparseable_output
    status: int | None
    served_context: int | None


def from_client(text: str) -> bool:
    return bool(_CLIENT.search(text))


_FRAME_LINE = re.compile(r'(?m)^\s*File "[^"]*", line \d+, in .*$')


def classify(message: str, traceback: str, phrases: bool = True) -> EndpointFailure | None:
    """Judge by the exception's own words first; the traceback's only when they say nothing.

    `phrases=False` leaves out the servers' own words for an unparseable generation (knowledge
    first met on the dev set; audit/learned.py switches it off to measure generalization)."""
    return classify_text(message, phrases) or classify_text(_FRAME_LINE.sub("", traceback), phrases)


def classify_text(text: str, phrases: bool = True) -> EndpointFailure | None:
    """The kind of model-endpoint failure an exception's type + message show."""
    if not text or not from_client(text):
        return None
    return classify_words(text, phrases)


def classify_words(text: str, phrases: bool = True) -> EndpointFailure | None:
    """The kind of failure the words show, without asking that a model client said them (for
    text already known to be about a model call: an agent's own log of it, its model-call
    code in the traceback)."""
    if not text:
        return None
    m = _STATUS.search(text)
    status = int(m.group(1)) if m else None
    if _CONTEXT.search(text):
        ctx = _SERVED_CTX.search(text)
        return EndpointFailure("context_overflow", status, int(ctx.group(1)) if ctx else None)
    if phrases and _PARSE_OUTPUT.search(text):
        return EndpointFailure("unparseable_output", status, None)
    for kind, pattern in _KINDS:
        if pattern.search(text):
            return EndpointFailure(kind, status, None)
    if status is not None and 400 <= status < 500:
        return EndpointFailure("bad_request", status, None)
    if "BadRequestError" in text or "UnprocessableEntityError" in text:
        return EndpointFailure("bad_request", status, None)
    return None
