"""Confidence intervals for a pass rate (Wilson score interval).

Wilson rather than the normal approximation: benchmark scores sit near 0 or 1 for many
tasks and jobs have a few hundred trials at most, where the normal interval leaves [0, 1]
and undercovers. No SciPy: z for the usual levels is a constant.
"""

from __future__ import annotations

import math

Z = {0.90: 1.6448536269514722, 0.95: 1.959963984540054, 0.99: 2.5758293035489004}


def wilson(passed: int, total: int, level: float = 0.95) -> tuple[float, float] | None:
    """(low, high) as fractions in [0, 1]; None when there are no trials."""
    if total <= 0:
        return None
    if not 0 <= passed <= total:
        raise ValueError(f"passed={passed} outside 0..total={total}")
    z = Z[level]
    p = passed / total
    denom = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denom
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)
