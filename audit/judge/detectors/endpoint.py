"""The model endpoint: its failures wherever they surface, and a served window set too short.

Three places show an endpoint failure:
- the exception that ended the trial, raised in the model client (litellm, openai, httpx...);
- the same, surfacing as a crash of the agent's own code (issue #20): the agent's harness
  raised, but its traceback shows it was handling the endpoint's answer (a body that is not
  JSON, a reply without `usage` or `choices`, an HTTP status it turned into an exception). The
  trigger is the endpoint, so it is infra, with the endpoint's words or the failing read as
  proof; a parse of the MODEL's output (tool-call arguments, message content) stays the agent's;
- the agent's own log of how its run ended (Claude Code's `API Error: 402 ...`, mini-swe-agent's
  exit status, OpenHands' error state, a custom agent's status and error).
And one more without any error: the run ended on a reply that carried no usage block (the
stream was cut before its end) from an endpoint shown to send usage.

What is not the endpoint's doing stays the agent's: a request past the context window the
agent was told or that it never managed (unless the server serves less than it was told:
audit/judge/context_window.py), a 4xx for a request the agent built, a server that could not parse
what the model generated. What proves nothing either way is insufficient_evidence, never infra:
a timeout alone, a 5xx whose body says the server could not parse what it was given (without
naming the model's generation), and a 500 on one request that nothing else repeats: a server
failing on one request may have failed on that request. A 500 excuses only when the endpoint
failed other trials' requests within OUTAGE_WINDOW too (audit/judge/model_endpoint.py).
"""

from __future__ import annotations

import re
from dataclasses import replace

from audit.judge import context_window as CW
from audit.judge import model_endpoint as ME
from audit.judge.context import JobContext
from audit.judge.detectors.common import (
    HARBOR_TIMEOUTS,
    etype,
    exception_text,
    frame_lines,
    innermost_owner,
    owner_of,
)
from audit.judge.verdict import (
    Classification,
    Proof,
    exception_line,
    exception_quote,
    exception_where,
    excuse,
    short,
)
from audit.read import chain as C
from audit.read import layout as L
from audit.read import readings
from audit.read.evidence import TrialEvidence
from audit.read.logs import Call
from audit.read.models import parse_time
from audit.read.reached import model_reached

# Servers' own words for a generation they could not parse, whatever the status (llama.cpp's
# chat parser: "Failed to parse input at pos N"). A refinement: without it such an error is
# still no outage (a 5xx that says it failed to parse is tied to its input), only nobody's proof.
# llama.cpp's own words for a request past its window ("exceeds the available context size",
# `n_ctx`, `n_prompt_tokens`). A refinement: without it such a 400 is still the request the
# agent built (the general 4xx reading), and no served window is read from it.
# The error body quotes chat-template control tokens: the server was reading the model's
# raw generation, so the failure is about what the model wrote. A refinement of the general
# reading (a parse failure naming the model's generation): the token forms, Gemma's
# `<|channel>` / `<channel|>` / `<|tool_call>` among them, were met in the dev set.
_GENERATED_MARKUP = re.compile(r"<\|[a-z_]+\|?>|<[a-z_]+\|>|</?tool_call>|</?think>")

# Traceback frames that are a model call (function names and source lines of agents' clients).
_MODEL_CALL = re.compile(
    r"(?i)(?:\bchat\b|\bcompletions?\b|\bcomplete\b|\bllm\b|call_model|query_model|\b_?query\b|"
    r"\bgenerate\b|\binference\b|messages\.create|responses\.create|/chat/completions|"
    r"/v1/messages|api_base|base_url)"
)
# Words that make a number an HTTP answer (an agent's own message may hold any number).
_HTTP_WORDS = re.compile(
    r"(?i)\b(?:HTTP|status(?:_code)?|error code|API|returned|responded)\b\W{0,3}(?:\w+\W{1,3}){0,3}"
    r"[1-5]\d\d\b|Service Unavailable|Bad Gateway|Gateway Time-?out|Too Many Requests|"
    r"Payment Required|Unauthorized|Forbidden|overloaded|rate.?limit|insufficient_quota|"
    r"credit|invalid.{0,10}api.?key|upstream connect error|no healthy upstream"
)
# Source lines that read the endpoint's HTTP answer rather than the model's words.
_BODY_READ = re.compile(
    r"\.json\(\)|json\.loads\(\s*(?:r|resp|response|res|raw|body|http_response|reply|result)"
    r"(?:\.(?:text|content|body|read\(\)))?\s*\)"
)
_MODEL_CONTENT = re.compile(r"(?i)arguments|tool_call|function|\.message\b|message\.content")
_NO_USAGE = re.compile(r"usage|prompt_tokens|completion_tokens")
_NO_CHOICES = re.compile(r"choices")
_MISSING_FIELD = ("KeyError", "AttributeError", "TypeError", "IndexError")


def model_endpoint(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """A model-endpoint failure ended the trial before it was graded."""
    if ev.result is None or ev.result.reward is not None:
        return None
    kind = etype(ev) or ""
    if kind in HARBOR_TIMEOUTS:
        return None  # Harbor's own budget ran out: a model call in flight is not the cause
    text = exception_text(ev)
    info = ev.result.exception_info
    message = f"{info.exception_type}: {info.exception_message or ''}" if info else ""
    owner = innermost_owner(ev)
    failure: ME.EndpointFailure | None = None
    site: Proof | None = None
    found = ev.origin()
    if found is not None and found.layer == "model_client" and found.remote:
        # The root cause arose in the model client reading the endpoint's answer, however the
        # agent wrapped it: the whole chain's words, else what the client observed.
        failure, site = _from_client_root(ev, found)
    elif owner in ("client", None) or (owner == "harbor" and ME.from_client(text)):
        tail = text.strip().splitlines()[-1] if text.strip() else ""
        failure = ME.classify(f"{message}\n{tail}", text)
    elif owner == "agent":
        failure, site = _surfaced_in_harness(ev, kind, message, text)
    if failure is None:
        return None
    return _verdict(ev, ctx, failure, message, site)


# Where in the HTTP exchange a client's timeout fired: before the response's headers (the
# endpoint never answered) or while reading its body or stream (it was answering).
_BEFORE_ANSWER = re.compile(
    r"_receive_response_headers|awaiting (?:response )?headers|_send_request|connect",
    re.IGNORECASE,
)
_DURING_ANSWER = re.compile(
    r"_receive_response_body|_receive_event.*body|iter_bytes|iter_lines|iter_raw|__next__|"
    r"__anext__|_iter_events|read_chunk",
    re.IGNORECASE,
)


def _from_client_root(
    ev: TrialEvidence, found: C.Origin
) -> tuple[ME.EndpointFailure | None, Proof | None]:
    """The kind of the endpoint failure behind a root cause in the model client."""
    chain = ev.chain()
    words = "\n".join(r.text for r in chain)
    failure = ME.classify_words(words)
    root = found.root
    if failure is None and root.name == "JSONDecodeError":
        failure = ME.EndpointFailure("not_json", None, None)
    elif failure is None and "timeout" in root.name.lower():
        failure = ME.EndpointFailure("timeout", None, None)
    elif failure is None and re.search(r"(?i)connect|disconnect|protocol", root.name):
        failure = ME.EndpointFailure("unreachable", None, None)
    if failure is not None and failure.kind == "timeout":
        functions = " ".join(f.func for r in chain for f in r.frames)
        if _DURING_ANSWER.search(functions):
            failure = ME.EndpointFailure("timeout_answering", None, None)
        elif _BEFORE_ANSWER.search(functions):
            failure = ME.EndpointFailure("unanswered", None, None)
    site = None
    if failure is not None:
        where = ev.exception_source or "result.json exception_info"
        raised_in = found.site.path.rsplit("/", 2)[-2:] if found.site else []
        site = Proof(
            "endpoint_response",
            where,
            short(root.text),
            "the root cause of the exception chain, raised in the model client reading the "
            "endpoint's answer" + (f" (called from {'/'.join(raised_in)})" if raised_in else ""),
        )
    return failure, site


def _surfaced_in_harness(
    ev: TrialEvidence, kind: str, message: str, text: str
) -> tuple[ME.EndpointFailure | None, Proof | None]:
    """The endpoint's failure behind a crash of the agent's own code, and the line showing it."""
    frames = frame_lines(text)
    agent = [f for f in frames if owner_of(ev, f[0]) == "agent"]
    src = agent[-1][2] if agent else ""
    where = ev.exception_source or "result.json exception_info"
    if ME.from_client(message):
        # The agent wrapped the client's exception in its own: the client's words stand.
        found = ME.classify_text(message)
        if found is not None:
            return found, None
    model_call = any(_MODEL_CALL.search(f"{p} {fn} {s}") for p, fn, s in frames)
    if src and not _MODEL_CONTENT.search(src):
        if _BODY_READ.search(src) and ("JSONDecode" in kind or "Expecting value" in message):
            return ME.EndpointFailure("not_json", None, None), Proof(
                "endpoint_response",
                where,
                short(src),
                "the agent read the endpoint's response body here and it was not JSON",
            )
        if kind in _MISSING_FIELD and (model_call or _usage_sent_before(ev)):
            for pattern, what in ((_NO_USAGE, "usage"), (_NO_CHOICES, "choices")):
                if pattern.search(src) or pattern.search(message):
                    return ME.EndpointFailure(f"no_{what}", None, None), Proof(
                        "endpoint_response",
                        where,
                        short(src or message),
                        f"the endpoint's reply had no `{what}`, which every complete "
                        "chat-completion response carries",
                    )
    if model_call and _HTTP_WORDS.search(message):
        found = ME.classify_words(message)
        # A JSONDecodeError's words say nothing of who sent the text: only its site does.
        if found is not None and found.kind != "not_json":
            return found, None
    return None, None


def _own_words(ev: TrialEvidence) -> Proof:
    """The exception the trial ended on, quoted as the endpoint's answer."""
    return Proof(
        "endpoint_response", exception_where(ev), exception_quote(ev), "the endpoint's words"
    )


def _usage_sent_before(ev: TrialEvidence) -> bool:
    """The agent's own record shows model replies that carried usage: it talks to an endpoint
    that sends it, so a reply read without it was the endpoint's doing."""
    return any(
        c.usage is not None and not c.usage.missing for log in ev.agent_logs() for c in log.calls
    )


def _verdict(
    ev: TrialEvidence,
    ctx: JobContext,
    failure: ME.EndpointFailure,
    message: str,
    site: Proof | None,
) -> Classification | None:
    head = exception_line(ev)
    host = ", ".join(sorted(ctx.model_hosts)) or None
    where = f" ({host})" if host else ""
    if failure.kind == "context_overflow":
        return _context(ev, ctx, f"{message}\n{exception_text(ev)}", exception_where(ev), head)
    if failure.kind == "unparseable_output" or _quotes_generation(ctx, message):
        return Classification(
            "agent_error",
            "model_output_unparseable",
            "model",
            "The server could not parse what the model generated (malformed tool-call or "
            "channel markup) and returned an error for it: the content is the model's, not an "
            "outage of the endpoint.",
            head,
            host,
        )
    if failure.kind == "bad_request" and (changed := _refused_from_a_moment(ev, ctx, failure)):
        own = _own_words(ev)
        return excuse(
            "infra",
            "model_endpoint_refusing_from_a_moment",
            "model",
            f"The model endpoint{where} began refusing ({failure.status}) requests of a kind it "
            f"had answered before in this trial, at the same moment as {len(changed)} other "
            "trials (quoted): the endpoint changed (a deploy, a limit, a model swapped), not the "
            "agent's requests. Check the endpoint at that time and rerun.",
            [own, *changed[:3]],
            lead=head,
            endpoint=host,
        )
    if failure.kind == "bad_request":
        return Classification(
            "agent_error",
            "agent_request_rejected",
            "model",
            f"The model endpoint{where} rejected the request the agent's harness built "
            f"({failure.status or 400}): a bug or a bad setting in the agent, not an outage.",
            head,
            host,
        )
    own = _own_words(ev)
    if failure.kind == "address_invalid":
        return address_not_built(ev, own, head)
    if failure.kind in ("content_rejected", "internal_error"):
        return _one_request(ev, ctx, failure, own, head)
    if failure.kind == "timeout_answering":
        return Classification(
            "agent_error",
            "model_call_timed_out_generating",
            "model",
            "A model call timed out while the endpoint was sending its answer (the client's "
            "timeout fired reading the response body or stream): the model was generating, "
            "past the limit the agent's harness set. A runaway generation is the model's.",
            head,
            host,
        )
    if failure.kind == "timeout":
        return Classification(
            "insufficient_evidence",
            "model_call_timed_out",
            "model",
            "A model call timed out. That is no proof of either side: an endpoint that stopped "
            "answering and a runaway generation past the client's limit both end this way. "
            "Read the endpoint's logs at that time before counting it as infra.",
            head,
            host,
        )
    words = KIND_WORDS.get(failure.kind) or ME.KIND_TEXT.get(failure.kind, failure.kind)
    proof = [site] if site else []
    proof.append(own)
    return excuse(
        "infra",
        f"model_endpoint_{failure.kind}",
        "model",
        f"{words[0].upper() + words[1:]}{where}; the trial ended before the model could "
        "finish and nothing was graded. Check the endpoint's logs at that time and rerun.",
        proof,
        lead=head,
        endpoint=host,
    )


def address_not_built(ev: TrialEvidence, said: Proof, head: list[str]) -> Classification:
    """The model client could not build a request from the address it was given (its own words,
    `said`): nothing was sent, no model was asked: the operator's launch configuration."""
    return excuse(
        "infra",
        "model_address_invalid",
        "model",
        "The model client could not build a request from the address it was given (its own "
        "words quoted), so no model call was ever sent and nothing graded here is the model's "
        "work: the operator's launch configuration (the endpoint's URL). Fix it and rerun.",
        [replace(said, cause="launch_config", reading="the client could not build the request")],
        lead=head,
    )


# --- a 5xx tied to one request is no outage -------------------------------------------------
# Another trial of the job whose run ended on a server error this close in time (seconds):
# the endpoint failed on different requests at once, an outage.
OUTAGE_WINDOW = 600.0


def _one_request(
    ev: TrialEvidence, ctx: JobContext, failure: ME.EndpointFailure, own: Proof, head: list[str]
) -> Classification:
    """A 5xx on this request. One that says the server could not parse what it was given was
    caused by its input: insufficient_evidence. Any other is the serving plane failing (outside
    the system under test): infra, noting the other trials' requests it failed too."""
    host = ", ".join(sorted(ctx.model_hosts)) or None
    at = f" ({host})" if host else ""
    if failure.kind == "content_rejected":
        return Classification(
            "insufficient_evidence",
            "model_endpoint_rejected_content",
            "model",
            f"The model endpoint{at} answered with a server error saying it could not parse "
            "what it was given: the failure was caused by the request's content (the agent's "
            "messages, or the model's own earlier output), not by an outage. Who produced the "
            "unparseable text is not shown: read the request in the agent's log.",
            head,
            host,
        )
    others = _repeated_server_errors(ev, ctx)
    if others:
        return excuse(
            "infra",
            "model_endpoint_internal_error_repeated",
            "model",
            f"The model endpoint{at} failed with a server error on this trial's request and on "
            f"{len(others)} other request(s) (quoted) within {OUTAGE_WINDOW / 60:.0f} minutes: it "
            "was failing whatever it was asked, an outage. Check the endpoint's logs at that "
            "time and rerun.",
            [own, *others[:3]],
            lead=head,
            endpoint=host,
        )
    return excuse(
        "infra",
        "model_endpoint_internal_error",
        "model",
        f"The model endpoint{at} answered with a server error (500): the serving plane failed "
        "on the request, and it is outside the system under test (the model and the agent's "
        "harness), whatever the request was. Check the endpoint's logs at that time and rerun.",
        [own],
        lead=head,
        endpoint=host,
    )


def _ended_at(ev: TrialEvidence) -> str | None:
    if ev.result is None:
        return None
    span = ev.result.agent_execution
    return (span.finished_at if span else None) or ev.result.finished_at


_SERVER_KINDS = ("internal_error", "server_error")


def _ending_error_of(
    ev: TrialEvidence, kinds: tuple[str, ...], status: int | None = None
) -> Proof | None:
    """The endpoint error of one of `kinds` (and `status`, when given) a trial's run ended on:
    its exception, else its log."""
    info = ev.result.exception_info if ev.result else None
    prefix = f"../{ev.trial_dir}/"
    found: ME.EndpointFailure | None
    if info and info.exception_type:
        found = ME.classify_text(f"{info.exception_type}: {info.exception_message or ''}")
        if found is not None and found.kind in kinds and status in (None, found.status):
            return Proof("endpoint_response", prefix + exception_where(ev), exception_quote(ev))
    for log in ev.agent_logs():
        where, words, quote = _ending_error(log)
        found = ME.classify_words(words) if words and _HTTP_WORDS.search(words) else None
        if found is not None and found.kind in kinds and status in (None, found.status):
            return Proof("endpoint_response", prefix + where, short(quote))
    return None


def _repeated_server_errors(ev: TrialEvidence, ctx: JobContext) -> list[Proof]:
    """Other requests the endpoint failed with a 5xx: other trials of the job whose run ended
    on one within OUTAGE_WINDOW of this one. (A trial's own retries resend the same request:
    they show nothing the first failure did not.)"""
    return _others_ending_alike(ev, ctx, _SERVER_KINDS, None, OUTAGE_WINDOW)


# 4xx failures that start at one moment across trials: this close in time (seconds).
ONE_MOMENT = 120.0
# Other trials whose requests the endpoint began refusing at that moment, besides this one.
ONE_MOMENT_OTHERS = 2


def _others_ending_alike(
    ev: TrialEvidence,
    ctx: JobContext,
    kinds: tuple[str, ...],
    status: int | None,
    window: float,
) -> list[Proof]:
    when = parse_time(_ended_at(ev))
    if when is None:
        return []
    key = f"endings:{','.join(kinds)}:{status}"
    memo = ctx.memo.get(key)
    endings: list[tuple[str, str | None, Proof]]
    if isinstance(memo, list):
        endings = memo
    else:
        endings = []
        for other in ctx.evidences:
            if other.result is None or (other.result.reward or 0) >= 1.0:
                continue  # a pass did not end on a failure
            found = _ending_error_of(other, kinds, status)
            if found is not None:
                endings.append((other.trial_dir, _ended_at(other), found))
        ctx.memo[key] = endings
    out: list[Proof] = []
    for trial, at, proof in endings:
        t = parse_time(at)
        if trial == ev.trial_dir or t is None or (t.tzinfo is None) != (when.tzinfo is None):
            continue
        if abs((t - when).total_seconds()) <= window:
            out.append(replace(proof, reading=f"another trial's run ended on it, at {at}"))
    return out


def _refused_from_a_moment(
    ev: TrialEvidence, ctx: JobContext, failure: ME.EndpointFailure
) -> list[Proof]:
    """A 4xx the endpoint began answering at one moment across trials, to requests of a kind it
    had answered before: other trials' runs ended on the same status (and, issue #34, the same
    body) within ONE_MOMENT. This trial's model was reached earlier; or, the first refused call
    included, the job's other trials were answered before the moment. The endpoint changed, not
    the requests."""
    if failure.status is None:
        return []
    reached = model_reached(ev).answer == "yes"
    if not reached and not (readings.on("refused_from_a_moment") and _answered_before(ev, ctx)):
        return []
    others = _others_ending_alike(ev, ctx, ("bad_request",), failure.status, ONE_MOMENT)
    if readings.on("refused_from_a_moment"):
        body = _body(exception_quote(ev))
        others = [p for p in others if not body or _body(p.quote) == body]
    return others if len(others) >= ONE_MOMENT_OTHERS else []


def _body(quote: str) -> str:
    """An error's words without its numbers and ids (the same refusal, request after request)."""
    return re.sub(r"[\d_-]+|\s+", " ", quote.split(":", 1)[-1]).strip().lower()


def _answered_before(ev: TrialEvidence, ctx: JobContext) -> Proof | None:
    """Another trial of the job whose model was reached and whose run ended before this trial's
    started: the endpoint answered requests of this kind before the moment it began refusing."""
    started = parse_time(ev.result.started_at if ev.result else None)
    if started is None:
        return None
    for other in ctx.evidences:
        if other is ev or other.result is None:
            continue
        ended = parse_time(_ended_at(other))
        if ended is None or (ended.tzinfo is None) != (started.tzinfo is None) or ended > started:
            continue
        agent = other.result.agent_result
        tokens = (agent.n_output_tokens if agent else None) or 0
        if tokens > 0:
            return Proof(
                "endpoint_response",
                f"../{other.trial_dir}/{L.TRIAL_RESULT}",
                f"n_output_tokens: {tokens}",
                "the endpoint answered this job's requests before the moment",
            )
    return None


KIND_WORDS = {
    "no_usage": "the model endpoint answered without a `usage` block and the agent's harness "
    "crashed reading it",
    "no_choices": "the model endpoint answered without `choices` (an error object in a "
    "success reply) and the agent's harness crashed reading it",
    "not_json": "the model endpoint answered with a body that is not JSON (an HTML error page, "
    "an empty or cut-off reply) and the agent's harness crashed parsing it",
}


def _quotes_generation(ctx: JobContext, text: str) -> bool:
    """The error quotes the model's own generated markup (the server was parsing it)."""
    return bool(_GENERATED_MARKUP.search(text)) and "pars" in text


def _context(
    ev: TrialEvidence, ctx: JobContext, error: str, where: str, head: list[str]
) -> Classification | None:
    told = list(ctx.told) + _trial_told(ev)
    j = CW.judge(error, where, told)
    host = ", ".join(sorted(ctx.model_hosts)) or None
    at = f" ({host})" if host else ""
    if j.misconfigured and j.told is not None:
        return excuse(
            "infra",
            "model_context_misconfigured",
            "model",
            f"The agent was told the model takes {j.told.tokens} input tokens but the server"
            f"{at} serves {j.served}"
            + (
                f"; the rejected request had {j.request}, within what it was told"
                if j.request
                else ""
            )
            + ": a serving misconfiguration, the agent could not know to summarize in time. "
            f"Serve the window the agent is told (or tell it {j.served}) and rerun.",
            j.proof,
            lead=head,
            endpoint=host,
        )
    told_text = f" It was told {j.told.tokens} ({j.told.where})." if j.told is not None else ""
    return Classification(
        "agent_error",
        "model_context_overflow",
        "model",
        "The agent let its prompt grow past the model's served context window"
        + (f" ({j.numbers()})" if j.numbers() else "")
        + " (e.g. by feeding unbounded tool output back to the model) and the server rejected "
        "the request. Managing its context is the agent's job: this counts as its failure."
        + told_text,
        head,
        host,
    )


def _trial_told(ev: TrialEvidence) -> list[CW.Window]:
    return CW.told_in_json(ev.text("config.json"), "config.json") + CW.told_in_text(
        ev.text(L.TRIAL_LOG), L.TRIAL_LOG
    )


def failing_when_stopped(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """A trial the job's stop cut off while its requests were already failing for a proven
    outside reason: trial.log's last line is the server refusing a request that fits the window
    the agent was told (the stop only came first). None otherwise."""
    text = ev.text(L.TRIAL_LOG) or ""
    lines = [(n, ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip()]
    if not lines:
        return None
    n, line = lines[-1]
    failure = ME.classify_text(line)
    if failure is None or failure.kind != "context_overflow":
        return None
    verdict = _context(ev, ctx, line, f"{L.TRIAL_LOG}:{n}", [f"{L.TRIAL_LOG}:{n}: {short(line)}"])
    return verdict if verdict is not None and verdict.category == "infra" else None


# --- the agent's own record of how its run ended -------------------------------------------
def endpoint_in_agent_log(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """The agent's log says its run ended on an endpoint failure (graded or not)."""
    if ev.result is None or (ev.result.reward or 0) >= 1.0:
        return None
    if (etype(ev) or "") in HARBOR_TIMEOUTS:
        return None
    for log in ev.agent_logs():
        if log.source in TERMINAL_SOURCES and not ended_in_failure(ev, log):
            continue  # an error the run went on after, or a run that finished
        where, words, quote = _ending_error(log, etype(ev) == _EXIT_ERROR)
        failure = _log_failure(words) if words else None
        if failure is not None:
            return _judge_log_ending(ev, ctx, log.source, failure, (where, words, quote))
    return None


# Logs read for their terminal error alone (audit/read/logs/terminal.py).
TERMINAL_SOURCES = ("terminal", "exit-output")
_EXIT_ERROR = "NonZeroAgentExitCodeError"


def ended_in_failure(ev: TrialEvidence, log) -> bool:
    """The run ended in failure, so its last error is how it ended: the log's own summary says
    so, or Harbor recorded the agent's command exiting non-zero (NonZeroAgentExitCodeError)."""
    return (log.end is not None and log.end.status == "summary") or etype(ev) == _EXIT_ERROR


def _log_failure(words: str) -> ME.EndpointFailure | None:
    """The endpoint failure the words of a run's ending error show, if any."""
    found = ME.classify_text(words) or (
        ME.classify_words(words) if _HTTP_WORDS.search(words) else None
    )
    if found is None and ME.stream_failed(words):
        found = ME.EndpointFailure("stream_failed", None, None)
    return found


def _judge_log_ending(
    ev: TrialEvidence,
    ctx: JobContext,
    source: str,
    failure: ME.EndpointFailure,
    said: tuple[str, str, str],
) -> Classification | None:
    """The verdict on a run that ended on `failure` (said: where, words, verbatim quote)."""
    where, words, quote = said
    if failure.kind == "context_overflow":
        verdict = _context(ev, ctx, words, where, exception_line(ev))
        return verdict if verdict is not None and verdict.category == "infra" else None
    if failure.kind == "unparseable_output" or _quotes_generation(ctx, words):
        return None  # the model's own generation: the grade (or the fallback) stands
    own = Proof("endpoint_response", where, short(quote), "the endpoint's words")
    if failure.kind == "address_invalid":
        # The model answered before: its work was graded.
        return None if model_reached(ev).answer == "yes" else address_not_built(
            ev, own, exception_line(ev)
        )
    if failure.kind == "stream_failed":
        return None if work_kept(ev) else _stream_failed(ev, ctx, own)
    if failure.kind in ("content_rejected", "internal_error"):
        return _one_request(ev, ctx, failure, own, exception_line(ev))
    if failure.kind not in ME.INFRA_KINDS:
        return None
    return excuse(
        "infra",
        f"model_endpoint_{failure.kind}",
        "model",
        f"{ME.KIND_TEXT[failure.kind][0].upper() + ME.KIND_TEXT[failure.kind][1:]}, and the "
        f"agent's run ended there ({source} log). The trigger was the endpoint: rerun.",
        [own],
        lead=exception_line(ev),
        endpoint=", ".join(sorted(ctx.model_hosts)) or None,
    )


def work_kept(ev: TrialEvidence) -> bool:
    """The run kept work of the model's, whatever ended it: a turn it completed (a model call
    answered) or a file it changed, as the agent's own log records them."""
    logs = ev.agent_logs()
    return (
        any(c.answered for log in logs for c in log.calls)
        or any(log.changes for log in logs)
        or bool(ev.written_by_agent())
    )


def _stream_failed(ev: TrialEvidence, ctx: JobContext, own: Proof) -> Classification:
    return excuse(
        "infra",
        "model_endpoint_stream_failed",
        "model",
        "The endpoint ended its stream with its protocol's failure event (the Responses API's "
        "`response.failed`, a stream's `error` event) and the run ended there before any turn "
        "completed or any file was written: the endpoint's answer, like a 5xx; nothing graded "
        "here is the model's work. Check the endpoint at that time and rerun.",
        [own],
        lead=exception_line(ev),
        endpoint=", ".join(sorted(ctx.model_hosts)) or None,
    )


def _ending_error(log, failed: bool = False) -> tuple[str, str, str]:
    """(where, words to judge, verbatim quote) of the error the run ended on, if any. A
    console's last error is the endpoint's only in a model client's words, unless the run ended
    in failure on it (`failed`: Harbor recorded the agent exiting non-zero), when it is the
    run's terminal error (issue #34) and judged by the words the audit knows."""
    if log.end is not None and log.end.is_error and log.end.message:
        console = log.source == "stdout" and not (failed and readings.on("terminal_error"))
        if console and not ME.from_client(log.end.message):
            return "", "", ""
        return log.end.where, f"{log.end.status}: {log.end.message}", log.end.message
    last = log.last()
    if isinstance(last, Call) and last.error:
        return last.where, last.error, last.error
    return "", "", ""


# --- a reply cut off by the serving side ---------------------------------------------------


def model_reply_cut_off(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """The run ended on a model reply that carried no usage and no tool call."""
    if ev.result is None or etype(ev) is not None or (ev.result.reward or 0) >= 1.0:
        return None
    for log in ev.agent_logs():
        calls = log.calls
        last = log.last()
        if not calls or not isinstance(last, Call) or last.usage is None:
            continue
        if not last.usage.missing or last.acted or last.error:
            continue
        if not (last.usage.completion_tokens or last.text.strip()):
            continue  # an empty reply with no tokens: nothing shows a reply was under way
        sent = next(
            (
                Proof(
                    "endpoint_response",
                    c.usage_where,
                    f"prompt_tokens: {c.usage.prompt_tokens}",
                    "the same endpoint reported usage for an earlier reply",
                )
                for c in calls[:-1]
                if c.usage is not None and not c.usage.missing
            ),
            None,
        ) or ctx.usage_reported(ev)
        if sent is None:
            return None  # this endpoint may never report usage: a zero says nothing
        first = next((ln for ln in last.text.splitlines() if ln.strip()), "")
        said = short(first) or f"completion_tokens: {last.usage.completion_tokens}"
        return excuse(
            "infra",
            "model_reply_cut_off",
            "model",
            "The agent's last model call came back without a usage block (no prompt count for "
            "a non-empty prompt, from an endpoint shown to send one) and without a tool call, "
            "and the run ended there: the endpoint's reply was incomplete, a failure of the "
            "endpoint, not of the model (issue #20: a response without `usage`). The agent "
            "never got to act on it; rerun the task.",
            [
                Proof(
                    "endpoint_response",
                    last.where,
                    said,
                    f"prompt_tokens 0, completion_tokens {last.usage.completion_tokens}, no tool "
                    "call",
                ),
                sent,
            ],
            lead=exception_line(ev),
        )
    return None
