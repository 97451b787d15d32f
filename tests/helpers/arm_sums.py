"""The named sums of one experiment arm from per-user numpy sums, as ``experiments.arm_sums`` gives them from
Spark: the reference the numpy-only experiment simulations compare through (``kernels.experiments.compare``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np


def arm_sums(sums: dict[str, np.ndarray], mask: np.ndarray, specs: Iterable[Any]) -> dict[str, float]:
    """For each metric spec (``name``, ``kind``, ``num``, ``den``), over the users in ``mask`` with a positive
    denominator: a mean's n, Σy, Σy² of y = num / den; a ratio's n, Σnum, Σden, Σnum², Σden², Σnum·den."""
    out: dict[str, float] = {}
    for spec in specs:
        num, den = sums[spec.num][mask], sums[spec.den][mask]
        num, den = num[den > 0], den[den > 0]
        if spec.kind == "mean":
            y = num / den
            out.update({f"{spec.name}|n": len(y), f"{spec.name}|x": y.sum(), f"{spec.name}|xx": y @ y})
        else:
            out.update(
                {
                    f"{spec.name}|n": len(num),
                    f"{spec.name}|x": num.sum(),
                    f"{spec.name}|y": den.sum(),
                    f"{spec.name}|xx": num @ num,
                    f"{spec.name}|yy": den @ den,
                    f"{spec.name}|xy": num @ den,
                }
            )
    return out
