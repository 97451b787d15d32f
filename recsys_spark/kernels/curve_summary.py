"""A bounded summary of each score bin's histogram, and the curves assembled from the summaries, pure numpy.

The pooled AUC's sorted stream (:func:`recsys_spark.per_user.pooled_auc.bin_runs`) hands each (key, score bin)'s
distinct scores in ascending order, in chunks.  Besides the bin's Mann-Whitney partial, :class:`BinSummary` keeps
a few of them, with the class totals ``P`` and ``N`` of the key known beforehand:

* the bin's *local cells*: a distinct score's ``below_pos`` and ``below_neg`` count the bin's positives and
  negatives scored strictly below it, ``t = below_neg / N + below_pos / P`` and ``cell = min(floor(t / h), C - 1)``
  with ``h = 2 / C``, ``C = (bound - 1) // 2`` (:func:`kernels.curves.cell_of`): two scores of one bin and one
  local cell are less than ``h`` apart in ``s = FPR + TPR`` (within a bin ``s`` moves exactly as ``t``);
* kept (``role``): the first and the last distinct score of each local cell (``PR``); the first (``ROC``) and the
  last (``ROC_LAST``) *sure ROC vertex* of each local cell, a sure vertex being a distinct score of the bin
  other than its lowest whose step ``(pos, neg)`` differs from the next lower score's (scikit-learn's
  ``drop_intermediate``).  The bin's lowest and highest scores are always kept (the ends of its first and last
  cells); whether they are vertices the driver decides, knowing the neighbouring bins (the lowest: when the
  key's lowest or its step differs from the lower bin's highest; the highest: when sure, or the key's highest),
  and so it knows the first and the last *true* vertex of each (bin, local cell): the candidates;
* ``WHOLE``: the first ``budget`` distinct scores the caller allows whole (the stream allows ``bound - 1`` per
  key and partition), so that a key with ``D + 1 <= bound`` distinct scores arrives complete.

A bin keeps at most ``2 (C (P_b / P + N_b / N) / 2 + 1)`` scores per role (``t < P_b / P + N_b / N``): summed
over a key's ``B`` bins, at most ``2 (C + B)`` per role, ``4 (C + B)`` in all, plus the whole ones; nothing
proportional to the rows.

:func:`curves_from_summary` assembles a key's curves on the driver: exact (:func:`kernels.curves.exact_curves`)
when ``D + 1 <= bound``; else the candidates' global counts (``TP = P - positives of the lower bins -
below_pos``), and of the candidates (true vertices for the ROC, distinct scores for the PR curve) the first and
the last of each cell of ``s = FPR + TPR`` (:func:`kernels.curves.subset_mask`).  The guarantee
(docs/metrics.md, "Curves"): two consecutive written ROC points with skipped vertices between them lie in one
global cell or in one (bin, local cell), so their segment spans ``dx + dy < h`` and the area is within
``1 / (2 C)`` of the exact AUC.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from recsys_spark.kernels import curves as K
from recsys_spark.kernels.auc import UPartial, merge_u, u_from_histogram

#: roles of a kept distinct score (bits): an end of a local cell among every score (PR), the first (ROC) and the
#: last (ROC_LAST) sure vertex of a local cell, and sent whole (WHOLE)
PR, ROC, WHOLE, ROC_LAST = 1, 2, 4, 8
#: a kept score's fields, in this order
FIELDS = ("score", "below_pos", "below_neg", "pos", "neg")


@dataclass
class _Ends:
    """The last member so far of one role (its local cell and its fields)."""

    cell: int = -1
    row: tuple[float, ...] | None = None


@dataclass
class BinSummary:
    """One (key, bin)'s partial and kept scores, fed its distinct scores ascending in chunks (:meth:`add`)."""

    n_pos: float  # P of the key
    n_neg: float  # N of the key
    bound: int
    partial: UPartial = field(default_factory=lambda: UPartial(0.0, 0.0, 0.0))
    runs: int = 0
    vertices: int = 0  # sure vertices (module docstring)
    last_step: tuple[float, float] | None = None
    kept: list[np.ndarray] = field(default_factory=list)  # blocks of rows: FIELDS..., role
    ends: dict[int, _Ends] = field(default_factory=lambda: {PR: _Ends(), ROC: _Ends()})

    def add(self, values: np.ndarray, pos: np.ndarray, neg: np.ndarray, whole: int = 0) -> None:
        """The next distinct scores of the bin, ascending, with their counts; the first ``whole`` kept whole."""
        n = len(values)
        if n == 0:
            return
        below_pos = self.partial.n_pos + np.cumsum(pos) - pos
        below_neg = self.partial.n_neg + np.cumsum(neg) - neg
        rows = np.column_stack([values, below_pos, below_neg, pos, neg])
        role = np.zeros(n, dtype=np.int64)
        if self.n_pos > 0 and self.n_neg > 0:  # else no curve: only the partial
            role[:whole] |= WHOLE
            cell = K.cell_of(below_neg, below_pos, self.n_neg, self.n_pos, self.bound)
            lower_pos = np.r_[np.nan if self.last_step is None else self.last_step[0], pos[:-1]]
            lower_neg = np.r_[np.nan if self.last_step is None else self.last_step[1], neg[:-1]]
            sure = (pos != lower_pos) | (neg != lower_neg)
            if self.last_step is None:
                sure[0] = False  # the bin's lowest: decided on the driver
            self.vertices += int(sure.sum())
            self._mark(cell, np.ones(n, dtype=bool), (PR, PR), rows, role)
            self._mark(cell, sure, (ROC, ROC_LAST), rows, role)
        keep = role != 0
        if keep.any():
            self.kept.append(np.column_stack([rows[keep], role[keep]]))
        self.partial = merge_u([self.partial, u_from_histogram(pos, neg)])
        self.runs += n
        self.last_step = (float(pos[-1]), float(neg[-1]))

    def _mark(
        self, cell: np.ndarray, members: np.ndarray, bits: tuple[int, int], rows: np.ndarray, role: np.ndarray
    ) -> None:
        """Mark ``bits`` (first, last) on the first and the last member of each local cell; the chunk's last
        member waits for the next one (or the bin's end) to know whether it is the last of its cell."""
        at = np.flatnonzero(members)
        if len(at) == 0:
            return
        first_bit, last_bit = bits
        ends = self.ends[first_bit]
        cells = cell[at]
        first = cells != np.r_[ends.cell, cells[:-1]]
        role[at[first]] |= first_bit
        before = np.flatnonzero(first) - 1  # the member before a cell's first is the last of its cell
        role[at[before[before >= 0]]] |= last_bit
        if first[0] and ends.row is not None:
            self._keep(ends.row, last_bit)
        # the chunk's last member: the last of its cell or not, known at the next member or the bin's end
        ends.cell, ends.row = int(cells[-1]), tuple(rows[at[-1]].tolist())

    def _keep(self, row: tuple[float, ...], bit: int) -> None:
        self.kept.append(np.array([[*row, bit]], dtype=np.float64))

    def finish(self) -> np.ndarray:
        """The kept rows (FIELDS..., role; a score may come twice with different roles: OR them)."""
        for bit, ends in self.ends.items():
            if ends.row is not None:
                self._keep(ends.row, ROC_LAST if bit == ROC else bit)
        return np.concatenate(self.kept) if self.kept else np.zeros((0, len(FIELDS) + 1))


@dataclass(frozen=True)
class KeySummary:
    """One key's summaries: per bin (ascending) its class counts, distinct scores and sure vertices; the kept
    rows of all its bins (``bin`` and FIELDS, ``role``), in any order, a score possibly twice."""

    bins: np.ndarray
    bin_pos: np.ndarray
    bin_neg: np.ndarray
    bin_runs: np.ndarray
    bin_vertices: np.ndarray
    row_bin: np.ndarray
    rows: np.ndarray  # FIELDS..., role

    @property
    def n_pos(self) -> float:
        return float(self.bin_pos.sum())

    @property
    def n_neg(self) -> float:
        return float(self.bin_neg.sum())

    @property
    def distinct(self) -> int:
        return int(self.bin_runs.sum())


def _merged(summary: KeySummary) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bin index of each distinct kept score, its FIELDS, its roles ORed), ascending score."""
    order = np.argsort(summary.rows[:, 0], kind="stable")
    rows, row_bin = summary.rows[order], summary.row_bin[order]
    starts = np.flatnonzero(np.r_[True, rows[1:, 0] != rows[:-1, 0]]) if len(rows) else np.zeros(0, np.int64)
    role = np.bitwise_or.reduceat(rows[:, -1].astype(np.int64), starts) if len(rows) else np.zeros(0, np.int64)
    index = np.searchsorted(summary.bins, row_bin[starts])
    return index, rows[starts, :-1], role


def curves_from_summary(summary: KeySummary, bound: int) -> K.Curves | None:
    """The key's curves from its summaries (module docstring); ``None`` without both classes."""
    n_pos, n_neg = summary.n_pos, summary.n_neg
    if n_pos <= 0 or n_neg <= 0:
        return None
    index, rows, role = _merged(summary)
    score, below_pos, below_neg, pos, neg = rows.T
    if summary.distinct + 1 <= bound:  # every distinct score came whole
        return K.exact_curves(score, pos, neg)
    tp = n_pos - (np.cumsum(summary.bin_pos) - summary.bin_pos)[index] - below_pos
    fp = n_neg - (np.cumsum(summary.bin_neg) - summary.bin_neg)[index] - below_neg
    n = len(score)
    lowest = (below_pos == 0) & (below_neg == 0)  # each bin's lowest score
    top = np.arange(n) == n - 1  # the key's highest: the curve's first point
    # a bin's lowest is a vertex when it is the key's lowest or its step differs from the next lower score's,
    # the lower bin's highest (the row before it)
    low_vertex = lowest & np.r_[True, (pos[1:] != pos[:-1]) | (neg[1:] != neg[:-1])]
    first, last = (role & ROC).astype(bool), (role & ROC_LAST).astype(bool)
    # the ends of a local cell among the true vertices: a bin's lowest, when a vertex, is the first of its cell
    # (cell 0), before the first sure vertex; the key's highest, when no sure vertex, the last of its cell
    cell = K.cell_of(below_neg, below_pos, n_neg, n_pos, bound)
    first &= ~((cell == 0) & _per_bin(index, low_vertex, len(summary.bins))[index])
    if not last[-1]:
        last &= ~((index == index[-1]) & (cell == cell[-1]))
    vertex = first | last | low_vertex | top
    ends = (low_vertex | top) & ~(role & (ROC | ROC_LAST)).astype(bool)
    sizes = (int(summary.bin_vertices.sum()) + int(ends.sum()) + 1, summary.distinct + 1)
    pr = (role & PR).astype(bool)
    down = slice(None, None, -1)  # descending score, curve order
    roc_points = _thin(score[vertex][down], tp[vertex][down], fp[vertex][down], n_pos, n_neg, bound)
    pr_points = _thin(score[pr][down], tp[pr][down], fp[pr][down], n_pos, n_neg, bound)
    return K.curves_of(roc_points, pr_points, n_pos, n_neg, sizes)


def _per_bin(index: np.ndarray, flag: np.ndarray, bins: int) -> np.ndarray:
    """Whether any row of each bin (rows by bin index) has ``flag``."""
    found = np.zeros(bins, dtype=bool)
    found[index[flag]] = True
    return found


def _thin(scores: np.ndarray, tp: np.ndarray, fp: np.ndarray, n_pos: float, n_neg: float, bound: int) -> K.Points:
    """The first and the last point of each cell of ``s = FPR + TPR`` (:func:`kernels.curves.subset_mask`)."""
    keep = K.subset_mask(K.cell_of(fp, tp, n_neg, n_pos, bound))
    return scores[keep], tp[keep], fp[keep]


def summarize(values: np.ndarray, pos: np.ndarray, neg: np.ndarray, bins: np.ndarray, bound: int) -> KeySummary:
    """The summaries of a whole ascending histogram whose distinct scores fall in ``bins`` (non-decreasing),
    each bin in one chunk: what the stream gives, whatever its chunks (the reference of the tests)."""
    values, pos, neg = (np.asarray(a, dtype=np.float64) for a in (values, pos, neg))
    bins = np.asarray(bins, dtype=np.int64)
    n_pos, n_neg = float(pos.sum()), float(neg.sum())
    if len(bins) == 0:  # no score: no bin (the ends below would have one entry more than the starts)
        return key_summary([])
    starts = np.flatnonzero(np.r_[True, bins[1:] != bins[:-1]])
    parts = []
    for lo, hi in zip(starts, np.r_[starts[1:], len(bins)], strict=True):
        s = BinSummary(n_pos, n_neg, bound)
        s.add(values[lo:hi], pos[lo:hi], neg[lo:hi], whole=hi - lo)
        parts.append((int(bins[lo]), s, s.finish()))
    return key_summary(parts)


def key_summary(parts: Sequence[tuple[int, BinSummary, np.ndarray]]) -> KeySummary:
    """A :class:`KeySummary` from ``(bin, its BinSummary, its kept rows)`` per bin."""
    parts = sorted(parts, key=lambda p: p[0])
    counts = [(p[1].partial.n_pos, p[1].partial.n_neg, p[1].runs, p[1].vertices) for p in parts]
    table = np.array(counts, dtype=np.float64).reshape(-1, 4)
    rows = [p[2] for p in parts]
    return KeySummary(
        np.array([p[0] for p in parts], dtype=np.int64),
        table[:, 0],
        table[:, 1],
        table[:, 2],
        table[:, 3],
        np.concatenate([np.full(len(r), p[0], np.int64) for p, r in zip(parts, rows, strict=True)])
        if parts
        else np.zeros(0, np.int64),
        np.concatenate(rows) if rows else np.zeros((0, len(FIELDS) + 1)),
    )


def score_bins(values: np.ndarray, n_bins: int) -> np.ndarray:
    """The pooled AUC's bins in numpy: ``min(floor(n_bins * (atan(score) / pi + 1/2)), n_bins - 1)``
    (:func:`recsys_spark.per_user.pooled_auc.score_bin`; an ulp of ``atan`` may differ from the JVM's)."""
    bins = np.floor((np.arctan(np.asarray(values, dtype=np.float64)) / math.pi + 0.5) * n_bins)
    return np.minimum(bins, n_bins - 1).astype(np.int64)


def curves_from_histogram(
    values: np.ndarray, pos: np.ndarray, neg: np.ndarray, bound: int, bins: np.ndarray | None = None
) -> K.Curves | None:
    """Both curves of an ascending histogram: exact when ``D + 1 <= bound``, else the subset of
    :func:`curves_from_summary` over the score bins ``bins`` (required then).  ``None`` without both classes."""
    if len(values) + 1 <= bound:
        return K.exact_curves(values, pos, neg)
    if bins is None:
        raise ValueError("above the bound the subset needs each distinct score's bin")
    return curves_from_summary(summarize(values, pos, neg, bins, bound), bound)
