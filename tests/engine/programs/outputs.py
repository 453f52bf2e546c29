"""A test program run by the real engine in place of the project's `__main__.py`: it exports the
JSON object of the file BENCHSTACK_TEST_OUTPUTS names as the stack's outputs, so a real stack
answers `pulumi stack output --json` with recorded outputs (tests of the audit's --stack)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pulumi

for key, value in json.loads(Path(os.environ["BENCHSTACK_TEST_OUTPUTS"]).read_text()).items():
    pulumi.export(key, value)
