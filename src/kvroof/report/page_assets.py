"""The style sheet and the script of report.html, inline in the page (no network, no server).

The script reads each figure's data (a ``<script type="application/json">`` beside its inline
SVG, made by :func:`kvroof.plot.figure_data.interactive_svg`): on a pointer move over a figure
it finds the nearest drawn point, reference line, bar or cell of a visible series and shows
the series and its values in a tooltip; a click (or Enter or Space) on a legend entry hides or
shows the series it stands for. Without the script the page and its figures read as before.
"""

from __future__ import annotations

from typing import Final

__all__ = ["CSS", "SCRIPT"]

CSS: Final = """
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; text-size-adjust: 100%; }
body { font-family: system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif; max-width: 1150px;
       margin: 0 auto; padding: 1em 1.2em 3em; color: #222; line-height: 1.45;
       overflow-wrap: break-word; }
h1 { font-size: 1.55em; line-height: 1.25; margin: 0.4em 0 0.6em; }
h2 { font-size: 1.3em; margin: 1.8em 0 0.5em; border-bottom: 1px solid #ddd;
     padding-bottom: 0.2em; }
h3 { font-size: 1.08em; margin: 1.4em 0 0.4em; }
h4 { font-size: 1em; margin: 1em 0 0.3em; }
a { color: #0b5cad; }
:target { scroll-margin-top: 0.5em; }
.findings { background: #f2f7fc; border: 1px solid #c6d8ec; border-left: 5px solid #0072B2;
            border-radius: 4px; padding: 0.2em 1em 0.5em; margin: 1em 0; }
.findings h2 { border: none; margin: 0.5em 0 0.3em; font-size: 1.15em; }
.findings ol { margin: 0; padding-left: 1.3em; }
.findings li { margin: 0.2em 0; }
nav.contents ol { padding-left: 1.3em; margin: 0.2em 0; }
nav.contents > ol > li { margin: 0.25em 0; }
nav.contents li li { font-size: 0.92em; }
@media (min-width: 900px) { nav.contents > ol { columns: 2; column-gap: 2.5em; }
                            nav.contents > ol > li { break-inside: avoid; } }
.hint { font-size: 0.9em; color: #555; }
.scroll { overflow-x: auto; max-width: 100%; margin: 0.5em 0; }
.scroll:focus { outline: 2px solid #0072B2; outline-offset: 2px; }
table { border-collapse: collapse; font-size: 0.88em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.55em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.long { min-width: 16em; }
.notes { font-size: 0.85em; color: #444; padding-left: 1.2em; }
.sources { font-size: 0.85em; }
figure.chart { margin: 1em 0 1.8em; }
figure.chart h4 { margin-top: 0.4em; }
.plot { position: relative; max-width: 100%; }
.plot svg { display: block; width: 100%; height: auto; }
svg.kv-chart text { font-family: 'DejaVu Sans', 'Bitstream Vera Sans', Verdana, Arial,
                    Helvetica, sans-serif; }
figcaption { font-size: 0.9em; color: #333; margin-top: 0.3em; }
.tip { position: absolute; left: 0; top: 0; z-index: 3; pointer-events: none;
       background: rgba(255, 255, 255, 0.97); border: 1px solid #777; border-radius: 4px;
       padding: 0.3em 0.55em; font-size: 0.8em; line-height: 1.35;
       box-shadow: 0 1px 5px rgba(0, 0, 0, 0.25); max-width: min(24em, 90%); }
.tip b { display: block; margin-bottom: 0.1em; }
.tip span { font-variant-numeric: tabular-nums; }
.kv-dot { fill: none; stroke: #111; stroke-width: 1.6; pointer-events: none; }
.kv-legend { cursor: pointer; }
.kv-legend:focus { outline: 1px dotted #0072B2; }
.kv-off { opacity: 0.3; }
@media (max-width: 600px) {
  body { padding: 0.6em 0.7em 2em; }
  h1 { font-size: 1.3em; }
  table { font-size: 0.8em; }
  .tip { font-size: 0.7em; max-width: 75%; padding: 0.2em 0.4em; }
}
"""

SCRIPT: Final = r"""
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var POINT = {line: 1, step: 1, points: 1, polygon: 1};
  var SOFT = {area: 1, band: 1, polygon: 1};
  var SPAN = {vline: 3, hline: 3, area: 3, bar: 4, barh: 4, cells: 4, band: 4};
  function fmt(v) {
    if (typeof v !== "number") return String(v);
    if (!isFinite(v)) return String(v);
    var a = Math.abs(v);
    if (a !== 0 && (a >= 1e6 || a < 1e-3)) {
      return v.toExponential(3).replace(/\.?0+e/, "e");
    }
    return Number(v.toPrecision(4)).toLocaleString("en-US", {maximumFractionDigits: 6});
  }
  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) {
      return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c];
    });
  }
  function measure(kind, r, p) {
    /* distance from p to the row r (SVG units) and the point to mark */
    var x0, x1, y0, y1, dx, dy;
    if (POINT[kind]) return [Math.hypot(p.x - r[0], p.y - r[1]), r[0], r[1]];
    if (kind === "vline") {
      y0 = Math.min(r[1], r[2]); y1 = Math.max(r[1], r[2]);
      if (p.y < y0 || p.y > y1) return null;
      return [Math.abs(p.x - r[0]), r[0], p.y];
    }
    if (kind === "hline") {
      x0 = Math.min(r[1], r[2]); x1 = Math.max(r[1], r[2]);
      if (p.x < x0 || p.x > x1) return null;
      return [Math.abs(p.y - r[0]), p.x, r[0]];
    }
    if (kind === "area") {
      y0 = Math.min(r[1], r[2]); y1 = Math.max(r[1], r[2]);
      dy = p.y < y0 ? y0 - p.y : (p.y > y1 ? p.y - y1 : 0);
      return [Math.hypot(p.x - r[0], dy), r[0], Math.max(y0, Math.min(y1, p.y))];
    }
    x0 = Math.min(r[0], r[2]); x1 = Math.max(r[0], r[2]);
    y0 = Math.min(r[1], r[3]); y1 = Math.max(r[1], r[3]);
    if (kind === "band") { y0 = -1e9; y1 = 1e9; }
    dx = p.x < x0 ? x0 - p.x : (p.x > x1 ? p.x - x1 : 0);
    dy = p.y < y0 ? y0 - p.y : (p.y > y1 ? p.y - y1 : 0);
    return [Math.hypot(dx, dy), (x0 + x1) / 2,
            kind === "barh" || kind === "cells" ? (y0 + y1) / 2 : y0];
  }
  function setup(fig) {
    var plot = fig.querySelector(".plot");
    var svg = plot && plot.querySelector("svg");
    var node = document.getElementById(fig.id + "__data");
    if (!svg || !node) return;
    var data;
    try { data = JSON.parse(node.textContent); } catch (e) { return; }
    var tip = plot.querySelector(".tip");
    var hidden = {};
    var dot = document.createElementNS(NS, "circle");
    dot.setAttribute("r", "4");
    dot.setAttribute("class", "kv-dot");
    dot.style.display = "none";
    svg.appendChild(dot);
    function nearest(p, radius) {
      var best = null, soft = null;
      data.series.forEach(function (s, si) {
        if (hidden[si]) return;
        s.rows.forEach(function (r) {
          var m = measure(s.kind, r, p);
          if (!m) return;
          if (SOFT[s.kind]) {
            if (m[0] <= radius && (!soft || m[0] < soft.d)) {
              soft = {d: m[0], x: m[1], y: m[2], s: s, r: r};
            }
          } else if (m[0] <= radius && (!best || m[0] < best.d)) {
            best = {d: m[0], x: m[1], y: m[2], s: s, r: r};
          }
        });
      });
      return best || soft;
    }
    function hide() {
      tip.hidden = true;
      dot.style.display = "none";
    }
    function show(e) {
      var ctm = svg.getScreenCTM();
      if (!ctm) return;
      var pt = svg.createSVGPoint();
      pt.x = e.clientX; pt.y = e.clientY;
      var p = pt.matrixTransform(ctm.inverse());
      var hit = nearest(p, 14 / (ctm.a || 1));
      if (!hit) { hide(); return; }
      var s = hit.s, skip = SPAN[s.kind] || 2, html = "<b>" + esc(s.name) + "</b>";
      s.cols.forEach(function (c, i) {
        var col = data.columns[c];
        var v = hit.r[skip + i];
        html += "<span>" + esc(col[0]) + (col[1] ? " (" + esc(col[1]) + ")" : "") + ": " +
                esc(fmt(v)) + "</span><br>";
      });
      tip.innerHTML = html;
      tip.hidden = false;
      dot.setAttribute("cx", hit.x);
      dot.setAttribute("cy", hit.y);
      dot.style.display = "";
      var box = plot.getBoundingClientRect();
      var at = svg.createSVGPoint();
      at.x = hit.x; at.y = hit.y;
      var c = at.matrixTransform(ctm);
      var x = c.x - box.left, y = c.y - box.top;
      var w = tip.offsetWidth, h = tip.offsetHeight;
      var left = x + 14 + w > box.width ? x - 14 - w : x + 14;
      var top = y + 14 + h > box.height ? y - 14 - h : y + 14;
      tip.style.left = Math.max(0, Math.min(left, box.width - w)) + "px";
      tip.style.top = Math.max(0, top) + "px";
    }
    svg.addEventListener("pointermove", show);
    svg.addEventListener("pointerdown", show);
    svg.addEventListener("pointerleave", hide);
    data.legend.forEach(function (entry) {
      var els = entry.els.map(function (id) { return document.getElementById(id); })
                         .filter(Boolean);
      if (!els.length || !entry.series.length) return;
      var off = false;
      function toggle() {
        off = !off;
        entry.series.forEach(function (si) {
          hidden[si] = off;
          data.series[si].els.forEach(function (id) {
            var el = document.getElementById(id);
            if (el) el.style.display = off ? "none" : "";
          });
        });
        els.forEach(function (el, i) {
          el.classList.toggle("kv-off", off);
          if (!i) el.setAttribute("aria-pressed", off ? "false" : "true");
        });
        hide();
      }
      els.forEach(function (el, i) {
        el.classList.add("kv-legend");
        el.addEventListener("click", toggle);
        if (i) return;  /* the entry's text: a button for the keyboard and screen readers */
        el.setAttribute("role", "button");
        el.setAttribute("tabindex", "0");
        el.setAttribute("aria-pressed", "true");
        el.setAttribute("aria-label", "show or hide " + entry.label);
        el.addEventListener("keydown", function (e) {
          if (e.key === "Enter" || e.key === " ") { e.preventDefault(); toggle(); }
        });
      });
    });
  }
  document.querySelectorAll("figure.chart").forEach(setup);
})();
"""
