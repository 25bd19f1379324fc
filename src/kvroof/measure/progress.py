"""A plain progress bar on stderr with the elapsed time and an estimate of the time left.

Work is counted in *weights* the benchmark chooses (bytes to copy, FLOPs to run, or a rough
time estimate), so that a grid whose last points are the largest still gets a fair estimate:
time left = elapsed x (weight left / weight done), shown once 2% of the work is done (earlier
estimates swing wildly). On a terminal the bar redraws in place; into
a file or pipe it prints one line per tenth of the work. ``quiet=True`` prints nothing.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]

_WIDTH = 24
_MIN_FRACTION = 0.02


def _clock(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


class Progress:
    """One benchmark's progress: :meth:`advance` after each piece of work, then :meth:`done`."""

    def __init__(
        self,
        label: str,
        total_weight: float,
        *,
        quiet: bool = False,
        stream: TextIO | None = None,
    ) -> None:
        self.label = label
        self.total = max(float(total_weight), 1e-300)
        self.quiet = quiet
        self.stream = stream if stream is not None else sys.stderr
        self.done_weight = 0.0
        self.start = time.perf_counter()
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last_draw = 0.0
        self._last_tenth = -1

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def time_left(self) -> float | None:
        """Seconds left by the weights done so far (``None`` before 2% of the work is done)."""
        fraction = min(1.0, self.done_weight / self.total)
        if fraction < _MIN_FRACTION:
            return None
        return self.elapsed() * (1.0 - fraction) / fraction

    def line(self, note: str = "") -> str:
        fraction = min(1.0, self.done_weight / self.total)
        filled = round(fraction * _WIDTH)
        bar = "#" * filled + "-" * (_WIDTH - filled)
        left = self.time_left()
        eta = "left ?" if left is None else f"~{_clock(left)} left"
        text = f"{self.label} [{bar}] {fraction:4.0%}  {_clock(self.elapsed())} elapsed, {eta}"
        return f"{text}  {note}" if note else text

    def advance(self, weight: float, note: str = "") -> None:
        self.done_weight += max(0.0, float(weight))
        if self.quiet:
            return
        if self._tty:
            now = time.perf_counter()
            if now - self._last_draw >= 0.1:
                self._last_draw = now
                self.stream.write("\r\x1b[K" + self.line(note))
                self.stream.flush()
            return
        tenth = int(10 * min(1.0, self.done_weight / self.total))
        if tenth > self._last_tenth:
            self._last_tenth = tenth
            self.stream.write(self.line(note) + "\n")
            self.stream.flush()

    def done(self, note: str = "") -> None:
        """Finish the bar (one final line with the total time)."""
        self.done_weight = self.total
        if self.quiet:
            return
        text = f"{self.label} done in {_clock(self.elapsed())}" + (f"  {note}" if note else "")
        self.stream.write(("\r\x1b[K" if self._tty else "") + text + "\n")
        self.stream.flush()
