"""benchstack audit: turn a raw Harbor job directory into an explained score.

The package reads a job directory (local path or s3:// URI), classifies every trial with the
signature rules in `rules.yaml` and the detectors in `detectors/` (reading each agent's own logs
through `agent_logs/`), lists for rerun only what it can prove was outside the model's control
(`RULES.md`), applies the user's adjudications and renders reports. It imports nothing from
`components/` except two contracts: the stack-output key names in `contracts/outputs.py` and
Harbor's job-directory layout in `contracts/jobdir.py`.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
