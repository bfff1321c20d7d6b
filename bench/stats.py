"""Order statistics for the benchmark report: medians, percentiles and spreads.

Why not ``statistics.quantiles``: it interpolates with the "exclusive" method by default and
needs at least two points; the report wants the plain linear-interpolation percentile (the one
numpy calls ``linear``) for any sample size, and a p99 that is defined for small smoke runs.
Everything here is pure and allocation-light so that the harness itself stays cheap to import.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence


def percentile(samples: Sequence[float], fraction: float) -> float:
    """The ``fraction`` (0..1) percentile of ``samples`` by linear interpolation.

    Raises ValueError on an empty sample: a percentile of nothing is a bug in the caller.
    """
    if not samples:
        raise ValueError("percentile of an empty sample")
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be within [0, 1], not {fraction}")
    ordered = sorted(samples)
    position = fraction * (len(ordered) - 1)
    lower = int(position)
    upper = min(lower + 1, len(ordered) - 1)
    weight = position - lower
    return ordered[lower] + (ordered[upper] - ordered[lower]) * weight


def median(samples: Sequence[float]) -> float:
    return percentile(samples, 0.5)


def summarize(samples: Sequence[float]) -> Dict[str, float]:
    """Median, p10/p90, quartiles, p99, min, max and count of ``samples`` (non-empty)."""
    return {
        "n": float(len(samples)),
        "min": min(samples),
        "p10": percentile(samples, 0.10),
        "p25": percentile(samples, 0.25),
        "p50": percentile(samples, 0.50),
        "p75": percentile(samples, 0.75),
        "p90": percentile(samples, 0.90),
        "p99": percentile(samples, 0.99),
        "max": max(samples),
    }


def ratio(value: Optional[float], reference: Optional[float]) -> Optional[float]:
    """``value / reference``, or None when either is missing or the reference is zero."""
    if value is None or reference is None or reference == 0:
        return None
    return value / reference
