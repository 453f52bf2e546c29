"""What a shell command the agent sent does to the time it takes, read from the command itself.

When a command of the agent's own runs past the harness's per-command cap, who is to blame
depends on the command, not on the timeout message (issue #20): a read that blocks forever (a
pipe, `/proc/*/fd`, stdin), a server or `tail -f` in the foreground, an interactive program, a
`sleep`, a long install or build: the agent chose to wait, and its run paid for it. Only a
command that cannot take long (`ls`, `echo`, `cat FILE`...), or one the agent bounded itself
(`timeout 10 ...`) below the cap, shows that the environment failed when it never returned.

The kinds are shell semantics (what each program does with its arguments and stdin), not
phrases from any job. `kind_of()` reads every foreground segment of a command line
(`a && b; c | d`, one per line) and returns the one that decides: a line is `trivial` only when
all of it is.

Where a log says a command ran past a cap is read by audit/read/caps.py.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

# Most-blaming first: the first kind any foreground segment has decides the line.
KINDS = (
    "follow",
    "server",
    "blocking_read",
    "interactive",
    "sleep",
    "install_or_build",
    "other",
    "bounded",
    "trivial",
)
# Kinds that do not end by themselves: whatever is typed after them waits behind them.
NEVER_ENDS = ("follow", "server", "blocking_read", "interactive")
AGENTS_OWN_WAIT = ("follow", "server", "blocking_read", "interactive", "sleep", "install_or_build")
KIND_TEXT = {
    "follow": "follows output forever (`tail -f`, `watch`, a pager)",
    "server": "runs a server in the foreground, which never exits",
    "blocking_read": "reads from a pipe, a /proc fd or stdin, which blocks until input comes",
    "interactive": "starts an interactive program that waits for keyboard input",
    "sleep": "sleeps",
    "install_or_build": "is a long install or build",
    "other": "is the agent's own program",
    "bounded": "was bounded by the agent's own `timeout` below the cap",
    "trivial": "cannot take long (a listing, an echo, a read of a file)",
}


@dataclass(frozen=True)
class CommandKind:
    kind: str
    segment: str  # the segment that decided it


_FOLLOW = re.compile(
    r"^(?:tail\b.*\s-[a-zA-Z]*[fF]\b|tail\s+--follow\b|journalctl\b.*\s-f\b|watch\b|less\b|more\b|"
    r"top\b|htop\b|dmesg\b.*\s-w\b|docker\s+logs\b.*\s-f\b|kubectl\s+logs\b.*\s-f\b|"
    r"inotifywait\b(?!.*\s-t\s))"
)
_SERVER = re.compile(
    r"^(?:python[\d.]*\s+-m\s+(?:http\.server|SimpleHTTPServer|uvicorn|flask\s+run|"
    r"jupyter|streamlit)\b|flask\s+run\b|uvicorn\b|gunicorn\b|hypercorn\b|daphne\b|"
    r"(?:npm|pnpm|yarn)\s+(?:run\s+)?(?:start|dev|serve)\b|npx\s+(?:serve|http-server)\b|"
    r"http-server\b|rails\s+(?:s|server)\b|php\s+-S\b|jupyter\b|redis-server\b|mongod\b|"
    r"postgres\b|mysqld\b|nginx\b.*daemon\s+off|/usr/sbin/sshd\b.*\s-D\b|sshd\b.*\s-D\b|"
    r"streamlit\s+run\b|node\s+\S*(?:server|app|index)\S*\.m?js\b|"
    r"qemu-system-\S+(?!.*-daemonize)|socat\b.*LISTEN|nc\b.*\s-l|ncat\b.*\s-l|"
    r"python[\d.]*\s+(?:\S*/)?[\w-]*(?:server|serve)[\w-]*\.py\b|python[\d.]*\s+(?:\S*/)?app\.py\b)"
)
_BLOCKING_READ = re.compile(
    r"^(?:cat\s*(?:>>?\s*\S+\s*)?$|cat\s+(?:-\s*$|/proc/\S*/fd/|/dev/(?:stdin|tty|fd/)|\S*(?:fifo|pipe)\S*)|"
    r"read\b|tee\b(?:\s+-a)?(?:\s+\S+)*\s*$|python[\d.]*\s+-\s*$|wait\s*$|wait\s+%?\d+\s*$|sleep\s+infinity\b|"
    r"tail\s+\S*(?:fifo|pipe)\S*\s*$|dd\s+if=/dev/(?:stdin|tty)\b|head\s+/proc/\S*/fd/|"
    r"grep\s+(?:-\S+\s+)*['\"]?[^\s/'\"]+['\"]?\s*$)"
)
_INTERACTIVE = re.compile(
    r"^(?:(?:vim?|nvim|nano|emacs|pico|joe|mc)\b.*|ed|python[\d.]*|ipython|node|bash|sh|zsh|irb|ghci|ocaml|R|"
    r"sqlite3|mysql|psql|redis-cli|mongo|gdb|lldb|ftp|telnet|ssh\s+\S+|su|sudo\s+-i|"
    r"passwd|bc|dc)\s*$"
)
_SLEEP = re.compile(r"^sleep\s+\d")
_INSTALL_BUILD = re.compile(
    r"^(?:(?:sudo\s+)?apt(?:-get)?\s+(?:install|upgrade|dist-upgrade|update|build-dep)\b|"
    r"(?:python[\d.]*\s+-m\s+)?pip[\d.]*\s+(?:install|download|wheel)\b|"
    r"uv\s+(?:pip\s+install|sync|add|tool\s+install|run)\b|conda\s+(?:install|create|env)\b|"
    r"mamba\s+install\b|(?:npm|pnpm|yarn)\s+(?:install|ci|add|build|run\s+build)\b|"
    r"cargo\s+(?:build|install|test|run)\b|go\s+(?:build|install|test|get|mod\s+download)\b|"
    r"make\b|cmake\b|ninja\b|\./configure\b|configure\b|meson\b|bazel\b|"
    r"(?:gcc|g\+\+|clang\+?\+?|cc|rustc|javac|tsc|ghc|ocamlopt|gfortran)\b|mvn\b|gradle\b|"
    r"\./gradlew\b|sbt\b|docker\s+(?:build|pull)\b|apk\s+add\b|yum\s+install\b|"
    r"dnf\s+install\b|brew\s+install\b|gem\s+install\b|bundle\s+install\b|"
    r"Rscript\s+-e\s+['\"]?install\.packages|R\s+CMD\s+INSTALL\b|opam\s+install\b|"
    r"stack\s+build\b|cabal\s+(?:build|install)\b|python[\d.]*\s+setup\.py\b|git\s+clone\b|"
    r"wget\b|curl\b.*\s-[a-zA-Z]*[oO]\b|pio\b|webpack\b)"
)
_TRIVIAL = re.compile(
    r"^(?:ls|pwd|echo|printf|true|false|id|whoami|date|uname|hostname|env|printenv|"
    r"mkdir|touch|cd|test|\[|which|type|command\s+-v|stat|file|wc\s+\S|head\s+\S|"
    r"tail\s+(?:-n\s*\d+\s+|-\d+\s+)?\S|cat\s+\S|chmod|chown|ln|mv|cp|rm|basename|dirname|"
    r"realpath|readlink|df|du\s+-sh?\s+\S|free|ps|uptime|nproc|clear|export|unset|alias|"
    r"source\s+\S|\.\s+\S|set\s|history|jobs|kill\b|pkill\b|tmux\s+(?:has-session|"
    r"capture-pane|send-keys|list-\w+|ls)\b|git\s+(?:status|log|diff|branch|show|rev-parse|"
    r"config)\b)|"
    # A program asked only for its version, or a file's bytes dumped (bounded by the file).
    r"\S+\s+(?:--version|-V|-version)\s*$|(?:od|xxd|hexdump|strings\s+-n\s*\d+)\s+(?:-\S+\s+)*\S|"
    # An interpreter asked only to import modules or print a version.
    r"python[\d.]*\s+-c\s+(['\"])\s*(?:import|from)\s[\w., ]+(?:\simport\s[\w., *]+)?"
    r"\s*;?\s*\1\s*$"
)
_TIMEOUT_WRAPPED = re.compile(
    r"^timeout\s+(?:-[a-zA-Z]+\s+\S+\s+|--\S+\s+)*(\d+(?:\.\d+)?)([smh]?)\s"
)
_BACKGROUND = re.compile(
    r"&\s*$|^(?:nohup|setsid|disown)\b|^(?:screen|tmux)\s+(?:-\S+\s+)*(?:new|-dm)|"
    r"\s-(?:daemonize|detach|d)\b|--daemon\b|--detach\b"
)
_STATEMENTS = re.compile(r"\n|&&|\|\||;")
_PIPE = re.compile(r"(?<!\|)\|(?!\|)")
_PREFIX = re.compile(r"^(?:sudo\s+(?:-\S+\s+)*|env\s+(?:\S+=\S*\s+)+|\S+=\S*\s+|exec\s+|time\s+)")
_TMUX_KEY = re.compile(r"^(?:C-[a-zA-Z\\\]]|M-\S|Enter|Escape|Tab|BSpace|q)$")
# Programs that read stdin when given no file: fed by a pipe, they end when the pipe does.
_STDIN_FILTER = re.compile(
    r"^(?:cat|grep|egrep|fgrep|tee|head|tail|wc|sort|uniq|cut|tr|sed|awk|"
    r"xargs|less|more|python[\d.]*\s+-)\b"
)
_DUP = re.compile(r"\s+\d?>&\d\b|\s+\d>\s*/dev/null\b")
_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?[^\n]*\n.*?\n\s*\1\s*(?:\n|$)", re.DOTALL)


def segments(command: str) -> list[tuple[str, bool]]:
    """(segment, fed by a pipe) for every foreground segment, prefixes (`sudo`, `VAR=x`)
    removed."""
    # A heredoc body is data, not commands; the command that opens it reads the heredoc.
    text = _HEREDOC.sub(" <<HEREDOC\n", command)
    out: list[tuple[str, bool]] = []
    for statement in _STATEMENTS.split(text):
        for stage, raw in enumerate(_PIPE.split(statement)):
            seg = raw.strip()
            if not seg or seg.startswith("#") or _TMUX_KEY.match(seg):
                continue
            if _BACKGROUND.search(seg):
                continue  # it runs in the background: it cannot hold the command open
            while m := _PREFIX.match(seg):
                seg = seg[m.end() :]
            seg = _DUP.sub("", seg)  # `2>&1`, `2>/dev/null`: where output goes, not what runs
            seg = seg.strip().strip("()").strip()
            if seg:
                out.append((seg, stage > 0 or "<<HEREDOC" in seg or "<" in seg.split(">")[0][1:]))
    return out


def _seconds(value: str, unit: str) -> float:
    return float(value) * {"": 1, "s": 1, "m": 60, "h": 3600}[unit]


def kind_of_segment(seg: str, cap_seconds: float | None = None, fed: bool = False) -> str:
    m = _TIMEOUT_WRAPPED.match(seg)
    if m:
        limit = _seconds(m.group(1), m.group(2))
        if cap_seconds is not None and limit < cap_seconds:
            return "bounded"
        seg = seg[m.end() :].strip()
    for kind, pattern in (
        ("follow", _FOLLOW),
        ("server", _SERVER),
        ("blocking_read", _BLOCKING_READ),
        ("interactive", _INTERACTIVE),
        ("sleep", _SLEEP),
        ("install_or_build", _INSTALL_BUILD),
        ("trivial", _TRIVIAL),
    ):
        if pattern.match(seg):
            if kind == "blocking_read" and fed and _STDIN_FILTER.match(seg):
                return "trivial"  # it reads the pipe or heredoc it is given, then ends
            return kind
    return "other"


def kind_of(command: str, cap_seconds: float | None = None) -> CommandKind:
    """The kind of a whole command line: its most-blaming foreground segment."""
    found = [(kind_of_segment(s, cap_seconds, fed), s) for s, fed in segments(command)]
    if not found:
        return CommandKind("trivial", command.strip())
    kind, seg = min(found, key=lambda ks: KINDS.index(ks[0]))
    return CommandKind(kind, seg)


def installs_or_builds(command: str) -> bool:
    """A statement of the command line installs, downloads or builds, in the foreground or in
    the background (`pip install x &` keeps running after the prompt returns)."""
    for statement in _STATEMENTS.split(_HEREDOC.sub(" <<HEREDOC\n", command)):
        for raw in _PIPE.split(statement):
            seg = raw.strip().rstrip("&").strip()
            while m := _PREFIX.match(seg):
                seg = seg[m.end() :]
            if seg and _INSTALL_BUILD.match(seg.strip("()").strip()):
                return True
    return False


def first_line(command: str) -> str:
    """The first line of a command that is not a comment (what to quote of it)."""
    lines = [ln.strip() for ln in command.strip().splitlines() if ln.strip()]
    return next((ln for ln in lines if not ln.startswith("#")), lines[0] if lines else "")


def words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()
