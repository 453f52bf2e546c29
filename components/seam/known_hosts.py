"""The SSH host key of a host as known_hosts records it; when it records none, one first contact
through OpenSSH (the seam's `StrictHostKeyChecking=accept-new` options) records it. The key is
checked before any login, so no credentials are used and nothing runs on the host.

Used only by the host seam (components/seam/ssh.py, `known_host_key`), which builds the ssh command
of the first contact and runs this on the machine running Pulumi, at every preview and up (an
invoke), as a program of the program's own python, standard library only:

    python -I known_hosts.py '{"name": "[10.0.0.11]:2222", "known_hosts": "~/.ssh/known_hosts",
                              "contact": ["ssh", "-n", ...]}'

Output (last stdout line, JSON): host_key ("type base64", "" when the host presented none, said
on stderr in one line).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path


def recorded_key(name: str, known_hosts: Path) -> str:
    """The first key `known_hosts` records for `name` ("type base64"), or "". `ssh-keygen -F`
    also finds hashed entries (HashKnownHosts)."""
    if not known_hosts.is_file():
        return ""
    try:
        proc = subprocess.run(["ssh-keygen", "-F", name, "-f", str(known_hosts)],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              check=False)
    except OSError:
        return ""
    for line in proc.stdout.splitlines():
        fields = line.split()
        if not line.startswith("#") and len(fields) >= 3:
            return f"{fields[1]} {fields[2]}"
    return ""


def host_key(name: str, known_hosts: str, contact: Sequence[str]) -> str:
    """The key recorded for `name`, after a first `contact` (an ssh command that records it and
    logs in to nothing) when none was."""
    path = Path(known_hosts).expanduser()
    key = recorded_key(name, path)
    if not key:
        path.parent.mkdir(parents=True, exist_ok=True)
        # The login itself is refused (no authentication method): only the key exchange happens.
        try:
            subprocess.run(list(contact), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=False)
        except OSError:
            pass
        key = recorded_key(name, path)
    if not key:
        print(f"known_host_key: {name} presented no host key (unreachable, or not SSH)",
              file=sys.stderr)
    return key


def main(argv: Sequence[str]) -> int:
    spec = json.loads(argv[0])
    print(json.dumps({"host_key": host_key(spec["name"], spec["known_hosts"], spec["contact"])}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
