"""``kvroof simulate``'s flags read into the library's inputs: the engine settings
(:class:`kvroof.simulate.settings.SimSettings`), the variants of ``--compare``, the replicas'
deployments, and the arrival flags checked against the arrivals and schedulers chosen. Errors
name the flag, not the settings field. The library is imported when a function runs, so that
building the parser stays fast."""

from __future__ import annotations

import argparse
import dataclasses
import re
from typing import TYPE_CHECKING, Any

from kvroof.cli.deployment_flags import deployment_from_args, flag_error, quantity_flag
from kvroof.errors import KvroofError
from kvroof.units import Kind

if TYPE_CHECKING:
    from kvroof.simulate.settings import SimSettings

__all__ = ["FLAGS", "check_arrival_flags", "compare_variant", "deployments_from_args",
           "named_by_flag", "settings_from_args", "stage_plan_from_args"]

FLAGS = {  # SimSettings field -> flag
    "max_num_batched_tokens": "--max-num-batched-tokens", "max_num_seqs": "--max-num-seqs",
    "scheduler": "--scheduler", "cache_policy": "--cache-policy", "load_mode": "--load-mode",
    "router": "--router", "router_weights": "--router-weights", "dram_cache": "--dram-cache",
    "tier": "--cache-tier",
    "offload_store": "--offload-store",
    "tier_cache": "--cache-tier-size", "activation_reserve": "--activation-reserve",
    "kv_tokens": "--kv-tokens", "aging_limit": "--aging-limit",
    "admission_backlog": "--admission-backlog", "power_cap": "--power-cap",
    "slo_ttft": "--slo-ttft", "slo_tpot": "--slo-tpot", "rps": "--rps",
    "time_scale": "--time-scale", "users": "--users", "think_time": "--think-time",
    "seed": "--seed", "burstiness (cv)": "--burstiness", "output lengths": "--output-tokens",
    "replicas": "--replicas", "compute_model": "--compute-model",
    "moe_routing": "--moe-routing", "ttft_clock": "--ttft-clock",
    "stages": "--stages", "stage_interval": "--stage-interval", "stage_arrival": "--stage-arrival",
}
_UNITS = {"dram_cache": Kind.CAPACITY, "tier_cache": Kind.CAPACITY,
          "activation_reserve": Kind.CAPACITY, "power_cap": Kind.POWER,
          "slo_ttft": Kind.TIME, "slo_tpot": Kind.TIME, "admission_backlog": Kind.TIME}


def named_by_flag(error: KvroofError) -> KvroofError:
    """The error with a settings name replaced by its flag."""
    message = str(error)
    if "prepare_trace(output_tokens=...)" in message:  # the library's argument, as a flag
        return KvroofError(message.replace("prepare_trace(output_tokens=...)", "--output-tokens"))
    for name, flag in sorted(FLAGS.items(), key=lambda item: -len(item[0])):
        if message.startswith(name + ":"):
            rest = message[len(name):]
            for other in ("max_num_batched_tokens", "max_num_seqs"):  # named in the text too
                rest = rest.replace(f"the {other} ", f"{FLAGS[other]} ")
            return KvroofError(flag + rest)
    return flag_error(error)


def settings_from_args(args: argparse.Namespace) -> SimSettings:
    """The engine settings the flags give."""
    from kvroof.simulate.router_weights import RouterWeights
    from kvroof.simulate.settings import SimSettings

    def size(flag: str, text: str | None) -> float | None:
        return quantity_flag(flag, text, Kind.CAPACITY)

    try:
        return SimSettings(
            max_num_batched_tokens=args.max_num_batched_tokens, max_num_seqs=args.max_num_seqs,
            scheduler=args.scheduler, cache_policy=args.cache_policy, load_mode=args.load_mode,
            router=args.router, prefix_caching=not args.no_prefix_caching,
            router_weights=RouterWeights.parse(args.router_weights)
            if args.router_weights is not None else RouterWeights(),
            dram_cache=size("--dram-cache", args.dram_cache), tier=args.cache_tier,
            offload_store=getattr(args, "offload_store", None),
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
            engine_overhead=not getattr(args, "no_engine_overhead", False),
        )
    except KvroofError as error:
        raise named_by_flag(error) from None


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def compare_variant(base: SimSettings, text: str) -> SimSettings:
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
        elif name == "router_weights":  # KEY=W/KEY=W: commas separate the variant's settings
            from kvroof.simulate.router_weights import RouterWeights

            try:
                parsed = RouterWeights.parse(value.replace("/", ","), base.router_weights)
            except KvroofError as error:
                raise KvroofError(f"--compare {text}: {error}") from None
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


def deployments_from_args(args: argparse.Namespace) -> list[Any]:
    """The replicas' deployments: ``--replicas`` of the main one, then each ``--replica``."""
    from kvroof.cost.memory_fit import check_fit
    from kvroof.simulate.resources import check_simulated_settings
    from kvroof.simulate.settings import MAX_REPLICAS, ReplicaSpec

    if args.model is None:
        raise KvroofError("--model is required")
    if not 0 <= args.replicas <= MAX_REPLICAS:
        raise KvroofError(f"--replicas: expected an integer from 0 to {MAX_REPLICAS:,}, got "
                          f"{args.replicas}")
    deps = []
    if args.replicas:
        main = deployment_from_args(args)
        try:
            check_simulated_settings(main)
        except KvroofError as error:
            raise named_by_flag(error) from None
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


def check_arrival_flags(args: argparse.Namespace, variants: list[SimSettings]) -> None:
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



_STAGE_FLAGS = ("stage_arrival", "stage_interval", "drain")
_NOT_WITH_STAGES = ("rps", "arrival", "burstiness", "time_scale", "users", "think_time")


def stage_plan_from_args(args: argparse.Namespace) -> Any:
    """The staged run ``--stages`` gives (a :class:`kvroof.workload.stages.StagePlan`), or
    ``None``; a stage flag without ``--stages``, or ``--stages`` with another arrival flag, is
    an error naming both."""
    if args.stages is None:
        for name in _STAGE_FLAGS:
            if getattr(args, name) is not None:
                flag = "--no-drain" if name == "drain" and not args.drain else \
                    "--" + name.replace("_", "-")
                raise KvroofError(f"{flag}: applies to a staged run (--stages)")
        return None
    for name in _NOT_WITH_STAGES:
        if getattr(args, name) is not None:
            raise KvroofError(f"--stages: a staged run sets its own arrivals; give no "
                              f"--{name.replace('_', '-')}")
    from kvroof.workload.stages import check_interval, plan_from_rates

    try:
        interval = quantity_flag("--stage-interval", args.stage_interval, Kind.TIME)
        return plan_from_rates(
            args.stages, arrival=args.stage_arrival or "poisson", seed=args.seed,
            interval=check_interval(0.0 if interval is None else interval),
            drain=args.drain is not False)
    except KvroofError as error:
        raise named_by_flag(error) from None
