"""How the program behaves under the engine, beyond declaring resources.

When an update fails or is cancelled, the engine shuts its resource monitor down and the Python
language host interrupts the program (SIGINT). Left alone, Python raises KeyboardInterrupt at
whatever it was doing (often formatting the gRPC error of a registration the monitor will never
answer) and prints those tracebacks under the one reason the user should read: the failed
resource's own error, which the engine has shown already. So the program leaves quietly.
"""

from __future__ import annotations

import os
import signal
import sys

# The Python language host's "an error was already shown to the user" exit code: it adds no
# message of its own (pulumi-language-python-exec).
ERROR_SHOWN_EXIT_CODE = 32


def _leave_quietly(_signum: int, _frame: object) -> None:
    sys.stderr.flush()
    os._exit(ERROR_SHOWN_EXIT_CODE)


def leave_quietly_when_interrupted() -> None:
    """Exit at once on the engine's interrupt, with no traceback (only under the engine: the
    graph tests run the program under mocks, in the test runner's own process)."""
    from pulumi.runtime.mocks import MockMonitor
    from pulumi.runtime.settings import get_monitor

    if isinstance(get_monitor(), MockMonitor):
        return
    signal.signal(signal.SIGINT, _leave_quietly)
