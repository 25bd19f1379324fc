"""One replica driven by hand: requests with chosen block ids, arrivals and the steps in between,
as :func:`kvroof.simulate.runner.simulate` interleaves them (an arrival at or before the replica's
next event is accepted first)."""

from __future__ import annotations

from collections.abc import Callable

from kvroof.cost.deployment import Deployment
from kvroof.simulate.engine import Engine
from kvroof.simulate.metrics import IterationLog
from kvroof.simulate.request import Request
from kvroof.simulate.resources import replica_resources
from kvroof.simulate.settings import SimSettings

from .helpers import REG


def request(index: int, arrival: float, ids: list[int], ends: list[int], output: int,
            preload: int = 0) -> Request:
    """A request of ``ends[-1]`` input tokens in blocks ``ids`` ending at ``ends``."""
    return Request(index, arrival, ends[-1], output, list(ids), list(ends), preload=preload)


def blocks(first: int, count: int, size: int = 16) -> tuple[list[int], list[int]]:
    """``count`` block ids from ``first`` on, each ``size`` tokens."""
    return list(range(first, first + count)), [size * (i + 1) for i in range(count)]


def make_engine(dep: Deployment, settings: SimSettings,
                engine_class: type[Engine] = Engine) -> tuple[Engine, list[Request]]:
    """A replica of ``dep`` and the list its finished requests are appended to."""
    done: list[Request] = []
    res = replica_resources(dep, settings, REG)
    engine = engine_class(0, res, settings, IterationLog(),
                          lambda r, _t: done.append(r), check=True)
    return engine, done


def drive(engine: Engine, requests: list[Request],
          after_step: Callable[[Engine], None] | None = None, max_events: int = 100_000) -> None:
    """Accept ``requests`` at their arrival times and step until every one has finished;
    ``after_step`` is called after each step."""
    arrivals = sorted(requests, key=lambda r: r.arrival)
    events = 0
    while arrivals or engine.outstanding:
        events += 1
        assert events < max_events, "the replica did not finish"
        if arrivals and arrivals[0].arrival <= engine.next_time:
            nxt = arrivals.pop(0)
            engine.accept(nxt, nxt.arrival)
            continue
        engine.advance()
        if after_step is not None:
            after_step(engine)
