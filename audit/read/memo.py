"""Results of pure functions of a text, remembered by the text's digest.

The detectors scan the same texts more than once: an agent's output is read with its command
and again as agent output, by the setup and the agent phase, and a whole job is audited again
with other knowledge switched off (the dev-set views of the generalization benchmark). The
scans are pure (a text and the function's other arguments in, an immutable value out), so each
is done once. The key is a digest of the text, not the text, so that the memo does not keep an
agent's megabytes alive; the last `maxsize` results are kept.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def by_text(maxsize: int = 8192) -> Callable[[F], F]:
    """Remember `fn(text, *args)` (args hashable; the value immutable: a tuple, a frozen
    dataclass, None)."""

    def decorate(fn: F) -> F:
        cache: OrderedDict[tuple[bytes, int, tuple[Hashable, ...]], Any] = OrderedDict()
        lock = threading.Lock()

        @functools.wraps(fn)
        def remembered(text: str, *args: Hashable) -> Any:
            digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16)
            key = (digest.digest(), len(text), args)
            with lock:
                if key in cache:
                    cache.move_to_end(key)
                    return cache[key]
            value = fn(text, *args)
            with lock:
                cache[key] = value
                if len(cache) > maxsize:
                    cache.popitem(last=False)
            return value

        remembered.cache_clear = cache.clear  # type: ignore[attr-defined]
        return remembered  # type: ignore[return-value]

    return decorate
