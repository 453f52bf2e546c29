"""How much host logic is left in bash, and how many places decide what one place should own.

Issue 21 moved the host logic from bash (hostside/probes/: once 26 scripts, ~1,950 lines) into
the tested Python package hostside/. This measures what that move is meant to hold:

a. bash lines (and scripts) left under hostside/probes/;
b. defaults outside the config: `${VAR:-value}` fallbacks in shipped bash (the .sh files and the
   bash in the program's and host package's string literals), and in the host package's Python
   an `os.environ.get(X, value)`, a `.get("key", value)` or `.get("key") or value`, a default on
   a step's inputs dataclass, and a literal default on a parameter or CLI option named like a
   config key that has a default (components/config*.py) or like a key the module reads from
   its inputs;
c. the owners of Harbor's job layout (contracts/jobdir.py is to be the one): the
   files that decide a job is finished (a test on `finished_at`, or a grep/jq for it), that
   check whether the recorded PID is Harbor running a job (`/proc/PID/cmdline` or `kill -0`
   beside a job), and that spell the layout's names (`results/`, `logs/`, `<job>.pid`,
   `<job>.log`, the launch token, the resolved config, the provenance manifest, the trials set
   aside, a trial's compose project);
d. the places outside the host seam (components/seam/) that decide local-or-ssh: a test on
   `is_local` whose branches build an ssh path, or an ssh command built outside the seam.

Python is read with `ast` (docstrings and comments do not count; f-string pieces do); bash line
by line, comments skipped. tests/architecture/test_host_logic_counts.py asserts the targets and
feeds each rule a file with the violation it is for; test_layers.py reports its violations as
these findings.

    .venv/bin/python -m tests.architecture.host_logic [--json]
"""

from __future__ import annotations

import ast
import functools
import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = "hostside/probes"
HOSTSIDE = "hostside"
JOBDIR = "contracts/jobdir.py"
# The host seam: every file of the package.
SEAM = "components/seam/"


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.text}"


# --- the files -------------------------------------------------------------------------------


def product_files(root: Path = ROOT) -> dict[str, str]:
    """Everything shipped or run as the product: the program, its components (with the host
    package and scripts) and the audit. Tests, benchmarks and demo data are not."""
    paths = [*(path for package in ("components", "hostside", "contracts", "audit")
               for path in (root / package).rglob("*.py")),
             *(root / HOSTSIDE).rglob("*.sh"), root / "__main__.py"]
    return {str(p.relative_to(root)): p.read_text() for p in sorted(paths) if p.is_file()}


def config_defaults(files: dict[str, str]) -> dict[str, set[str]]:
    """The config's keys that have a default, each with its defaults as source text: the fields
    with a value in the classes of components/config.py (or the modules it is split into,
    components/config*.py or a package such as components/config_models/); `Field(default=X)`
    gives X."""
    keys: dict[str, set[str]] = {}
    for path, text in files.items():
        if not re.fullmatch(r"components/config[^/]*\.py|components/config[^/]*/.*\.py", path):
            continue
        for node in walk(parse(text)):
            if isinstance(node, ast.ClassDef):
                for stmt in node.body:
                    if (isinstance(stmt, ast.AnnAssign) and stmt.value is not None
                            and isinstance(stmt.target, ast.Name)):
                        value = stmt.value
                        if isinstance(value, ast.Call) and _name(value.func) == "Field":
                            given = [k.value for k in value.keywords if k.arg == "default"]
                            value = given[0] if given else value
                        keys.setdefault(stmt.target.id, set()).add(_literal(value))
    return keys


# --- a. bash lines ---------------------------------------------------------------------------


def bash_code_lines(text: str) -> int:
    """Lines that are neither blank nor a comment (a `# benchstack:include` line counts: it is
    a whole Python file the seam inlines, which the Python counts already cover)."""
    return sum(1 for line in text.splitlines()
               if line.strip() and not line.strip().startswith("#")
               or line.strip().startswith("# benchstack:include"))


def bash_counts(files: dict[str, str]) -> dict[str, int]:
    scripts = {p: t for p, t in files.items() if p.startswith(f"{SCRIPTS}/") and p.endswith(".sh")}
    return {
        "scripts": len(scripts),
        "lines": sum(len(t.splitlines()) for t in scripts.values()),
        "code_lines": sum(bash_code_lines(t) for t in scripts.values()),
    }


# --- helpers over Python ---------------------------------------------------------------------


@functools.cache
def parse(text: str) -> ast.Module:
    """One tree per file for every rule (the rules only read it)."""
    return ast.parse(text)


_WALKED: dict[int, list[ast.AST]] = {}


def walk(tree: ast.AST) -> Iterable[ast.AST]:
    """ast.walk, kept once per parsed file (the rules walk each file several times)."""
    if not isinstance(tree, ast.Module):
        return ast.walk(tree)
    if id(tree) not in _WALKED:
        _WALKED[id(tree)] = list(ast.walk(tree))
    return _WALKED[id(tree)]



@functools.cache
def docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                found.add(id(body[0].value))
    return found


def strings(tree: ast.AST) -> Iterator[ast.Constant]:
    """Every str literal that is not a docstring, f-string pieces included."""
    skip = docstrings(tree)
    for node in walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            yield node


def shell_lines(path: str, text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of the bash a file holds: a .sh file's non-comment lines, or each
    line of a Python file's string literals (bash the program renders or a step runs)."""
    if path.endswith(".sh"):
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip() and not line.lstrip().startswith("#"):
                yield number, line
    elif path.endswith(".py"):
        for node in strings(parse(text)):
            for offset, line in enumerate(node.value.splitlines()):
                yield node.lineno + offset, line


def is_literal_value(node: ast.AST | None) -> bool:
    """A literal that is a value of its own: not None, not empty (an empty default is a
    tolerant read of outside data, `.get("Id", "")`, not a decision)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return is_literal_value(node.operand)
    if isinstance(node, ast.Constant):
        return node.value is not None and node.value != "" and not isinstance(node.value, bytes)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return bool(node.elts)
    if isinstance(node, ast.Dict):
        return bool(node.keys)
    if isinstance(node, ast.JoinedStr):
        return bool(node.values)
    return False


def _literal(node: ast.AST) -> str:
    """A literal's value as source text (600 and 600.0 alike), else its source."""
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)
    return repr(float(value)) if isinstance(value, int) and not isinstance(value, bool) else (
        repr(value))


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" or (
        isinstance(node, ast.Name) and node.id == "environ")


def _const_key(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _get_call(node: ast.AST) -> ast.Call | None:
    """`m.get("key")` / `m.get("key", d)` / `os.getenv("X")`, else None."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "getenv") and node.args
            and _const_key(node.args[0]) is not None):
        return node
    return None


def read_keys(tree: ast.AST) -> set[str]:
    """The keys a module reads from a mapping (its inputs, a spec): `m["k"]`, `m.get("k")`."""
    keys = set()
    for node in walk(tree):
        if isinstance(node, ast.Subscript) and (key := _const_key(node.slice)) is not None:
            keys.add(key)
        elif (call := _get_call(node)) is not None:
            keys.add(_const_key(call.args[0]) or "")
    return keys


def _input_classes(tree: ast.AST) -> set[str]:
    """The dataclasses a module reads its step inputs into: `read(Inputs)` (hostside/step.py)."""
    found = {"Inputs"}
    for node in walk(tree):
        if (isinstance(node, ast.Call) and _name(node.func) == "read" and node.args
                and isinstance(node.args[0], ast.Name)):
            found.add(node.args[0].id)
    return found


def _parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[tuple[str, ast.AST]]:
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    yield from ((p.arg, d) for p, d in zip(positional[len(positional) - len(a.defaults):],
                                             a.defaults, strict=True))
    keyword = zip(a.kwonlyargs, a.kw_defaults, strict=True)
    yield from ((p.arg, d) for p, d in keyword if d is not None)


def _option_name(call: ast.Call) -> str:
    """The dest of an argparse `add_argument` call."""
    for kw in call.keywords:
        if kw.arg == "dest" and (dest := _const_key(kw.value)):
            return dest
    names = [_const_key(a) or "" for a in call.args]
    longest = max(names, key=len, default="")
    return longest.lstrip("-").replace("-", "_")


# --- b. defaults outside the config ------------------------------------------------------------

# `${VAR:-x}`, `${VAR-x}`, `${VAR:=x}`, `${VAR=x}`; group 2 is the fallback.
SHELL_FALLBACK = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):?[-=]([^}]*)\}")


def shell_fallbacks(path: str, text: str) -> tuple[list[Finding], list[Finding]]:
    """(defaults, guards): `${VAR:-value}` gives a value of its own; `${VAR:-}` only lets a
    never-failing probe run under `set -u` with VAR unset (it decides no value)."""
    defaults, guards = [], []
    for number, line in shell_lines(path, text):
        for match in SHELL_FALLBACK.finditer(line):
            (defaults if match.group(2) else guards).append(
                Finding(path, number, match.group(0)))
    return defaults, guards


def _call_default(node: ast.Call, named: Callable[[str, ast.AST], bool]) -> str | None:
    """Why a call decides a default (an environment read, a key's fallback, a CLI option's),
    or None."""
    if not isinstance(node.func, ast.Attribute):
        return None
    attr, owner = node.func.attr, node.func.value
    env = _is_environ(owner) or attr == "getenv"
    if env and attr in ("get", "getenv", "setdefault", "pop") and len(node.args) > 1 and (
            not (isinstance(node.args[1], ast.Constant) and node.args[1].value is None)):
        return "an environment default"
    if (attr == "get" and len(node.args) > 1 and _const_key(node.args[0]) is not None
            and is_literal_value(node.args[1])):
        return "a default for a key"
    if attr == "add_argument" and any(
            kw.arg == "default" and named(_option_name(node), kw.value) for kw in node.keywords):
        return "a CLI default for an input"
    return None


def _or_default(node: ast.BoolOp) -> bool:
    """`m.get("key") or value`, `os.environ["X"] or value`."""
    for left, right in zip(node.values, node.values[1:], strict=False):
        getter = _get_call(left)
        env_read = isinstance(left, ast.Subscript) and _is_environ(left.value)
        if (getter is not None or env_read) and is_literal_value(right):
            return True
    return False


def _inputs_defaults(node: ast.ClassDef) -> list[ast.AnnAssign]:
    """The fields of a step's inputs dataclass that have a default (a ClassVar, the RENAMED map
    step.read honours, is not an input)."""
    return [stmt for stmt in node.body
            if isinstance(stmt, ast.AnnAssign) and stmt.value is not None
            and "ClassVar" not in ast.unparse(stmt.annotation)]


def python_defaults(path: str, text: str, config: dict[str, set[str]]) -> list[Finding]:
    """The defaults a host module decides for itself (see the module docstring, b). A literal
    default on a parameter or CLI option counts when the module reads that name from its inputs
    (its inputs then have two sources) or when it is the config's default for that key."""
    tree = parse(text)
    inputs = _input_classes(tree)
    keys = read_keys(tree)
    found = []

    def named(name: str, default: ast.AST) -> bool:
        return is_literal_value(default) and (
            name in keys or _literal(default) in config.get(name, set()))

    def add(node: ast.AST, why: str) -> None:
        found.append(Finding(path, node.lineno, f"{why}: {ast.unparse(node)}"))

    for node in walk(tree):
        if isinstance(node, ast.Call) and (why := _call_default(node, named)):
            add(node, why)
        elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and _or_default(node):
            add(node, "a default for a key (or)")
        elif isinstance(node, ast.ClassDef) and node.name in inputs:
            for stmt in _inputs_defaults(node):
                add(stmt, f"a default on the step's inputs ({node.name})")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found += [Finding(path, default.lineno, f"a default for {name} in {node.name}(): "
                                                    f"{ast.unparse(default)}")
                      for name, default in _parameters(node) if named(name, default)]
    return sorted(found, key=lambda f: f.line)


# --- c. one owner of the job layout ------------------------------------------------------------


def _mentions_finished_at(node: ast.AST) -> bool:
    """The expression is a job's (or trial's) `finished_at`, however it is read."""
    if isinstance(node, ast.Attribute) and node.attr == "finished_at":
        return True
    if isinstance(node, ast.Name) and node.id in ("finished_at", "FINISHED_AT"):
        return True
    if isinstance(node, ast.Attribute) and node.attr == "FINISHED_AT":
        return True
    if isinstance(node, ast.Subscript):
        key = node.slice
        return _const_key(key) == "finished_at" or _mentions_finished_at(key)
    if isinstance(node, ast.Call) and _name(node.func) == "get" and node.args:
        return _const_key(node.args[0]) == "finished_at" or _mentions_finished_at(node.args[0])
    return False


def _tests(tree: ast.AST) -> Iterator[ast.AST]:
    """Every expression used as a condition."""
    for node in walk(tree):
        if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
            yield node.test
        elif isinstance(node, ast.comprehension):
            yield from node.ifs
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield node.operand
        elif isinstance(node, ast.Compare):
            yield node
        elif isinstance(node, ast.Call) and _name(node.func) == "bool" and node.args:
            yield node.args[0]


GREP_FINISHED = re.compile(r"\b(grep|jq|sed|awk)\b.*finished_at|finished_at.*\|\s*(grep|jq)\b")


def finished_deciders(path: str, text: str) -> list[Finding]:
    """Where a file decides a job is finished: a condition on `finished_at` (a comparison with
    None, a truth test), or bash that greps or jq's for it."""
    found = []
    if path.endswith(".py"):
        tree = parse(text)
        for test in _tests(tree):
            parts = ([test.left, *test.comparators] if isinstance(test, ast.Compare)
                     else [test.values] if isinstance(test, ast.BoolOp) else [test])
            flat = [p for part in parts for p in (part if isinstance(part, list) else [part])]
            if any(_mentions_finished_at(p) for p in flat):
                found.append(Finding(path, test.lineno, ast.unparse(test)))
    for number, line in shell_lines(path, text):
        if GREP_FINISHED.search(line) or (path.endswith(".sh") and "finished_at" in line):
            found.append(Finding(path, number, line.strip()))
    return found


PROC_CMDLINE = re.compile(r"/proc/.*cmdline|(^|/)cmdline$")
SHELL_PID_CHECK = re.compile(r"kill\s+-0\b|/proc/\S*cmdline|\bpgrep\b|\bpidof\b")
JOBISH = re.compile(r"job", re.IGNORECASE)


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _is_liveness_check(node: ast.AST) -> bool:
    """`os.kill(pid, 0)`, or a `/proc/<pid>/cmdline` read (a literal, or `... / "cmdline"`)."""
    if (isinstance(node, ast.Call) and _name(node.func) == "kill" and len(node.args) == 2
            and isinstance(node.args[1], ast.Constant) and node.args[1].value == 0):
        return True
    return (isinstance(node, ast.Constant) and isinstance(node.value, str)
            and bool(PROC_CMDLINE.search(node.value)))


def _speaks_of_a_job(fn: ast.AST) -> bool:
    for node in ast.walk(fn):
        name = (node.id if isinstance(node, ast.Name) else node.arg if isinstance(node, ast.arg)
                else node.attr if isinstance(node, ast.Attribute) else "")
        if JOBISH.search(name):
            return True
    return False


def pid_checkers(path: str, text: str) -> list[Finding]:
    """Where a file checks whether a process is Harbor running a job: a function that reads a
    process's command line or probes it with signal 0 and speaks of a job; bash with `kill -0`,
    `/proc/$pid/cmdline`, `pgrep` or `pidof` in a file that names a job."""
    found = []
    if path.endswith(".py"):
        for fn in _functions(parse(text)):
            checks = [n for n in ast.walk(fn) if _is_liveness_check(n)]
            if checks and _speaks_of_a_job(fn):
                found.append(Finding(path, fn.lineno, f"def {fn.name}"))
        # A function nested in another is reported once, by its own line.
        found = list({f.line: f for f in found}.values())
    if JOBISH.search(text):
        for number, line in shell_lines(path, text):
            if SHELL_PID_CHECK.search(line):
                found.append(Finding(path, number, line.strip()))
    return found


# What spells Harbor's job layout (jobdir.py's names), in a string literal or a bash line.
LAYOUT = {
    "results/": re.compile(r"(^|/)results(/|$)"),
    "logs/": re.compile(r"(^|/)logs(/|$)"),
    "<job>.pid": re.compile(r"\.pid$|\}\.pid\b|\.pid\b[\"'\s]"),
    "<job>.log": re.compile(r"\}\.log\b|^\.log$|\$\w+\.log\b|\b(job|trial)\.log\b"),
    "launch token / resolved config / provenance": re.compile(
        r"\.launch-token|\.resolved-config|\.provenance\.json"),
    "trials set aside": re.compile(r"benchstack-interrupted"),
    "compose project": re.compile(r"__env$"),
}


# These two name files of any program (the proxy bridge has its own PID file and log): they
# are the job layout's in a file that speaks of a job.
JOB_ONLY = {"<job>.pid", "<job>.log"}


def _keys_and_words(tree: ast.AST) -> set[int]:
    """String literals that are a mapping's key or an argv word, not a path: `m["results"]`,
    `m.get("results")`, `{"logs": ...}`, `["docker", "logs", name]`."""
    found = set()
    for node in walk(tree):
        if isinstance(node, ast.Subscript):
            found.add(id(node.slice))
        elif isinstance(node, ast.Call) and _name(node.func) in ("get", "pop", "setdefault"):
            found.update(id(a) for a in node.args[:1])
        elif isinstance(node, ast.Dict):
            found.update(id(k) for k in node.keys if k is not None)
        elif isinstance(node, (ast.List, ast.Tuple)):
            found.update(id(e) for e in node.elts)
    return found


def _identifiers(tree: ast.AST) -> Iterator[str]:
    for node in walk(tree):
        if isinstance(node, (ast.Name, ast.Attribute, ast.arg)):
            yield _name(node) if not isinstance(node, ast.arg) else node.arg
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name


def layout_spellings(path: str, text: str) -> list[Finding]:
    """Where a file spells a name of Harbor's job layout: a string literal that is a path or a
    piece of one (prose, a mapping key or an argv word is not), or a bash line."""
    found = []
    if path.endswith(".py"):
        tree = parse(text)
        not_paths = _keys_and_words(tree)
        speaks_of_jobs = any(JOBISH.search(name) for name in _identifiers(tree))
        for node in strings(tree):
            value = node.value
            prose = re.search(r"\s", value) and not re.search(r"[/$]", value)
            if prose or id(node) in not_paths:
                continue
            for what, pattern in LAYOUT.items():
                if pattern.search(value) and (speaks_of_jobs or what not in JOB_ONLY):
                    found.append(Finding(path, node.lineno, f"{what}: {value!r}"))
    else:
        for number, line in shell_lines(path, text):
            for what, pattern in LAYOUT.items():
                if pattern.search(line):
                    found.append(Finding(path, number, f"{what}: {line.strip()}"))
    return found


# --- d. local-or-ssh -------------------------------------------------------------------------

SSHISH = re.compile(r"ssh|private_key", re.IGNORECASE)


def _refers_to_is_local(node: ast.AST) -> bool:
    return any(_name(n) == "is_local" for n in ast.walk(node)
               if isinstance(n, (ast.Name, ast.Attribute)))


def _builds_ssh(nodes: Iterable[ast.AST]) -> bool:
    """The code names something of the ssh path (a call, a variable, an attribute): strings,
    such as an error message, do not count."""
    for top in nodes:
        for node in ast.walk(top):
            if isinstance(node, (ast.Name, ast.Attribute)) and SSHISH.search(_name(node)):
                return True
    return False


SEAM_SSH = {"ssh_command", "copy_here_command", "ssh_options", "remote_connection"}


def local_or_ssh_deciders(path: str, text: str) -> list[Finding]:
    """Outside the seam: a test on `is_local` whose branches take an ssh path, a call of the
    seam's ssh builders, or an `ssh` command spelled in a string."""
    if path.startswith(SEAM) or not path.endswith(".py"):
        return []
    tree = parse(text)
    found = []
    for node in walk(tree):
        branches: list[ast.AST] = []
        if isinstance(node, ast.If) and _refers_to_is_local(node.test):
            branches = [*node.body, *node.orelse]
        elif isinstance(node, ast.IfExp) and _refers_to_is_local(node.test):
            branches = [node.body, node.orelse]
        if branches and _builds_ssh(branches):
            found.append(Finding(path, node.lineno, f"is_local decides: {ast.unparse(node.test)}"))
        if isinstance(node, ast.Call) and _name(node.func) in SEAM_SSH:
            found.append(Finding(path, node.lineno, f"builds ssh: {ast.unparse(node)[:80]}"))
    for node in strings(tree):
        if re.match(r"\s*ssh\s+-", node.value):
            found.append(Finding(path, node.lineno, f"spells ssh: {node.value[:60]!r}"))
    return sorted(found, key=lambda f: f.line)


# --- all of it -------------------------------------------------------------------------------


@dataclass
class Counts:
    bash: dict[str, int]
    shell_defaults: list[Finding] = field(default_factory=list)
    shell_guards: list[Finding] = field(default_factory=list)
    python_defaults: list[Finding] = field(default_factory=list)
    finished: list[Finding] = field(default_factory=list)
    pid_check: list[Finding] = field(default_factory=list)
    layout: list[Finding] = field(default_factory=list)
    local_or_ssh: list[Finding] = field(default_factory=list)

    @staticmethod
    def owners(findings: list[Finding]) -> list[str]:
        return sorted({f.path for f in findings})

    def summary(self) -> dict:
        return {
            "bash_scripts": self.bash["scripts"],
            "bash_lines": self.bash["lines"],
            "bash_code_lines": self.bash["code_lines"],
            "shell_defaults": len(self.shell_defaults),
            "shell_unset_guards": len(self.shell_guards),
            "hostside_python_defaults": len(self.python_defaults),
            "finished_owners": self.owners(self.finished),
            "pid_check_owners": self.owners(self.pid_check),
            "layout_owners": self.owners(self.layout),
            "local_or_ssh_deciders_outside_seam": len(self.local_or_ssh),
        }


def measure(files: dict[str, str]) -> Counts:
    keys = config_defaults(files)
    counts = Counts(bash=bash_counts(files))
    for path, text in files.items():
        if path.endswith(".sh") or path.startswith(f"{HOSTSIDE}/") or path.startswith(SEAM):
            defaults, guards = shell_fallbacks(path, text)
            counts.shell_defaults += defaults
            counts.shell_guards += guards
        if path.startswith(f"{HOSTSIDE}/") and path.endswith(".py"):
            counts.python_defaults += python_defaults(path, text, keys)
        counts.finished += finished_deciders(path, text)
        counts.pid_check += pid_checkers(path, text)
        counts.layout += layout_spellings(path, text)
        counts.local_or_ssh += local_or_ssh_deciders(path, text)
    return counts


@functools.cache
def measure_root(root: Path = ROOT) -> Counts:
    """The counts of the checkout at `root` (measured once per process)."""
    return measure(product_files(root))


def main(argv: list[str]) -> int:
    counts = measure_root()
    if "--json" in argv:
        print(json.dumps({"summary": counts.summary(),
                          "findings": {k: [asdict(f) for f in v] for k, v in vars(counts).items()
                                       if isinstance(v, list)}}, indent=2))
        return 0
    summary = counts.summary()
    print(f"a. bash under {SCRIPTS}/: {summary['bash_scripts']} scripts, "
          f"{summary['bash_lines']} lines ({summary['bash_code_lines']} not blank or comment)")
    print(f"b. defaults outside the config: {summary['shell_defaults']} bash ${{VAR:-value}}, "
          f"{summary['hostside_python_defaults']} in hostside Python "
          f"({summary['shell_unset_guards']} bash ${{VAR:-}} unset guards, no value)")
    for what in ("finished", "pid_check", "layout"):
        print(f"c. owners of {what}: {Counts.owners(getattr(counts, what))}")
    print(f"d. local-or-ssh deciders outside {SEAM}: "
          f"{summary['local_or_ssh_deciders_outside_seam']}")
    for what, findings in vars(counts).items():
        if isinstance(findings, list) and findings and what not in ("shell_guards",):
            owners_ok = what in ("finished", "pid_check", "layout") and {
                f.path for f in findings} == {JOBDIR}
            if not owners_ok:
                print(f"\n{what}:")
                for finding in findings:
                    print(f"  {finding}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
