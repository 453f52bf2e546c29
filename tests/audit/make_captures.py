"""Regenerate `tests/audit/captures/`: what real tools print when the network fails.

Every capture is made by RUNNING the tool against a server on 127.0.0.1 that fails in one way,
never by writing the wording by hand. The tools run in a private mount namespace
(`unshare -m`) whose /etc/hosts maps a few names under the reserved `.test` TLD to 127.0.0.1
and whose /etc/resolv.conf points at a loopback DNS stub that answers NXDOMAIN for every
other name, so no request or lookup can leave 127.0.0.0/8 and the captured lines name a
host the way a real failure would (not `127.0.0.1`).

Server behaviours (one thread each, on free loopback ports):
  status-502 / status-503 / status-429  answer every request (GET, HEAD, CONNECT) with it
  reset    read the request, then close with SO_LINGER 0 (the peer sees a TCP RST)
  hang     accept and read, never answer (the tool's own read timeout fires)
  tls-self a TLS server with a self-signed certificate for its name (answers 200)
  tls-eof  read the TLS ClientHello, then close (EOF in the middle of the handshake)
  dns      a name under `.invalid` that the stub answers NXDOMAIN
  proxy-502  an HTTP proxy that answers 502 to CONNECT and to plain requests

Run as root (for unshare and the bind mounts), from the repo root:
    .venv/bin/python tests/audit/make_captures.py [--only TOOL] [--tool-venv DIR]
pip, uv and huggingface_hub run from DIR (a throwaway venv: `python3 -m venv DIR &&
DIR/bin/pip install uv huggingface_hub`). Every command has a timeout; the whole run takes a
few minutes. Writes one `<family>/<tool>.txt` per capture (trimmed to the decisive lines) and
`index.json` (tool, version, command, server behaviour, the host the line must name).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import socketserver
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

CAPTURES = Path(__file__).with_name("captures")
TIMEOUT = 90  # seconds per command, a bound on tools that retry
NAMES = {
    "index": "index.mirror.test",  # package index (pip, uv, npm, cargo, apt)
    "git": "git.mirror.test",  # code host
    "hub": "hub.mirror.test",  # model hub
    "files": "files.mirror.test",  # plain downloads (curl, wget)
    "proxy": "proxy.mirror.test",  # an HTTP proxy
}
UNRESOLVABLE = "pkgs.benchstack.invalid"
FAMILIES = (
    "http_502",
    "http_503",
    "http_429",
    "connection_reset",
    "read_timeout",
    "tls_untrusted",
    "tls_eof",
    "dns",
    "proxy_502",
)

# --- servers ---------------------------------------------------------------------------------
_REASON = {502: "Bad Gateway", 503: "Service Unavailable", 429: "Too Many Requests"}


def _status_handler(code: int):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self) -> None:
            body = (
                f"<html><head><title>{code} {_REASON[code]}</title></head>"
                f"<body><h1>{code} {_REASON[code]}</h1></body></html>\n"
            ).encode()
            self.send_response(code, _REASON[code])
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            if code == 429:
                self.send_header("Retry-After", "1")
            self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_HEAD = do_POST = do_CONNECT = _answer

        def log_message(self, *args) -> None:  # keep the capture run quiet
            pass

    return Handler


class _Quiet(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        pass


class _RawHandler(socketserver.BaseRequestHandler):
    behaviour = "reset"
    context: ssl.SSLContext | None = None

    def handle(self) -> None:
        sock = self.request
        sock.settimeout(30)
        try:
            if self.behaviour == "tls-self":
                with self.context.wrap_socket(sock, server_side=True) as tls:
                    tls.recv(65536)
                    tls.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    )
                return
            sock.recv(65536)
            if self.behaviour == "hang":
                time.sleep(TIMEOUT)
            elif self.behaviour == "reset":
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            # tls-eof: plain close after the ClientHello
        except (OSError, ssl.SSLError):
            pass
        finally:
            try:
                sock.close()
            except OSError:
                pass


class _RawServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def _raw(behaviour: str, context: ssl.SSLContext | None = None) -> socketserver.BaseServer:
    handler = type(f"H_{behaviour}", (_RawHandler,), {"behaviour": behaviour, "context": context})
    return _RawServer(("127.0.0.1", 0), handler)


class _DnsStub(threading.Thread):
    """UDP DNS on 127.0.0.1:53 answering NXDOMAIN to every query (RFC 1035 header only)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 53))

    def run(self) -> None:
        while True:
            try:
                data, peer = self.sock.recvfrom(4096)
            except OSError:
                return
            if len(data) < 12:
                continue
            flags = 0x8183 | (data[2] & 0x01) << 8  # response, RD copied, RA, RCODE=3
            self.sock.sendto(
                data[:2] + struct.pack(">H", flags) + data[4:6] + b"\0" * 6 + data[12:], peer
            )


def _self_signed(tmp: Path, name: str) -> ssl.SSLContext:
    key, crt = tmp / "key.pem", tmp / "crt.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            f"/CN={name}",
            "-addext",
            f"subjectAltName=DNS:{name}",
            "-keyout",
            str(key),
            "-out",
            str(crt),
        ],
        check=True,
        capture_output=True,
        timeout=TIMEOUT,
    )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    return ctx


@dataclass
class Servers:
    ports: dict[str, int]

    def url(self, behaviour: str, role: str, scheme: str = "http") -> str:
        if behaviour == "dns":
            return f"{scheme}://{UNRESOLVABLE}"
        return f"{scheme}://{NAMES[role]}:{self.ports[behaviour]}"


def start_servers(tmp: Path) -> Servers:
    ports: dict[str, int] = {}
    for code in (502, 503, 429):
        srv = _Quiet(("127.0.0.1", 0), _status_handler(code))
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        ports[f"status-{code}"] = srv.server_address[1]
    ports["proxy-502"] = ports["status-502"]
    ctx = _self_signed(tmp, NAMES["index"])
    for behaviour in ("reset", "hang", "tls-self", "tls-eof"):
        srv = _raw(behaviour, ctx if behaviour == "tls-self" else None)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        ports[behaviour] = srv.server_address[1]
    _DnsStub().start()
    return Servers(ports)


# --- the tools -------------------------------------------------------------------------------
FAMILY_SERVER = {
    "http_502": "status-502",
    "http_503": "status-503",
    "http_429": "status-429",
    "connection_reset": "reset",
    "read_timeout": "hang",
    "tls_untrusted": "tls-self",
    "tls_eof": "tls-eof",
    "dns": "dns",
    "proxy_502": "proxy-502",
}
TLS_FAMILIES = ("tls_untrusted", "tls_eof")


@dataclass
class Run:
    tool: str
    family: str
    argv: list[str]
    env: dict[str, str]
    host: str  # the host the captured lines must name ("a|b": either)
    cwd: Path | None = None


def _base_env(home: Path) -> dict[str, str]:
    # A clean environment: no proxy variables, no tool config from the machine.
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
    }


def _target(servers: Servers, family: str, role: str) -> tuple[str, str]:
    """(base URL the tool is pointed at, host the failure should name)."""
    if family == "proxy_502":
        # Some tools name the proxy, others only the URL they asked for.
        return f"https://{NAMES[role]}", f"{NAMES['proxy']}|{NAMES[role]}"
    scheme = "https" if family in TLS_FAMILIES else "http"
    url = servers.url(FAMILY_SERVER[family], role, scheme)
    host = UNRESOLVABLE if family == "dns" else NAMES[role]
    return url, host


def _proxy_env(servers: Servers, family: str) -> dict[str, str]:
    if family != "proxy_502":
        return {}
    proxy = f"http://{NAMES['proxy']}:{servers.ports['proxy-502']}"
    return {"http_proxy": proxy, "https_proxy": proxy, "HTTP_PROXY": proxy, "HTTPS_PROXY": proxy}


def runs(servers: Servers, tmp: Path, tool_venv: Path) -> list[Run]:
    out: list[Run] = []
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    for family in FAMILIES:
        env0 = {**_base_env(home), **_proxy_env(servers, family)}
        # curl
        url, host = _target(servers, family, "files")
        out.append(
            Run(
                "curl",
                family,
                ["curl", "-fsSL", "-m", "5", "-o", "/dev/null", f"{url}/uv/install.sh"],
                env0,
                host,
            )
        )
        # wget
        out.append(
            Run(
                "wget",
                family,
                ["wget", "-t", "1", "-T", "5", "-O", "/dev/null", f"{url}/releases/tool.tar.gz"],
                env0,
                host,
            )
        )
        # pip
        url, host = _target(servers, family, "index")
        out.append(
            Run(
                "pip",
                family,
                [
                    str(tool_venv / "bin" / "pip"),
                    "download",
                    "--no-deps",
                    "--no-cache-dir",
                    "--retries",
                    "1",
                    "--timeout",
                    "5",
                    "--index-url",
                    f"{url}/simple/",
                    # pip ignores a plain-http index unless trusted (real ones are https);
                    # trusting an https host would switch off the TLS runs' certificate check.
                    *(["--trusted-host", host] if url.startswith("http:") else []),
                    "-d",
                    str(tmp / "pipdl"),
                    "requests-mock-pkg",
                ],
                {**env0, "PIP_CONFIG_FILE": "/dev/null", "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
                host,
            )
        )
        # uv
        out.append(
            Run(
                "uv",
                family,
                [
                    str(tool_venv / "bin" / "uv"),
                    "pip",
                    "install",
                    "--no-cache",
                    "--dry-run",
                    "--python",
                    str(tool_venv / "bin" / "python"),
                    "--index-url",
                    f"{url}/simple/",
                    "requests-mock-pkg",
                ],
                {**env0, "UV_NO_CONFIG": "1", "UV_HTTP_TIMEOUT": "5", "UV_HTTP_RETRIES": "1"},
                host,
            )
        )
        # npm
        npm_dir = tmp / f"npm-{family}"
        npm_dir.mkdir(exist_ok=True)
        (npm_dir / "package.json").write_text('{"name":"cap","version":"1.0.0"}\n')
        out.append(
            Run(
                "npm",
                family,
                [
                    "npm",
                    "install",
                    "left-pad-mock",
                    f"--registry={url}/",
                    "--no-audit",
                    "--no-fund",
                    "--fetch-retries=1",
                    "--fetch-retry-mintimeout=500",
                    "--fetch-retry-maxtimeout=1000",
                    "--fetch-timeout=5000",
                    f"--cache={tmp / 'npmcache'}",
                    "--userconfig=/dev/null",
                ],
                env0,
                host,
                cwd=npm_dir,
            )
        )
        # cargo
        cargo_home = tmp / f"cargo-{family}"
        (cargo_home / "proj" / "src").mkdir(parents=True, exist_ok=True)
        (cargo_home / "config.toml").write_text(
            "[source.crates-io]\nreplace-with = 'mirror'\n"
            f"[source.mirror]\nregistry = 'sparse+{url}/index/'\n"
            "[net]\nretry = 1\n[http]\ntimeout = 5\n"
        )
        (cargo_home / "proj" / "Cargo.toml").write_text(
            '[package]\nname = "cap"\nversion = "0.1.0"\nedition = "2021"\n'
            '[dependencies]\nserde-mock = "1"\n'
        )
        (cargo_home / "proj" / "src" / "main.rs").write_text("fn main() {}\n")
        out.append(
            Run(
                "cargo",
                family,
                ["cargo", "generate-lockfile"],
                {
                    **env0,
                    "CARGO_HOME": str(cargo_home),
                    "RUSTUP_HOME": os.environ.get("RUSTUP_HOME", "/root/.rustup"),
                    "RUSTUP_TOOLCHAIN": os.environ.get("RUSTUP_TOOLCHAIN", "stable"),
                },
                host,
                cwd=cargo_home / "proj",
            )
        )
        # apt
        out.append(_apt_run(tmp, family, url, host, env0))
        # git
        url, host = _target(servers, family, "git")
        out.append(
            Run(
                "git",
                family,
                [
                    "git",
                    "-c",
                    "http.lowSpeedLimit=1",
                    "-c",
                    "http.lowSpeedTime=5",
                    "clone",
                    f"{url}/org/repo.git",
                    str(tmp / f"clone-{family}"),
                ],
                {
                    **env0,
                    "GIT_CONFIG_GLOBAL": "/dev/null",
                    "GIT_CONFIG_NOSYSTEM": "1",
                    "GIT_TERMINAL_PROMPT": "0",
                },
                host,
            )
        )
        # huggingface_hub
        url, host = _target(servers, family, "hub")
        out.append(
            Run(
                "huggingface_hub",
                family,
                [
                    str(tool_venv / "bin" / "python"),
                    "-c",
                    "from huggingface_hub import hf_hub_download; "
                    "hf_hub_download('org/model', 'config.json')",
                ],
                {
                    **env0,
                    "HF_ENDPOINT": url,
                    "HF_HOME": str(tmp / f"hf-{family}"),
                    "HF_HUB_DISABLE_TELEMETRY": "1",
                    "HF_HUB_ETAG_TIMEOUT": "2",
                    "HF_HUB_DOWNLOAD_TIMEOUT": "5",
                },
                host,
            )
        )
    return out


def _apt_run(tmp: Path, family: str, url: str, host: str, env0: dict[str, str]) -> Run:
    root = tmp / f"apt-{family}"
    for sub in ("lists/partial", "cache/archives/partial", "parts", "prefs", "sourceparts"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "sources.list").write_text(f"deb [trusted=yes] {url}/debian bookworm main\n")
    # Everything under the temp dir: the machine's apt config (sources, apt.conf.d, proxies)
    # is never read or touched.
    (root / "apt.conf").write_text(
        f'Dir::Etc::SourceList "{root}/sources.list";\n'
        f'Dir::Etc::SourceParts "{root}/sourceparts";\n'
        f'Dir::Etc::Parts "{root}/parts";\n'
        f'Dir::Etc::Preferences "{root}/prefs/none";\n'
        f'Dir::Etc::PreferencesParts "{root}/prefs";\n'
        f'Dir::State::Lists "{root}/lists";\n'
        f'Dir::Cache "{root}/cache";\n'
        'Debug::NoLocking "true";\nAPT::Sandbox::User "root";\n'
        'Acquire::Retries "0";\nAcquire::http::Timeout "5";\nAcquire::https::Timeout "5";\n'
    )
    return Run(
        "apt", family, ["apt-get", "update"], {**env0, "APT_CONFIG": str(root / "apt.conf")}, host
    )


def version(tool: str, tool_venv: Path) -> str:
    argv = {
        "curl": ["curl", "--version"],
        "wget": ["wget", "--version"],
        "pip": [str(tool_venv / "bin" / "pip"), "--version"],
        "uv": [str(tool_venv / "bin" / "uv"), "--version"],
        "npm": ["npm", "--version"],
        "cargo": ["cargo", "--version"],
        "apt": ["apt-get", "--version"],
        "git": ["git", "--version"],
        "huggingface_hub": [
            str(tool_venv / "bin" / "python"),
            "-c",
            "import huggingface_hub as h; print('huggingface_hub', h.__version__)",
        ],
    }[tool]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT).stdout
    first = out.splitlines()[0] if out else "unknown"
    return first if tool != "npm" else f"npm {first}"


# --- trimming --------------------------------------------------------------------------------
_DECISIVE = re.compile(
    r"(?i)(error|fail|err[:!]|warn|fatal|refused|reset|timed? ?out|resolv|ssl|tls|certificat|"
    r"\b4\d\d\b|\b5\d\d\b|retry|retrying|unable|could not|couldn't|bad gateway|unavailable|"
    r"too many|eof|name or service|proxy|tunnel|hangup|closed)"
)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
MAX_LINES = 14


def trim(text: str, tmp: Path) -> str:
    lines = []
    for raw in _ANSI.sub("", text).replace("\r", "\n").splitlines():
        line = raw.rstrip().replace(str(tmp), "/tmp/cap")
        if line.startswith(('  File "', "    ")):  # traceback frames and source lines
            continue
        if line.strip() and _DECISIVE.search(line) and line not in lines:
            lines.append(line[:400])
    if len(lines) > MAX_LINES:
        lines = lines[: MAX_LINES // 2] + lines[-(MAX_LINES // 2) :]
    return "\n".join(lines) + "\n"


def _text(data: bytes | str | None) -> str:
    if isinstance(data, bytes):
        return data.decode("utf-8", errors="replace")
    return data or ""


def _namespaced(argv: list[str], ns: Path) -> list[str]:
    mount = (
        f"mount --bind {ns / 'resolv.conf'} /etc/resolv.conf && "
        f'mount --bind {ns / "hosts"} /etc/hosts && exec "$@"'
    )
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", mount, "sh", *argv]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="capture only this tool")
    parser.add_argument("--tool-venv", type=Path, default=Path("/tmp/capvenv"))
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("run as root (unshare -m and bind mounts)", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="captures-"))
    try:
        ns = tmp / "ns"
        ns.mkdir()
        (ns / "resolv.conf").write_text("nameserver 127.0.0.1\noptions attempts:1 timeout:2\n")
        (ns / "hosts").write_text(
            "127.0.0.1 localhost\n" + "".join(f"127.0.0.1 {n}\n" for n in NAMES.values())
        )
        servers = start_servers(tmp)
        index_path = CAPTURES / "index.json"
        index = json.loads(index_path.read_text()) if index_path.exists() else {}
        versions: dict[str, str] = {}
        for run in runs(servers, tmp, args.tool_venv):
            if args.only and run.tool != args.only:
                continue
            versions.setdefault(run.tool, version(run.tool, args.tool_venv))
            started = time.monotonic()
            try:
                proc = subprocess.run(
                    _namespaced(run.argv, ns),
                    env=run.env,
                    cwd=run.cwd,
                    capture_output=True,
                    text=True,
                    timeout=TIMEOUT,
                    stdin=subprocess.DEVNULL,
                )
                text, rc = proc.stdout + proc.stderr, proc.returncode
            except subprocess.TimeoutExpired as exc:
                text = _text(exc.stdout) + _text(exc.stderr)
                rc = "timeout"
            rel = f"{run.family}/{run.tool}.txt"
            (CAPTURES / run.family).mkdir(parents=True, exist_ok=True)
            (CAPTURES / rel).write_text(trim(text, tmp))
            index[rel] = {
                "tool": run.tool,
                "version": versions[run.tool],
                "family": run.family,
                "server": FAMILY_SERVER[run.family],
                "command": " ".join(run.argv)
                .replace(str(tmp), "/tmp/cap")
                .replace(str(args.tool_venv), "$VENV"),
                "exit": rc,
                "seconds": round(time.monotonic() - started, 1),
                "host": run.host,
            }
            print(f"{rel}: exit {rc}, {index[rel]['seconds']} s", file=sys.stderr)
        index_path.write_text(json.dumps(dict(sorted(index.items())), indent=1) + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
