"""`python3 -m hostside RESOURCE VERB`: run one verb of one host module (see __init__.py)."""

from __future__ import annotations

import importlib
import sys

from .step import HostError, Verb

VERBS = ("create", "delete", "check")


def main(argv: list[str]) -> int:
    if sys.version_info < (3, 9):  # noqa: UP036  # a host's python3 may be older: say so
        print(f"hostside: python3 on this host is {sys.version.split()[0]}, older than 3.9: "
              "install a newer python3", file=sys.stderr)
        return 1
    if len(argv) != 2 or argv[1] not in VERBS:
        print(f"usage: python3 -m hostside RESOURCE {'|'.join(VERBS)}", file=sys.stderr)
        return 2
    resource, verb = argv
    try:
        module = importlib.import_module(f".{resource}", __package__)
    except ModuleNotFoundError:
        print(f"hostside: no host module {resource!r}", file=sys.stderr)
        return 2
    run = getattr(module, verb, None)
    if not isinstance(run, Verb):
        print(f"hostside: {resource} has no {verb}", file=sys.stderr)
        return 2
    try:
        run()
    except HostError as exc:
        print(f"{resource}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
