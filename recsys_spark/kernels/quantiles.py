"""Normal and Student t quantiles and two-sided p-values of the intervals and tests, from ``scipy.stats``
imported lazily (a config check or a kernel import should not pay scipy's import).

>>> round(z_quantile(0.95), 6), round(t_quantile(0.95, 2), 4)
(1.959964, 4.3027)
"""

from __future__ import annotations

import math


def z_quantile(confidence: float) -> float:
    """Two-sided normal quantile: z_{(1 + confidence) / 2}."""
    from scipy.stats import norm

    check_confidence(confidence)
    return float(norm.ppf(0.5 + confidence / 2.0))


def t_quantile(confidence: float, df: float) -> float:
    """Two-sided Student t quantile with ``df`` degrees of freedom (normal when df is infinite)."""
    from scipy.stats import t

    check_confidence(confidence)
    return float(t.ppf(0.5 + confidence / 2.0, df)) if math.isfinite(df) else z_quantile(confidence)


def p_value_t(stat: float, df: float) -> float:
    """Two-sided p of a t statistic with ``df`` degrees of freedom (normal when df is infinite); NaN for NaN."""
    from scipy.stats import t

    if math.isnan(stat):
        return math.nan
    return float(2.0 * t.sf(abs(stat), df)) if math.isfinite(df) else p_value_z(stat)


def p_value_z(stat: float) -> float:
    """Two-sided p of a normal statistic; NaN for NaN."""
    from scipy.stats import norm

    return math.nan if math.isnan(stat) else float(2.0 * norm.sf(abs(stat)))


def check_confidence(confidence: float) -> None:
    """Refuse a confidence outside (0, 1) with a ValueError."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
