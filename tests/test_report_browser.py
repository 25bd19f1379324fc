"""report.html in a real browser (Chromium driven by Playwright, the 'browser' extra), at a
desktop (1280 x 800) and a phone (390 x 844) size: no console errors, every image and figure
drawn, no horizontal page scroll, every contents link lands on its section, pointing at a
figure shows a value, and a legend entry hides and shows its series.

Skipped, with the reason, where Playwright or a Chromium cannot be had (Playwright's own
browser download is not needed: Debian's ``chromium`` package, ``apt-get install chromium``,
is found on PATH, or set ``KVROOF_CHROMIUM`` to a browser's path). With ``KVROOF_SCREENSHOTS``
set to a folder, the tests leave screenshots of the page there."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kvroof.report import ReportResult
from tests.test_report_html import built_report  # noqa: F401  (the session's one report)

sync_api = pytest.importorskip(
    "playwright.sync_api",
    reason="Playwright is not installed: pip install 'kvroof[browser]' to run the browser "
           "tests")

SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}


CHROMIUM = os.environ.get("KVROOF_CHROMIUM") or next(
    (found for name in ("chromium", "chromium-browser", "google-chrome")
     if (found := shutil.which(name))), None)
pytestmark = pytest.mark.skipif(
    not CHROMIUM, reason="no Chromium to drive: apt-get install chromium (or set "
                         "KVROOF_CHROMIUM to a browser)")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = CHROMIUM
    with sync_api.sync_playwright() as playwright:
        try:
            launched = playwright.chromium.launch(executable_path=path)
        except sync_api.Error as error:
            pytest.skip(f"Chromium at {path} does not start: {str(error).splitlines()[0]}")
        yield launched
        launched.close()


class Loaded:
    """A page of the report at one size, with what it logged."""

    def __init__(self, page: Any, messages: list[str]) -> None:
        self.page = page
        self.messages = messages


@pytest.fixture(params=sorted(SIZES))
def loaded(request: pytest.FixtureRequest, browser: Any,
           built_report: ReportResult) -> Iterator[Loaded]:  # noqa: F811
    size = request.param
    context = browser.new_context(viewport=SIZES[size], is_mobile=size == "phone",
                                  has_touch=size == "phone",
                                  device_scale_factor=2 if size == "phone" else 1)
    page = context.new_page()
    messages: list[str] = []
    page.on("console", lambda m: messages.append(f"{m.type}: {m.text}")
            if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: messages.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: messages.append(f"request failed: {r.url}"))
    page.goto(built_report.html.as_uri())
    page.wait_for_load_state("load")
    page.size = size
    yield Loaded(page, messages)
    context.close()


def _screenshot(page: Any, name: str, element: str | None = None) -> None:
    folder = os.environ.get("KVROOF_SCREENSHOTS")
    if not folder:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    target = Path(folder) / f"{page.size}-{name}.png"
    if element:
        page.locator(element).screenshot(path=str(target))
    else:
        page.screenshot(path=str(target))


def test_loads_clean_and_draws_every_image_and_figure(loaded: Loaded) -> None:
    page = loaded.page
    sizes = page.evaluate("""() => Array.from(document.querySelectorAll(
        'img, figure.chart svg, table')).map(e => {
          const r = e.getBoundingClientRect();
          return [e.tagName, e.closest('[id]') ? e.closest('[id]').id : '', r.width, r.height];
        })""")
    assert sum(tag == "svg" for tag, *_ in sizes) >= 10
    for tag, where, width, height in sizes:
        assert width > 50 and height > 20, (tag, where, width, height)
    complete = page.evaluate("Array.from(document.images).every(i => i.complete && "
                             "i.naturalWidth > 0)")
    assert complete
    _screenshot(page, "top")
    assert loaded.messages == []


def test_no_horizontal_page_scroll(loaded: Loaded) -> None:
    scroll, width = loaded.page.evaluate(
        "[document.scrollingElement.scrollWidth, window.innerWidth]")
    assert scroll <= width
    # wide tables scroll inside their own box instead
    boxes = loaded.page.evaluate("""() => Array.from(document.querySelectorAll('.scroll'))
        .map(b => [b.scrollWidth > b.clientWidth, getComputedStyle(b).overflowX])""")
    assert all(overflow == "auto" for _, overflow in boxes)
    if loaded.page.size == "phone":
        assert any(wide for wide, _ in boxes)
        _screenshot(loaded.page, "wide-table", "#what_if")


def test_every_contents_link_lands_on_its_section(loaded: Loaded) -> None:
    page = loaded.page
    targets = page.evaluate("Array.from(document.querySelectorAll('nav.contents a'))"
                            ".map(a => a.getAttribute('href'))")
    assert len(targets) > 20
    for target in targets:
        page.evaluate("window.scrollTo(0, 0)")
        page.locator(f'nav.contents a[href="{target}"]').click()
        landed = page.evaluate("""(id) => {
            const el = document.getElementById(id);
            if (!el) return null;
            const r = el.getBoundingClientRect();
            return [location.hash, r.top, r.bottom, window.innerHeight];
          }""", target[1:])
        assert landed is not None, f"{target}: no such element"
        hash_, top, bottom, height = landed
        assert hash_ == target
        # the section's start is in view (at the top, or as far as the page can scroll)
        assert -2 <= top < height and bottom > 0, (target, top, bottom, height)
    assert loaded.messages == []


_POINTS = """(key) => {
    const data = JSON.parse(document.getElementById('fig-' + key + '__data').textContent);
    const svg = document.querySelector('#fig-' + key + ' svg');
    const matrix = svg.getScreenCTM();
    const out = [];
    data.series.forEach((s) => {
      if (!['line', 'step', 'points', 'bar', 'barh', 'cells'].includes(s.kind)) return;
      if (!s.rows.length || out.length >= 3) return;
      const r = s.rows[Math.floor(s.rows.length / 2)];
      const p = svg.createSVGPoint();
      const point = ['line', 'step', 'points'].includes(s.kind);
      p.x = point ? r[0] : (r[0] + r[2]) / 2;
      p.y = point ? r[1] : (r[1] + r[3]) / 2;
      const c = p.matrixTransform(matrix);
      const values = r.slice(point ? 2 : 4);
      out.push({name: s.name, x: c.x, y: c.y, values: values});
    });
    return {points: out, names: data.series.map((s) => s.name)};
  }"""


def test_pointing_at_a_figure_shows_its_values(loaded: Loaded,
                                               built_report: ReportResult) -> None:  # noqa: F811
    page = loaded.page
    keys = [f.key for f in built_report.figures]
    if page.size == "phone":
        keys = keys[:3]
    for key in keys:
        page.locator(f"#fig-{key}").scroll_into_view_if_needed()
        found = page.evaluate(_POINTS, key)
        assert found["points"], key
        for point in found["points"]:
            page.mouse.move(point["x"], point["y"])
            tip = page.locator(f"#fig-{key} .tip")
            assert tip.is_visible(), (key, point["name"])
            lines = tip.inner_text().splitlines()
            # a series of this figure, then its values (the point's own when it is the nearest)
            assert lines[0] in found["names"], (key, lines)
            assert len(lines) >= 2 and all(": " in line for line in lines[1:]), lines
            if lines[0] == point["name"]:
                shown = " ".join(lines[1:])
                assert any(str(v) in shown if isinstance(v, str) else
                           _number_in(shown, v) for v in point["values"]), (lines, point)
        if key == keys[0]:
            _screenshot(page, f"hover-{key}", f"#fig-{key}")
        page.mouse.move(0, 0)
        assert not page.locator(f"#fig-{key} .tip").is_visible()
    assert loaded.messages == []


def _number_in(text: str, value: float) -> bool:
    import re

    for match in re.findall(r"-?[\d,]*\.?\d+(?:e[-+]?\d+)?", text):
        try:
            shown = float(match.replace(",", ""))
        except ValueError:
            continue
        if shown == value or (value and abs(shown - value) <= 5e-4 * abs(value) + 1e-12):
            return True
    return False


def test_a_legend_entry_hides_and_shows_its_series(loaded: Loaded) -> None:
    page = loaded.page
    key = "kappa-vs-t"
    page.locator(f"#fig-{key}").scroll_into_view_if_needed()
    entry = page.evaluate("""(key) => {
        const data = JSON.parse(document.getElementById('fig-' + key + '__data').textContent);
        const e = data.legend.find((e) => e.series.length);
        return {text: e.els[0], series: e.series.flatMap((i) => data.series[i].els)};
      }""", key)
    shown = f"""() => {entry['series']}.map((id) =>
        getComputedStyle(document.getElementById(id)).display !== 'none')"""
    assert all(page.evaluate(shown))
    page.locator(f"[id='{entry['text']}']").click()
    assert not any(page.evaluate(shown))
    assert page.get_attribute(f"[id='{entry['text']}']", "aria-pressed") == "false"
    _screenshot(page, f"legend-off-{key}", f"#fig-{key}")
    page.locator(f"[id='{entry['text']}']").focus()
    page.keyboard.press("Enter")  # the keyboard toggles it back
    assert all(page.evaluate(shown))
    assert loaded.messages == []
