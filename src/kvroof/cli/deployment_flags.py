"""Flags that describe a deployment (model, hardware, settings), shared by every command that
evaluates the cost model, and their translation into :func:`kvroof.cost.deployment`."""

from __future__ import annotations

import argparse
from typing import Any

from kvroof.cli.common import registry_from_args, token_flag
from kvroof.cost.deployment import (
    BANDWIDTH_SOURCES,
    COPY_LAYOUTS,
    DEFAULT_KV_RESERVE_TOKENS,
    DEFAULT_MEMORY_UTILIZATION,
    MLA_TP_LOADS,
    Deployment,
    deployment,
)
from kvroof.cost.deployment_settings import COMPUTE_MODELS, MOE_ROUTINGS, TTFT_CLOCKS
from kvroof.cost.flops import MLA_MODES
from kvroof.cost.host_memory import LOCALITIES
from kvroof.cost.kv_terms import LOCAL_KV
from kvroof.errors import KvroofError, short_repr
from kvroof.specs.base import DTYPE_BYTES
from kvroof.units import Kind, UnitError, parse_quantity

__all__ = [
    "add_deployment_flags",
    "deployment_from_args",
    "flag_error",
    "quantity_flag",
    "settings_from_args",
]


def add_deployment_flags(
    parser: argparse.ArgumentParser, *, model_required: bool = True, many_models: bool = False,
    tp_default: int = 1, tp_why: str = "",
) -> None:
    """Add --model, --accelerator/--link or --system, and every cost-model setting
    (``tp_default``: the default of ``--tp``, ``tp_why`` its reason when not 1)."""
    if many_models:
        parser.add_argument("--model", action="append", default=[],
                            help="model name, alias or HF id (repeatable)")
    else:
        parser.add_argument("--model", required=model_required,
                            help="model name, alias or HF id")
    where = parser.add_argument_group("hardware (give --system, or --accelerator [--link])")
    where.add_argument("--system", help="a system from `kvroof list systems`")
    where.add_argument("--accelerator", help="an accelerator from `kvroof list accelerators`")
    where.add_argument("--link", help="host link (default: the system's or accelerator's)")
    tune = parser.add_argument_group("cost-model settings")
    tune.add_argument("--engine", metavar="NAME",
                      help="an engine profile from `kvroof list engines`: sets the copy "
                           "granularity, per-copy overhead, link share, write-back, prefix-reuse "
                           "block, request overhead, MLA settings and default overlap unless the "
                           "flags below set them (default: none, kvroof's own defaults)")
    tune.add_argument("--tp", type=int, default=tp_default,
                      help=f"tensor-parallel degree (default {tp_default}{tp_why})")
    tune.add_argument("--compute-dtype", default="bf16", choices=sorted(DTYPE_BYTES),
                      help="dtype whose dense peak sets compute (default bf16)")
    tune.add_argument("--kv-dtype", default="bf16", choices=sorted(DTYPE_BYTES),
                      help="dtype of the KV cache (default bf16)")
    tune.add_argument("--weight-dtype", default=None, choices=sorted(DTYPE_BYTES),
                      help="dtype of the linear-layer and expert weights (default: the "
                           "published checkpoint's, e.g. fp8 for DeepSeek-V3)")
    tune.add_argument("--mla", default=None, choices=MLA_MODES,
                      help="MLA prefill: expanded (vLLM/SGLang) or absorbed (default expanded)")
    tune.add_argument("--compute-model", default="auto", choices=COMPUTE_MODELS,
                      help="how compute is timed: roofline (one whole-model roofline at the "
                           "achievable figures: the paper's formulas), kernels (each op's "
                           "roofline over its measured efficiency from kvroof's kernel tables, "
                           "op by op; ops without a table fall back to their roofline) or auto "
                           "(the default: kernels where the tables cover the accelerator, "
                           "else roofline)")
    tune.add_argument("--moe-routing", default="balanced", choices=MOE_ROUTINGS,
                      help="MoE routing of the kernel tables in kernel mode: balanced or "
                           "skewed (power law) (default balanced)")
    tune.add_argument("--ttft-clock", default="kernel", choices=TTFT_CLOCKS,
                      help="what a TTFT is: kernel (the GPU's work and the transfer) or client "
                           "(plus the engine profile's serving overheads: what a client "
                           "measures) (default kernel)")
    tune.add_argument("--compute", metavar="FLOPS",
                      help='per-GPU peak compute override, e.g. "2000 TFLOPS"')
    tune.add_argument("--compute-efficiency", type=float, default=None, metavar="F",
                      help="fraction of peak compute achieved, in (0, 1] (default: the "
                           "accelerator's published achievable matmul rate, or the system's "
                           "calibrated curve; 1 = peak)")
    tune.add_argument("--hbm-efficiency", type=float, default=None, metavar="F",
                      help="fraction of HBM bandwidth a weight read reaches, in (0, 1] "
                           "(default: the accelerator's measured figure, else 1)")
    tune.add_argument("--bandwidth", metavar="BW",
                      help='per-GPU host-link bandwidth override, e.g. "15 GB/s"')
    tune.add_argument("--bandwidth-source", default=None, choices=BANDWIDTH_SOURCES,
                      help="link bandwidth: peak, published sustained, or the system's "
                           "calibrated figure (default: calibrated if the system has one, else "
                           "peak)")
    tune.add_argument("--link-efficiency", type=float, default=None, metavar="F",
                      help="fraction of link bandwidth achieved, in (0, 1] (default 1, or the "
                           "engine's link share)")
    tune.add_argument("--latency", metavar="TIME",
                      help='per-copy latency override, e.g. "2 us" (default: the link\'s, or '
                           "the engine's per-copy overhead)")
    tune.add_argument("--block-tokens", type=int, default=None, metavar="N",
                      help="tokens per transferred block; 0 = a request is one block "
                           "(default 256, or the engine's)")
    tune.add_argument("--copy-layout", default=None, choices=COPY_LAYOUTS,
                      help="copies per block (default per-layer, or the engine's)")
    tune.add_argument("--reuse-block-tokens", type=int, default=None, metavar="N",
                      help="cached prefixes are reused in whole blocks of N tokens and the rest "
                           "recomputed; 0 or 1 = every cached token is reused (default, or the "
                           "engine's)")
    tune.add_argument("--request-overhead", metavar="TIME",
                      help='fixed time added to every TTFT, e.g. "5 ms" (default 0, or the '
                           "engine's)")
    tune.add_argument("--gpus-loading", type=int, metavar="N",
                      help="GPUs loading KV at once (default: all GPUs of the system)")
    tune.add_argument("--host-memory-locality", default="local", choices=LOCALITIES,
                      help="where the pinned KV buffers live: each GPU's own NUMA node, "
                           "interleaved over the sockets, or the other socket (default local)")
    tune.add_argument("--overlap-efficiency", type=float, default=None, metavar="F",
                      help="share of the shorter of load and compute that overlap hides, in "
                           "[0, 1] (default 1, or the system's calibrated value)")
    tune.add_argument("--allreduce", action=argparse.BooleanOptionalAction, default=True,
                      help="two TP all-reduces per layer over the scale-up link (default on)")
    tune.add_argument("--mla-tp-load", default=None, choices=MLA_TP_LOADS,
                      help="how an MLA latent reaches the TP ranks: every rank loads it (vLLM, "
                           "SGLang), rank 0 loads and broadcasts (LMCache), or each loads a "
                           "shard and all-gathers (default every-rank)")
    tune.add_argument("--local-kv", default="held", choices=LOCAL_KV,
                      help="what sliding-window and chunked layers keep and load: held (the "
                           "last W - 1 tokens, or the current chunk, as vLLM's hybrid KV cache "
                           "manager keeps them) or all (every cached token, as an engine that "
                           "allocates every layer like a full-attention one) (default held)")
    tune.add_argument("--sparse-load", default="all", metavar="all|SHARE",
                      help="what a DeepSeek Sparse Attention layer loads: all (today's engines) "
                           "or the share of its cached latents the indexer selects, in (0, 1] "
                           "(a what-if; the indexer keys are loaded whole) (default all)")
    tune.add_argument("--write-back", action=argparse.BooleanOptionalAction, default=None,
                      help="save the new tokens' KV to host memory in the same step, sharing "
                           "the link (default on, or the engine's)")
    tune.add_argument("--iteration-tokens", type=token_flag(1), default=None, metavar="N",
                      help="tokens sharing one read of the weights (running decodes and other "
                           "prefill chunks of the iteration); default: the request alone (T)")
    tune.add_argument("--memory-utilization", type=float, default=DEFAULT_MEMORY_UTILIZATION,
                      metavar="F", help="share of HBM the engine may use, in (0, 1] (default "
                                        f"{DEFAULT_MEMORY_UTILIZATION:g}, vLLM's)")
    tune.add_argument("--kv-reserve-tokens", type=token_flag(0), default=DEFAULT_KV_RESERVE_TOKENS,
                      metavar="N", help="tokens of KV that must fit beside the weights "
                                        f"(default {DEFAULT_KV_RESERVE_TOKENS:g})")
    tune.add_argument("--tier", action="append", default=[], metavar="NAME=FRACTION",
                      help="share of cached tokens on a system tier (repeatable)")


def quantity_flag(flag: str, text: str | None, kind: Kind) -> float | None:
    """Parse a flag value with units into SI; errors name the flag."""
    if text is None:
        return None
    try:
        return parse_quantity(text, kind)
    except UnitError as error:
        raise KvroofError(f"{flag}: {error}") from None


def _tiers(values: list[str]) -> dict[str, float]:
    tiers: dict[str, float] = {}
    for value in values:
        name, sep, fraction = value.partition("=")
        if name in tiers:
            raise KvroofError(f"--tier: tier {short_repr(name)} given twice")
        try:
            tiers[name] = float(fraction)
        except ValueError:
            sep = ""
        if not sep or not name:
            raise KvroofError(f"--tier: expected NAME=FRACTION, got {short_repr(value)}")
    return tiers


def _sparse_load(text: str) -> str | float:
    if text == "all":
        return "all"
    try:
        return float(text)
    except ValueError:
        raise KvroofError(f"--sparse-load: expected all or a share in (0, 1], got "
                          f"{short_repr(text)}") from None


def _granularity(args: argparse.Namespace) -> dict[str, Any] | None:
    """The copy granularity the flags give: only what they set (an engine fills in the rest,
    else :class:`Granularity`'s defaults)."""
    given: dict[str, Any] = {}
    if args.block_tokens is not None:
        if args.block_tokens < 0:
            raise KvroofError(f"--block-tokens: expected 0 or a positive integer, got "
                              f"{args.block_tokens}")
        given["block_tokens"] = args.block_tokens or None
    if args.copy_layout is not None:
        given["layout"] = args.copy_layout
    return given or None


def _reuse_block(args: argparse.Namespace) -> int | None:
    value: int | None = args.reuse_block_tokens
    if value is None:
        return None
    if value < 0:
        raise KvroofError(f"--reuse-block-tokens: expected 0 or a positive integer, got {value}")
    return value or 1  # blocks of one token: every cached token is reused


def settings_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The cost-model settings the flags give (everything but model and hardware). Settings an
    engine profile may set are left out when their flag is not given, so that the engine's (or
    the deployment's default) applies."""
    settings: dict[str, Any] = {
        "engine": args.engine,
        "tp": args.tp,
        "compute_dtype": args.compute_dtype,
        "kv_dtype": args.kv_dtype,
        "mla_mode": args.mla,
        "compute": quantity_flag("--compute", args.compute, Kind.COMPUTE),
        "compute_efficiency": args.compute_efficiency,
        "compute_model": args.compute_model,
        "moe_routing": args.moe_routing,
        "ttft_clock": args.ttft_clock,
        "hbm_efficiency": args.hbm_efficiency,
        "weight_dtype": args.weight_dtype,
        "bandwidth": quantity_flag("--bandwidth", args.bandwidth, Kind.BANDWIDTH),
        "bandwidth_source": args.bandwidth_source,
        "link_efficiency": args.link_efficiency,
        "overlap_efficiency": args.overlap_efficiency,
        "latency": quantity_flag("--latency", args.latency, Kind.TIME),
        "granularity": _granularity(args),
        "reuse_block_tokens": _reuse_block(args),
        "request_overhead": quantity_flag("--request-overhead", args.request_overhead,
                                          Kind.TIME),
        "gpus_loading": args.gpus_loading,
        "host_memory_locality": args.host_memory_locality,
        "allreduce": args.allreduce,
        "mla_tp_load": args.mla_tp_load,
        "write_back": args.write_back,
        "local_kv": args.local_kv,
        "sparse_load": _sparse_load(args.sparse_load),
        "iteration_tokens": args.iteration_tokens,
        "memory_utilization": args.memory_utilization,
        "kv_reserve_tokens": args.kv_reserve_tokens,
        "tier_fractions": _tiers(args.tier),
    }
    return {key: value for key, value in settings.items()
            if value is not None or key not in _ENGINE_SETTABLE}


_ENGINE_SETTABLE = frozenset({"engine", "mla_mode", "link_efficiency", "latency", "granularity",
                              "mla_tp_load", "write_back", "reuse_block_tokens",
                              "request_overhead"})


_FLAG_NAMES = {"tp": "--tp", "compute_efficiency": "--compute-efficiency",
               "link_efficiency": "--link-efficiency", "gpus_loading": "--gpus-loading",
               "tier_fractions": "--tier", "compute_dtype": "--compute-dtype",
               "overlap_efficiency": "--overlap-efficiency",
               "bandwidth_source": "--bandwidth-source", "compute": "--compute",
               "bandwidth": "--bandwidth", "latency": "--latency",
               "new_tokens": "--new-tokens", "cached_tokens": "--cached-tokens",
               "kv_dtype": "--kv-dtype", "mla_mode": "--mla", "weight_dtype": "--weight-dtype",
               "hbm_efficiency": "--hbm-efficiency",
               "host_memory_locality": "--host-memory-locality", "mla_tp_load": "--mla-tp-load",
               "iteration_tokens": "--iteration-tokens",
               "memory_utilization": "--memory-utilization",
               "kv_reserve_tokens": "--kv-reserve-tokens",
               "reuse_block_tokens": "--reuse-block-tokens",
               "request_overhead": "--request-overhead", "block_tokens": "--block-tokens",
               "layout": "--copy-layout", "local_kv": "--local-kv",
               "sparse_load": "--sparse-load", "compute_model": "--compute-model",
               "moe_routing": "--moe-routing", "ttft_clock": "--ttft-clock"}


def check_flags_apply(args: argparse.Namespace, deps: Deployment | list[Deployment]) -> None:
    """A layer-kind flag given where no model of the command has those layers is an error,
    not silently ignored (with several models it must apply to one of them); so is a MoE
    routing for models without MoE layers or outside kernel mode."""
    from kvroof.cost.groups import layer_groups

    models = {d.model.name: d.model for d in (deps if isinstance(deps, list) else [deps])}
    present: set[str] = set()  # the layer kinds of any model: mla, sparse, local (window/chunk)
    for model in models.values():
        present |= {"mla"} if model.attention.kind == "mla" else set()
        for group in layer_groups(model):
            present |= {group.kind} | ({"local"} if group.holds in ("window", "chunk") else set())
    checks = (
        ("--mla", args.mla is not None, "mla", "MLA layers"),
        ("--mla-tp-load", args.mla_tp_load is not None, "mla", "MLA layers"),
        ("--sparse-load", args.sparse_load != "all", "sparse", "DeepSeek Sparse Attention layers"),
        ("--local-kv", args.local_kv != "held", "local", "sliding-window or chunked layers"),
    )
    for flag, given, kind, layers in checks:
        if models and given and kind not in present:
            raise KvroofError(f"{flag}: {' or '.join(models)} "
                              f"{'has' if len(models) == 1 else 'have'} no {layers}")
    routing = getattr(args, "moe_routing", "balanced")
    if models and routing != "balanced":
        if not any(model.is_moe for model in models.values()):
            raise KvroofError(f"--moe-routing: {' or '.join(models)} "
                              f"{'has' if len(models) == 1 else 'have'} no MoE layers")
        deployments = deps if isinstance(deps, list) else [deps]
        if not any(dep.uses_kernels for dep in deployments):
            raise KvroofError("--moe-routing: applies to kernel mode (--compute-model kernels, "
                              "or auto where kernel tables cover the accelerator)")


def flag_error(error: KvroofError) -> KvroofError:
    """The same error with a settings field name (``tier_fractions.x`` too) replaced by its
    flag."""
    message = str(error)
    field = message.split(":", 1)[0]
    name = field.split(".", 1)[0]
    if name in _FLAG_NAMES and " " not in field:
        detail = field[len(name):].replace(".", " ", 1)
        return KvroofError(_FLAG_NAMES[name] + detail + message[len(field):])
    return error


def deployment_from_args(
    args: argparse.Namespace, model: str | None = None, **overrides: Any
) -> Deployment:
    """The deployment the flags describe (``overrides`` replace settings, e.g. ``tp``)."""
    if args.system is None and args.accelerator is None:
        raise KvroofError("give --system or --accelerator")
    if args.system is not None and args.accelerator is not None:
        raise KvroofError("give --system or --accelerator, not both")
    settings = settings_from_args(args) | overrides
    registry = registry_from_args(args)
    if isinstance(settings.get("engine"), str):
        try:
            settings["engine"] = registry.engine(settings["engine"])
        except KvroofError as error:
            raise KvroofError(f"--engine: {error}") from None
    try:
        return deployment(
            model or args.model,
            system=args.system,
            accelerator=args.accelerator,
            link=args.link,
            registry=registry,
            **settings,
        )
    except KvroofError as error:
        raise flag_error(error) from None
