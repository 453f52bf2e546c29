"""benchstack audit: turn a raw Harbor job directory into an explained score.

Four rooms, each importing only the ones before it (tests/audit/test_architecture.py):
- `read/`: a job dir (local or s3://) and Harbor's files as models; every agent log read by log
  family to one shape per trial (model calls, commands, how the run ended); the exception chain
  and the layer its root cause arose in; whether the model was reached;
- `judge/`: the signature registry, the rules of `rules.yaml`, the detectors, and the one rule
  every verdict passes: no excuse without proof, under the ownership rule of `RULES.md`;
- `score/`: the score conventions' registry (`conventions.py`: the board's rule, Harbor 0.21's and
  0.26's job means; the only place a score is computed), raw and adjusted in each, attempts,
  the merge with reruns, adjudications, the reference in its own convention, the board's
  conformance, whether the raw score can be quoted, and the one report model;
- `output/`: the report's renderings (table, JSON, Markdown, HTML), the archive.
`pipeline.py` sits above them: read -> judge -> score -> the report model, for one job dir or
several of one run. It imports nothing of the rest of the project but four contracts: the
stack-output key names in `contracts/outputs.py`, Harbor's job-directory layout in
`contracts/jobdir.py`, the Harbor versions' facts and the score conventions' names in
`contracts/harbor_profiles.py` and the copy of a remote Harbor host's job dir in
`contracts/job_copy.py` (tests/audit/test_architecture.py).
"""

__all__ = ["__version__"]

__version__ = "0.2.0"
