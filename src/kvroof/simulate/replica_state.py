"""What one replica holds while it serves: its queues, KV space, cache tiers, host link (per
direction), power model, clock and counters.

:class:`ReplicaState` only sets them up; the replica's behaviour is layered on it by
:mod:`kvroof.simulate.iteration` (running one iteration and applying its effects),
:mod:`kvroof.simulate.fast_forward` (runs of decode iterations in closed form),
:mod:`kvroof.simulate.admission` (admitting one waiting request) and
:mod:`kvroof.simulate.engine` (the step, arrivals and preemption), which combines them into
:class:`kvroof.simulate.engine.Engine`.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

from kvroof.simulate.decode_run import DecodeRun
from kvroof.simulate.link import Link
from kvroof.simulate.memory import HbmPool
from kvroof.simulate.metrics import IterationLog
from kvroof.simulate.offload_store import save_model
from kvroof.simulate.power import PowerModel
from kvroof.simulate.request import Request
from kvroof.simulate.resources import ReplicaResources
from kvroof.simulate.scheduler import LIMITS
from kvroof.simulate.settings import SimSettings
from kvroof.simulate.tiers import LruTier

__all__ = ["Finish", "ReplicaState"]

Finish = Callable[[Request, float], None]
"""Called with a request and the time it finished."""


class ReplicaState:
    """One replica's queues, KV space, caches and link (the state an :class:`Engine
    <kvroof.simulate.engine.Engine>` steps)."""

    def __init__(self, index: int, res: ReplicaResources, settings: SimSettings,
                 log: IterationLog, on_finish: Finish, check: bool = False) -> None:
        self.index = index
        self.res = res
        self.settings = settings
        self.log = log
        self.on_finish = on_finish
        self.check = check
        self.m = res.model
        self.groups = res.kv_groups  # a hybrid model's KV cache groups (kvroof.simulate.kv_groups)
        self.pool = HbmPool(res.hbm_tokens, settings.prefix_caching,
                            self.groups.full if self.groups is not None else 1)
        self.tier = LruTier(res.tier_tokens) if res.tier_model is not None else None
        self.host = LruTier(res.dram_tokens, self.tier)
        self.external = settings.cache_policy != "recompute"
        # what goes to host DRAM: docs/simulate.md, "Offloading"
        profile = res.dep.engine.offload_store if res.dep.engine is not None else "as-computed"
        store = settings.offload_store or profile
        self.store = self.external and res.dram_tokens > 0 and store != "none"
        self.saver = save_model(res) if self.store else res.model  # prices the stores
        self.h2d = Link()
        self.d2h = Link()
        self.power = PowerModel(res.idle_power, res.tdp, settings.power_cap)
        self.skip = settings.scheduler == "utilization-aware"
        self.caps = self.m.caps  # decode rules not linear in the context (windows, chunks)
        self.kernel_steps = res.kernel_steps  # kernel mode's step times (None: the roofline)
        self.step_overhead = res.step_overhead  # engine seconds added to every iteration
        self.frontend = res.frontend  # (per request, per prompt token) client-side seconds
        self.now = 0.0
        self.next_time = math.inf
        self.pending: DecodeRun | None = None
        self.waiting: deque[Request] = deque()
        self.running: dict[int, Request] = {}
        self.prefilling: list[Request] = []
        self.decodes = 0
        self.decode_base = 0  # sum of (context at join - join step) over decoding requests
        self.step_no = 0
        self.finishes: list[tuple[int, int, Request]] = []
        self.loads: list[tuple[float, int, Request]] = []  # (done, seq, request); stale
        # entries (the request landed, or loads again: another load_done) are skipped
        self.saves: list[tuple[float, int, list[int], list[int]]] = []
        self.storing: set[int] = set()  # blocks on their way to host DRAM (in self.saves)
        self.in_flight: dict[int, int] = {}  # block -> async loads bringing it into HBM
        self.seq = 0
        self.outstanding = 0
        self.preemptions = 0
        self.dynamic_joules = 0.0
        self.peak_power = 0.0  # per GPU, of the most power-hungry iteration
        self.held_until = -math.inf
        self.limits = [0] * len(LIMITS)  # iterations by what limited their batch
        # the iteration being scheduled
        self._chunks: list[tuple[Request, int, int, bool]] = []
        self._load_end = 0.0
        self._tried: list[tuple[Request, int]] = []  # (request, its HBM blocks) not admitted
