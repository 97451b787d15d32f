"""Headless Chromium for the report's tests: load a file, collect console errors, screenshot, DOM, and
measure a page's layout and colours as the browser computed them (:func:`measure`).

Uses Debian's ``chromium`` (``.ci/run`` installs it); tests skip with a visible reason without it.
The PNG is decoded here (zlib and the five PNG row filters), so no imaging package is needed.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
]
#: what Chromium writes to stderr for a page's console errors and failed loads
CONSOLE_ERROR = re.compile(r"CONSOLE[:(]\d+|Uncaught|net::ERR_|Failed to load resource|Refused to", re.IGNORECASE)


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class Page:
    dom: str
    console_errors: list[str]
    png: bytes


def _run(binary: str, args: list[str], url: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        env = {**os.environ, "HOME": profile}
        return subprocess.run(
            [binary, *FLAGS, f"--user-data-dir={profile}", *args, url],
            capture_output=True,
            check=False,
            text=True,
            timeout=120,
            env=env,
        )


def only_sections(path: Path, ids: tuple[str, ...], out: Path) -> Path:
    """A copy of the page at ``out`` that shows only the sections ``ids`` (the others hidden by CSS): a
    screenshot of the window's top then holds them."""
    page = path.read_text(encoding="utf-8")
    keep = "".join(f":not(#{i})" for i in ids)
    out.write_text(page.replace("</style>", f"section{keep} {{ display: none; }}\n</style>", 1), encoding="utf-8")
    return out


def load(path: Path, width: int = 1200, height: int = 1600, scale: float = 0.5) -> Page:
    """Open ``path`` twice (DOM after scripts, then a screenshot) and gather the console errors of both.

    The page is laid out at ``width`` x ``height`` CSS pixels and the screenshot taken at ``scale`` device
    pixels per CSS pixel (half size: a quarter of the pixels to decode, the same picture).
    """
    binary = chromium()
    assert binary is not None
    url = path.resolve().as_uri()
    dumped = _run(binary, ["--dump-dom"], url)
    with tempfile.TemporaryDirectory() as tmp:
        shot = Path(tmp) / "shot.png"
        taken = _run(
            binary,
            [f"--window-size={width},{height}", f"--force-device-scale-factor={scale}", f"--screenshot={shot}"],
            url,
        )
        png = shot.read_bytes() if shot.exists() else b""
    errors = [line for run in (dumped, taken) for line in run.stderr.splitlines() if CONSOLE_ERROR.search(line)]
    return Page(dumped.stdout, errors, png)


#: run inside a copy of the page (the report has no script of its own): the viewport, the page's width, every
#: table's right edge and its scrolling box, the rendered colour of every forest dot and verdict cell, the extent of
#: the charts' text; written as JSON into <pre id="measured">, which --dump-dom hands back
MEASURE = """
(function () {
  var out = {width: window.innerWidth, scroll_width: document.documentElement.scrollWidth,
             sections: [], tables: [], marks: [], cells: [], text_left: 0, text_right: 0};
  document.querySelectorAll("section[id]").forEach(function (s) { out.sections.push(s.id); });
  document.querySelectorAll("table").forEach(function (t) {
    var box = t.closest(".scroll");
    out.tables.push({id: t.id, section: t.closest("section").id, right: t.getBoundingClientRect().right,
                     box_right: box ? box.getBoundingClientRect().right : null,
                     overflow: box ? getComputedStyle(box).overflowX : null});
  });
  document.querySelectorAll("figure[id] circle.dot").forEach(function (c) {
    out.marks.push({figure: c.closest("figure").id, fill: getComputedStyle(c).fill});
  });
  document.querySelectorAll("td[data-verdict]").forEach(function (td) {
    out.cells.push({section: td.closest("section").id, verdict: td.getAttribute("data-verdict"),
                    color: getComputedStyle(td).color});
  });
  out.states = [];
  document.querySelectorAll(".banner[data-decision], .banner[data-state], td[data-state]").forEach(function (e) {
    var style = getComputedStyle(e);
    var state = e.getAttribute("data-decision") || e.getAttribute("data-state");
    out.states.push({section: e.closest("section").id, state: state,
                     kind: e.tagName.toLowerCase(), color: style.color, background: style.backgroundColor,
                     border: style.borderTopColor});
  });
  var lefts = [], rights = [];
  document.querySelectorAll("svg.chart text").forEach(function (t) {
    var r = t.getBoundingClientRect();
    if (r.width > 0) { lefts.push(r.left); rights.push(r.right); }
  });
  out.text_left = Math.min.apply(null, lefts);
  out.text_right = Math.max.apply(null, rights);
  var pre = document.createElement("pre");
  pre.id = "measured";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
"""


@dataclass
class Measured:
    data: dict
    console_errors: list[str]


def measure(path: Path, width: int, height: int = 1200) -> Measured:
    """Lay ``path`` out at ``width`` x ``height`` CSS pixels and read back what :data:`MEASURE` finds."""
    binary = chromium()
    assert binary is not None
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / path.name
        page = path.read_text(encoding="utf-8")
        assert page.count("</body>") == 1
        copy.write_text(page.replace("</body>", f"<script>{MEASURE}</script>\n</body>"), encoding="utf-8")
        done = _run(binary, ["--dump-dom", f"--window-size={width},{height}"], copy.resolve().as_uri())
    found = re.search(r'<pre id="measured">(.*?)</pre>', done.stdout, re.DOTALL)
    assert found is not None, done.stderr[-2000:]
    text = html.unescape(found.group(1))
    errors = [line for line in done.stderr.splitlines() if CONSOLE_ERROR.search(line)]
    return Measured(json.loads(text), errors)


def decode_png(data: bytes) -> np.ndarray:
    """Pixels (height, width, channels) of an 8-bit RGB/RGBA/grey PNG, non-interlaced."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + length
    assert header is not None
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and interlace == 0, "only 8-bit non-interlaced PNGs"
    channels = {0: 1, 2: 3, 4: 2, 6: 4}[colour]
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8).reshape(height, 1 + width * channels)
    out = np.zeros((height, width * channels), dtype=np.uint8)
    prev = np.zeros(width * channels, dtype=np.int32)
    for y in range(height):
        kind, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if kind == 0:
            cur = line
        elif kind == 2:
            cur = (line + prev) & 255
        elif kind == 1:  # Sub: a running sum per channel
            cur = (np.cumsum(line.reshape(width, channels), axis=0) & 255).reshape(-1)
        else:  # Average or Paeth depend on the reconstructed left byte: pixel by pixel
            cur = np.zeros_like(line)
            for x in range(width):
                s = slice(x * channels, (x + 1) * channels)
                left = cur[s.start - channels : s.stop - channels] if x else np.zeros(channels, dtype=np.int32)
                up = prev[s]
                if kind == 3:
                    cur[s] = (line[s] + (left + up) // 2) & 255
                else:
                    upleft = prev[s.start - channels : s.stop - channels] if x else np.zeros(channels, dtype=np.int32)
                    p = left + up - upleft
                    pa, pb, pc = np.abs(p - left), np.abs(p - up), np.abs(p - upleft)
                    pred = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, up, upleft))
                    cur[s] = (line[s] + pred) & 255
        out[y] = cur
        prev = cur
    return out.reshape(height, width, channels)


def check_page(path: Path, expected_charts: int) -> np.ndarray:
    """Load ``path`` in Chromium, assert what every report must satisfy, return the screenshot's pixels."""
    page = load(path, width=1100, height=1400)
    assert page.console_errors == []
    charts = re.findall(
        r'<figure id="chart-[^"]+"[^>]*>\s*<figcaption>[^<]*</figcaption>\s*<svg class="chart"', page.dom
    )
    assert len(charts) == expected_charts, "the rendered DOM lacks charts"
    for figure in re.findall(r'<figure id="chart-.*?</figure>', page.dom, re.DOTALL):
        assert re.search(r"<(polyline|circle|rect|polygon)\b", figure), figure[:80]  # every chart draws marks
    pixels = decode_png(page.png)[..., :3]
    assert pixels.shape[:2] == (700, 550)  # 1100 x 1400 CSS pixels at half scale
    colours = np.unique(pixels.reshape(-1, 3), axis=0)
    ink = (pixels.min(axis=2) < 160).mean()  # share of pixels darker than light grey: text, lines, marks
    assert len(colours) > 50 and 0.005 < ink < 0.5, (len(colours), ink)
    return pixels
