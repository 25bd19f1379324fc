"""``kvroof simulate`` and ``kvroof sweep``: the serving simulation from the command line.

This module registers both commands and holds ``simulate``'s flags; the rest is in modules of
one concept each: :mod:`kvroof.cli.simulate_settings` (flags read into settings, variants and
deployments), :mod:`kvroof.cli.simulate_run` (the handler), :mod:`kvroof.cli.simulate_print`
(what it prints) and :mod:`kvroof.cli.simulate_sweep` (``kvroof sweep``). Handlers parse flags
and print; the simulation is :func:`kvroof.simulate.simulate`, imported when a command runs so
that other commands stay fast."""

from __future__ import annotations

import argparse
from typing import Any

from kvroof.cli.commands import command_help
from kvroof.cli.deployment_flags import add_deployment_flags
from kvroof.cli.simulate_run import run_simulate
from kvroof.cli.simulate_sweep import register_sweep, run_sweep_command

__all__ = ["register", "run_simulate", "run_sweep_command"]

# Kept here (not imported) so that building the parser imports nothing heavy; a test checks
# they match kvroof.simulate.settings.
SCHEDULERS = ("fifo", "utilization-aware")
CACHE_POLICIES = ("load", "recompute", "split")
LOAD_MODES = ("sync", "async", "layerwise")
ROUTERS = ("round-robin", "least-loaded", "prefix-affinity", "kappa", "scoring")
OFFLOAD_STORES = ("as-computed", "none")
_FORMATS = ("sharegpt", "docqa", "mooncake", "table")


def register(commands: Any) -> None:
    """Add ``kvroof simulate`` and ``kvroof sweep`` to the subcommands ``commands``."""
    sim = commands.add_parser(
        "simulate", help=command_help("simulate"),
        description="Serve a trace on simulated vLLM-style replicas timed by the cost model; "
                    "prints TTFT/TPOT/latency percentiles, throughput, tokens per iteration, "
                    "cache hit rates, link use and power. See docs/simulate.md.")
    sim.add_argument("trace", nargs="?", default=None,
                     help="a trace (Mooncake JSONL, ShareGPT, document QA, table); default: "
                          "the first five minutes of Mooncake's conversation trace, shipped "
                          "with kvroof")
    sim.add_argument("--format", choices=_FORMATS, help="the trace's format (guessed if not "
                                                        "given)")
    sim.add_argument("--skip-bad", action="store_true",
                     help="skip bad lines and requests no replica could serve (longer than the "
                          "context, KV larger than a replica's HBM), and count them")
    sim.add_argument("--requests", type=int, metavar="N", help="only the first N requests")
    arrivals = sim.add_argument_group("arrivals (default: the trace's own timestamps)")
    arrivals.add_argument("--rps", type=float, metavar="R",
                          help="open loop at R requests/s (Poisson unless --arrival gamma)")
    arrivals.add_argument("--arrival", choices=("poisson", "gamma"), default=None,
                          help="arrival process with --rps (default poisson)")
    arrivals.add_argument("--burstiness", type=float, default=None, metavar="CV",
                          help="gamma arrivals: coefficient of variation of the gaps (1 = "
                               "Poisson, more is burstier)")
    arrivals.add_argument("--time-scale", type=float, metavar="F",
                          help="replay the trace's timestamps F times faster")
    arrivals.add_argument("--users", type=int, metavar="N",
                          help="closed loop: N users, each sending its next request when the "
                               "previous one finishes")
    arrivals.add_argument("--think-time", default=None, metavar="TIME",
                          help="closed loop: pause between a user's requests (default 0 s)")
    arrivals.add_argument("--stages", metavar="RATExSECONDS,...",
                          help="a staged run as inference-perf runs one, e.g. 5x60,10x60: 5 "
                               "requests/s for 60 s, then 10 requests/s for 60 s "
                               "(int(rate x duration) requests each, the trace's in order); "
                               "each stage starts when the one before has finished")
    arrivals.add_argument("--stage-arrival", choices=("poisson", "constant"), default=None,
                          help="arrivals within a stage: inference-perf's poisson or constant "
                               "timer (default poisson)")
    arrivals.add_argument("--stage-interval", default=None, metavar="TIME",
                          help="pause between stages (default 0 s; inference-perf waits its "
                               "interval, 1 s by default, plus a 1 s lead)")
    arrivals.add_argument("--drain", action=argparse.BooleanOptionalAction, default=None,
                          help="--no-drain: start each stage after its duration whether or not "
                               "the one before has finished (default: drain, as inference-perf)")
    arrivals.add_argument("--output-tokens", metavar="SPEC",
                          help="output lengths instead of the trace's: N, exp:MEAN or "
                               "uniform:LO:HI")
    arrivals.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    fleet = sim.add_argument_group("replicas")
    fleet.add_argument("--replicas", type=int, default=1, metavar="N",
                       help="N replicas of the deployment the flags describe (default 1)")
    fleet.add_argument("--replica", action="append", default=[], metavar="SYSTEM:TP",
                       help="a replica of another system, e.g. gh200:1 (repeatable; added to "
                            "the --replicas of the main deployment)")
    _add_engine_flags(sim)
    out = sim.add_argument_group("output")
    out.add_argument("--compare", action="append", default=[], metavar="KEY=VALUE[,...]",
                     help="also run these settings on the same arrivals and print them side "
                          "by side, e.g. scheduler=utilization-aware or "
                          "cache-policy=recompute,load-mode=sync, or "
                          "router=scoring,router-weights=prefix=3/no-hit-lru=2 (repeatable)")
    out.add_argument("--json", action="store_true", help="print JSON")
    out.add_argument("-o", "--output", metavar="DIR",
                     help="write requests.csv, iterations.csv, summary.json and figures here "
                          "(built apart and moved in when complete)")
    out.add_argument("--force", action="store_true",
                     help="write into a non-empty folder kvroof did not make")
    out.add_argument("--quiet", action="store_true", help="no progress bar")
    add_deployment_flags(sim)
    sim.set_defaults(handler=run_simulate)

    register_sweep(commands)


def _add_engine_flags(parser: argparse.ArgumentParser) -> None:
    engine = parser.add_argument_group("engine and policies")
    engine.add_argument("--scheduler", choices=SCHEDULERS, default="fifo",
                        help="fifo (vLLM) or utilization-aware (default fifo)")
    engine.add_argument("--cache-policy", choices=CACHE_POLICIES, default="load",
                        help="load cached prefixes from host tiers, recompute them (no host "
                             "tier), or split the two (default load)")
    engine.add_argument("--load-mode", choices=LOAD_MODES, default="async",
                        help="sync (the batch waits), async (the request waits) or layerwise "
                             "(overlapped with its prefill) (default async)")
    engine.add_argument("--router", choices=ROUTERS, default="round-robin",
                        help="how requests are spread over replicas (default round-robin; "
                             "scoring: llm-d's endpoint picker)")
    engine.add_argument("--router-weights", metavar="KEY=W,...",
                        help="the scoring router's weights: queue, kv-utilization, prefix, "
                             "host-prefix, no-hit-lru (default llm-d's tiered-prefix-cache "
                             "profile: queue=2,kv-utilization=2,prefix=1,host-prefix=1,"
                             "no-hit-lru=0; keys not given keep theirs)")
    engine.add_argument("--max-num-batched-tokens", type=int, metavar="N",
                        help="token budget per iteration (default: vLLM's for the GPU: 8192 "
                             "from 70 GiB, else 2048)")
    engine.add_argument("--max-num-seqs", type=int, metavar="N",
                        help="running sequences at most (default: vLLM's: 1024 or 256)")
    engine.add_argument("--no-prefix-caching", action="store_true",
                        help="keep no prompt blocks in HBM after their request")
    engine.add_argument("--dram-cache", metavar="BYTES",
                        help='host DRAM for cached KV per replica, e.g. "500 GB" (default: '
                             "the replica's share of the system's host memory)")
    engine.add_argument("--offload-store", choices=OFFLOAD_STORES,
                        help="what goes to host DRAM: every computed block as it is computed "
                             "(as-computed, vLLM's offloading connector) or nothing (none); "
                             "default: the engine profile's")
    engine.add_argument("--cache-tier", metavar="NAME",
                        help="a system tier below DRAM (e.g. local-nvme on dgx-h100)")
    engine.add_argument("--cache-tier-size", metavar="BYTES",
                        help="bytes of that tier per replica (default: its share of the tier)")
    engine.add_argument("--kv-tokens", type=int, metavar="N",
                        help="KV space per GPU in tokens instead of what HBM leaves")
    engine.add_argument("--activation-reserve", metavar="BYTES",
                        help="HBM per GPU kept for activations beyond the memory-utilization "
                             "margin (default 0)")
    engine.add_argument("--aging-limit", type=int, default=None, metavar="N",
                        help="utilization-aware: times a waiting request may be passed "
                             "(default 16)")
    engine.add_argument("--admission-backlog", default="1 s", metavar="TIME",
                        help="utilization-aware: hold link-heavy requests while more than this "
                             "is queued on the host link (default 1 s)")
    engine.add_argument("--power-cap", metavar="WATTS", help='per-GPU power cap, e.g. "400 W"')
    engine.add_argument("--slo-ttft", metavar="TIME", help='TTFT objective for goodput, "2 s"')
    engine.add_argument("--slo-tpot", metavar="TIME",
                        help='TPOT objective for goodput, e.g. "100 ms"')
    engine.add_argument("--no-fast-forward", action="store_true",
                        help="step every decode iteration (slower; the results are the same)")
    engine.add_argument("--no-engine-overhead", action="store_true",
                        help="leave out the engine profile's step and request costs (GPU time "
                             "only)")
