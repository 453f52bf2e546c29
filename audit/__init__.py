"""benchstack audit: turn a raw Harbor job directory into an explained score.

The package reads a job directory (local path or s3:// URI), classifies every trial with the
signature rules in `rules.yaml`, applies the user's adjudications and renders reports. It imports
nothing from `components/` except the stack-output key names in `components/outputs.py`.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
