"""``kvroof simulate`` and ``kvroof sweep``: the serving simulation from the command line.
Handlers parse flags and print; the simulation is :func:`kvroof.simulate.simulate`, imported
when a command runs so that other commands stay fast."""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvroof.cli.commands import command_help
from kvroof.cli.common import print_json, print_table, registry_from_args
from kvroof.cli.deployment_flags import (
    add_deployment_flags,
    deployment_from_args,
    flag_error,
    quantity_flag,
)
from kvroof.errors import KvroofError
from kvroof.units import Kind, format_quantity

if TYPE_CHECKING:
    from kvroof.simulate.metrics import SimResult
    from kvroof.simulate.settings import SimSettings

__all__ = ["register"]

# Kept here (not imported) so that building the parser imports nothing heavy; a test checks
# they match kvroof.simulate.settings.
SCHEDULERS = ("fifo", "utilization-aware")
CACHE_POLICIES = ("load", "recompute", "split")
LOAD_MODES = ("sync", "async", "layerwise")
ROUTERS = ("round-robin", "least-loaded", "prefix-affinity", "kappa")
_FORMATS = ("sharegpt", "docqa", "mooncake", "table")

_FLAGS = {  # SimSettings field -> flag
    "max_num_batched_tokens": "--max-num-batched-tokens", "max_num_seqs": "--max-num-seqs",
    "scheduler": "--scheduler", "cache_policy": "--cache-policy", "load_mode": "--load-mode",
    "router": "--router", "dram_cache": "--dram-cache", "tier": "--cache-tier",
    "tier_cache": "--cache-tier-size", "activation_reserve": "--activation-reserve",
    "kv_tokens": "--kv-tokens", "aging_limit": "--aging-limit",
    "admission_backlog": "--admission-backlog", "power_cap": "--power-cap",
    "slo_ttft": "--slo-ttft", "slo_tpot": "--slo-tpot", "rps": "--rps",
    "time_scale": "--time-scale", "users": "--users", "think_time": "--think-time",
    "seed": "--seed", "burstiness (cv)": "--burstiness", "output lengths": "--output-tokens",
    "replicas": "--replicas",
}
_UNITS = {"dram_cache": Kind.CAPACITY, "tier_cache": Kind.CAPACITY,
          "activation_reserve": Kind.CAPACITY, "power_cap": Kind.POWER,
          "slo_ttft": Kind.TIME, "slo_tpot": Kind.TIME, "admission_backlog": Kind.TIME}


def _named(error: KvroofError) -> KvroofError:
    """The error with a settings name replaced by its flag."""
    message = str(error)
    for name, flag in sorted(_FLAGS.items(), key=lambda item: -len(item[0])):
        if message.startswith(name + ":"):
            rest = message[len(name):]
            for other in ("max_num_batched_tokens", "max_num_seqs"):  # named in the text too
                rest = rest.replace(f"the {other} ", f"{_FLAGS[other]} ")
            return KvroofError(flag + rest)
    return flag_error(error)


def register(commands: Any) -> None:
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
                          "cache-policy=recompute,load-mode=sync (repeatable)")
    out.add_argument("--json", action="store_true", help="print JSON")
    out.add_argument("-o", "--output", metavar="DIR",
                     help="write requests.csv, iterations.csv, summary.json and figures here "
                          "(built apart and moved in when complete)")
    out.add_argument("--force", action="store_true",
                     help="write into a non-empty folder kvroof did not make")
    out.add_argument("--quiet", action="store_true", help="no progress bar")
    add_deployment_flags(sim)
    sim.set_defaults(handler=run_simulate)

    sweep = commands.add_parser(
        "sweep", help=command_help("sweep"),
        description="One CSV row per simulation; see docs/simulate.md for the config.")
    sweep.add_argument("config", help="sweep config (YAML)")
    sweep.add_argument("--jobs", type=int, default=1, metavar="N",
                       help="local worker processes (default 1)")
    sweep.add_argument("--dask", metavar="ADDRESS",
                       help="run on an existing Dask cluster (scheduler address, e.g. "
                            "tcp://host:8786; needs kvroof[distributed])")
    sweep.add_argument("-o", "--output", metavar="DIR",
                       help="write sweep.csv (and latency-vs-rps.png) here")
    sweep.add_argument("--force", action="store_true",
                       help="write into a non-empty folder kvroof did not make")
    sweep.add_argument("--json", action="store_true", help="print the rows as JSON")
    sweep.add_argument("--quiet", action="store_true", help="no progress bar")
    sweep.set_defaults(handler=run_sweep_command)


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
                        help="how requests are spread over replicas (default round-robin)")
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


def _settings(args: argparse.Namespace) -> SimSettings:
    from kvroof.simulate.settings import SimSettings

    def size(flag: str, text: str | None) -> float | None:
        return quantity_flag(flag, text, Kind.CAPACITY)

    try:
        return SimSettings(
            max_num_batched_tokens=args.max_num_batched_tokens, max_num_seqs=args.max_num_seqs,
            scheduler=args.scheduler, cache_policy=args.cache_policy, load_mode=args.load_mode,
            router=args.router, prefix_caching=not args.no_prefix_caching,
            dram_cache=size("--dram-cache", args.dram_cache), tier=args.cache_tier,
            tier_cache=size("--cache-tier-size", args.cache_tier_size),
            activation_reserve=size("--activation-reserve", args.activation_reserve) or 0.0,
            kv_tokens=args.kv_tokens,
            **({} if args.aging_limit is None else {"aging_limit": args.aging_limit}),
            admission_backlog=quantity_flag("--admission-backlog", args.admission_backlog,
                                            Kind.TIME) or 0.0,
            power_cap=quantity_flag("--power-cap", args.power_cap, Kind.POWER),
            slo_ttft=quantity_flag("--slo-ttft", args.slo_ttft, Kind.TIME),
            slo_tpot=quantity_flag("--slo-tpot", args.slo_tpot, Kind.TIME),
            fast_forward=not args.no_fast_forward,
        )
    except KvroofError as error:
        raise _named(error) from None


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _variant(base: SimSettings, text: str) -> SimSettings:
    """``base`` with the ``KEY=VALUE,...`` of one --compare."""
    changes: dict[str, Any] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        name = key.strip().replace("-", "_")
        if not sep or not name:
            raise KvroofError(f"--compare: expected KEY=VALUE[,KEY=VALUE], got {text!r}")
        fields = {f.name: f for f in dataclasses.fields(base)}
        if name not in fields or name in ("label", "fast_forward"):
            allowed = ", ".join(n.replace("_", "-") for n in fields
                                if n not in ("label", "fast_forward"))
            raise KvroofError(f"--compare: unknown setting {key.strip()!r} (one of {allowed})")
        if name in changes:
            raise KvroofError(f"--compare {text}: {key.strip()} given twice (give each "
                              "variant its own --compare)")
        value = value.strip()
        current = getattr(base, name)
        parsed: Any
        if name in _UNITS:
            parsed = quantity_flag(f"--compare {key}", value, _UNITS[name])
        elif name == "prefix_caching":
            if value.lower() not in _TRUE + _FALSE:
                raise KvroofError(f"--compare {key.strip()}: expected one of "
                                  f"{', '.join(_TRUE + _FALSE)}, got {value!r}")
            parsed = value.lower() in _TRUE
        elif name in ("max_num_batched_tokens", "max_num_seqs", "kv_tokens", "aging_limit"):
            try:
                parsed = int(value)
            except ValueError:
                raise KvroofError(f"--compare {key}: expected an integer, got {value!r}") \
                    from None
        else:
            parsed = value if current is None or isinstance(current, str) else type(current)(
                value)
        changes[name] = parsed
    try:
        return dataclasses.replace(base, label=text, **changes)
    except KvroofError as error:
        raise KvroofError(f"--compare {text}: {error}") from None


def _deployments(args: argparse.Namespace) -> list[Any]:
    from kvroof.cost.memory_fit import check_fit
    from kvroof.simulate.settings import MAX_REPLICAS, ReplicaSpec

    if args.model is None:
        raise KvroofError("--model is required")
    if not 0 <= args.replicas <= MAX_REPLICAS:
        raise KvroofError(f"--replicas: expected an integer from 0 to {MAX_REPLICAS:,}, got "
                          f"{args.replicas}")
    deps = []
    if args.replicas:
        main = deployment_from_args(args)
        check_fit(main)
        deps += [main] * args.replicas
    for text in args.replica:
        spec = ReplicaSpec.parse(text)
        other = argparse.Namespace(**{**vars(args), "system": spec.system, "accelerator": None,
                                      "link": None, "tp": spec.tp, "gpus_loading": None})
        try:
            dep = deployment_from_args(other)
            check_fit(dep)
        except KvroofError as error:
            raise KvroofError(f"--replica {text}: {error}") from None
        deps.append(dep)
    if not deps:
        raise KvroofError("--replicas 0 and no --replica: nothing to simulate")
    if len(deps) > MAX_REPLICAS:
        raise KvroofError(f"--replicas and --replica: {len(deps):,} replicas, more than "
                          f"{MAX_REPLICAS:,}")
    return deps


class _Bar:
    """The progress bar, drawn only once a run has taken more than a second."""

    def __init__(self, label: str, quiet: bool) -> None:
        self.label = label
        self.quiet = quiet
        self.start = time.perf_counter()
        self.bar: Any = None

    def __call__(self, fraction: float, simulated: float) -> None:
        if self.quiet or time.perf_counter() - self.start < 1.0:
            return
        if self.bar is None:
            from kvroof.measure.progress import Progress

            self.bar = Progress(self.label, 1.0)
            self.bar.start = self.start
        self.bar.advance(fraction - self.bar.done_weight,
                         f"{format_quantity(simulated, Kind.TIME)} simulated")

    def done(self) -> None:
        if self.bar is not None:
            self.bar.done()


def _check_arrival_flags(args: argparse.Namespace, variants: list[SimSettings]) -> None:
    """A flag that does not apply to the arrivals or scheduler chosen is an error, not
    silently ignored (:func:`kvroof.simulate.runner.check_applies`, named by flag)."""
    from kvroof.simulate.runner import check_applies

    names = ("rps", "arrival", "burstiness", "time_scale", "users", "think_time", "aging_limit")
    given = {name: getattr(args, name) for name in names if getattr(args, name) is not None}
    for variant in variants[1:]:  # a --compare that sets the aging limit
        if variant.aging_limit != variants[0].aging_limit and variant.scheduler == "fifo":
            raise KvroofError(f"--compare {variant.label}: aging-limit applies to the "
                              "utilization-aware scheduler")
    try:
        check_applies(given, [v.scheduler for v in variants])
    except KvroofError as error:
        message = str(error).replace("gamma arrivals", "arrival gamma")
        for name in names:
            message = re.sub(rf"\b{name}\b", "--" + name.replace("_", "-"), message)
        raise KvroofError(message) from None


def run_simulate(args: argparse.Namespace) -> None:
    from kvroof.simulate.runner import prepare_trace, simulate
    from kvroof.workload.requests import MOONCAKE_SLICE, load_requests

    registry = registry_from_args(args)
    settings = _settings(args)
    variants = [settings] + [_variant(settings, text) for text in args.compare]
    deps = _deployments(args)
    if args.output is not None:
        from kvroof.outputs import check_output_folder

        check_output_folder(args.output, force=args.force, flag="-o")
    _check_arrival_flags(args, variants)
    think = quantity_flag("--think-time", args.think_time, Kind.TIME) or 0.0
    path = args.trace or MOONCAKE_SLICE
    trace = load_requests(path, args.format, skip_bad=args.skip_bad)
    if args.requests is not None:
        if args.requests < 1:
            raise KvroofError(f"--requests: expected a positive integer, got {args.requests}")
        import numpy as np

        trace = trace.take(np.arange(min(args.requests, len(trace))))
    try:
        trace = prepare_trace(trace, rps=args.rps, arrival=args.arrival or "poisson",
                              burstiness=1.0 if args.burstiness is None else args.burstiness,
                              time_scale=args.time_scale,
                              output_tokens=args.output_tokens, seed=args.seed,
                              closed_loop=args.users is not None)
    except KvroofError as error:
        raise _named(error) from None
    results: list[SimResult] = []
    for index, variant in enumerate(variants):
        label = "simulating" if len(variants) == 1 else f"simulating {index + 1}/{len(variants)}"
        bar = _Bar(label, args.quiet or args.json)
        try:
            result = simulate(trace, deps, variant, users=args.users, think_time=think,
                              skip_bad=args.skip_bad, registry=registry, progress=bar)
        except KvroofError as error:
            raise _named(error) from None
        bar.done()
        results.append(result)
    if args.output is not None:
        _write(args.output, args.force, results, trace.name)
    if args.json:
        from kvroof.simulate.output import result_json

        payload = [result_json(r) for r in results]
        print_json(payload[0] if len(payload) == 1 else payload)
        return
    _print(trace, results)
    if args.output is not None:
        print(f"wrote {args.output}")


def _write(folder: str, force: bool, results: list[SimResult], name: str) -> None:
    from kvroof.outputs import staged_folder
    from kvroof.plot.simulate import timeline_figure, ttft_cdf_figure
    from kvroof.plot.style import save_figure
    from kvroof.simulate.output import write_result

    with staged_folder(folder, force=force, command="simulate", flag="-o") as staging:
        for index, result in enumerate(results):
            prefix = "" if index == 0 else f"compare-{index}-"
            write_result(staging, result, prefix)
            save_figure(timeline_figure(result, note=result.label),
                        staging / f"{prefix}timeline.png")
        labelled = {f"{i}: {r.label}" if len(results) > 1 else r.label: r
                    for i, r in enumerate(results)}
        save_figure(ttft_cdf_figure(labelled, note=name), staging / "ttft-cdf.png")


def _seconds(value: float) -> str:
    return "-" if value is None or not math.isfinite(value) else format_quantity(value,
                                                                                 Kind.TIME)


def _share(value: float) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{100 * value:.1f} %"


def _stats(stats: dict[str, float]) -> str:
    return (f"mean {_seconds(stats['mean'])}, p50 {_seconds(stats['p50'])}, "
            f"p90 {_seconds(stats['p90'])}, p99 {_seconds(stats['p99'])}")


def _lines(result: SimResult) -> list[tuple[str, str]]:
    s = result.summary
    limits = ", ".join(f"{name} {100 * share:.0f}%" for name, share in
                       s["batch_limit"].items() if share > 0) or "-"
    energy = s["energy_j"]
    rows = [
        ("settings", result.label),
        ("requests", f"{s['requests']:,} completed in {_seconds(s['makespan_s'])} "
                     f"({s['skipped']} skipped, {s['output_cut']} outputs cut at the context)"),
        ("TTFT", _stats(s["ttft_s"])),
        ("TPOT", _stats(s["tpot_s"])),
        ("end-to-end", _stats(s["e2e_s"])),
        ("throughput", f"{s['throughput_rps']:.3g} requests/s, "
                       f"{s['input_tokens_per_s']:,.0f} input and "
                       f"{s['output_tokens_per_s']:,.0f} output tokens/s"),
    ]
    if result.settings.get("slo_ttft") is not None or result.settings.get("slo_tpot") is not None:
        rows.append(("goodput", f"{s['goodput_rps']:.3g} requests/s ({_share(s['slo_met'])} "
                                "meet the SLOs)"))
    rows += [
        ("tokens per iteration", f"{s['tokens_per_iteration']:,.0f} "
                                 f"({_share(s['budget_utilization'])} of the "
                                 f"{s['token_budget']:,}-token budget; prefill "
                                 f"{s['prefill_tokens_per_iteration']:,.0f}, decode "
                                 f"{s['decode_tokens_per_iteration']:,.0f})"),
        ("batch limited by", limits),
        ("prompt tokens from", f"HBM {_share(s['hit_rate_hbm'])}, host DRAM "
                               f"{_share(s['hit_rate_host'])}, tier {_share(s['hit_rate_tier'])}"
                               f", recomputed by split {_share(s['split_recomputed_share'])}, "
                               f"computed {_share(s['computed_share'])}"),
        ("host link busy", f"to GPU {_share(s['link_h2d_utilization'])}, to host "
                           f"{_share(s['link_d2h_utilization'])}"),
        ("compute utilization", _share(s["compute_utilization"])),
        ("power per GPU", f"mean {s['power_mean_w']:.0f} W, max {s['power_max_w']:.0f} W"),
        ("energy", f"{energy / 1e6:.4g} MJ ({energy / max(s['requests'], 1) / 1e3:.3g} kJ per "
                   f"request, {s['energy_per_output_token_j']:.3g} J per output token)"),
        ("preemptions", f"{s['preemptions']:,}"),
        ("simulated", f"{_seconds(s['makespan_s'])} in {_seconds(s['wall_s'])} "
                      f"({s['simulated_per_wall_second']:,.0f}x real time; "
                      f"{s['stepped_iterations']:,} iterations stepped, "
                      f"{s['fast_forwarded_iterations']:,} in {s['fast_forward_runs']:,} "
                      "fast-forwarded runs)"),
    ]
    return rows


def _compact(result: SimResult) -> list[tuple[str, str]]:
    """Short cells for the side-by-side table of --compare."""
    s = result.summary
    return [
        ("requests", f"{s['requests']:,}"),
        ("TTFT p50", _seconds(s["ttft_s"]["p50"])),
        ("TTFT p99", _seconds(s["ttft_s"]["p99"])),
        ("TPOT p50", _seconds(s["tpot_s"]["p50"])),
        ("TPOT p99", _seconds(s["tpot_s"]["p99"])),
        ("end-to-end p50", _seconds(s["e2e_s"]["p50"])),
        ("end-to-end p99", _seconds(s["e2e_s"]["p99"])),
        ("throughput (requests/s)", f"{s['throughput_rps']:.3g}"),
        ("goodput (requests/s)", f"{s['goodput_rps']:.3g}"),
        ("tokens per iteration", f"{s['tokens_per_iteration']:,.0f}"),
        ("HBM hits", _share(s["hit_rate_hbm"])),
        ("host DRAM hits", _share(s["hit_rate_host"])),
        ("tier hits", _share(s["hit_rate_tier"])),
        ("recomputed by split", _share(s["split_recomputed_share"])),
        ("host link busy, to GPU", _share(s["link_h2d_utilization"])),
        ("power per GPU, mean", f"{s['power_mean_w']:.0f} W"),
        ("energy per output token", f"{s['energy_per_output_token_j']:.3g} J"),
        ("preemptions", f"{s['preemptions']:,}"),
    ]


def _print(trace: Any, results: list[SimResult]) -> None:
    first = results[0]
    counts: dict[str, int] = {}
    for label in first.replicas:
        counts[label] = counts.get(label, 0) + 1
    head = [("trace", f"{trace.name}" + (" (SYNTHETIC)" if trace.synthetic else "")),
            ("source", trace.source),
            ("replicas", "; ".join(f"{n} x {label}" for label, n in counts.items()))]
    if len(results) == 1:
        rows = head + _lines(first)
        width = max(len(k) for k, _ in rows) + 2
        for key, value in rows:
            print(f"{key.ljust(width)}{value}")
    else:
        for key, value in head:
            print(f"{key}: {value}")
        print()
        columns = [_compact(r) for r in results]
        table = [[key] + [col[i][1] for col in columns] for i, (key, _) in
                 enumerate(columns[0])]
        header = ["", *(f"[{i}] {r.label}" for i, r in enumerate(results))]
        print_table(table, header=header)
    notes = sorted({note for r in results for note in r.notes})
    for note in notes:
        print(f"note: {note}")


def run_sweep_command(args: argparse.Namespace) -> None:
    from kvroof.simulate.sweep import grid_columns, load_sweep_config, run_sweep, summary_row

    config = load_sweep_config(args.config)
    if args.dask is not None and args.jobs != 1:
        raise KvroofError("give --jobs or --dask, not both")
    if args.output is not None:
        from kvroof.outputs import check_output_folder

        check_output_folder(args.output, force=args.force, flag="-o")
    start = time.perf_counter()
    bar: Any = None

    def progress(done: int, total: int) -> None:
        nonlocal bar
        if args.quiet or args.json or time.perf_counter() - start < 1.0:
            return
        if bar is None:
            from kvroof.measure.progress import Progress

            bar = Progress("sweep", total)
            bar.start = start
        bar.advance(done - bar.done_weight, f"{done}/{total} simulations")

    try:
        rows = run_sweep(config, jobs=args.jobs, dask=args.dask, progress=progress,
                         spec_paths=list(getattr(args, "spec_path", []) or []))
    except KvroofError as error:  # a grid point's settings: name the file they came from
        if str(error).startswith("--"):  # a flag's (--jobs, --dask), not the file's
            raise
        raise KvroofError(f"{args.config}: {error}") from None
    if bar is not None:
        bar.done()
    if args.output is not None:
        _write_sweep(args.output, args.force, rows, grid_columns(config))
    if args.json:
        print_json(rows)
        return
    columns = grid_columns(config)
    table = []
    for row in rows:
        brief = summary_row(row)
        table.append([str(row.get(c, "")) for c in columns]
                     + [_format_cell(k, v) for k, v in brief.items() if k != "point"])
    header = columns + [k for k in summary_row(rows[0]) if k != "point"] if rows else columns
    print_table(table, header=header)
    if args.output is not None:
        print(f"wrote {Path(args.output) / 'sweep.csv'} ({len(rows)} simulations)")


def _format_cell(key: str, value: Any) -> str:
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        return f"{value:.4g}"
    return str(value)


def _write_sweep(folder: str, force: bool, rows: list[dict[str, Any]], grid: list[str]) -> None:
    from kvroof.outputs import staged_folder
    from kvroof.simulate.output import rows_csv_text

    with staged_folder(folder, force=force, command="sweep", flag="-o") as staging:
        (staging / "sweep.csv").write_text(rows_csv_text(rows), encoding="utf-8")
        if "rps" in grid and len({row["rps"] for row in rows}) > 1:
            from kvroof.plot.simulate import latency_vs_rps_figure
            from kvroof.plot.style import save_figure

            group = [key for key in grid if key != "rps"]
            save_figure(latency_vs_rps_figure(rows, group), staging / "latency-vs-rps.png")

