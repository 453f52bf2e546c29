"""The word filter in front of the network patterns drops no failure any pattern can match.

audit/judge/network.py reads only the lines of an output that hold one of its `_WORDS` (plain
substring search; the combined pattern is too slow for megabytes of agent output). That is
safe only if every string any pattern matches holds one of the words. Checked here on strings
generated from each pattern itself (one per branch of every alternation, quantifiers at their
minimum and at one more), and on the real tool captures.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from audit.judge import network as N

try:  # Python 3.11+
    from re import _constants as C  # type: ignore[attr-defined]
    from re import _parser as P  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    import sre_constants as C  # type: ignore[no-redef]
    import sre_parse as P  # type: ignore[no-redef]

CAPTURES = Path(__file__).with_name("captures")
_CATEGORY = {
    C.CATEGORY_DIGIT: "7",
    C.CATEGORY_SPACE: " ",
    C.CATEGORY_WORD: "a",
    C.CATEGORY_NOT_SPACE: "x",
    C.CATEGORY_NOT_DIGIT: "x",
    C.CATEGORY_NOT_WORD: "-",
}
_LIMIT = 64


def _char_of(items) -> str:
    for op, av in items:
        if op is C.LITERAL:
            return chr(av)
        if op is C.RANGE:
            return chr(av[0])
        if op is C.CATEGORY:
            return _CATEGORY.get(av, "a")
    return "a"


def _expand(tokens) -> list[str]:
    """Strings the parsed pattern matches: every branch, repeats at min and min + 1."""
    outs = [""]
    for op, av in tokens:
        if op is C.LITERAL:
            opts = [chr(av)]
        elif op is C.NOT_LITERAL:
            opts = ["x" if chr(av) != "x" else "y"]
        elif op is C.ANY:
            opts = ["x"]
        elif op is C.IN:
            negate = any(o is C.NEGATE for o, _ in av)
            opts = ["~" if negate else _char_of(av)]
        elif op is C.CATEGORY:
            opts = [_CATEGORY.get(av, "a")]
        elif op is C.AT:
            opts = [""]
        elif op is C.SUBPATTERN:
            opts = _expand(av[-1])
        elif op is C.BRANCH:
            opts = [s for branch in av[1] for s in _expand(branch)]
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
            low, high, body = av
            inner = _expand(body)[:4]
            counts = sorted({max(low, 1 if low == 0 and high != 0 else low), low})
            opts = ["".join(p) for n in counts for p in itertools.product(inner, repeat=n)]
        elif op in (C.ASSERT, C.ASSERT_NOT):
            opts = [""]
        else:
            opts = [""]
        outs = [a + b for a, b in itertools.product(outs, opts)][:_LIMIT]
    return outs


def _examples(pattern: re.Pattern[str]) -> list[str]:
    return [s for s in _expand(P.parse(pattern.pattern)) if pattern.search(s)]


PATTERNS = [(family, p) for family, ps in N._COMPILED.items() for p in ps]


@pytest.mark.parametrize(("family", "pattern"), PATTERNS, ids=[p.pattern[:40] for _, p in PATTERNS])
def test_every_string_a_pattern_matches_passes_the_word_filter(family, pattern):
    examples = _examples(pattern)
    assert examples, f"no example generated for {pattern.pattern!r}"
    for text in examples:
        assert N.might_fail(text), (family, pattern.pattern, text)


def test_the_real_captures_are_read_whole():
    """On every capture, reading only the candidate lines finds what reading all lines does."""
    for path in sorted(CAPTURES.glob("*/*.txt")):
        text = path.read_text()
        every = [n for n, line in enumerate(text.splitlines(), 1) if N.classify_line(line)]
        found = [f.where for f in N.failures_in(text, lambda n: n, limit=10_000)]
        assert found == every, path


def test_bash_dev_tcp_names_its_endpoint():
    """bash's own redirection error names the host it could not reach in the /dev/tcp path: an
    outside endpoint (not `unknown`, which a refused connection with no host would be)."""
    from audit.judge import network as N

    line = "/tests/test.sh: line 16: /dev/tcp/host.docker.internal/27891: Connection refused"
    (failure,) = N.failures_in(line, lambda n: f"verifier/test-stdout.txt:{n}")
    assert (failure.family, failure.host) == ("refused", "host.docker.internal")
    assert N.owner(failure, set()) == "external"
    assert N.owner(failure, {"host.docker.internal"}) == "agent"
    local = "bash: /dev/tcp/127.0.0.1/8080: Connection refused"
    (mine,) = N.failures_in(local, lambda n: f"x:{n}")
    assert N.owner(mine, set()) == "agent"  # the container's own loopback
