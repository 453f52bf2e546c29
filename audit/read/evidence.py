"""Everything a trial directory says about one trial, read tolerantly and lazily.

Only result.json is read for every trial; logs, verifier output, trajectory and recording are
read the first time a rule asks for them, so a passing trial costs one small file read. A
missing or corrupt file becomes an entry in `problems`, never an exception.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from pydantic import ValidationError

from audit.read import chain as C
from audit.read import layout as L
from audit.read.logs import AgentLog, read_all
from audit.read.models import ExceptionInfo, TrialResult, VerifierResult

SOURCES = (
    "exception",
    "trial_log",
    "verifier_output",
    "agent_commands",
    "agent_output",
    "agent_exit_code",
    "agent_setup_output",
)
_COMMAND_DIR = re.compile(r"^command-(\d+)/")
# Top-level text logs other agents leave in agent/ (not the scripts they were installed with).
_AGENT_LOG = re.compile(r"(?i)(output|log|stderr|stdout|response|error)[\w.-]*\.(txt|log|json)$")

# Terminal escape sequences in panes and recordings would split words that rules look for.
_ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])")


@dataclass(frozen=True)
class Chunk:
    """A piece of evidence text and where it came from (file, and trajectory step if any)."""

    file: str
    text: str
    step: int | None = None
    # A place that is not a line of a text file (an event of an agent's JSON log).
    label: str | None = None

    def where(self, line: int) -> str:
        if self.label is not None:
            return self.label
        if self.step is not None:
            return f"{self.file} step {self.step}"
        return f"{self.file}:{line}"


@dataclass(frozen=True)
class Exchange:
    """A command the agent ran and the output it got back (either may be missing)."""

    command: Chunk | None
    output: Chunk | None
    return_code: str | None


@dataclass
class TrialEvidence:
    layout: L.JobLayout
    trial_dir: str
    result: TrialResult | None = None
    problems: list[str] = field(default_factory=list)
    _sources: dict[str, list[Chunk]] = field(default_factory=dict, repr=False)
    _traj: tuple[list[Chunk] | None, list[Chunk] | None] | None = field(default=None, repr=False)
    _texts: dict[str, str | None] = field(default_factory=dict, repr=False)
    _agent_files: list[str] | None = field(default=None, repr=False)
    _commands: list[Exchange] | None = field(default=None, repr=False)
    _exchanges: list[Exchange] = field(default_factory=list, repr=False)
    _written: list[str] = field(default_factory=list, repr=False)
    _logs: list[AgentLog] | None = field(default=None, repr=False)
    _json: dict[str, object] = field(default_factory=dict, repr=False)
    _log_exchanges: list[Exchange] | None = field(default=None, repr=False)
    _chain: tuple[C.Raised, ...] | None = field(default=None, repr=False)
    # Facts derived from the files, read once (audit/read/reached.py).
    facts: dict[str, object] = field(default_factory=dict, repr=False)
    # result.json was absent (result may then be rebuilt from the other files).
    result_missing: bool = False
    # Where the exception was read from when it is not result.json's exception_info.
    exception_source: str | None = None

    @classmethod
    def load(
        cls, layout: L.JobLayout, trial_dir: str, job_rewards: dict[str, float] | None = None
    ) -> TrialEvidence:
        """Read result.json; without one, rebuild what it would have said from the other files.

        `job_rewards` maps trial names to the reward the job's result.json lists for them.
        """
        ev = cls(layout, trial_dir)
        raw = ev._read(L.TRIAL_RESULT, required=True)
        if raw is not None:
            try:
                ev.result = TrialResult.model_validate_json(raw)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first.get("loc", ())) or "file"
                ev.problems.append(
                    f"{trial_dir}/{L.TRIAL_RESULT} is corrupt ({where}: {first['msg']})"
                )
        else:
            ev.result_missing = True
            ev.result = ev._rebuilt_result((job_rewards or {}).get(trial_dir))
        return ev

    def _rebuilt_result(self, job_reward: float | None) -> TrialResult | None:
        """A TrialResult from the reward file, the job's reward list and exception.txt."""
        reward, source = _reward_file(
            self._read(L.VERIFIER_REWARD_TXT), self._read(L.VERIFIER_REWARD_JSON)
        )
        if reward is None and job_reward is not None:
            reward, source = job_reward, "the job's result.json reward_stats"
        exc_text = self._read(L.TRIAL_EXCEPTION)
        info = _exception_from_text(exc_text) if exc_text else None
        if reward is None and info is None:
            return None
        self.exception_source = L.TRIAL_EXCEPTION if info else None
        found = [s for s in (source, L.TRIAL_EXCEPTION if info else None) if s]
        self.problems.append(
            f"{self.trial_dir}/{L.TRIAL_RESULT} is missing; judged from {' and '.join(found)}"
        )
        return TrialResult(
            trial_name=self.trial_dir,
            verifier_result=VerifierResult(rewards={"reward": reward})
            if reward is not None
            else None,
            exception_info=info,
        )

    def _read(self, rel: str, required: bool = False) -> str | None:
        if rel in self._texts:
            return self._texts[rel]
        try:
            text = self.layout.read_text(f"{self.trial_dir}/{rel}")
        except OSError as exc:
            self.problems.append(f"{self.trial_dir}/{rel} unreadable: {exc}")
            text = None
        else:
            if text is None and required:
                self.problems.append(f"{self.trial_dir}/{rel} is missing")
        self._texts[rel] = text
        return text

    def text(self, rel: str) -> str | None:
        return self._read(rel)

    def json(self, rel: str) -> object | None:
        """The JSON in a file, parsed once (None when it is absent or not JSON)."""
        if rel not in self._json:
            raw = self._read(rel)
            try:
                self._json[rel] = json.loads(raw) if raw else None
            except ValueError:
                self._json[rel] = None
        return self._json[rel]

    def chain(self) -> tuple[C.Raised, ...]:
        """The exception chain that ended the trial, root cause first (audit/read/chain.py)."""
        if self._chain is None:
            info = self.result.exception_info if self.result else None
            text = (info.exception_traceback if info else None) or self._read(L.TRIAL_EXCEPTION)
            self._chain = C.parse(text)
        return self._chain

    def agent(self) -> C.Agent:
        """The configured agent (the trial's config.json `agent`, else result.json's name)."""
        config = self.json(L.TRIAL_CONFIG)
        agent = config.get("agent") if isinstance(config, dict) else None
        agent = agent if isinstance(agent, dict) else {}
        name = agent.get("name") or (
            self.result.agent_info.name if self.result and self.result.agent_info else None
        )
        path = agent.get("import_path")
        return C.Agent(
            path if isinstance(path, str) else None, name if isinstance(name, str) else None
        )

    def origin(self) -> C.Origin | None:
        """Where the chain's root cause arose (its layer) and what it was."""
        return C.origin(self.chain(), self.agent())

    def source(self, name: str) -> list[Chunk]:
        if name not in self._sources:
            loader = getattr(self, f"_load_{name}", None)
            if loader is None:
                raise KeyError(f"unknown evidence source {name!r} (known: {', '.join(SOURCES)})")
            self._sources[name] = loader()
        return self._sources[name]

    # --- loaders, one per source ---------------------------------------------------------------
    def _load_exception(self) -> list[Chunk]:
        chunks = []
        info = self.result.exception_info if self.result else None
        if info:
            # A result rebuilt from exception.txt (no result.json) is quoted from that file.
            where = self.exception_source or f"{L.TRIAL_RESULT} exception_info"
            head = f"{info.exception_type or ''}: {info.exception_message or ''}"
            chunks.append(Chunk(where, head))
            if info.exception_traceback:
                chunks.append(Chunk(where, info.exception_traceback))
        if info or self.result is None:
            text = self._read(L.TRIAL_EXCEPTION)
            if text:
                chunks.append(Chunk(L.TRIAL_EXCEPTION, text))
        return chunks

    def _load_trial_log(self) -> list[Chunk]:
        return _one(L.TRIAL_LOG, self._read(L.TRIAL_LOG))

    def _load_verifier_output(self) -> list[Chunk]:
        return _one(L.VERIFIER_STDOUT, self._read(L.VERIFIER_STDOUT))

    def _load_agent_exit_code(self) -> list[Chunk]:
        chunks = _one(L.AGENT_EXIT_CODE, self._read(L.AGENT_EXIT_CODE))
        # Installed agents (Harbor's BaseInstalledAgent) keep one dir per exec they ran.
        for rel in self.agent_files():
            if rel.endswith("/return-code.txt"):
                chunks.extend(_one(f"{L.AGENT_DIR}/{rel}", self._read(f"{L.AGENT_DIR}/{rel}")))
        return chunks

    def _load_agent_commands(self) -> list[Chunk]:
        commands, _ = self._trajectory()
        chunks = list(commands or [])
        for ex in self._command_dirs() + self._other_agent_exchanges():
            if ex.command:
                chunks.append(ex.command)
        if not chunks:
            _, inputs = self._recording()
            return inputs
        return chunks

    def _load_agent_output(self) -> list[Chunk]:
        _, observations = self._trajectory()
        chunks = list(observations) if observations is not None else []
        chunks.extend(ex.output for ex in self._command_dirs() if ex.output)
        chunks.extend(ex.output for ex in self._other_agent_exchanges() if ex.output)
        if observations is None:
            pane = self._read(L.AGENT_PANE)
            if pane:
                chunks.append(Chunk(L.AGENT_PANE, _ANSI.sub("", pane)))
            else:
                outputs, _ = self._recording()
                chunks.extend(outputs)
        chunks.extend(_one(L.AGENT_ORACLE_LOG, self._read(L.AGENT_ORACLE_LOG)))
        for rel in self.agent_files():
            # Other agents' own logs (e.g. `<agent>-output.txt`, episode responses).
            if _AGENT_LOG.search(rel) and "/" not in rel:
                path = f"{L.AGENT_DIR}/{rel}"
                chunks.extend(_one(path, self._read(path)))
        return chunks

    def _load_agent_setup_output(self) -> list[Chunk]:
        return _one(L.AGENT_SETUP_STDOUT, self._read(L.AGENT_SETUP_STDOUT))

    # --- agent files beyond terminus-2 ---------------------------------------------------------
    def agent_files(self) -> list[str]:
        """Files under agent/ (relative to it), listed once per trial."""
        if self._agent_files is None:
            prefix = f"{self.trial_dir}/{L.AGENT_DIR}/"
            try:
                listed = self.layout.files_under(f"{self.trial_dir}/{L.AGENT_DIR}")
            except OSError as exc:
                self.problems.append(f"{self.trial_dir}/{L.AGENT_DIR} unlistable: {exc}")
                listed = []
            self._agent_files = [f[len(prefix) :] for f in listed if f.startswith(prefix)]
        return self._agent_files

    def _command_dirs(self) -> list[Exchange]:
        """agent/command-N/{command.txt,stdout.txt,return-code.txt}, in N order."""
        if self._commands is None:
            numbered = sorted(
                {int(m.group(1)) for f in self.agent_files() if (m := _COMMAND_DIR.match(f))}
            )
            out = []
            for n in numbered:
                base = f"{L.AGENT_DIR}/command-{n}"
                cmd = self._read(f"{base}/command.txt")
                stdout = self._read(f"{base}/stdout.txt")
                rc = self._read(f"{base}/return-code.txt")
                out.append(
                    Exchange(
                        Chunk(f"{base}/command.txt", cmd) if cmd else None,
                        Chunk(f"{base}/stdout.txt", _ANSI.sub("", stdout)) if stdout else None,
                        rc.strip() if rc else None,
                    )
                )
            self._commands = out
        return self._commands

    def exchanges(self) -> list[Exchange]:
        """Every (command, its output) pair the agent left: trajectory steps, command dirs."""
        self._trajectory()
        return list(self._exchanges) + self._command_dirs() + self._other_agent_exchanges()

    def written_by_agent(self) -> list[str]:
        """Contents the agent passed to file-writing tools (write/edit/create calls)."""
        self._trajectory()
        return self._written

    def result_metadata(self) -> dict | None:
        """result.json's `agent_result.metadata`, where custom agents keep their own record
        (the typed model drops it: it is read only when an agent-log reader asks)."""
        data = self.json(L.TRIAL_RESULT)
        agent = data.get("agent_result") if isinstance(data, dict) else None
        metadata = agent.get("metadata") if isinstance(agent, dict) else None
        return metadata if isinstance(metadata, dict) else None

    def agent_logs(self) -> list[AgentLog]:
        """Every agent log of the trial, in one shape (audit/read/logs), read once."""
        if self._logs is None:
            try:
                self._logs = read_all(self)
            except (ValueError, TypeError, AttributeError, KeyError) as exc:
                # A log of a format version the readers do not know: noted, never fatal.
                self.problems.append(f"{self.trial_dir}: an agent log could not be read ({exc})")
                self._logs = []
        return self._logs

    def _other_agent_exchanges(self) -> list[Exchange]:
        """Commands and outputs from agent logs other than ATIF and command dirs (read
        already): Claude Code, OpenHands, mini-swe-agent, episode dirs, custom messages."""
        if self._log_exchanges is None:
            out: list[Exchange] = []
            for log in self.agent_logs():
                if log.source == "atif":
                    continue
                for a in log.actions:
                    out.append(
                        Exchange(
                            Chunk(a.where.split(":")[0].split(" ")[0], a.command, label=a.where),
                            Chunk(
                                (a.output_where or a.where).split(":")[0].split(" ")[0],
                                _ANSI.sub("", a.output),
                                label=a.output_where,
                            )
                            if a.output
                            else None,
                            str(a.exit_code) if a.exit_code is not None else None,
                        )
                    )
            self._log_exchanges = out
        return self._log_exchanges

    # --- parsers -------------------------------------------------------------------------------
    def _trajectory(self) -> tuple[list[Chunk] | None, list[Chunk] | None]:
        """(command chunks, observation chunks) from the ATIF trajectory; (None, None) if absent."""
        if self._traj is not None:
            return self._traj
        parsed: tuple[list[Chunk] | None, list[Chunk] | None] = (None, None)
        raw = self._read(L.AGENT_TRAJECTORY)
        if raw is not None:
            try:
                data = json.loads(raw)
                self._json[L.AGENT_TRAJECTORY] = data  # the ATIF reader uses it too
                steps = data.get("steps") if isinstance(data, dict) else None
                if not isinstance(steps, list):
                    raise ValueError("no steps list")
                parsed = _trajectory_chunks(steps, self)
            except (ValueError, AttributeError, TypeError) as exc:
                self.problems.append(f"{self.trial_dir}/{L.AGENT_TRAJECTORY} is corrupt ({exc})")
        self._traj = parsed
        return parsed

    def _recording(self) -> tuple[list[Chunk], list[Chunk]]:
        """(output chunks, input chunks) from the asciinema v2 cast."""
        raw = self._read(L.AGENT_RECORDING)
        if not raw:
            return [], []
        out: list[str] = []
        inp: list[str] = []
        bad = 0
        for line in raw.splitlines()[1:]:
            try:
                _, kind, data = json.loads(line)
            except (ValueError, TypeError):
                bad += 1
                continue
            (out if kind == "o" else inp).append(str(data))
        if bad:
            # A cast cut off by a killed container has a torn last line: worth noting, not fatal.
            self.problems.append(f"{self.trial_dir}/{L.AGENT_RECORDING}: {bad} unreadable lines")
        clean_out = _ANSI.sub("", "".join(out)).replace("\r\n", "\n").replace("\r", "\n")
        clean_in = "".join(inp).replace("\r", "\n")
        return (
            _one(L.AGENT_RECORDING, clean_out),
            _one(L.AGENT_RECORDING, clean_in),
        )


_EXC_LAST = re.compile(
    r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Timeout)\w*)"
    r"(?::\s*(?P<msg>.*))?$"
)


def _exception_from_text(text: str) -> ExceptionInfo | None:
    """The exception a traceback ends with (`pkg.mod.SomeError: message`)."""
    for line in reversed(text.strip().splitlines()):
        m = _EXC_LAST.match(line.strip())
        if m:
            return ExceptionInfo(
                exception_type=m.group("type").rsplit(".", 1)[-1],
                exception_message=m.group("msg") or "",
                exception_traceback=text,
            )
    return None


def _reward_file(txt: str | None, js: str | None) -> tuple[float | None, str | None]:
    if js:
        try:
            data = json.loads(js)
            value = data.get("reward") if isinstance(data, dict) else None
            if value is None and isinstance(data, dict) and len(data) == 1:
                value = next(iter(data.values()))
            if isinstance(value, (int, float)):
                return float(value), L.VERIFIER_REWARD_JSON
        except ValueError:
            pass
    if txt and txt.strip():
        try:
            return float(txt.strip()), L.VERIFIER_REWARD_TXT
        except ValueError:
            pass
    return None, None


def _one(file: str, text: str | None) -> list[Chunk]:
    return [Chunk(file, text)] if text else []


# Tool-call argument keys that carry a shell command (Terminus-2 `keystrokes`, the `command` of
# exec/bash tools of other agents) and those that carry a file's new content.
_COMMAND_KEYS = ("keystrokes", "command", "cmd", "script", "code", "input")
_CONTENT_KEYS = ("content", "file_text", "new_str", "new_string", "text", "patch")


def _content_text(value: object) -> str:
    """An observation's content: a string, or a list of {type: text, text} parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(
            p["text"] for p in value if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def _trajectory_chunks(steps: list, ev: TrialEvidence) -> tuple[list[Chunk], list[Chunk]]:
    commands, observations = [], []
    last_command: Chunk | None = None
    for step in steps:
        if not isinstance(step, dict) or step.get("source") != "agent":
            continue
        step_id = step.get("step_id")
        keys: list[str] = []
        for call in step.get("tool_calls") or []:
            args = (call or {}).get("arguments") or {}
            if not isinstance(args, dict):
                continue
            keys.extend(args[k] for k in _COMMAND_KEYS if isinstance(args.get(k), str))
            ev._written.extend(args[k] for k in _CONTENT_KEYS if isinstance(args.get(k), str))
        if keys:
            last_command = Chunk(L.AGENT_TRAJECTORY, "\n".join(keys), step_id)
            commands.append(last_command)
        results = ((step.get("observation") or {}).get("results")) or []
        texts = [_content_text(r.get("content")) for r in results if isinstance(r, dict)]
        text = "\n".join(t for t in texts if t)
        if text:
            chunk = Chunk(L.AGENT_TRAJECTORY, _ANSI.sub("", text), step_id)
            observations.append(chunk)
            # The output belongs to this step's command, or (agents that log a tool result as
            # its own step) to the last command before it.
            ev._exchanges.append(Exchange(last_command, chunk, None))
    return commands, observations
