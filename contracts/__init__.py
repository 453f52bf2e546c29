"""What the program, the host side and the audit share, and nothing else: the contracts.

- `outputs`: the stack output key names (`__main__.py` exports them, `audit/` reads them);
- `jobdir`: Harbor's job layout (where each file of a job is, what its states mean);
- `hostlayout`: where benchstack keeps its own things on a host and in a task container;
- `harbor_profiles`: the Harbor versions benchstack runs and what differs between them (the
  pins, the endpoint flags, the preflight, the resume, GPU tasks, the score convention and
  0.26.0's error-policy table, by which a trial's reward is valid or not).

Every module here is standard library only and imports nothing of the project: the host side
runs on a host's own python3 (3.9 or later), and the status probes inline `jobdir.py` whole
(tests/architecture checks both).
"""
