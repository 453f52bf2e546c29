"""The exception chain of a trial, read whole: every exception Python printed, in order, with its
frames, and the layer each frame belongs to.

Python prints a chain cause first: the exception that started it, then "The above exception was
the direct cause of the following exception:" (`raise ... from`) or "During handling of the
above exception, another exception occurred:" and the next, up to the one that ended the trial.
The root cause is the first; the one the trial ended on is the last.

The layer of a frame is read from its file path and from the job's configured agent, never
from a list of library names:
- `agent`: the configured agent's own package (`config.agent.import_path`, its top-level
  module), or any code outside Python and its installed packages;
- `model_client`: Harbor's own model layer (`harbor/llms/`);
- `environment`: Harbor's environments (`harbor/environments/`: Docker, a remote sandbox
  provider, a cluster), where every exec into the sandbox goes;
- `verifier`: Harbor's verifier (`harbor/verifier/`);
- `harbor`: the rest of Harbor (the trial, the orchestrator, its built-in agents' terminal
  driver);
- `library`: any other installed package (site-packages, dist-packages), and `stdlib`.
A library or the standard library runs on behalf of whoever called it: `owner()` gives each
frame the layer of the nearest frame above it that is not a library's. An installed package
called from the agent's code that fails on a remote answer (a transport error, a status turned
into an exception, a body it could not decode) is the agent's model client: the agent talks to
two things outside itself, the sandbox (always through Harbor's environment) and the model
endpoint.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from audit.read.status import says_status

_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>.+?)\s*$')
_LINK = {
    "The above exception was the direct cause of the following exception:": "cause",
    "During handling of the above exception, another exception occurred:": "context",
}
_HEAD = "Traceback (most recent call last):"
# `pkg.mod.SomeError: message` or `SomeError` alone, at the end of a traceback block.
_RAISED = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s?(?P<message>.*))?$")
STDLIB = re.compile(
    r"/lib/python3\.\d+/(?!site-packages/|dist-packages/)|/Python\.framework/|\\Lib\\(?!site-packages)"
)
_INSTALLED = re.compile(r"/(?:site|dist)-packages/(?P<pkg>[\w.-]+)")
_HARBOR = re.compile(r"/harbor/(?P<sub>\w+)/(?=[\w/.-]*\.py$)")
_HARBOR_LAYER = {
    # Harbor's built-in agents drive the sandbox through Harbor's own terminal code (tmux); a
    # failure raised there is read in Harbor's words (rules.yaml), like the rest of Harbor.
    "agents": "harbor",
    "llms": "model_client",
    "environments": "environment",
    "verifier": "verifier",
}
# Standard-library modules that move bytes over a network.
_NET_STDLIB = re.compile(r"/(?:socket|ssl|http/client|urllib/request|asyncio/(?:streams|"
                         r"selector_events|sslproto))\.py$")
# Exception names that say a remote call failed: its transport, its status, or its body.
_REMOTE = re.compile(
    r"(?:Timeout|Connect|Connection|RemoteProtocol|ReadError|WriteError|ProtocolError|"
    r"APIError|APIStatusError|StatusError|HTTPError|HTTPStatus|ServerError|ServiceUnavailable|"
    r"RateLimit|Authentication|PermissionDenied|BadRequest|NotFound|InternalServer|"
    r"gaierror|SSLError|IncompleteRead|RemoteDisconnected)"
)


@dataclass(frozen=True)
class Frame:
    path: str
    line: int
    func: str
    source: str

    def __str__(self) -> str:
        """The frame as Python prints it (what a proof quotes of it)."""
        return f'File "{self.path}", line {self.line}, in {self.func}'


@dataclass(frozen=True)
class Raised:
    """One exception of the chain: its type as printed, its message, its frames (outermost
    first), and how the NEXT exception relates to it (`cause`, `context`, or None: last)."""

    type: str
    message: str
    frames: tuple[Frame, ...]
    link: str | None = None

    @property
    def name(self) -> str:
        return self.type.rsplit(".", 1)[-1]

    @property
    def text(self) -> str:
        return f"{self.type}: {self.message}".rstrip(": ")


@dataclass(frozen=True)
class Agent:
    """Where the configured agent's code lives, from the job's config."""

    import_path: str | None = None
    name: str | None = None

    def owns(self, path: str) -> bool:
        if not self.import_path:
            return False
        module = self.import_path.split(":", 1)[0]
        top = module.split(".", 1)[0]
        # Its own file, or its top-level package (a checkout or an installed package).
        return "/" + module.replace(".", "/") + ".py" in path or f"/{top}/" in path


def parse(text: str | None) -> tuple[Raised, ...]:
    """Every exception of the traceback text, root cause first."""
    if not text or _HEAD not in text:
        return ()
    out: list[Raised] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() != _HEAD:
            link = _LINK.get(lines[i].strip())
            if link and out:
                out[-1] = Raised(out[-1].type, out[-1].message, out[-1].frames, link)
            i += 1
            continue
        i += 1
        frames: list[Frame] = []
        while i < len(lines):
            m = _FRAME.match(lines[i])
            if m:
                source = ""
                if i + 1 < len(lines) and not _FRAME.match(lines[i + 1]):
                    nxt = lines[i + 1].strip()
                    if nxt and not set(nxt) <= set("^~ "):
                        source = nxt
                frames.append(Frame(m.group("path"), int(m.group("line")), m.group("func"), source))
                i += 1
                continue
            stripped = lines[i].strip()
            if lines[i].startswith((" ", "\t")) or not stripped:
                i += 1
                continue
            raised = _RAISED.match(stripped)
            if raised:
                message = [raised.group("message") or ""]
                i += 1
                # A message may run over several lines until the next block or link.
                while (
                    i < len(lines)
                    and lines[i].strip() not in _LINK
                    and lines[i].strip() != _HEAD
                    and not lines[i].startswith("  File ")
                ):
                    if lines[i].strip():
                        message.append(lines[i].strip())
                    i += 1
                out.append(Raised(raised.group("type"), "\n".join(message).strip(), tuple(frames)))
            else:
                i += 1
            break
    return tuple(out)


def layer(path: str, agent: Agent) -> str:
    """The layer a frame's file belongs to, before its caller is considered."""
    if agent.owns(path):
        return "agent"
    installed = _INSTALLED.search(path)
    if installed:
        if installed.group("pkg") != "harbor":
            return "library"
        sub = path[installed.end() :].lstrip("/").split("/", 1)[0]
        return _HARBOR_LAYER.get(sub, "harbor")
    if STDLIB.search(path):
        return "stdlib"
    # Harbor run from a checkout: its innermost `harbor/<sub>/`.
    checkout = next(reversed(list(_HARBOR.finditer(path))), None)
    if checkout:
        return _HARBOR_LAYER.get(checkout.group("sub"), "harbor")
    return "agent"  # outside Python and any installed package: the job's own code


@dataclass(frozen=True)
class Origin:
    """Where the chain's root cause arose, and what it was."""

    root: Raised
    last: Raised
    layer: str  # agent | model_client | environment | verifier | harbor | library | unknown
    remote: bool  # the root is a remote call failing: transport, status, or an undecodable body
    site: Frame | None  # the innermost frame of the layer that made the failing call


def origin(chain: tuple[Raised, ...], agent: Agent) -> Origin | None:
    """The root cause of the chain and the layer it arose in."""
    if not chain:
        return None
    root, last = chain[0], chain[-1]
    frames = root.frames
    # The innermost frame that is neither a library's nor Python's raised it, or called the
    # library that did: a remote failure below the agent's own call is its model client's.
    kinds = [layer(f.path, agent) for f in frames]
    named = [(k, f) for k, f in zip(kinds, frames, strict=True) if k not in ("library", "stdlib")]
    remote = _is_remote(root, frames)
    if named:
        where, site = named[-1]
        below = kinds[frames.index(site) + 1 :]
        if where == "agent" and remote and any(k == "library" for k in below):
            return Origin(root, last, "model_client", True, site)
        return Origin(root, last, where, remote, site)
    # Only library and stdlib frames: the caller is in a later block of the chain (a library
    # that wraps an exception raises its own, whose traceback starts at its caller).
    for outer in chain[1:]:
        for f in reversed(outer.frames):
            kind = layer(f.path, agent)
            if kind in ("library", "stdlib"):
                continue
            if kind == "agent":
                return Origin(root, last, "model_client" if remote else "library", remote, f)
            return Origin(root, last, kind, remote, f)
    return Origin(root, last, "library" if frames else "unknown", remote, None)


def _is_remote(root: Raised, frames: tuple[Frame, ...]) -> bool:
    if _REMOTE.search(root.name) or says_status(root.message):
        return True
    if any(_NET_STDLIB.search(f.path) for f in frames):
        return True
    # A body a library could not decode: json's decoder called from an installed package's
    # response handling (`response.json()`), not from the agent's own parse of model output.
    if root.name == "JSONDecodeError":
        paths = [f.path for f in frames]
        return any(_INSTALLED.search(p) for p in paths) and any("json" in p for p in paths)
    return False
