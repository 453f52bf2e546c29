"""A kubeconfig read, and the Kubernetes API client the k8s host modules share (stdlib only).

The stack writes its kubeconfig as JSON (JSON is YAML, so Harbor's `kubernetes` client reads
the same file), and this module reads nothing else: no PyYAML on a host's python3. `load` takes
the JSON text itself (a step's secret) or the path of a JSON file, picks the current context's
cluster and user, and `Client` speaks to that cluster:

    client = Client(load(text_or_path))
    client.get("/api/v1/namespaces/ns")               # a JSON object
    client.post("/api/v1/namespaces/ns/pods", pod)     # the created object
    for event in client.stream("/api/v1/namespaces/ns/events?watch=1"): ...

The server's certificate is checked against `certificate-authority-data` (or the file in
`certificate-authority`, or the system's CAs), unless `insecure-skip-tls-verify`. The user is a
bearer `token` or a client certificate (`client-certificate-data`/`client-key-data`, written to
0600 temporary files for `ssl.load_cert_chain` and deleted at once; or the files named by
`client-certificate`/`client-key`). A user that runs a plugin (`exec`, `auth-provider`) is
refused: a host step cannot run it.

Every failure is a HostError naming the request and what the API answered (a 403 names the verb
and resource refused, in the API's own words). Nothing of the kubeconfig's secrets is ever put
in an error.
"""

from __future__ import annotations

import base64
import binascii
import http.client
import json
import os
import socket
import ssl
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .step import HostError

# Every request but a watch is bounded by this many seconds unless the caller says otherwise.
TIMEOUT_S = 30
# A watch line is at most this long (a Pod with its status is some kilobytes).
MAX_LINE = 16 * 1024 * 1024


@dataclass(frozen=True)
class Kubeconfig:
    """What of a kubeconfig the client uses: the current context's cluster and user."""

    context: str
    server: str
    # The context's namespace, "" when it names none.
    namespace: str
    ca_data: bytes | None
    ca_file: str | None
    insecure: bool
    token: str | None
    cert_data: bytes | None
    key_data: bytes | None
    cert_file: str | None
    key_file: str | None


def _named(config: dict, kind: str, name: str, source: str) -> dict:
    """The `kind` entry (clusters, users, contexts) called `name`: its inner object."""
    entries = config.get(kind) or []
    if not isinstance(entries, list):
        raise HostError(f"kubeconfig {source}: {kind} is not a list")
    for entry in entries:
        if isinstance(entry, dict) and entry.get("name") == name:
            inner = entry.get(kind[:-1])
            if not isinstance(inner, dict):
                raise HostError(f"kubeconfig {source}: {kind[:-1]} {name!r} has no "
                                f"{kind[:-1]} object")
            return inner
    raise HostError(f"kubeconfig {source}: no {kind[:-1]} named {name!r} (the current context "
                    "refers to it): fix the kubeconfig")


def _b64(value: object, key: str, source: str) -> bytes:
    if not isinstance(value, str):
        raise HostError(f"kubeconfig {source}: {key} must be a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise HostError(f"kubeconfig {source}: {key} is not valid base64") from None


def parse(config: object, source: str = "(text)") -> Kubeconfig:
    """The current context's cluster and user of a kubeconfig object; `source` names it in
    errors (a path, or "(text)" for a secret's text)."""
    if not isinstance(config, dict):
        raise HostError(f"kubeconfig {source}: not a JSON object")
    current = config.get("current-context")
    if not isinstance(current, str) or not current:
        raise HostError(f"kubeconfig {source}: no current-context: set it to one of its contexts")
    context = _named(config, "contexts", current, source)
    cluster_name, user_name = context.get("cluster"), context.get("user")
    if not isinstance(cluster_name, str) or not cluster_name:
        raise HostError(f"kubeconfig {source}: context {current!r} names no cluster")
    cluster = _named(config, "clusters", cluster_name, source)
    server = cluster.get("server")
    if not isinstance(server, str) or urlsplit(server).scheme not in ("https", "http") \
            or not urlsplit(server).hostname:
        raise HostError(f"kubeconfig {source}: cluster {cluster_name!r} has no https:// server "
                        f"(got {server!r})")
    user: dict = {}
    if isinstance(user_name, str) and user_name:
        user = _named(config, "users", user_name, source)
    for plugin in ("exec", "auth-provider"):
        if user.get(plugin):
            raise HostError(f"kubeconfig {source}: user {user_name!r} authenticates with "
                            f"{plugin!r}, which a host step cannot run: give it a token or a "
                            "client certificate")
    ca_data = cluster.get("certificate-authority-data")
    cert, key = user.get("client-certificate-data"), user.get("client-key-data")
    cert_file, key_file = user.get("client-certificate"), user.get("client-key")
    token = user.get("token")
    if token is not None and (not isinstance(token, str) or not token.strip()):
        raise HostError(f"kubeconfig {source}: user {user_name!r} has an empty token")
    if bool(cert or cert_file) != bool(key or key_file):
        raise HostError(f"kubeconfig {source}: user {user_name!r} has a client certificate "
                        "without its key, or a key without its certificate")
    if not token and not (cert or cert_file):
        raise HostError(f"kubeconfig {source}: user {user_name!r} has neither a token nor "
                        "client-certificate-data/client-key-data: give it one")
    namespace = context.get("namespace") or ""
    return Kubeconfig(
        context=current,
        server=server.rstrip("/"),
        namespace=namespace if isinstance(namespace, str) else "",
        ca_data=_b64(ca_data, "certificate-authority-data", source) if ca_data else None,
        ca_file=cluster.get("certificate-authority") or None,
        insecure=cluster.get("insecure-skip-tls-verify") is True,
        token=token.strip() if isinstance(token, str) else None,
        cert_data=_b64(cert, "client-certificate-data", source) if cert else None,
        key_data=_b64(key, "client-key-data", source) if key else None,
        cert_file=cert_file if isinstance(cert_file, str) and cert_file else None,
        key_file=key_file if isinstance(key_file, str) and key_file else None,
    )


def load(text_or_path: str) -> Kubeconfig:
    """A kubeconfig from its JSON text (it starts with `{`) or from the JSON file at a path."""
    if not isinstance(text_or_path, str) or not text_or_path.strip():
        raise HostError("kubeconfig is empty: pass its JSON text or the path of its JSON file")
    text, source = text_or_path, "(text)"
    if not text_or_path.lstrip().startswith("{"):
        source = text_or_path
        try:
            with open(text_or_path) as f:
                text = f.read()
        except OSError as exc:
            raise HostError(f"kubeconfig {source}: cannot read it ({exc.strerror})") from None
    try:
        config = json.loads(text)
    except ValueError as exc:
        where = f" (line {exc.lineno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise HostError(f"kubeconfig {source}: not JSON{where}: the stack writes its kubeconfig "
                        "as JSON (convert a YAML one)") from None
    return parse(config, source)


def _ssl_context(config: Kubeconfig) -> ssl.SSLContext:
    if config.insecure:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif config.ca_data is not None:
        try:
            context = ssl.create_default_context(cadata=config.ca_data.decode("ascii"))
        except (ssl.SSLError, UnicodeDecodeError, ValueError):
            raise HostError("kubeconfig: certificate-authority-data is not a PEM "
                            "certificate") from None
    else:
        try:
            context = ssl.create_default_context(cafile=config.ca_file)
        except OSError as exc:
            raise HostError(f"kubeconfig: certificate-authority {config.ca_file}: "
                            f"{exc.strerror or exc}") from None
    if config.cert_data is not None or config.cert_file is not None:
        _load_client_cert(context, config)
    return context


def _load_client_cert(context: ssl.SSLContext, config: Kubeconfig) -> None:
    """The client certificate and key into `context`: data goes through 0600 temporary files
    (load_cert_chain reads files only), removed as soon as they are read."""
    paths: list[str] = []
    try:
        files: list[str] = []
        for data, named in ((config.cert_data, config.cert_file),
                            (config.key_data, config.key_file)):
            if data is None:
                files.append(named or "")
                continue
            fd, path = tempfile.mkstemp(prefix="benchstack-k8s-", suffix=".pem")  # 0600
            paths.append(path)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            files.append(path)
        context.load_cert_chain(files[0], files[1])
    except (ssl.SSLError, OSError) as exc:
        raise HostError(f"kubeconfig: the client certificate and key cannot be loaded "
                        f"({getattr(exc, 'reason', None) or exc.strerror or exc})") from None
    finally:
        for path in paths:
            try:
                os.unlink(path)
            except OSError:
                pass


def api_message(body: bytes) -> str:
    """What the API said: a Status object's message, else the body's first line."""
    text = body.decode(errors="replace").strip()
    try:
        value = json.loads(text)
    except ValueError:
        return text.splitlines()[0][:300] if text else ""
    if isinstance(value, dict) and value.get("message"):
        return str(value["message"])
    return text[:300]


class ApiError(HostError):
    """The API answered a request with an error status; `status` is the HTTP code."""

    def __init__(self, message: str, status: int, api_message: str):
        super().__init__(message)
        self.status = status
        self.api_message = api_message


class Client:
    """The cluster of a kubeconfig: one HTTPS connection per request (a step makes few)."""

    def __init__(self, config: Kubeconfig, timeout: float = TIMEOUT_S):
        self.config = config
        self.timeout = timeout
        url = urlsplit(config.server)
        self.https = url.scheme == "https"
        self.host = url.hostname or ""
        self.port = url.port or (443 if self.https else 80)
        self.prefix = url.path.rstrip("/")
        self.ssl = _ssl_context(config) if self.https else None

    @property
    def base_url(self) -> str:
        return self.config.server

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        if self.https:
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout,
                                               context=self.ssl)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def _headers(self, accept: str, body: bool) -> dict[str, str]:
        headers = {"Accept": accept, "User-Agent": "benchstack-hostside"}
        if body:
            headers["Content-Type"] = "application/json"
        if self.config.token:
            headers["Authorization"] = f"Bearer {self.config.token}"
        return headers

    def _open(self, method: str, path: str, body: Any = None, timeout: float | None = None,
              accept: str = "application/json"
              ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send the request; the response is open (the caller reads and closes it). An error
        status is raised as ApiError, a failed connection as HostError."""
        data = None if body is None else json.dumps(body).encode()
        conn = self._connect(self.timeout if timeout is None else timeout)
        try:
            conn.request(method, self.prefix + path, body=data,
                         headers=self._headers(accept, data is not None))
            resp = conn.getresponse()
        except ssl.SSLCertVerificationError as exc:
            conn.close()
            raise HostError(f"{method} {path}: the API server's certificate is not trusted "
                            f"({exc.verify_message}): fix certificate-authority-data in the "
                            "kubeconfig") from None
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            why = "timed out" if isinstance(exc, socket.timeout) else str(exc) or type(exc).__name__
            raise HostError(f"{method} {path}: no answer from {self.config.server} "
                            f"({why})") from None
        if resp.status >= 400:
            try:
                raw = resp.read(65536)
            except (OSError, http.client.HTTPException):
                raw = b""
            conn.close()
            said = api_message(raw)
            raise ApiError(f"{method} {path}: {resp.status} {resp.reason}"
                           f"{': ' + said if said else ''}", resp.status, said)
        return conn, resp

    def request(self, method: str, path: str, body: Any = None,
                timeout: float | None = None) -> dict:
        conn, resp = self._open(method, path, body, timeout)
        try:
            raw = resp.read()
        except (OSError, http.client.HTTPException) as exc:
            raise HostError(f"{method} {path}: the answer broke off ({exc})") from None
        finally:
            conn.close()
        try:
            value = json.loads(raw) if raw.strip() else {}
        except ValueError:
            raise HostError(f"{method} {path}: the answer is not JSON: "
                            f"{raw[:120].decode(errors='replace')!r}") from None
        if not isinstance(value, dict):
            raise HostError(f"{method} {path}: the answer is not a JSON object")
        return value

    def get(self, path: str, timeout: float | None = None) -> dict:
        return self.request("GET", path, timeout=timeout)

    def post(self, path: str, body: Any, timeout: float | None = None) -> dict:
        return self.request("POST", path, body, timeout)

    def delete(self, path: str, body: Any = None, timeout: float | None = None) -> dict:
        return self.request("DELETE", path, body, timeout)

    def text(self, path: str, timeout: float | None = None) -> str:
        """A plain-text answer (a pod's log)."""
        conn, resp = self._open("GET", path, timeout=timeout, accept="*/*")
        try:
            return resp.read(1024 * 1024).decode(errors="replace")
        except (OSError, http.client.HTTPException) as exc:
            raise HostError(f"GET {path}: the answer broke off ({exc})") from None
        finally:
            conn.close()

    def stream(self, path: str, timeout: float | None = None) -> Iterator[dict]:
        """The JSON objects of a streamed answer, one a line (a `?watch=1` request). `timeout`
        bounds each read: a quiet connection raises socket.timeout (an OSError), which the
        caller treats as the end of this watch. Ends when the server ends the answer."""
        conn, resp = self._open("GET", path, timeout=timeout)
        try:
            while True:
                line = resp.readline(MAX_LINE)
                if not line:
                    return
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except ValueError:
                    raise HostError(f"GET {path}: a watch line is not JSON: "
                                    f"{line[:120].decode(errors='replace')!r}") from None
                if isinstance(value, dict):
                    yield value
        finally:
            conn.close()
