"""Network failures in free text: which family, which endpoint, and who owns that endpoint.

The wording comes from running the tools themselves against failing loopback servers
(`tests/audit/captures/`, see its README): curl, wget, pip, uv, npm, cargo, apt, git and
huggingface_hub, plus the Python stacks under them (urllib3, requests, httpx). A pattern
names a failure FAMILY (an HTTP 5xx or 429, a proxy refusing the tunnel, DNS, TLS, a reset,
a timeout, a refused connection), never one run's sentence.

A failure excuses a trial only when its endpoint is outside the agent's control. The host is
taken from the failing line (a URL, `host='x'`, `resolve host: x`, `connection to x:443`), else
from the command that produced the output. Loopback hosts and hosts the agent wrote into its
own files are the agent's: a 502 from the nginx it started on localhost is its own bug.
"""

from __future__ import annotations

import bisect
import ipaddress
import re
from dataclasses import dataclass

from audit.read.memo import by_text

FAMILIES = (
    "http_5xx",
    "http_429",
    "proxy",
    "dns",
    "tls",
    "reset",
    "timeout",
    "refused",
    "unreachable",
    "fetch",
)

_STATUS = r"(?P<status>5\d\d|429)"
# family -> patterns; `status`, `host` and `url` groups are read when present.
_PATTERNS: dict[str, list[str]] = {
    "proxy": [
        r"CONNECT tunnel failed, response (?P<status>\d{3})",
        r"Tunnel connection failed: (?P<status>\d{3})",
        r"Invalid response from proxy: HTTP/[\d.]+ (?P<status>\d{3})",
        r"Proxy tunneling failed",
        r"Received HTTP code (?P<status>\d{3}) from proxy",
        r"ProxyError\(?'?(?:Unable|Cannot) to connect to proxy",
        r"(?:httpx|httpcore)\w*\.ProxyError: (?P<status>\d{3})",
        r"tunnel error: unsuccessful",
    ],
    "http_status": [
        rf"The requested URL returned error: {_STATUS}",  # curl -f, git
        rf"\bERROR {_STATUS}: ",  # wget
        rf"awaiting response\.\.\. {_STATUS}\b",  # wget
        rf"\b{_STATUS}\s+(?:Bad Gateway|Service Unavailable|Gateway Time-?out|Too Many Requests"
        r"|Internal Server Error)\b(?:\s*-\s*(?:GET|HEAD|POST) (?P<url>\S+))?",  # apt, npm
        rf"successful HTTP response from `(?P<url>[^`]+)`[^\n]*, got {_STATUS}\b",  # cargo
        rf"HTTP status (?:server|client) error \({_STATUS}\b[^)]*\) for url \((?P<url>[^)\s]+)",
        rf"(?:npm ERR!|npm error) code E{_STATUS}\b",
        rf"(?:Server|Client) error '{_STATUS}[^']*' for url '(?P<url>[^']+)'",  # httpx
        rf"HTTP Error {_STATUS} thrown while requesting \w+ (?P<url>\S+)",  # huggingface_hub
        rf"\b{_STATUS} (?:Server|Client) Error: [^\n]*? for url: (?P<url>\S+)",  # requests
        rf"too many {_STATUS} error responses",  # urllib3 retries exhausted
        rf"\bHTTP/[\d.]+ {_STATUS}\b",
        rf"status code: {_STATUS}, reason phrase",  # maven (Apache HttpClient)
        rf"CondaHTTPError: HTTP {_STATUS}\b[^\n]*? for url <(?P<url>[^>]+)>",
    ],
    "dns": [
        r"Could not resolve host:? '?(?P<host>[\w.-]+)",
        r"Could not resolve '(?P<host>[\w.-]+)'",
        r"Temporary failure resolving '(?P<host>[\w.-]+)'",
        r"Temporary failure in name resolution",
        r"Name or service not known",
        r"nodename nor servname provided",
        r"getaddrinfo (?:ENOTFOUND|EAI_AGAIN) (?P<host>[\w.-]+)",
        r"unable to resolve host address .(?P<host>[\w.-]+)",
        r"Failed to resolve '(?P<host>[\w.-]+)'",
        r"failed to lookup address information",
        r"dial tcp: lookup (?P<host>[\w.-]+)[^\n]*no such host",
        r"Could not resolve hostname",
        r"java\.net\.UnknownHostException: (?P<host>[\w.-]+)",  # JVM tools (maven, gradle)
        r"No such host is known",  # .NET
        r"\bEAI_AGAIN\b",
    ],
    "tls": [
        r"SSL certificate problem",
        r"curl: \((?:35|60)\)",
        r"SSL_ERROR_SYSCALL",
        r"CERTIFICATE_VERIFY_FAILED",
        r"UNEXPECTED_EOF_WHILE_READING",
        r"[Cc]ertificate verif(?:y|ication) failed",
        r"Could not handshake",
        r"TLS connection was non-properly terminated",
        r"gnutls_handshake\(\) failed",
        r"Unable to establish SSL connection",
        r"tls handshake eof",
        r"SSL connect error",
        r"disconnected before secure TLS connection was established",
        r"unable to get local issuer certificate",
        r"invalid peer certificate",
        r"\b(?:DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|CERT_HAS_EXPIRED|"
        r"UNABLE_TO_(?:GET_ISSUER_CERT(?:_LOCALLY)?|VERIFY_LEAF_SIGNATURE)|"
        r"ERR_TLS_CERT_ALTNAME_INVALID)\b",
        r"The certificate of .(?P<host>[\w.-]+). is not trusted",
        r"self[- ]signed certificate",
        r"SSLError\(",
    ],
    "reset": [
        r"Connection reset by peer",
        r"\bECONNRESET\b",
        r"Recv failure",
        r"Connection aborted",
        r"RemoteDisconnected",
        r"Failure when receiving data from the peer",
        r"connection closed before message completed",
        r"IncompleteRead",
        r"\bConnection failed \[IP: ",  # apt
        r"\bsocket hang up\b",  # node
        r"ServerDisconnectedError",  # aiohttp
        r"java\.net\.SocketException: Connection reset",
    ],
    "timeout": [
        r"curl: \(28\)",
        r"Operation timed out after \d+",
        r"Connection timed out",
        r"Read timed out",
        r"ReadTimeoutError",
        r"network timeout at: (?P<url>\S+)",
        r"error sending request[^\n]*\n?[^\n]*operation timed out",
        r"cause: operation timed out",
        r"Operation too slow",
        r"Timeout was reached",
        r"'timed out' thrown while requesting \w+ (?P<url>\S+)",
        r"\bETIMEDOUT\b",
        r"\bESOCKETTIMEDOUT\b",  # node's request/yarn
        r"java\.net\.SocketTimeoutException",
        r"dial tcp [^\n]*: i/o timeout",  # Go (go get, docker)
        r"Client\.Timeout exceeded while awaiting headers",  # Go's net/http
    ],
    # No route to the endpoint's network, as the kernel's errno says it (ENETUNREACH 101,
    # EHOSTUNREACH 113) in C's, Python's and node's words.
    "unreachable": [
        r"Network is unreachable",
        r"\bENETUNREACH\b",
        r"\[Errno 101\]",
        r"No route to host",
        r"\bEHOSTUNREACH\b",
        r"\[Errno 113\]",
    ],
    "refused": [
        r"Connection refused",
        r"\bECONNREFUSED\b",
        r"Failed to connect to (?P<host>[\w.:-]+) port \d+",
        r"Couldn't connect to server",
        r"Cannot connect to host (?P<host>[\w.-]+):\d+",  # aiohttp
    ],
    # A tool's summary that a download failed, when the cause is not on the same line: uv's
    # `Failed to fetch: url`, cargo's `failed to download from url`, npm's `network request to
    # url failed`, pip's `Could not fetch URL url`. Tried last: a cause line names the family.
    "fetch": [
        r"\b[Ff]ailed to fetch:? `?(?P<url>https?://[^`\s]+)",
        r"failed to download from `(?P<url>[^`]+)`",
        r"network request to (?P<url>\S+) failed",
        r"Could not fetch URL (?P<url>\S+?):",
        r"error: Request failed after \d+ retr",
        r"CondaHTTPError: HTTP 000 CONNECTION FAILED for url <(?P<url>[^>]+)>",
    ],
}

# A 4xx status with its reason phrase on a download summary (apt's `404  Not Found`): the
# server answered, the network works; what failed is the request (RFC 9110 §15.5).
_CLIENT_ERROR = re.compile(r"\b4(?:0\d|1\d|2[0-8]|[3-9]\d)\s+[A-Z][a-z]")

_COMPILED = {family: [re.compile(p) for p in patterns] for family, patterns in _PATTERNS.items()}
# Words at least one of which every pattern above needs (lower case). Checked with plain
# substring search before any regex runs: agents' outputs can be megabytes without a single
# failure, and the combined pattern below scans at a few MB/s. tests/audit/test_network_words.py
# proves every pattern's example lines pass this filter.
_WORDS = (
    "proxy",
    "tunnel",
    "returned error",
    "error 4",
    "error 5",
    "awaiting response",
    "bad gateway",
    "service unavailable",
    "gateway time",
    "too many requests",
    "internal server error",
    "http response",
    "http status",
    "npm err",
    "npm error",
    "for url",
    "http error",
    "server error",
    "client error",
    "error responses",
    "http/",
    "resolv",
    "name or service",
    "nodename",
    "getaddrinfo",
    "lookup",
    "ssl",
    "certificat",
    "curl: (",
    "handshake",
    "tls",
    "issuer",
    "cert_",
    "self-signed",
    "self signed",
    "reset",
    "recv failure",
    "aborted",
    "remotedisconnected",
    "receiving data",
    "closed before",
    "incompleteread",
    "connection failed",
    "timed out",
    "timeout",
    "too slow",
    "etimedout",
    "refused",
    "unreachable",
    "unreach",
    "no route to host",
    "errno 101",
    "errno 113",
    "failed to connect",
    "couldn't connect",
    "failed to fetch",
    "failed to download",
    "network request",
    "could not fetch",
    "request failed after",
    "timeout was reached",
    "name resolution",
    "unexpected_eof",
    "self_signed",
    "unable_to_",
    "unknownhost",
    "no such host",
    "eai_again",
    "timedout",
    "sockettimeout",
    "i/o timeout",
    "client.timeout",
    "socket hang up",
    "serverdisconnected",
    "connection reset",
    "cannot connect to host",
    "status code:",
    "condahttperror",
)


def might_fail(text: str) -> bool:
    """False when `text` cannot hold a network failure (none of the words is in it)."""
    low = text.lower()
    return any(w in low for w in _WORDS)


# One prefilter over every pattern: most lines of a log are not network failures.
_ANY = re.compile(
    "|".join(f"(?:{re.sub(r'[?]P<[a-z]+>', '', p)})" for ps in _PATTERNS.values() for p in ps)
)

_URL = re.compile(
    r"\b(?:https?|wss?|git|ftp)://(?:[^@/\s'\"`]+@)?(?P<host>\[[0-9a-fA-F:]+\]|[^/:\s'\"`)\]]+)"
)
_HOST_HINTS = [
    re.compile(r"host='(?P<host>[^']+)'"),
    re.compile(r"(?:in connection to|connect to|connecting to) (?P<host>[\w.-]+):\d+"),
    re.compile(r"(?:Resolving|Connecting to) (?P<host>[\w.-]+) \("),
    # bash's own redirection to /dev/tcp names the endpoint in the path it could not open.
    re.compile(r"/dev/(?:tcp|udp)/(?P<host>[\w.-]+)/\d+:"),
]
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "0.0.0.0", "::", "::1"}


@dataclass(frozen=True)
class NetFailure:
    """One failing line: its family, HTTP status (if any), endpoint host, and where it is."""

    family: str
    status: int | None
    host: str | None
    where: str
    line: str
    via_proxy: bool
    proxy: str | None = None  # the proxy's address when the line shows it (apt's [IP: a p])

    @property
    def kind(self) -> str:
        """A short name for reports: `HTTP 502`, `HTTP 429`, `proxy 502`, `DNS`, `TLS`..."""
        if self.family == "proxy":
            return f"proxy {self.status}" if self.status else "proxy"
        if self.status:
            return f"HTTP {self.status}"
        return {
            "dns": "DNS failure",
            "tls": "TLS failure",
            "reset": "connection reset",
            "timeout": "timeout",
            "refused": "connection refused",
            "unreachable": "network unreachable",
            "fetch": "failed download",
        }[self.family]


def clean_host(host: str | None) -> str | None:
    if not host:
        return None
    host = host.strip("[]`'\".,;").lower()
    if host.count(":") == 1:  # host:port (an IPv6 address has more colons)
        host = host.split(":", 1)[0]
    return host or None


def host_in(text: str) -> str | None:
    """The first endpoint host a line or command names (URL first, then other shapes)."""
    m = _URL.search(text)
    if m:
        return clean_host(m.group("host"))
    for hint in _HOST_HINTS:
        m = hint.search(text)
        if m:
            return clean_host(m.group("host"))
    return None


@by_text()
def classify_line(line: str) -> tuple[str, int | None, str | None, bool] | None:
    """(family, status, host, via_proxy) for a failing line, or None."""
    if not _ANY.search(line):
        return None
    for family, patterns in _COMPILED.items():
        for pattern in patterns:
            m = pattern.search(line)
            if not m:
                continue
            groups = m.groupdict()
            status = int(groups["status"]) if groups.get("status") else None
            host = clean_host(groups.get("host"))
            if host is None and groups.get("url"):
                host = host_in(groups["url"])
            if host is None:
                host = host_in(line)
            if family == "http_status":
                if status is None:
                    continue
                family = "http_429" if status == 429 else "http_5xx"
            if family == "fetch" and _CLIENT_ERROR.search(line):
                return None  # the server answered: the request (a stale index, a wrong URL)
            return family, status, host, family == "proxy" or "proxy" in line.lower()
    return None


def failures_in(text: str, where, context_host: str | None = None, limit: int = 50):
    """Every failing line of `text` as NetFailure; `where(line_no)` names its place."""
    return [
        NetFailure(family, status, host, where(n), line, via_proxy, proxy)
        for n, family, status, host, line, via_proxy, proxy in _failing_lines(
            text, context_host, limit
        )
    ]


@by_text()
def _failing_lines(text: str, context_host: str | None, limit: int) -> tuple[tuple, ...]:
    """failures_in's reading, where each line is only its number (pure: remembered)."""
    out: list[tuple] = []
    if not text or not might_fail(text):
        return ()
    last_command_host = context_host
    lines = text.splitlines()
    for n in _candidates(text, lines):
        line = lines[n - 1]
        if line.startswith("+ ") or line.startswith("$ "):
            # A shell trace (`set -x`) or a prompt: the command the next lines belong to.
            last_command_host = host_in(line) or last_command_host
            continue
        hit = classify_line(line)
        if hit is None:
            continue
        family, status, host, via_proxy = hit
        window = lines[max(0, n - 3) : n - 1][::-1] + lines[n : n + 4]
        if host is None:
            # Tools print the URL on a neighbouring line (cargo's `failed to download from`,
            # apt's `Err:1 http://...` above its reason).
            host = next((h for w in window if (h := host_in(w))), None)
        proxy = _apt_went_through_proxy(line, [line, *window])
        via_proxy = via_proxy or proxy is not None
        stripped = line.strip()
        out.append((
            n,
            family,
            status,
            host or last_command_host,
            stripped if len(stripped) <= 240 else stripped[:237] + "...",
            via_proxy,
            proxy,
        ))
        if len(out) >= limit:
            break
    named = {f[3] for f in out if f[3]}
    if len(named) == 1 and any(f[3] is None for f in out):
        # One tool run, one endpoint: its traceback lines without a URL are about that host too.
        (only,) = named
        out = [f if f[3] else (*f[:3], only, *f[4:]) for f in out]
    return tuple(out)


_PROMPT_LINE = re.compile(r"(?m)^[+$] ")


def _candidates(text: str, lines: list[str]) -> list[int]:
    """Line numbers that can matter: those holding one of the words, and shell prompt lines.

    Found with plain substring search over the whole text, then only those lines go through
    the patterns: agents' outputs can be megabytes of which a handful of lines are failures.
    """
    low = text.lower()
    starts = [m.start() for m in _PROMPT_LINE.finditer(low)]
    for word in _WORDS:
        i = low.find(word)
        while i != -1 and len(starts) <= len(lines):
            starts.append(i)
            i = low.find(word, i + len(word))
    if len(starts) > len(lines) // 4:
        return list(range(1, len(lines) + 1))  # dense: a plain walk is as cheap
    offsets: list[int] = []
    pos = 0
    for line in low.splitlines(keepends=True):
        offsets.append(pos)
        pos += len(line)
    found = {bisect.bisect_right(offsets, s) for s in starts}
    return sorted(n for n in found if 1 <= n <= len(lines))


_APT_IP = re.compile(r"\[IP: (?P<ip>[0-9a-fA-F.:]+) (?P<port>\d+)\]")
_URL_PORT = re.compile(r"\b(?P<scheme>https?)://[^/\s:]+(?::(?P<port>\d+))?")


def _apt_went_through_proxy(line: str, around: list[str]) -> str | None:
    """apt's `[IP: addr port]` is where it connected: a port other than the URL's is a proxy.

    Returns the proxy's `addr:port`, or None.
    """
    m = _APT_IP.search(line)
    if not m:
        return None
    for text in around:
        u = _URL_PORT.search(text)
        if u:
            port = u.group("port") or ("443" if u.group("scheme") == "https" else "80")
            return f"{m.group('ip')}:{m.group('port')}" if port != m.group("port") else None
    return None


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host in _LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_WRITE = re.compile(
    r"(?:>>?|\btee\b(?:\s+-a)?)\s*['\"]?(?P<path>/?[\w./~-]+)"  # shell redirect or tee
)


def hosts_written_by_agent(commands: list[str], written: list[str]) -> set[str]:
    """Hosts the agent named in files it wrote itself (heredocs, redirects, write tools).

    `commands` are shell commands; `written` are contents passed to file-writing tools.
    A failure against such a host (its own mirror, a name it put in /etc/hosts, a proxy it
    configured) is the agent's doing, not the network's.
    """
    hosts: set[str] = set()
    for text in written:
        hosts.update(h for m in _URL.finditer(text) if (h := clean_host(m.group("host"))))
    for cmd in commands:
        if not _WRITE.search(cmd):
            continue
        if "<<" in cmd:  # a heredoc: everything after it is the file's content
            hosts.update(h for m in _URL.finditer(cmd) if (h := clean_host(m.group("host"))))
        for segment in re.split(r"\n(?=\S)|&&|;", cmd):
            if _WRITE.search(segment) or "<<" in segment:
                hosts.update(
                    h for m in _URL.finditer(segment) if (h := clean_host(m.group("host")))
                )
        # /etc/hosts entries name hosts directly, without a URL.
        for m in re.finditer(r"(?m)^\s*\d+\.\d+\.\d+\.\d+\s+([\w.-]+)", cmd):
            if "/etc/hosts" in cmd:
                hosts.add(m.group(1).lower())
    return hosts


def owner(failure: NetFailure, agent_hosts: set[str]) -> str:
    """`agent` (its own server or a host it configured), `external`, or `unknown` (a service
    of the task's own network, or no host and a refused connection)."""
    if failure.via_proxy:
        return "external"
    host = failure.host
    if host is None:
        # No host named and none in the command: the tool's own configured endpoint (its
        # package index, the default mirror), which the agent did not choose. A refused
        # connection without a host is usually a local service, so it stays unknown.
        return "unknown" if failure.family == "refused" else "external"
    if is_loopback(host) or host in agent_hosts:
        return "agent"
    if "." not in host and ":" not in host:
        # A single-label name (`db`, `redis`, `main`) is a service of the task's own compose
        # network or the container itself, not an endpoint outside it.
        return "unknown"
    return "external"


SUCCESS = re.compile(
    r"(?m)^(?:Get:\d+|Hit:\d+|Fetched \d|Successfully installed|Downloading |Downloaded |"
    r"Resolved \d+ package|Installed \d+ package|Receiving objects: 100%|added \d+ package|"
    r"\s*Downloaded \S+ v|Saving to: |HTTP request sent, awaiting response\.\.\. 200)"
)
