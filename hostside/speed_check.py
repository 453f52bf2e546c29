"""SpeedCheck: is the serving plane fast enough for the job, measured before it launches.

create: from the Harbor host (where the agents' calls come from), `concurrency` clients send
`rounds` streamed chat completions each through the gateway at once: a prompt of
`prompt_tokens` words behind a nonce (no prefix cache helps it), `output_tokens` generated with
SGLang's `ignore_eos` (every request decodes the same length). For each request: the time to
its first token, and its decode speed (the tokens after the first over the time after the
first). The figures (median and 10th percentile of decode tokens/s per request, median and 90th
percentile of time to first token, requests, errors, wall time) are the step's outputs; the
provenance manifest records them. A floor (`min_decode_tokens_per_s`) or ceiling
(`max_time_to_first_token_s`) the median misses fails the step, and with it `up`, naming the
measured and the required figure and the key. Bounded by `timeout_s` in all. Standard library
only.

The load starts once the gateway routes again: a worker replaced by this `up` is ready on its
own port before the gateway's health check and circuit breaker let it back in (smg answers 503
"All workers are unavailable" meanwhile), so one short completion is retried on a refused
connection or a 502/503/504 for at most ROUTE_WAIT_S, and the step fails naming the last
answer if the gateway never routes.
"""

from __future__ import annotations

import http.client
import json
import statistics
import threading
import time
import uuid
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from .step import HostError, emit, log, verb

NAME = "speed_check"
# The keys whose floor and ceiling a failure names (the config's).
FLOOR_KEY = "benchstack:serving.speed_check.min_decode_tokens_per_s"
CEILING_KEY = "benchstack:serving.speed_check.max_time_to_first_token_s"
# How long the gateway may take to route to a replaced worker again (its health check and its
# circuit breaker's timeout, a minute at most in smg's and sglang-router's defaults).
ROUTE_WAIT_S = 120.0
# Answers that say the gateway has no worker to route to yet, not that the plane is broken.
NOT_ROUTED = ("HTTP 502", "HTTP 503", "HTTP 504", "ConnectionRefusedError")


@dataclass(frozen=True)
class Inputs:
    # The gateway's OpenAI-compatible base (http://host:port, without /v1).
    url: str
    model: str
    concurrency: int
    rounds: int
    prompt_tokens: int
    output_tokens: int
    timeout_s: int
    min_decode_tokens_per_s: float | None
    max_time_to_first_token_s: float | None


@dataclass
class Sample:
    ttft_s: float | None = None
    decode_tokens_per_s: float | None = None
    tokens: int = 0
    error: str | None = None


def prompt(tokens: int) -> str:
    """About `tokens` tokens of text, behind a nonce so no cached prefix shortens the prefill."""
    words = ["benchstack", "measures", "the", "serving", "plane", "before", "the", "job"]
    body = " ".join(words[i % len(words)] for i in range(max(1, tokens - 8)))
    return f"{uuid.uuid4().hex} Repeat after me: {body}"


def one_request(inputs: Inputs, deadline: float) -> Sample:
    """One streamed completion; its time to first token and decode speed."""
    parts = urlsplit(inputs.url)
    body = json.dumps({
        "model": inputs.model, "stream": True, "max_tokens": inputs.output_tokens,
        "ignore_eos": True, "temperature": 0, "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": prompt(inputs.prompt_tokens)}],
    })
    timeout = max(1.0, deadline - time.monotonic())
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80,
                                      timeout=timeout)
    began = time.monotonic()
    first = last = None
    chunks = 0
    usage: dict = {}
    try:
        conn.request("POST", "/v1/chat/completions", body=body,
                     headers={"Content-Type": "application/json",
                              "Authorization": "Bearer EMPTY"})
        response = conn.getresponse()
        if response.status != 200:
            text = response.read(300).decode(errors="replace")
            return Sample(error=f"HTTP {response.status}: {text}")
        while True:
            raw = response.readline()
            if not raw:
                break
            line = raw.decode(errors="replace").strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if event.get("usage"):
                usage = event["usage"]
            for choice in event.get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("content") or delta.get("reasoning_content"):
                    now = time.monotonic()
                    first = first if first is not None else now
                    last = now
                    chunks += 1
            if time.monotonic() > deadline:
                return Sample(error=f"still generating at the check's bound {inputs.timeout_s}s")
    except (OSError, http.client.HTTPException, ValueError) as exc:
        return Sample(error=f"{type(exc).__name__}: {exc}"[:300])
    finally:
        conn.close()
    if first is None or last is None:
        return Sample(error="the stream carried no token")
    tokens = int(usage.get("completion_tokens") or chunks)
    decode = (tokens - 1) / (last - first) if last > first and tokens > 1 else None
    return Sample(ttft_s=first - began, decode_tokens_per_s=decode, tokens=tokens)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def wait_until_routed(inputs: Inputs, deadline: float) -> str | None:
    """None once a one-token completion goes through the gateway; else its last answer."""
    probe = replace(inputs, prompt_tokens=8, output_tokens=1)
    said = False
    while True:
        error = one_request(probe, deadline).error
        if error is None or not error.startswith(NOT_ROUTED):
            return None  # routed; any other failure is the load's to report
        if time.monotonic() + 1 >= deadline:
            return error
        if not said:
            log(NAME, f"the gateway routes to no worker yet ({error[:120]}): waiting up to "
                f"{deadline - time.monotonic():.0f}s")
            said = True
        time.sleep(1)


def measure(inputs: Inputs, began: float | None = None) -> dict:
    """The load and its figures (see the module's doc), bounded by `timeout_s` from `began`."""
    load_began = time.monotonic()
    deadline = (load_began if began is None else began) + inputs.timeout_s
    samples: list[Sample] = []
    lock = threading.Lock()

    def client() -> None:
        for _ in range(inputs.rounds):
            if time.monotonic() >= deadline:
                return
            sample = one_request(inputs, deadline)
            with lock:
                samples.append(sample)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(inputs.concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()) + 5)
    good = [s for s in samples if s.error is None]
    errors = [s.error for s in samples if s.error is not None]
    decode = [s.decode_tokens_per_s for s in good if s.decode_tokens_per_s is not None]
    ttft = [s.ttft_s for s in good if s.ttft_s is not None]
    return {
        "concurrency": inputs.concurrency, "prompt_tokens": inputs.prompt_tokens,
        "output_tokens": inputs.output_tokens, "requests": len(samples),
        "errors": len(errors), "first_error": errors[0] if errors else None,
        "decode_tokens_per_s": round(statistics.median(decode), 2) if decode else None,
        "decode_tokens_per_s_p10": round(percentile(decode, 0.1), 2) if decode else None,
        "time_to_first_token_s": round(statistics.median(ttft), 3) if ttft else None,
        "time_to_first_token_s_p90": round(percentile(ttft, 0.9), 3) if ttft else None,
        "wall_s": round(time.monotonic() - load_began, 2),
        "required": {"min_decode_tokens_per_s": inputs.min_decode_tokens_per_s,
                     "max_time_to_first_token_s": inputs.max_time_to_first_token_s},
    }


def verdict(inputs: Inputs, figures: dict) -> str | None:
    """Why the serving plane is refused for the job, or None."""
    planned = inputs.concurrency * inputs.rounds
    if figures["errors"] or figures["requests"] < planned:
        return (f"{figures['errors']} of {figures['requests']} requests failed and "
                f"{planned - figures['requests']} never ran within {inputs.timeout_s}s "
                f"(benchstack:serving.speed_check.timeout_s); first error: "
                f"{figures['first_error'] or 'none'}")
    decode, ttft = figures["decode_tokens_per_s"], figures["time_to_first_token_s"]
    floor, ceiling = inputs.min_decode_tokens_per_s, inputs.max_time_to_first_token_s
    at = (f"(median of {figures['requests']} requests at concurrency {inputs.concurrency}, "
          f"{inputs.prompt_tokens}-token prompts)")
    if floor is not None and (decode is None or decode < floor):
        return (f"decode {decode} tokens/s per request {at}, below the required {floor:g} "
                f"({FLOOR_KEY})")
    if ceiling is not None and (ttft is None or ttft > ceiling):
        return (f"time to first token {ttft} s {at}, above the allowed {ceiling:g} s "
                f"({CEILING_KEY})")
    return None


@verb(Inputs)
def create(inputs: Inputs) -> None:
    for key in ("concurrency", "rounds", "prompt_tokens", "output_tokens", "timeout_s"):
        if getattr(inputs, key) < 1:
            raise HostError(f"{key} must be at least 1, got {getattr(inputs, key)}")
    log(NAME, f"{inputs.concurrency} clients x {inputs.rounds} streamed completions of "
        f"{inputs.output_tokens} tokens after {inputs.prompt_tokens}-token prompts through "
        f"{inputs.url}")
    began = time.monotonic()
    unrouted = wait_until_routed(inputs, min(began + ROUTE_WAIT_S, began + inputs.timeout_s))
    if unrouted is not None:
        raise HostError(f"the gateway {inputs.url} routed no completion to a worker within "
                        f"{min(ROUTE_WAIT_S, inputs.timeout_s):g}s: {unrouted}")
    figures = measure(inputs, began)
    log(NAME, f"decode {figures['decode_tokens_per_s']} tokens/s per request (p10 "
        f"{figures['decode_tokens_per_s_p10']}), time to first token "
        f"{figures['time_to_first_token_s']} s (p90 {figures['time_to_first_token_s_p90']}), "
        f"{figures['requests']} requests in {figures['wall_s']} s")
    refused = verdict(inputs, figures)
    if refused:
        raise HostError(f"the serving plane is too slow for the job: {refused}")
    emit(figures)
