"""Model-endpoint failures by kind, read from the exception that ended the trial.

An agent talks to the model through an OpenAI-compatible client (litellm, openai, httpx, or
its own code); the server behind it may be SGLang, vLLM, llama.cpp, TGI or a hosted API. Who
is to blame depends on the kind, not on the exception class:

- the endpoint was unavailable whatever the request (502, 503, 504, Anthropic's 529, a
  provider's status body such as "overloaded" or "no healthy upstream"), refused service for
  the account (429, 402/quota, 401/403), could not be connected to, or answered outside the
  protocol (a body that is not JSON, a reply outside the API's schema): infra, the model never
  got to answer;
- a 500 (an InternalServerError without a status) is the server failing on the request (RFC
  9110 §15.6.1): the serving plane is outside the system under test (the model and the agent's
  harness as configured), so it is infra too, quoting the server's words, unless the body says
  what it failed to parse (below);
- a 5xx whose body says the server failed to parse something was caused by what it was given,
  not by an outage: when the body names the model's generation (its tool call, the call's
  arguments, the chat template's markup), the model's failure; otherwise nobody's proof;
- the call timed out: not proof of either side. A client's own limit also ends a runaway
  generation (the model's doing), so it is insufficient_evidence unless the connection itself
  never opened (a connect timeout: unreachable);
- the request did not fit the context window: the agent's own doing (it let its prompt grow
  past the served context) unless the job told the agent a larger limit than the server has,
  which is a stack misconfiguration;
- any other 4xx is a client error (RFC 9110 §15.5): the request the agent's harness built.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from audit.read import readings
from audit.read.status import status_in

# The client could not build a request from the address it was given, so nothing was sent: the
# operator's launch configuration kept the model from being reached. Each library's own words:
# the Rust `url` crate's ParseError::RelativeUrlWithoutBase ("relative URL without a base") and
# reqwest's Builder error ("builder error"); Python requests' MissingSchema and InvalidURL ("No
# scheme supplied", "No host supplied", "Invalid URL"); httpx's UnsupportedProtocol ("Request URL
# is missing an 'http://' or 'https://' protocol"); Go net/http ("unsupported protocol scheme");
# Node's URL parser and fetch (ERR_INVALID_URL, "Failed to parse URL from").
_ADDRESS = re.compile(
    r"(?i)(?:relative URL without a base|\bbuilder error\b|No (?:scheme|host) supplied|"
    r"\bInvalid URL\b|UnsupportedProtocol|missing an 'http://' or 'https://' protocol|"
    r"unsupported protocol scheme|ERR_INVALID_URL|Failed to parse URL from)"
)
# A stream the server itself ended with its protocol's failure event: the Responses API's
# `response.failed` ("an event that is emitted when a response fails"), a server-sent-events
# stream's `error` event. The endpoint's answer, like a 5xx, when the run kept nothing
# (audit/judge/detectors/endpoint.py).
_STREAM_FAILED = re.compile(r"(?i)\bresponse\.failed\b|\bevent:\s*error\b|\berror event\b")
# Exception names and messages that mean "this came from the model client".
_CLIENT = re.compile(
    r"(?:litellm|openai|anthropic|httpx|APIError|APIStatusError|APIConnectionError|"
    r"APITimeoutError|InternalServerError|ServiceUnavailableError|BadGatewayError|"
    r"RateLimitError|BadRequestError|AuthenticationError|PermissionDeniedError|"
    r"ContextWindowExceededError|NotFoundError|UnprocessableEntityError|OpenAIException|"
    r"Error code: \d{3}|API Error:?\s*\d{3}|validation errors? for ChatCompletion)"
)

# Context overflow as the servers word it: vLLM/OpenAI "maximum context length is N tokens"
# (the phrase the Harbor reference §5.2 quotes), SGLang "longer than the model's context
# length" / "exceeds the maximum allowed length", TGI "Input validation error: `inputs` tokens
# + `max_new_tokens` must be <= N", litellm ContextWindowExceededError.
_CONTEXT = re.compile(
    r"(?i)(?:maximum context length|context length exceeded|context_length_exceeded|"
    r"longer than the model'?s context length|exceeds? the maximum context|"
    r"ContextWindowExceeded|`?inputs`? tokens \+ `?max_new_tokens`? must be"
    r" <=|prompt is too long|input is too long|too many tokens|exceeds the maximum allowed length"
    r"|context window)"
)
# llama.cpp's own words for it ("request (N tokens) exceeds the available context size (M
# tokens)", `exceed_context_size_error`, `n_ctx`).
_CONTEXT_LLAMA = re.compile(r"(?i)(?:exceeds? the available context|exceed_context_size)")
_SERVED_CTX = re.compile(
    r"(?i)(?:maximum context length is|context length[^\d]{0,20}|must be <=\s*)(\d{3,7})"
)
_SERVED_CTX_LLAMA = re.compile(r"(?i)(?:context size[^\d]{0,20}|n_ctx'?:\s*)(\d{3,7})")
_UNREACHABLE = re.compile(
    r"(?i)(?:APIConnectionError|Connection error|ConnectTimeout|connect timeout|"
    r"timed out while connecting|connection refused|ConnectError|"
    r"Failed to establish a new connection|Name or service not known|"
    r"Temporary failure in name resolution|RemoteProtocolError|Server disconnected)"
)
# The account refused service, tried in this order.
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
]
# A refusal that names a limit and when it resets: the words of a rate limit (RFC 6585 §4: a 429
# says how long to wait; the providers' `x-ratelimit-reset-*` and `anthropic-ratelimit-*-reset`
# headers), as a client renders it when it writes the refusal in place of a reply.
_LIMIT_RESETS = re.compile(r"(?i)\blimit\b[^\n.]{0,40}\bresets?\b")
# What the client observed of the reply, tried in this order.
_OBSERVED: list[tuple[str, re.Pattern[str]]] = [
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
    ("unreachable", _UNREACHABLE),
    (
        "timeout",
        re.compile(
            r"(?i)(?:APITimeoutError|Request timed out|ReadTimeout|timed out waiting for|"
            r"litellm\.Timeout|Timeout: )"
        ),
    ),
]
# The endpoint unavailable whatever the request (RFC 9110 §15.6.3-5; Anthropic's 529
# overloaded_error; gateways' and providers' status bodies).
_UNAVAILABLE = re.compile(
    r"(?i)(?:ServiceUnavailableError|BadGatewayError|GatewayTimeout|\b50[234]\b|\b529\b|"
    r"overloaded|No available workers|Service Unavailable|Bad Gateway|Gateway Time-?out|"
    r"upstream connect error|no healthy upstream)"
)
# A server error on one request: a 500 or a 5xx class name without a status.
_INTERNAL = re.compile(
    r"(?i)(?:InternalServerError|\b500\b|Internal Server Error|The server had an error|"
    r"Provider returned error)"
)
# A server's own words that it failed to parse something (any server, any parser).
_PARSE_FAILED = re.compile(
    r"(?i)(?:(?:failed|unable|could ?not|cannot|can't) (?:to )?parse|pars(?:e|ing) error|"
    r"error (?:while )?parsing|syntax error|unterminated string|invalid (?:tool|function)[ _]call"
    r"|malformed (?:tool|function|json|output))"
)
# ... of what the model generated: its tool call, the call's arguments, its output.
_GENERATION = re.compile(
    r"(?i)(?:tool[ _-]?calls?|function[ _-]?calls?|\barguments\b|generat(?:ed|ion)|"
    r"model(?:'s)? output|completion text)"
)
# Servers' own wording for a generation they could not parse, whatever the status (llama.cpp's
# "Failed to parse input at pos N" names neither a tool call nor its arguments).
_PARSE_OUTPUT = re.compile(
    r"(?i)(?:failed to parse (?:input|tool call|the model output|generated)|"
    r"tool[_ ]call[^\n]{0,40}pars(?:e|ing) (?:error|failed)|could not parse tool call|"
    r"invalid tool call)"
)
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
    "server_error": "the model endpoint was unavailable (a 502, 503, 504 or 529, or its "
    "status body)",
    "internal_error": "the model endpoint failed on a request (500)",
    "unanswered": "the model endpoint sent no answer, not even the response's headers, before "
    "the client's timeout",
    "address_invalid": "the model client could not build a request from the address it was "
    "given (the operator's launch configuration): nothing was sent",
}
# A timeout proves nothing by itself (see the module docstring); a 500 is the serving plane's.
INFRA_KINDS = tuple(k for k in KIND_TEXT if k != "timeout")


@dataclass(frozen=True)
class EndpointFailure:
    # one of KIND_TEXT, or context_overflow / bad_request / unparseable_output /
    # content_rejected (a 5xx whose body says the server failed to parse what it was given)
    kind: str
    status: int | None
    served_context: int | None


def from_client(text: str) -> bool:
    return bool(_CLIENT.search(text))


_FRAME_LINE = re.compile(r'(?m)^\s*File "[^"]*", line \d+, in .*$')


def classify(message: str, traceback: str) -> EndpointFailure | None:
    """Judge by the exception's own words first; the traceback's only when they say nothing."""
    return classify_text(message) or classify_text(_FRAME_LINE.sub("", traceback))


def classify_text(text: str) -> EndpointFailure | None:
    """The kind of model-endpoint failure an exception's type + message show."""
    if not text or not from_client(text):
        return None
    return classify_words(text)


def classify_words(text: str) -> EndpointFailure | None:
    """The kind of failure the words show, without asking that a model client said them (for
    text already known to be about a model call: an agent's own log of it, its model-call
    code in the traceback).

    The order is the reasoning: a request past the context window first (whatever its status),
    then the account refused (quota, auth, rate), then the status class (any other 4xx is the
    request's), then a 5xx that says what it failed to parse (caused by its input, not an
    outage), then a 5xx by its status and body (unavailable, or one request failed), then what
    the client observed without a status (no JSON, no schema, no connection, no answer in
    time), last the 5xx words without a status. Before all of them: a request the client could
    not build (no status can follow: nothing was sent)."""
    if not text:
        return None
    if readings.on("address_not_built") and _ADDRESS.search(text):
        return EndpointFailure("address_invalid", None, None)
    status = status_in(text)
    return (
        _by_request(text, status)
        or _by_server_status(text, status)
        or _by_observation(text, status)
    )


def _by_request(text: str, status: int | None) -> EndpointFailure | None:
    """What the request met before any server failure: the window, the model's own output, the
    account refused, any other 4xx."""
    if _CONTEXT.search(text) or _CONTEXT_LLAMA.search(text):
        ctx = _SERVED_CTX.search(text) or _SERVED_CTX_LLAMA.search(text)
        return EndpointFailure("context_overflow", status, int(ctx.group(1)) if ctx else None)
    if _PARSE_OUTPUT.search(text):
        return EndpointFailure("unparseable_output", status, None)
    for kind, pattern in _KINDS:
        if pattern.search(text):
            return EndpointFailure(kind, status, None)
    if readings.on("synthesised_reply") and _LIMIT_RESETS.search(text):
        return EndpointFailure("rate_limit", status, None)
    if status is not None and 400 <= status < 500:
        return EndpointFailure("bad_request", status, None)
    return None


def _by_server_status(text: str, status: int | None) -> EndpointFailure | None:
    """A 5xx that says what it failed to parse, then a 5xx by its status and body."""
    server = status is not None and status >= 500
    if (server or _INTERNAL.search(text) or _UNAVAILABLE.search(text)) and _PARSE_FAILED.search(
        text
    ):
        named = _GENERATION.search(text)
        kind = "unparseable_output" if named else "content_rejected"
        return EndpointFailure(kind, status, None)
    if not server:
        return None
    if status in (502, 503, 504, 529) or _UNAVAILABLE.search(text) or _UNREACHABLE.search(text):
        return EndpointFailure("server_error", status, None)
    return EndpointFailure("internal_error", status, None)


def _by_observation(text: str, status: int | None) -> EndpointFailure | None:
    """What the client observed without a status, then the 5xx words without one."""
    for kind, pattern in _OBSERVED:
        if pattern.search(text):
            return EndpointFailure(kind, status, None)
    if _UNAVAILABLE.search(text):
        return EndpointFailure("server_error", status, None)
    if _INTERNAL.search(text):
        return EndpointFailure("internal_error", status, None)
    if "BadRequestError" in text or "UnprocessableEntityError" in text:
        return EndpointFailure("bad_request", status, None)
    return None


def stream_failed(text: str) -> bool:
    """The words say the server ended its stream with its protocol's failure event."""
    return readings.on("stream_failed_event") and bool(_STREAM_FAILED.search(text))
