"""What the program, the host side and the audit share, and nothing else: the contracts.

- `outputs`: the stack output key names (`__main__.py` exports them, `audit/` reads them);
- `jobdir`: Harbor's job layout (where each file of a job is, what its states mean);
- `hostlayout`: where benchstack keeps its own things on a host and in a task container.

Every module here is standard library only and imports nothing of the project: the host side
runs on a host's own python3 (3.9 or later), and the status probes inline `jobdir.py` whole
(tests/architecture checks both).
"""
