"""``kvroof plot KIND ... -o FILE``: one figure from the command line; options mirror the
Python functions in :mod:`kvroof.plot` (matplotlib is imported only when a plot is drawn)."""

from __future__ import annotations

import argparse
import math
import warnings
from pathlib import Path
from typing import Any

from kvroof.cli.commands import command_help
from kvroof.cli.common import CommandError, registry_from_args, token_flag
from kvroof.cli.deployment_flags import (
    add_deployment_flags,
    check_flags_apply,
    deployment_from_args,
    flag_error,
    settings_from_args,
)
from kvroof.cost.checks import is_whole_number
from kvroof.cost.deployment import Deployment
from kvroof.cost.timing import OVERLAP_MODES
from kvroof.errors import KvroofError, short_repr

__all__ = ["register"]

KINDS = ("roofline", "ceilings", "kappa-vs-t", "overhead", "what-if", "breakdown",
         "families", "validation")


def _items(flag: str, text: str, what: str) -> list[str]:
    """The comma-separated items of a flag's value; an empty value or an empty item (``''``,
    ``'1,,2'``, ``'1,'``) is an error naming the flag, never silently dropped."""
    items = [part.strip() for part in text.split(",")]
    if not text.strip() or not all(items):
        raise KvroofError(f"{flag}: expected {what} separated by commas, got "
                          f"{short_repr(text)}")
    return items


def _int_list(flag: str, text: str) -> list[int]:
    items = _items(flag, text, "integers")
    try:
        values = [int(part) for part in items]
    except ValueError:
        raise KvroofError(f"{flag}: expected integers separated by commas, got "
                          f"{short_repr(text)}") from None
    if any(v < 1 for v in values):
        raise KvroofError(f"{flag}: expected positive integers, got {short_repr(text)}")
    return values


def _float_list(flag: str, text: str) -> list[float]:
    items = _items(flag, text, "numbers")
    try:
        values = [float(part) for part in items]
    except ValueError:
        raise KvroofError(f"{flag}: expected numbers separated by commas, got "
                          f"{short_repr(text)}") from None
    if any(not (math.isfinite(v) and v > 0) for v in values):
        raise KvroofError(f"{flag}: expected positive finite numbers, got {short_repr(text)}")
    return values


def register(commands: Any) -> None:
    plot = commands.add_parser("plot", help=command_help("plot"))
    kinds = plot.add_subparsers(dest="figure", metavar="FIGURE", required=True)

    def figure_parser(name: str, help_text: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = kinds.add_parser(name, help=help_text)
        if name == "roofline":  # its default models need 8 GPUs' memory, as in the report
            add_deployment_flags(parser, many_models=True, tp_default=8,
                                 tp_why=": the default models' weights need 8 GPUs")
        else:
            add_deployment_flags(parser, many_models=True)
        parser.add_argument("-o", "--output", required=True, metavar="FILE",
                            help="output file: .png, .svg or .pdf")
        parser.set_defaults(handler=run_plot)
        return parser

    roofline = figure_parser("roofline", "attainable compute against K/T (the paper's Fig. 4)")
    roofline.add_argument("--hardware", action="append", default=[], metavar="ACC:LINK",
                          help="an accelerator on a link (repeatable; default A100, H100, B200 "
                               "on PCIe 4 and 5)")
    roofline.add_argument("--mode", choices=("paper", "full"), default="full")
    roofline.add_argument("--new-tokens", type=token_flag(1), default=None, metavar="T",
                          help="new tokens T for full mode (default 128)")
    roofline.add_argument("--y", choices=("flops", "tokens"), default=None,
                          help="y axis: new tokens/s per GPU (the default in full mode) or "
                               "attainable FLOP/s per GPU (the default in paper mode, as the "
                               "paper's Fig. 4)")
    roofline.add_argument("--peaks", choices=("paper", "spec", "both"), default=None,
                          help="paper mode: the paper's C and BW for its GPUs and links "
                               "(default), the dense spec peaks, or a panel of each")
    roofline.add_argument("--no-workloads", action="store_true",
                          help="leave out the workload median markers")

    ceilings = figure_parser("ceilings", "compute, HBM and host-link roofs with requests")
    ceilings.add_argument("--requests", metavar="T:K,...",
                          help="requests to place, e.g. 16:3200,128:1024 (default: a set)")

    kappa_t = figure_parser("kappa-vs-t", "full-mode kappa_crit against new tokens T")
    kappa_t.add_argument("--tps", default=None, metavar="N,N",
                         help="TP degrees to compare (default: --tp)")

    overhead = figure_parser("overhead", "transfer share or P_OH over K by T (Fig. 6)")
    overhead.add_argument("--metric", choices=("transfer_share", "p_oh"),
                          default="transfer_share")
    overhead.add_argument("--overlap", choices=OVERLAP_MODES, default=None,
                          help="serial, layerwise or ideal (default: the engine's, else serial)")
    overhead.add_argument("--cached", default="1024,2048,4096,8192,16384,32768,65536",
                          metavar="K,K", help="cached tokens on the x axis")
    overhead.add_argument("--new", default="64,128,256,512,1024,2048", metavar="T,T",
                          help="new tokens on the y axis")

    what_if = figure_parser("what-if", "kappa_crit against link bandwidth and KV format")
    what_if.add_argument("--new-tokens", type=token_flag(1), default=128.0, metavar="T")

    families = figure_parser("families", "kappa_crit by attention family, against T and K, "
                                         "with bytes and FLOPs per cached token by layer kind")
    families.add_argument("--new-tokens", type=token_flag(1), default=128.0, metavar="T")
    families.add_argument("--cached-tokens", type=token_flag(1), default=32_000.0, metavar="K",
                          help="the prefix whose bytes and FLOPs the bars split (default 32000)")
    families.add_argument("--other-system", default=None, metavar="SYSTEM",
                          help="a second placement drawn dashed (TP 1), e.g. gh200")

    validation = kinds.add_parser(
        "validation", help="predicted against measured for every validation case")
    validation.add_argument("--mode", choices=("before", "after", "held_out"), default="after",
                            help="the filled markers: before engine profiles, with them "
                                 "(default), or held out")
    validation.add_argument("--cases", action="append", default=None, metavar="DIR",
                            help="a folder of case files instead of the built-in ones")
    validation.add_argument("-o", "--output", required=True, metavar="FILE",
                            help="output file: .png, .svg or .pdf")
    validation.set_defaults(handler=run_plot)

    breakdown = figure_parser("breakdown", "TTFT stacked by compute and exposed transfer")
    breakdown.add_argument("--new-tokens", type=token_flag(1), default=128.0, metavar="T")
    breakdown.add_argument("--cached-tokens", type=token_flag(0), default=16384.0, metavar="K")
    breakdown.add_argument("--tps", default="1,8", metavar="N,N", help="TP degrees (default 1,8)")


def _models(args: argparse.Namespace, default: list[str]) -> list[str]:
    return list(args.model) or default


def _deployments(args: argparse.Namespace, **overrides: Any) -> list[Deployment]:
    deps = [deployment_from_args(args, model, **overrides)
            for model in _models(args, ["qwen3-235b-a22b"])]
    check_flags_apply(args, deps)
    return deps


def _output(args: argparse.Namespace) -> Path:
    path = Path(args.output)
    if path.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise CommandError(f"-o: {path}: use a .png, .svg or .pdf file name")
    if not path.parent.is_dir():
        raise CommandError(f"-o: {path}: folder {path.parent} does not exist")
    return path


def _families(args: argparse.Namespace) -> Any:
    """One model per family (default: the report's); the names are the families' where the
    model stands for one, else its layer mix."""
    from kvroof import plot
    from kvroof.analysis.families import FAMILIES, Family
    from kvroof.cost.deployment import deployment
    from kvroof.cost.memory_fit import fit_problem
    from kvroof.describe import layer_mix

    names = {f.model: f.name for f in FAMILIES}
    deps = [deployment_from_args(args, model)
            for model in _models(args, [f.model for f in FAMILIES])]
    families = [Family(names.get(d.model.name, layer_mix(d.model)), d.model.name) for d in deps]
    others: list[Deployment | None] = []
    for dep in deps:
        other = None
        if args.other_system is not None:
            try:
                other = deployment(dep.model, system=args.other_system,
                                   registry=registry_from_args(args),
                                   **(settings_from_args(args) | {"tp": 1}))
            except KvroofError as error:
                raise KvroofError(f"--other-system: {error}") from None
            other = None if fit_problem(other) else other
        others.append(other)
    shown: list[Deployment | None] = [None if fit_problem(d) else d for d in deps]
    return plot.families_figure(families, shown, others, args.new_tokens, args.cached_tokens)


def _draw(args: argparse.Namespace) -> Any:
    from kvroof import plot

    if args.figure == "validation":
        from kvroof.validation.run import validate

        return plot.validation_figure(validate(args.cases, registry_from_args(args)), args.mode)
    if args.figure == "roofline":
        pairs = []
        for item in args.hardware:
            accelerator, sep, link = item.partition(":")
            if not sep or not accelerator or not link:
                raise KvroofError(
                    f"--hardware: expected ACCELERATOR:LINK, got {short_repr(item)}")
            pairs.append((accelerator, link))
        if args.mode == "paper" and args.new_tokens is not None:
            raise KvroofError("--new-tokens: paper mode does not depend on it (kappa_crit = "
                              "2 N_active / B_kv x BW / C); use --mode full")
        if args.mode == "full" and args.peaks is not None:
            raise KvroofError("--peaks: full mode does not use it (the cost model's own "
                              "compute and bandwidth); use --mode paper")
        new_tokens = 128.0 if args.new_tokens is None else args.new_tokens
        registry = registry_from_args(args)
        hardware: list[plot.roofline.Hardware] = list(pairs)
        if args.system:
            if args.link:
                raise KvroofError("--link: the roofline takes a --system as it is; use "
                                  "--hardware ACCELERATOR:LINK for another link")
            hardware.append(registry.system(args.system).name)
        if args.accelerator:
            accelerator = registry.accelerator(args.accelerator)
            hardware.append((accelerator.name, args.link or accelerator.host_link))
        try:
            figure = plot.offload_roofline_figure(
                _models(args, ["qwen3-235b-a22b", "deepseek-v3"]),
                hardware or plot.roofline.DEFAULT_HARDWARE,
                mode=args.mode, new_tokens=new_tokens, y=args.y, peaks=args.peaks or "paper",
                workload_medians=None if args.no_workloads else plot.roofline.WORKLOAD_MEDIANS,
                registry=registry, **settings_from_args(args),
            )
        except KvroofError as error:
            raise flag_error(error) from None
        left_out = [f"{ax.get_title().split(':')[0]} on {str(artist.get_gid()).split(':', 1)[1]}"
                    for ax in figure.axes for artist in ax.get_lines()
                    if str(artist.get_gid()).startswith("does-not-fit:")]
        if left_out:
            warnings.warn(f"not drawn, the weights do not fit: {'; '.join(left_out)} "
                          "(a larger --tp, or --weight-dtype, may fit)", stacklevel=1)
        return figure
    if args.figure == "ceilings":
        dep = _deployments(args)[0]
        if args.requests is not None:
            requests = []
            for item in _items("--requests", args.requests, "T:K pairs"):
                t, sep, k = item.partition(":")
                try:
                    pair = (float(t), float(k))
                except ValueError:
                    sep = ""
                else:
                    if not (is_whole_number(pair[0]) and is_whole_number(pair[1])):
                        raise KvroofError(f"--requests: expected whole numbers of tokens, got "
                                          f"{short_repr(item)}")
                    requests.append(pair)
                if not sep:
                    raise KvroofError(f"--requests: expected T:K pairs, got {short_repr(item)}")
            try:
                return plot.ceilings_figure(dep, requests)
            except KvroofError as error:
                raise KvroofError(f"--requests: {error}") from None
        return plot.ceilings_figure(dep)
    if args.figure == "kappa-vs-t":
        tps = _int_list("--tps", args.tps) if args.tps is not None else [args.tp]
        deps = [d for tp in tps for d in _deployments(args, tp=tp)]
        try:
            return plot.kappa_vs_t_figure(deps)
        except KvroofError as error:  # --iteration-tokens below the T plotted, say
            raise flag_error(error) from None
    if args.figure == "overhead":
        dep = _deployments(args)[0]
        cached, new = _float_list("--cached", args.cached), _float_list("--new", args.new)
        try:
            return plot.overhead_figure(dep, cached, new, args.metric, args.overlap)
        except KvroofError as error:  # the grid's axes are these two flags
            field, sep, rest = str(error).partition(": ")
            flag = {"cached_tokens": "--cached", "new_tokens": "--new"}.get(field)
            if flag is None or not sep:
                raise
            raise KvroofError(f"{flag}: {rest.split(', got ')[0]}") from None
    if args.figure == "what-if":
        deps = _deployments(args)
        try:
            return plot.what_if_figure(deps, args.new_tokens, registry=registry_from_args(args))
        except KvroofError as error:
            raise flag_error(error) from None
    if args.figure == "families":
        return _families(args)
    tps = _int_list("--tps", args.tps)
    try:
        return plot.ttft_breakdown_figure(_deployments(args)[0], args.new_tokens,
                                          args.cached_tokens, tps)
    except KvroofError as error:
        if str(error).startswith("tp:"):
            raise KvroofError(f"--tps {args.tps}: {error}") from None
        raise flag_error(error) from None


def run_plot(args: argparse.Namespace) -> None:
    from kvroof.plot.style import save_figure

    path = _output(args)
    figure = _draw(args)
    save_figure(figure, path)
    print(f"wrote {path}")
