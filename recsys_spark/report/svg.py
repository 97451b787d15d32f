"""Hand-written inline SVG charts: small, deterministic, no JavaScript, no fonts to fetch.

Every function returns one ``<svg>`` element as text.  Coordinates are
printed with one decimal and labels with fixed rules, so the same data gives
the same bytes.  Missing values (None) break lines instead of being
interpolated; missing days are drawn as grey columns.  Each mark carries a
``<title>`` so a hover shows its exact value without any script.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

PALETTE = ("#4e79a7", "#e15759", "#59a14f", "#f28e2b", "#b07aa1", "#76b7b2", "#9c755f", "#edc948")
GREY = "#888"
#: significant gain and loss (recsys_spark/report/colour_rule.py); nothing else is drawn in them
GREEN, RED = "#1a7f37", "#cf222e"
GAP_FILL = "#ececec"
FONT = 11


def _f(v: float) -> str:
    """A coordinate: one decimal, no negative zero."""
    text = f"{v:.1f}"
    return "0.0" if text == "-0.0" else text


def fmt(v: float | None, digits: int = 4) -> str:
    """A value for a label or tooltip: ``digits`` significant digits, plain notation for usual magnitudes.

    >>> fmt(0.123456), fmt(1234.5), fmt(None), fmt(-0.00001234)
    ('0.1235', '1234', '—', '-1.234e-05')
    """
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if v == 0:
        return "0"
    if 1e-4 <= abs(v) < 1e6:
        return f"{v:.{digits}g}" if abs(v) < 10**digits else f"{v:.0f}"
    return f"{v:.{digits}g}"


def nice_step(lo: float, hi: float, count: int = 5) -> float:
    """The 1, 2 or 5 times a power of 10 at or just above (hi - lo) / count.

    >>> nice_step(0.0, 1.0, 4), nice_step(0.4, 0.5, 4)
    (0.5, 0.05)
    """
    raw = (hi - lo) / max(count, 1) if hi > lo else 1.0 / max(count, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw * (1 - 1e-12))


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values inside [lo, hi], about ``count`` of them (steps 1, 2 or 5 times a power of 10).

    >>> nice_ticks(0.0, 1.0)
    [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    >>> nice_ticks(0.62, 0.71, 4)
    [0.65, 0.7]
    """
    if hi <= lo:
        hi = lo + 1.0
    step = nice_step(lo, hi, count)
    first = math.ceil(lo / step - 1e-9)
    last = math.floor(hi / step + 1e-9)
    decimals = max(0, -math.floor(math.log10(step)))
    return [round(i * step, decimals + 2) for i in range(first, last + 1)]


def covering_ticks(
    lo: float, hi: float, count: int = 4, floor: float | None = None, ceiling: float | None = None
) -> list[float]:
    """:func:`nice_ticks` plus one step below and above when the data reach past them (within floor/ceiling),
    so the axis ends on a labelled tick.

    >>> covering_ticks(0.695, 0.965)
    [0.6, 0.7, 0.8, 0.9, 1.0]
    """
    ticks = nice_ticks(lo, hi, count)
    step = nice_step(lo, hi, count)
    if not ticks:
        ticks = [round(math.floor(lo / step) * step, max(0, -math.floor(math.log10(step))) + 3)]
    digits = max(0, -math.floor(math.log10(step))) + 3
    below, above = round(ticks[0] - step, digits), round(ticks[-1] + step, digits)
    if ticks[0] > lo + step * 1e-9 and (floor is None or below >= floor - step * 1e-9):
        ticks.insert(0, below)
    if ticks[-1] < hi - step * 1e-9 and (ceiling is None or above <= ceiling + step * 1e-9):
        ticks.append(above)
    return ticks


def tick_label(v: float, ticks: Sequence[float]) -> str:
    """Label of a tick with just the decimals its neighbours need."""
    step = abs(ticks[1] - ticks[0]) if len(ticks) > 1 else abs(v) or 1.0
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    if abs(round(step * 10**decimals) - step * 10**decimals) > 1e-6:
        decimals += 1
    return f"{v:.{decimals}f}"


def padded(
    values: Sequence[float | None], pad: float = 0.08, floor: float | None = None, ceiling: float | None = None
) -> tuple[float, float]:
    """(lo, hi) covering the values with a margin; a constant or empty series gets a small range."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return 0.0, 1.0
    lo, hi = min(vals), max(vals)
    span = hi - lo
    if span == 0:
        span = abs(hi) * 0.1 or 0.1
        lo, hi = lo - span / 2, hi + span / 2
    lo, hi = lo - span * pad, hi + span * pad
    if floor is not None:
        lo = max(lo, floor)
    if ceiling is not None:
        hi = min(hi, ceiling)
    return lo, hi


@dataclass
class Plot:
    """A plotting area inside an SVG of ``width`` x ``height`` with linear scales."""

    width: float
    height: float
    x_range: tuple[float, float]
    y_range: tuple[float, float]
    left: float = 52
    right: float = 14
    top: float = 12
    bottom: float = 30
    parts: list[str] = field(default_factory=list)

    def x(self, v: float) -> float:
        lo, hi = self.x_range
        return self.left + (v - lo) / ((hi - lo) or 1.0) * (self.width - self.left - self.right)

    def y(self, v: float) -> float:
        lo, hi = self.y_range
        return self.height - self.bottom - (v - lo) / ((hi - lo) or 1.0) * (self.height - self.top - self.bottom)

    def add(self, text: str) -> None:
        self.parts.append(text)

    def y_axis(self, ticks: Sequence[float], label: str = "", percent: bool = False) -> None:
        x0, x1 = self.left, self.width - self.right
        for t in ticks:
            y = _f(self.y(t))
            self.add(f'<line class="grid" x1="{_f(x0)}" y1="{y}" x2="{_f(x1)}" y2="{y}"/>')
            text = f"{tick_label(t * 100, [u * 100 for u in ticks])}%" if percent else tick_label(t, ticks)
            self.add(f'<text class="tick" x="{_f(x0 - 5)}" y="{y}" text-anchor="end" dy="0.32em">{text}</text>')
        if label:
            self.add(
                f'<text class="axis-label" x="{_f(x0)}" y="{_f(self.top - 3)}" text-anchor="start">'
                f"{escape(label)}</text>"
            )

    def x_axis(
        self, ticks: Sequence[float], labels: Sequence[str] | None = None, label: str = "", grid: bool = False
    ) -> None:
        y0 = self.height - self.bottom
        self.add(
            f'<line class="axis" x1="{_f(self.left)}" y1="{_f(y0)}" x2="{_f(self.width - self.right)}" y2="{_f(y0)}"/>'
        )
        for i, t in enumerate(ticks):
            x = _f(self.x(t))
            if grid:
                self.add(f'<line class="grid" x1="{x}" y1="{_f(self.top)}" x2="{x}" y2="{_f(y0)}"/>')
            self.add(f'<line class="axis" x1="{x}" y1="{_f(y0)}" x2="{x}" y2="{_f(y0 + 4)}"/>')
            text = labels[i] if labels is not None else tick_label(t, ticks)
            if text:
                self.add(f'<text class="tick" x="{x}" y="{_f(y0 + 15)}" text-anchor="middle">{escape(text)}</text>')
        if label:
            self.add(
                f'<text class="axis-label" x="{_f(self.width - self.right)}" y="{_f(self.height - 2)}" '
                f'text-anchor="end">{escape(label)}</text>'
            )

    def svg(self, title: str, css_class: str = "chart") -> str:
        body = "\n".join(self.parts)
        return (
            f'<svg class="{css_class}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_f(self.width)} '
            f'{_f(self.height)}" width="{_f(self.width)}" height="{_f(self.height)}" role="img" '
            f'aria-label="{escape(title)}"><title>{escape(title)}</title>\n{body}\n</svg>'
        )


@dataclass
class Series:
    name: str
    ys: list[float | None]
    band: list[tuple[float, float] | None] | None = None
    color: str = PALETTE[0]
    dashed: bool = False


def _segments(xs: Sequence[float], ys: Sequence[float | None]) -> list[list[tuple[float, float]]]:
    """Runs of consecutive points with a value (a None ends a run: gaps are never bridged)."""
    out: list[list[tuple[float, float]]] = [[]]
    for x, y in zip(xs, ys, strict=True):
        if y is None or not math.isfinite(y):
            if out[-1]:
                out.append([])
        else:
            out[-1].append((x, y))
    return [s for s in out if s]


def _legend(plot: Plot, series: Sequence[Series], extra: Sequence[tuple[str, str]] = ()) -> None:
    """One row of swatches under the title line, right-aligned."""
    items = [(s.name, s.color, s.dashed) for s in series if s.name] + [(n, c, False) for n, c in extra]
    x = plot.width - plot.right
    y = plot.top - 14
    for name, color, dashed in reversed(items):
        width = 7.0 * len(name) + 32
        x -= width
        dash = ' stroke-dasharray="4 3"' if dashed else ""
        plot.add(
            f'<line x1="{_f(x)}" y1="{_f(y - 4)}" x2="{_f(x + 16)}" y2="{_f(y - 4)}" '
            f'stroke="{color}" stroke-width="2.5"{dash}/>'
        )
        plot.add(f'<text class="legend" x="{_f(x + 20)}" y="{_f(y)}">{escape(name)}</text>')


def _gap_columns(
    plot: Plot, xs: Sequence[float], gaps: Sequence[int], step: float, lo: float, x_labels: Sequence[str] | None
) -> None:
    """A grey column marked "no data" at each index of ``gaps`` (``lo``: the y axis' floor)."""
    for i in gaps:
        x0, x1 = plot.x(xs[i] - step / 2), plot.x(xs[i] + step / 2)
        plot.add(
            f'<rect class="gap" x="{_f(x0)}" y="{_f(plot.top)}" width="{_f(x1 - x0)}" '
            f'height="{_f(plot.y(lo) - plot.top)}" fill="{GAP_FILL}"><title>no data: '
            f"{escape(x_labels[i] if x_labels else str(xs[i]))}</title></rect>"
        )
        xm, ym = _f((x0 + x1) / 2), _f((plot.top + plot.y(lo)) / 2)
        plot.add(
            f'<text class="gap-label" x="{xm}" y="{ym}" text-anchor="middle" dy="0.32em" '
            f'transform="rotate(-90 {xm} {ym})">no data</text>'
        )


def _band(plot: Plot, xs: Sequence[float], s: Series) -> None:
    """The series' interval band: a shaded polygon per run of days with an interval, a lone day's as a whisker."""
    if not s.band:
        return
    for seg in _segments(list(range(len(xs))), [None if b is None else 0.0 for b in s.band]):
        idx = [int(i) for i, _ in seg]
        upper = " ".join(f"{_f(plot.x(xs[i]))},{_f(plot.y(s.band[i][1]))}" for i in idx)  # type: ignore[index]
        lower = " ".join(
            f"{_f(plot.x(xs[i]))},{_f(plot.y(s.band[i][0]))}"  # type: ignore[index]
            for i in reversed(idx)
        )
        if len(idx) == 1:  # a lone day: its interval as a whisker
            i = idx[0]
            plot.add(
                f'<line x1="{_f(plot.x(xs[i]))}" y1="{_f(plot.y(s.band[i][0]))}" '  # type: ignore[index]
                f'x2="{_f(plot.x(xs[i]))}" y2="{_f(plot.y(s.band[i][1]))}" stroke="{s.color}" '  # type: ignore[index]
                f'stroke-opacity="0.35" stroke-width="6"/>'
            )
        else:
            plot.add(
                f'<polygon class="band" points="{upper} {lower}" fill="{s.color}" fill-opacity="0.18" stroke="none"/>'
            )


def _markers(
    plot: Plot,
    xs: Sequence[float],
    s: Series,
    x_labels: Sequence[str] | None,
    point_names: Sequence[str] | None,
) -> None:
    """A dot per point with a value, its exact value (and interval) as its hover title."""
    for i, (x, y) in enumerate(zip(xs, s.ys, strict=True)):
        if y is None or not math.isfinite(y):
            continue
        name = point_names[i] if point_names else (x_labels[i] if x_labels else fmt(x))
        band = s.band[i] if s.band and s.band[i] is not None else None
        interval = f" [{fmt(band[0])}, {fmt(band[1])}]" if band else ""
        plot.add(
            f'<circle class="point" cx="{_f(plot.x(x))}" cy="{_f(plot.y(y))}" r="2.6" '
            f'fill="{s.color}"><title>{escape(s.name)} {escape(name)}: {fmt(y)}{interval}'
            f"</title></circle>"
        )


def line_chart(
    xs: Sequence[float],
    series: Sequence[Series],
    *,
    title: str,
    x_labels: Sequence[str] | None = None,
    tick_every: int = 1,
    gaps: Sequence[int] = (),
    y_label: str = "",
    x_label: str = "",
    width: float = 360,
    height: float = 190,
    y_floor: float | None = None,
    y_ceiling: float | None = None,
    percent: bool = False,
    markers: bool = True,
    point_names: Sequence[str] | None = None,
) -> str:
    """Lines over x (numbers, or day indices with ``x_labels``), with optional interval bands.

    ``gaps``: indices of xs with no data at all, drawn as grey columns.
    """
    values: list[float | None] = [v for s in series for v in s.ys]
    for s in series:
        values += [b for pair in (s.band or []) if pair is not None for b in pair]
    lo, hi = padded(values, floor=y_floor, ceiling=y_ceiling)
    ticks = covering_ticks(lo, hi, 5 if height >= 260 else 4, y_floor, y_ceiling)
    lo, hi = min(lo, ticks[0]), max(hi, ticks[-1])
    step = (xs[1] - xs[0]) if len(xs) > 1 else 1.0
    x_lo, x_hi = (xs[0] - step / 2, xs[-1] + step / 2) if x_labels is not None else (min(xs), max(xs))
    plot = Plot(width, height, (x_lo, x_hi), (lo, hi), top=36 if any(s.name for s in series) else 16)
    _gap_columns(plot, xs, gaps, step, lo, x_labels)
    plot.y_axis(ticks, y_label, percent)
    if x_labels is not None:
        shown = [lab if i % tick_every == 0 else "" for i, lab in enumerate(x_labels)]
        plot.x_axis(list(xs), shown, x_label)
    else:
        plot.x_axis(nice_ticks(min(xs), max(xs), 5) if len(xs) > 8 else list(xs), None, x_label)
    for s in series:
        _band(plot, xs, s)
        dash = ' stroke-dasharray="5 3"' if s.dashed else ""
        for seg in (seg for seg in _segments(xs, s.ys) if len(seg) > 1):  # a lone point is its marker
            points = " ".join(f"{_f(plot.x(x))},{_f(plot.y(y))}" for x, y in seg)
            plot.add(
                f'<polyline class="line" points="{points}" fill="none" stroke="{s.color}" stroke-width="2"{dash}/>'
            )
        if markers:
            _markers(plot, xs, s, x_labels, point_names)
    if len(series) > 1 or (series and series[0].name):
        _legend(plot, series)
    return plot.svg(title)


def lorenz_chart(x: Sequence[float], y: Sequence[float], *, title: str, size: float = 300) -> str:
    """The Lorenz curve (share of exposures against share of items, least exposed first) and the diagonal."""
    plot = Plot(size + 40, size, (0.0, 1.0), (0.0, 1.0), left=48, right=12, top=14, bottom=34)
    ticks = [0.0, 0.25, 0.5, 0.75, 1.0]
    plot.y_axis(ticks, "share of exposures", percent=True)
    plot.x_axis(ticks, [f"{int(t * 100)}%" for t in ticks], "share of items, least exposed first")
    plot.add(
        f'<line class="diagonal" x1="{_f(plot.x(0))}" y1="{_f(plot.y(0))}" x2="{_f(plot.x(1))}" '
        f'y2="{_f(plot.y(1))}" stroke="{GREY}" stroke-dasharray="4 3"/>'
    )
    plot.add(
        f'<text class="note" x="{_f(plot.x(0.52))}" y="{_f(plot.y(0.58))}" transform="rotate(-45 '
        f'{_f(plot.x(0.52))} {_f(plot.y(0.58))})" text-anchor="middle">equality</text>'
    )
    pts = " ".join(f"{_f(plot.x(a))},{_f(plot.y(b))}" for a, b in zip(x, y, strict=True))
    area = f"{_f(plot.x(0))},{_f(plot.y(0))} {pts} {_f(plot.x(1))},{_f(plot.y(1))}"
    plot.add(f'<polygon points="{area}" fill="{PALETTE[0]}" fill-opacity="0.12" stroke="none"/>')
    plot.add(f'<polyline class="line" points="{pts}" fill="none" stroke="{PALETTE[0]}" stroke-width="2.2"/>')
    return plot.svg(title)


@dataclass
class Whisker:
    label: str
    value: float | None
    low: float | None = None
    high: float | None = None
    color: str = PALETTE[0]
    note: str = ""  # appended to the tooltip
    css: str = ""  # a class of the dot beside ``dot`` (e.g. the verdict it is coloured by)


def label_width(labels: Sequence[str], least: float = 110, per_char: float = 6.6) -> float:
    """Room for the longest row label at the row labels' font size (about ``per_char`` pixels a character).

    >>> label_width(["web"]), label_width(["x" * 50])
    (110, 342)
    """
    longest = max((len(label) for label in labels), default=0)
    return max(least, round(longest * per_char + 12))


def dot_whisker(
    rows: Sequence[Whisker],
    *,
    title: str,
    reference: float | None = None,
    reference_label: str = "",
    width: float = 360,
    percent: bool = False,
    row_height: float = 20,
    label_width: float = 110,
    x_label: str = "",
) -> str:
    """One row per label: a dot at the value, a whisker over [low, high], a dashed line at ``reference``."""
    values: list[float | None] = [r.value for r in rows] + [r.low for r in rows] + [r.high for r in rows]
    if reference is not None:
        values.append(reference)
    lo, hi = padded(values, pad=0.1)
    ticks = nice_ticks(lo, hi, 4)
    lo, hi = min(lo, ticks[0]), max(hi, ticks[-1])
    height = 16 + 34 + row_height * max(len(rows), 1)
    plot = Plot(width, height, (lo, hi), (0.0, float(max(len(rows), 1))), left=label_width, right=16, top=16, bottom=34)
    plot.x_axis(
        ticks,
        [f"{tick_label(t * 100, [u * 100 for u in ticks])}%" if percent else tick_label(t, ticks) for t in ticks],
        x_label,
        grid=True,
    )
    if reference is not None:
        xr = _f(plot.x(reference))
        plot.add(
            f'<line class="reference" x1="{xr}" y1="{_f(plot.top - 4)}" x2="{xr}" '
            f'y2="{_f(plot.height - plot.bottom)}" stroke="{GREY}" stroke-dasharray="4 3"/>'
        )
        if reference_label:
            anchor = "end" if plot.x(reference) > width * 0.6 else "start"
            shift = -4 if anchor == "end" else 4
            plot.add(
                f'<text class="note" x="{_f(plot.x(reference) + shift)}" y="{_f(plot.top - 5)}" '
                f'text-anchor="{anchor}">{escape(reference_label)}</text>'
            )
    for i, r in enumerate(rows):
        yc = plot.top + row_height * (i + 0.5)
        plot.add(
            f'<text class="row-label" x="{_f(label_width - 8)}" y="{_f(yc)}" text-anchor="end" '
            f'dy="0.32em">{escape(r.label)}</text>'
        )
        if r.value is None:
            plot.add(f'<text class="note" x="{_f(label_width + 4)}" y="{_f(yc)}" dy="0.32em">no value</text>')
            continue
        interval = ""
        if r.low is not None and r.high is not None:
            interval = f" [{fmt(r.low)}, {fmt(r.high)}]"
            plot.add(
                f'<line class="whisker" x1="{_f(plot.x(r.low))}" y1="{_f(yc)}" x2="{_f(plot.x(r.high))}" '
                f'y2="{_f(yc)}" stroke="{r.color}" stroke-width="2"/>'
            )
            for end in (r.low, r.high):
                plot.add(
                    f'<line x1="{_f(plot.x(end))}" y1="{_f(yc - 4)}" x2="{_f(plot.x(end))}" '
                    f'y2="{_f(yc + 4)}" stroke="{r.color}" stroke-width="1.5"/>'
                )
        shown = f"{r.value * 100:+.2f}%" if percent else fmt(r.value)
        css = escape(f"dot {r.css}" if r.css else "dot")
        plot.add(
            f'<circle class="{css}" cx="{_f(plot.x(r.value))}" cy="{_f(yc)}" r="4" fill="{r.color}">'
            f"<title>{escape(r.label)}: {shown}{interval}{escape(r.note)}</title></circle>"
        )
    return plot.svg(title)


def bar_chart(
    labels: Sequence[str],
    values: Sequence[float],
    *,
    title: str,
    width: float = 360,
    label_width: float = 170,
    colors: Sequence[str] | None = None,
) -> str:
    """Horizontal bars with their values written at their ends."""
    row_height = 20
    height = 16 + 30 + row_height * max(len(labels), 1)
    top = max(values, default=0.0)
    ticks = nice_ticks(0.0, top or 1.0, 4)
    plot = Plot(width, height, (0.0, ticks[-1]), (0.0, 1.0), left=label_width, right=40, top=10, bottom=30)
    plot.x_axis(ticks, None, "rows", grid=True)
    if not labels:
        plot.add(f'<text class="note" x="{_f(label_width + 6)}" y="{_f(plot.top + 14)}">nothing set aside</text>')
    for i, (label, v) in enumerate(zip(labels, values, strict=True)):
        y0 = plot.top + row_height * i + 3
        color = colors[i] if colors else PALETTE[0]
        plot.add(
            f'<text class="row-label" x="{_f(label_width - 8)}" y="{_f(y0 + 7)}" text-anchor="end" '
            f'dy="0.32em">{escape(label)}</text>'
        )
        plot.add(
            f'<rect x="{_f(plot.x(0))}" y="{_f(y0)}" width="{_f(plot.x(v) - plot.x(0))}" '
            f'height="{_f(row_height - 6)}" fill="{color}"><title>{escape(label)}: {fmt(v)}</title></rect>'
        )
        plot.add(f'<text class="value" x="{_f(plot.x(v) + 4)}" y="{_f(y0 + 7)}" dy="0.32em">{fmt(v)}</text>')
    return plot.svg(title)


def day_bars(
    x_labels: Sequence[str],
    stacks: Sequence[Series],
    *,
    title: str,
    gaps: Sequence[int] = (),
    tick_every: int = 1,
    width: float = 360,
    height: float = 190,
    y_label: str = "",
) -> str:
    """Stacked vertical bars per day (e.g. failed hard and soft rules); grey columns for missing days."""
    n = len(x_labels)
    totals = [sum((s.ys[i] or 0.0) for s in stacks) for i in range(n)]
    top = max(max(totals, default=0.0), 1.0)
    ticks = [t for t in nice_ticks(0.0, top, 4) if float(t).is_integer()] or [0.0, 1.0]
    plot = Plot(width, height, (-0.5, n - 0.5), (0.0, max(ticks[-1], top) * 1.1), top=36)
    for i in gaps:
        x0, x1 = plot.x(i - 0.5), plot.x(i + 0.5)
        plot.add(
            f'<rect class="gap" x="{_f(x0)}" y="{_f(plot.top)}" width="{_f(x1 - x0)}" '
            f'height="{_f(plot.y(0) - plot.top)}" fill="{GAP_FILL}"><title>no data: {escape(x_labels[i])}'
            f"</title></rect>"
        )
    plot.y_axis(ticks, y_label)
    plot.x_axis(list(range(n)), [lab if i % tick_every == 0 else "" for i, lab in enumerate(x_labels)])
    bar = (plot.x(1) - plot.x(0)) * 0.6 if n > 1 else 30.0
    for i in range(n):
        if i in gaps:
            continue
        base = 0.0
        for s in stacks:
            v = s.ys[i] or 0.0
            if v:
                plot.add(
                    f'<rect x="{_f(plot.x(i) - bar / 2)}" y="{_f(plot.y(base + v))}" width="{_f(bar)}" '
                    f'height="{_f(plot.y(base) - plot.y(base + v))}" fill="{s.color}">'
                    f"<title>{escape(x_labels[i])} {escape(s.name)}: {fmt(v)}</title></rect>"
                )
            base += v
        if base == 0:
            plot.add(f'<text class="ok-mark" x="{_f(plot.x(i))}" y="{_f(plot.y(0) - 4)}" text-anchor="middle">0</text>')
    _legend(plot, stacks)
    return plot.svg(title)


def scatter_fit(
    xs: Sequence[float],
    ys: Sequence[float],
    names: Sequence[str],
    *,
    title: str,
    slope: float | None,
    intercept: float | None,
    x_label: str,
    y_label: str,
    width: float = 420,
    height: float = 260,
) -> str:
    """Points (one per day) and the fitted least-squares line over the points' x range."""
    x_lo, x_hi = padded(list(xs), pad=0.1)
    y_lo, y_hi = padded(list(ys), pad=0.1)
    xt, yt = nice_ticks(x_lo, x_hi, 4), covering_ticks(y_lo, y_hi, 4)
    x_lo, x_hi, y_lo, y_hi = min(x_lo, xt[0]), max(x_hi, xt[-1]), min(y_lo, yt[0]), max(y_hi, yt[-1])
    plot = Plot(width, height, (x_lo, x_hi), (y_lo, y_hi), left=56, top=18, bottom=34)
    plot.y_axis(yt, y_label)
    plot.x_axis(xt, None, x_label, grid=True)
    if slope is not None and intercept is not None and xs:
        a, b = min(xs), max(xs)
        plot.add(
            f'<line class="fit" x1="{_f(plot.x(a))}" y1="{_f(plot.y(intercept + slope * a))}" '
            f'x2="{_f(plot.x(b))}" y2="{_f(plot.y(intercept + slope * b))}" stroke="{PALETTE[1]}" '
            f'stroke-width="2"><title>fit: y = {fmt(intercept)} + {fmt(slope)} x</title></line>'
        )
    for x, y, name in zip(xs, ys, names, strict=True):
        plot.add(
            f'<circle class="point" cx="{_f(plot.x(x))}" cy="{_f(plot.y(y))}" r="4" fill="{PALETTE[0]}" '
            f'fill-opacity="0.85"><title>{escape(name)}: x = {fmt(x)}, y = {fmt(y)}</title></circle>'
        )
    return plot.svg(title)
