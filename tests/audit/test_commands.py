"""What a command does to its own duration (audit/judge/commands.py), read from the command
itself."""

from __future__ import annotations

import pytest

from audit.judge.commands import kind_of
from audit.read.caps import cap_in

CASES = [
    ("ls -la /app\n", "trivial"),
    ("cd /app && cat README.md", "trivial"),
    ("echo hi | tee out.txt", "trivial"),
    ("ps aux | grep python", "trivial"),
    ("cat > /app/a.py << 'EOF'\ntail -f x\nEOF\n", "trivial"),
    ("nohup python3 -m http.server 8000 > /tmp/s.log 2>&1 &", "trivial"),
    ("C-c", "trivial"),
    ("tail -f /var/log/app.log", "follow"),
    ("journalctl -u nginx -f", "follow"),
    ("watch -n1 nvidia-smi", "follow"),
    ("cd /app && python3 -m http.server 8000", "server"),
    ("uvicorn main:app --port 8000", "server"),
    ("npm run dev", "server"),
    ("qemu-system-x86_64 -m 2048 -hda disk.img -nographic", "server"),
    ("cat /proc/1/fd/0", "blocking_read"),
    ("cat", "blocking_read"),
    ("cat > notes.txt", "blocking_read"),
    ("read line", "blocking_read"),
    ("grep TODO", "blocking_read"),
    ("python3 -", "blocking_read"),
    ("vim /app/main.c", "interactive"),
    ("python3", "interactive"),
    ("sleep 600", "sleep"),
    ("sudo apt-get update && apt-get install -y build-essential", "install_or_build"),
    ("pip install torch", "install_or_build"),
    ("make -j8", "install_or_build"),
    ("./configure --prefix=/usr && make && make install", "install_or_build"),
    ("cargo build --release", "install_or_build"),
    ("python3 train.py --epochs 50", "other"),
]


@pytest.mark.parametrize(("command", "kind"), CASES)
def test_kind_of(command, kind):
    assert kind_of(command).kind == kind


def test_a_timeout_below_the_cap_bounds_the_command():
    assert kind_of("timeout 20 python3 train.py", cap_seconds=600).kind == "bounded"
    assert kind_of("timeout 20m python3 train.py", cap_seconds=600).kind == "other"
    assert kind_of("timeout 5s tail -f x", cap_seconds=60).kind == "bounded"


@pytest.mark.parametrize(
    ("text", "seconds", "command"),
    [
        ("RuntimeError: Command timed out after 600 seconds", 600.0, None),
        ("The previous command timed out after 10.0 seconds", 10.0, None),
        ("Command 'tail -f x' timed out after 30 seconds", 30.0, "tail -f x"),
        ("[The command timed out after 120 seconds. You may wait longer", 120.0, None),
        ("[The command has no new output after 30 seconds. You may wait", 30.0, None),
        ("Command timed out after 2m 0.0s", 120.0, None),
        (
            "The last command <command>sleep 99</command> timed out and has been killed.",
            None,
            "sleep 99",
        ),
    ],
)
def test_cap_in_reads_each_harness_wording(text, seconds, command):
    hit = cap_in(text)
    assert hit is not None and (hit.seconds, hit.command) == (seconds, command)


def test_no_cap_without_a_timeout_line():
    assert cap_in("Connection timed out") is None and cap_in("") is None
