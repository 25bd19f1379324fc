"""``kvroof plan``: will offloading KV to host memory pay, with how much memory, at what reload
threshold, on how many GPUs. Flags are read into :func:`kvroof.plan.run.plan`'s arguments (an
error names the flag), progress lines go to stderr, and the result is printed as tables, as
JSON (``--json``) or written as a folder (``-o DIR``: ``plan.md``, ``plan.html`` with its
figures embedded, ``plan.json`` and the figures), built apart and moved in when complete."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvroof.cli.commands import command_help
from kvroof.cli.deployment_flags import add_deployment_flags, quantity_flag
from kvroof.errors import KvroofError
from kvroof.units import Kind

if TYPE_CHECKING:
    from kvroof.plan.result import Plan

__all__ = ["register", "run_plan"]

_FORMATS = ("sharegpt", "docqa", "mooncake", "table")
# Kept here so that building the parser imports nothing heavy (tests compare them with
# kvroof.simulate.settings).
_SCHEDULERS = ("fifo", "utilization-aware")
_LOAD_MODES = ("sync", "async", "layerwise")
_ROUTERS = ("round-robin", "least-loaded", "prefix-affinity", "kappa", "scoring")

_FLAGS = {  # the library's argument names -> flags, for errors
    "slo_ttft": "--slo-ttft", "slo_tpot": "--slo-tpot", "slo_percentile": "--slo-percentile",
    "candidate": "--candidate", "candidates": "--candidate", "jobs": "--jobs", "dask": "--dask",
    "target_rps": "--target-rps", "dram_cache": "--dram-cache", "dram_sizes": "--dram-sizes",
    "gpu_hour_price": "--gpu-hour-price", "dram_gb_price": "--dram-gb-price",
    "tolerance": "--tolerance", "first_rate": "--first-rate", "seed": "--seed",
    "cache_policy": "--cache-policy", "output lengths": "--output-tokens",
    "workload": "workload", "summary": "workload summary",
}


def register(commands: Any) -> None:
    """Add ``kvroof plan`` to the subcommands ``commands``."""
    plan = commands.add_parser(
        "plan", help=command_help("plan"),
        description="For each hardware candidate, with and without KV offloading to host "
                    "memory: the highest arrival rate meeting the latency objectives (searched "
                    "with the serving simulator), the gain against host memory per replica, "
                    "the reload threshold, GPUs for a target rate and the cost per million "
                    "tokens, and a verdict. See docs/plan.md.")
    plan.add_argument("workload", nargs="?", default="chat",
                      help="a trace (Mooncake JSONL, ShareGPT, document QA, table), a preset "
                           "(chat: Mooncake's shipped conversation trace; docqa; agentic) or "
                           "summary:prompt=TOKENS,reused=SHARE,distance=REQUESTS[,sigma=S]"
                           "[,output=SPEC][,requests=N][,rps=R] (default chat)")
    plan.add_argument("--candidate", action="append", default=[], metavar="SYSTEM[:TP][xN]",
                      help="a hardware candidate: a system or accelerator, its TP (default: the "
                           "smallest that fits) and replicas (default: one system's GPUs) "
                           "(repeatable)")
    plan.add_argument("--format", choices=_FORMATS, help="the trace's format (guessed if not "
                                                         "given)")
    plan.add_argument("--skip-bad", action="store_true",
                      help="skip bad lines and requests no replica could serve, and count them")
    plan.add_argument("--output-tokens", metavar="SPEC",
                      help="output lengths instead of the trace's: N, exp:MEAN or "
                           "uniform:LO:HI")
    plan.add_argument("--seed", type=int, default=0,
                      help="seed of the arrivals and of synthetic workloads (default 0)")
    goals = plan.add_argument_group("objectives, fleet and prices")
    goals.add_argument("--slo-ttft", metavar="TIME",
                       help='TTFT objective, e.g. "2 s" (with neither objective: MLPerf\'s '
                            "Llama-2-70B server latencies, TTFT 2 s and TPOT 200 ms)")
    goals.add_argument("--slo-tpot", metavar="TIME", help='TPOT objective, e.g. "50 ms"')
    goals.add_argument("--slo-percentile", type=float, default=90.0, metavar="P",
                       help="the percentile of requests the objectives apply to (default 90)")
    goals.add_argument("--target-rps", type=float, metavar="R",
                       help="size the fleet for R requests/s (GPUs with and without "
                            "offloading)")
    goals.add_argument("--gpu-hour-price", type=float, metavar="PRICE",
                       help="price of one GPU for an hour (for the cost per million tokens)")
    goals.add_argument("--dram-gb-price", type=float, metavar="PRICE",
                       help="price of one GB of host memory for an hour (same currency)")
    host = plan.add_argument_group("offloading")
    host.add_argument("--dram-cache", metavar="BYTES",
                      help='host memory per replica with offloading, e.g. "500 GB" (default: '
                           "the replica's share of the system's host memory)")
    host.add_argument("--dram-sizes", metavar="BYTES,...",
                      help='host-memory sizes per replica of the curve, e.g. "100 GB,400 GB" '
                           "(default: 1/4 to a few times the HBM KV pool)")
    host.add_argument("--cache-tier", metavar="NAME",
                      help="a system tier below DRAM (e.g. local-nvme on dgx-h100)")
    host.add_argument("--cache-tier-size", metavar="BYTES",
                      help="bytes of that tier per replica (default: its share of the tier)")
    host.add_argument("--cache-policy", choices=("load", "split"), default="load",
                      help="the offloading arm: load cached prefixes, or split load and "
                           "recompute (default load; the arm without offloading recomputes)")
    engine = plan.add_argument_group("engine")
    engine.add_argument("--scheduler", choices=_SCHEDULERS, default="fifo",
                        help="fifo (vLLM) or utilization-aware (default fifo)")
    engine.add_argument("--load-mode", choices=_LOAD_MODES, default="async",
                        help="sync, async or layerwise loads (default async)")
    engine.add_argument("--router", choices=_ROUTERS, default="round-robin",
                        help="how requests are spread over replicas (default round-robin)")
    engine.add_argument("--max-num-batched-tokens", type=int, metavar="N",
                        help="token budget per iteration (default: vLLM's for the GPU)")
    engine.add_argument("--max-num-seqs", type=int, metavar="N",
                        help="running sequences at most (default: vLLM's)")
    engine.add_argument("--kv-tokens", type=int, metavar="N",
                        help="KV space per GPU in tokens instead of what HBM leaves (what-ifs)")
    search = plan.add_argument_group("search and output")
    search.add_argument("--tolerance", type=float, default=0.05, metavar="SHARE",
                        help="stop the rate search when the failing rate is within this share "
                             "of the meeting one (default 0.05)")
    search.add_argument("--first-rate", type=float, metavar="R",
                        help="the first rate to try (default: estimated from the cost model)")
    search.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="run simulations on N local processes (default 1)")
    search.add_argument("--dask", metavar="ADDRESS",
                        help="run the simulations on an existing Dask cluster instead (scheduler "
                             "address, e.g. tcp://host:8786; needs kvroof[distributed]; not with "
                             "--jobs)")
    search.add_argument("--json", action="store_true", help="print JSON (SI units)")
    search.add_argument("-o", "--output", metavar="DIR",
                        help="write plan.md, plan.html (self-contained), plan.json and the "
                             "figures here (built apart and moved in when complete)")
    search.add_argument("--force", action="store_true",
                        help="write into a non-empty folder kvroof did not make")
    search.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    add_deployment_flags(plan, tp_default=0,
                         tp_why=": not taken here; give TP with each --candidate SYSTEM:TP")
    plan.set_defaults(handler=run_plan)


def _named(error: KvroofError) -> KvroofError:
    """The error with a library argument name replaced by its flag."""
    from kvroof.cli.simulate_settings import named_by_flag

    message = str(error).replace("output_tokens takes", "--output-tokens takes").replace(
        "(skip_bad)", "(--skip-bad)")
    for name, flag in sorted(_FLAGS.items(), key=lambda item: -len(item[0])):
        if re.match(rf"{re.escape(name)}\b", message) and not message.startswith(flag):
            return KvroofError(flag + message[len(name):])
    return named_by_flag(KvroofError(message))


def _sizes(text: str | None) -> tuple[float, ...] | None:
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    if not all(parts):
        raise KvroofError(f"--dram-sizes: expected sizes separated by commas, got {text!r}")
    return tuple(quantity_flag("--dram-sizes", p, Kind.CAPACITY) or 0.0 for p in parts)


def _inputs(args: argparse.Namespace) -> dict[str, Any]:
    """:func:`kvroof.plan.run.plan`'s arguments from the flags (errors name the flag)."""
    from kvroof.cli.deployment_flags import settings_from_args
    from kvroof.plan.inputs import SearchSettings
    from kvroof.plan.workloads import WorkloadSummary
    from kvroof.simulate.settings import SimSettings

    if args.system is not None or args.accelerator is not None:
        flag = "--system" if args.system is not None else "--accelerator"
        raise KvroofError(f"{flag}: give the hardware as --candidate SYSTEM[:TP][xREPLICAS] "
                          "(repeatable)")
    if args.tp != 0:
        raise KvroofError("--tp: give TP with each --candidate SYSTEM:TP")
    if args.iteration_tokens is not None:
        raise KvroofError("--iteration-tokens: the plan takes both regimes itself (a request "
                          "alone and inside a full iteration of the token budget)")
    if not args.candidate:
        raise KvroofError("--candidate: give at least one hardware candidate, e.g. "
                          "--candidate dgx-h100:8")
    if args.dask is not None and args.jobs != 1:  # kvroof sweep's rule
        raise KvroofError("give --jobs or --dask, not both")
    settings = settings_from_args(args)
    settings.pop("tp", None)
    settings = {k: v for k, v in settings.items() if v is not None}
    try:
        simulation = SimSettings(
            scheduler=args.scheduler, cache_policy=args.cache_policy, load_mode=args.load_mode,
            router=args.router, max_num_batched_tokens=args.max_num_batched_tokens,
            max_num_seqs=args.max_num_seqs, kv_tokens=args.kv_tokens, tier=args.cache_tier,
            tier_cache=quantity_flag("--cache-tier-size", args.cache_tier_size,
                                     Kind.CAPACITY))
        search = SearchSettings(tolerance=args.tolerance, first_rate=args.first_rate,
                                dram_sizes=_sizes(args.dram_sizes))
        workload: Any = args.workload
        if workload.startswith("summary:"):
            workload = WorkloadSummary.parse(workload.removeprefix("summary:"))
    except KvroofError as error:
        raise _named(error) from None
    return {
        "model": args.model, "candidates": list(args.candidate), "workload": workload,
        "slo_ttft": quantity_flag("--slo-ttft", args.slo_ttft, Kind.TIME),
        "slo_tpot": quantity_flag("--slo-tpot", args.slo_tpot, Kind.TIME),
        "slo_percentile": args.slo_percentile, "target_rps": args.target_rps,
        "gpu_hour_price": args.gpu_hour_price, "dram_gb_price": args.dram_gb_price,
        "dram_cache": quantity_flag("--dram-cache", args.dram_cache, Kind.CAPACITY),
        "deployment": settings, "simulation": simulation, "search": search,
        "output_tokens": args.output_tokens, "format": args.format, "skip_bad": args.skip_bad,
        "seed": args.seed, "jobs": args.jobs, "dask": args.dask,
    }


def run_plan(args: argparse.Namespace) -> None:
    """The handler of ``kvroof plan``."""
    from kvroof.cli.common import print_json, registry_from_args
    from kvroof.plan.run import plan

    inputs = _inputs(args)
    registry = registry_from_args(args)
    if args.output is not None:
        from kvroof.outputs import check_output_folder

        check_output_folder(args.output, force=args.force, flag="-o")

    def progress(message: str) -> None:
        if not args.quiet:
            print(f"plan: {message}", file=sys.stderr, flush=True)

    try:
        result = plan(**inputs, registry=registry, progress=progress)
    except KvroofError as error:
        raise _named(error) from None
    if args.output is not None:
        _write(args.output, args.force, result)
    if args.json:
        print_json(result.to_json())
    else:
        _print(result)
        if args.output is not None:
            print(f"wrote {args.output}")
    failed = result.failed
    if failed:  # the other candidates' plans are printed or written: exit status 1
        for cand in failed:
            print(f"kvroof: error: --candidate {cand.label}: a simulation failed: {cand.error}",
                  file=sys.stderr)
        raise SystemExit(1)


def _print(result: Plan) -> None:
    """The terminal tables."""
    from kvroof.cli.common import print_table
    from kvroof.plan.page import arm_header, arm_rows, summary_rows
    from kvroof.plan.verdict import tokens_text

    width = max(len(k) for k, _ in summary_rows(result))
    for key, value in summary_rows(result):
        print(f"{key.ljust(width)}  {value}")
    header = arm_header(result)
    tier = bool(result.settings.get("tier"))
    for cand in result.candidates:
        print()
        print(f"{cand.label}  {cand.deployment}, {cand.replicas} "
              f"replica{'s' * (cand.replicas != 1)} ({cand.gpus} GPU{'s' * (cand.gpus != 1)})"
              + (f" (kvroof chose {'; '.join(cand.choices)})" if cand.choices else ""))
        if cand.error is not None or cand.verdict is None:
            print(f"no plan: {cand.error}")
            continue
        print_table(arm_rows(cand, tier), header)
        th = cand.threshold
        rows = [("verdict", cand.verdict.sentence)]
        rows += [("why" if i == 0 else "", f"- {line}") for i, line in
                 enumerate(cand.verdict.why)]
        if th is not None:
            alone = "never" if th.setting is None else tokens_text(th.setting, "cached token")
            busy = "never" if th.setting_busy is None else f"{th.setting_busy:,}"
            rows.append(("reload", f"load from {alone} at T = {th.median_new:,} (alone), "
                                   f"{busy} in a full iteration"))
        if cand.curve is not None and cand.curve.pays_from_ratio is not None:
            rows.append(("pays from", f"host/HBM capacity ratio {cand.curve.pays_from_ratio:.2g}"))
        sw, so = cand.sizing_without, cand.sizing_with
        if result.target_rps is not None and sw is not None and so is not None:
            def gpus(s: Any) -> str:
                return "-" if s.gpus is None else f"{s.gpus:,} GPUs"
            rows.append(("fleet", f"{gpus(sw)} without offloading, {gpus(so)} with it for "
                                  f"{result.target_rps:.3g} requests/s"))
        if result.prices.gpu_hour is not None and sw is not None and so is not None:
            def cost(s: Any) -> str:
                return "-" if s.per_million_tokens is None else f"{s.per_million_tokens:.4g}"
            rows.append(("cost/Mtok", f"{cost(sw)} without offloading, {cost(so)} with it "
                                      "(prompt + output tokens)"))
        v = cand.validity
        if v is not None:
            rows.append(("basis", f"compute model {v.compute_model.split(' (')[0]}; engine "
                                  f"profile {v.engine.split(':')[0]}; closest validation case "
                                  f"{v.closest_case.split(' (')[0]} ({v.closest_error})"))
            rows += [("serving" if i == 0 else "", f"- {q.text()}")
                     for i, q in enumerate(v.serving)]
            rows += [("outside" if i == 0 else "", f"- {line}")
                     for i, line in enumerate(v.outside)]
        for key, value in rows:
            print(f"{key.ljust(9)}  {value}")
    simulated = result.simulated_s
    speed = simulated / result.wall_s if result.wall_s > 0 else float("inf")
    print()
    hours = simulated / 3600
    print(f"simulated  {result.simulations:,} runs, "
          f"{f'{hours:,.0f}' if hours >= 100 else f'{hours:.3g}'} h of serving in "
          f"{result.wall_s:.1f} s ({speed:,.0f}x real time)")


def _write(folder: str, force: bool, result: Plan) -> None:
    """plan.md, plan.html, plan.json and the figures into ``folder``."""
    from kvroof.outputs import staged_folder, write_text
    from kvroof.plan.page import FIGURES, page_blocks, render_html, render_markdown
    from kvroof.plot.plan import plan_memory_figure, plan_rate_figure, plan_threshold_figure
    from kvroof.plot.style import save_figure

    drawers = {"rate-vs-latency.png": plan_rate_figure,
               "gain-vs-host-memory.png": plan_memory_figure,
               "reload-threshold.png": plan_threshold_figure}
    with staged_folder(folder, force=force, command="plan", flag="-o") as staging:
        images: dict[str, bytes] = {}
        for name in FIGURES:
            path = staging / name
            save_figure(drawers[name](result), path)
            images[name] = Path(path).read_bytes()
        blocks = page_blocks(result, list(FIGURES))
        write_text(staging / "plan.md", render_markdown(blocks))
        write_text(staging / "plan.html", render_html(blocks, images))
        write_text(staging / "plan.json", json.dumps(result.to_json(), indent=2) + "\n")
