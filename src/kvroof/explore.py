"""``kvroof.explore()``: pick a model, hardware and settings with widgets in a notebook and see the
offload roofline (the chosen K/T marked), kappa_crit in both regimes, the TTFT breakdown and
the host-link bandwidth in use (the one given beside it when the host DRAM caps it) change as
you go.

Needs ipywidgets (the optional extra ``notebook``: ``pip install 'kvroof[notebook]'``). Every
number comes from the library (:func:`kvroof.kappa_crit`, :func:`kvroof.ttft`,
:func:`kvroof.memory_fit`); the figure is :func:`kvroof.plot.offload_roofline_figure`.
"""

from __future__ import annotations

import html
import math
from typing import Any

from kvroof.display import count, duration
from kvroof.errors import KvroofError
from kvroof.specs.registry import Registry, default_registry
from kvroof.units import Kind, format_quantity

__all__ = ["Explorer", "explore"]

_KV_DTYPES = ("bf16", "fp8", "int4")


def _bandwidth(dep: Any) -> str:
    """The bandwidth transfers run at, and the one given when the host DRAM caps it."""
    from kvroof.cost.caller_warnings import bandwidth_cap

    used = format_quantity(float(dep.effective_bandwidth), Kind.BANDWIDTH)
    if not bandwidth_cap(dep):
        return used
    given = format_quantity(float(dep.bandwidth), Kind.BANDWIDTH)
    return f"{used}: the host DRAM share caps the {given} given"


def _widgets() -> Any:
    try:
        import ipywidgets
    except ImportError:
        raise KvroofError("explore() needs ipywidgets: pip install 'kvroof[notebook]'") from None
    return ipywidgets


class Explorer:
    """The widgets of :func:`explore` (``controls`` by name), the text ``readout`` (an HTML
    widget), the roofline ``image`` and ``widget``, the box a notebook displays."""

    def __init__(self, registry: Registry | None = None, *, model: str = "qwen3-235b-a22b",
                 hardware: str = "dgx-h100", figure: bool = True,
                 token_budget: float = 8192.0) -> None:
        widgets = _widgets()
        self._registry = registry or default_registry()
        self._figure = figure
        self._budget = token_budget
        self._quiet = False
        reg = self._registry
        hardware_options = [f"system {name}" for name in reg.names("system")]
        hardware_options += [f"accelerator {name}" for name in reg.names("accelerator")]
        self.controls: dict[str, Any] = {
            "model": widgets.Dropdown(options=reg.names("model"), value=reg.model(model).name,
                                      description="model"),
            "hardware": widgets.Dropdown(options=hardware_options, value=f"system {hardware}",
                                         description="hardware"),
            "tp": widgets.Dropdown(options=[1], value=1, description="TP"),
            "kv_dtype": widgets.Dropdown(options=_KV_DTYPES, value="bf16",
                                         description="KV dtype"),
            "new_tokens": widgets.BoundedIntText(value=128, min=1, max=1_000_000,
                                                 description="T (new)"),
            "cached_tokens": widgets.BoundedIntText(value=16384, min=0, max=100_000_000,
                                                    description="K (cached)"),
            "bandwidth_gbs": widgets.BoundedFloatText(value=0.0, min=0.0, max=1e6,
                                                      description="link GB/s",
                                                      tooltip="0: the hardware's own"),
            "regime": widgets.ToggleButtons(options=["alone", "busy iteration"],
                                            value="alone", description="regime"),
        }
        self.readout = widgets.HTML()
        self.image = widgets.Image(format="png")
        for name, control in self.controls.items():
            control.observe(self._on_change, names="value")
            if name in ("model", "hardware"):
                control.observe(self._on_hardware, names="value")
        self._update_tp(prefer=8)
        self.widget = widgets.HBox([widgets.VBox(list(self.controls.values())),
                                    widgets.VBox([self.readout, self.image])])
        self.refresh()

    # -- state -------------------------------------------------------------------------------
    def _where(self) -> dict[str, Any]:
        kind, name = str(self.controls["hardware"].value).split(" ", 1)
        return {kind: name}

    def _settings(self) -> dict[str, Any]:
        settings: dict[str, Any] = {"tp": int(self.controls["tp"].value),
                                    "kv_dtype": self.controls["kv_dtype"].value}
        bandwidth = float(self.controls["bandwidth_gbs"].value)
        if bandwidth > 0:
            settings["bandwidth"] = bandwidth * 1e9
        return settings

    def _update_tp(self, prefer: int | None = None) -> None:
        from kvroof.cost.deployment import deployment
        from kvroof.cost.memory_fit import memory_fit, valid_tp_degrees

        base = deployment(self.controls["model"].value, registry=self._registry,
                          **self._where())
        degrees = valid_tp_degrees(base)
        current = prefer or int(self.controls["tp"].value)
        fitting = [tp for tp in degrees if memory_fit(deployment(
            self.controls["model"].value, registry=self._registry, tp=tp,
            **self._where())).fits]
        choice = current if current in degrees else (fitting[0] if fitting else degrees[-1])
        control = self.controls["tp"]
        self._quiet = True  # one refresh after both changes, not one per change
        try:
            control.options = degrees
            control.value = choice
        finally:
            self._quiet = False

    def _on_hardware(self, change: Any) -> None:
        self._update_tp()
        self.refresh()

    def _on_change(self, change: Any) -> None:
        if not self._quiet and change["owner"] not in (self.controls["model"],
                                                        self.controls["hardware"]):
            self.refresh()

    # -- output ------------------------------------------------------------------------------
    def deployment(self, busy: bool | None = None) -> Any:
        """The deployment the controls describe (in the chosen regime, or the one given)."""
        from kvroof.cost.deployment import deployment

        settings = self._settings()
        if busy is None:
            busy = self.controls["regime"].value == "busy iteration"
        if busy:
            settings["iteration_tokens"] = max(self._budget,
                                               float(self.controls["new_tokens"].value))
        return deployment(self.controls["model"].value, registry=self._registry,
                          **self._where(), **settings)

    def refresh(self) -> None:
        """Recompute the readout and the figure from the controls."""
        from kvroof.cost.kappa import kappa_crit
        from kvroof.cost.memory_fit import fit_problem
        from kvroof.cost.timing import ttft

        t = float(self.controls["new_tokens"].value)
        k = float(self.controls["cached_tokens"].value)
        try:
            dep = self.deployment()
            problem = fit_problem(dep, t + k)
            if problem:
                self.readout.value = f"<p><b>{html.escape(dep.label)}</b>: {problem}</p>"
                self.image.value = b""
                return
            alone = kappa_crit(self.deployment(busy=False), t)
            busy = kappa_crit(self.deployment(busy=True), t)
            result = ttft(dep, t, k, "layerwise")
        except KvroofError as error:
            self.readout.value = f"<p>{html.escape(str(error))}</p>"
            return

        def kappa(value: float) -> str:
            return "never transfer-bound" if math.isinf(value) else f"{value:.4g}"

        rows = [
            ("kappa_crit, request alone", kappa(float(alone.kappa_crit))),
            (f"kappa_crit, in an iteration of {count(max(self._budget, t))} tokens",
             kappa(float(busy.kappa_crit))),
            (f"TTFT (layerwise), T = {count(t)}, K = {count(k)}", duration(result.ttft)),
            ("compute", duration(result.compute)),
            ("transfer", duration(result.transfer)),
            ("exposed transfer", duration(result.exposed_transfer)),
            ("bound", str(result.bound)),
            ("host link (per GPU)", _bandwidth(dep)),
        ]
        body = "".join(f"<tr><td>{html.escape(a)}</td><td><b>{html.escape(b)}</b></td></tr>"
                       for a, b in rows)
        self.readout.value = (f"<p>{html.escape(dep.label)}</p><table>{body}</table>")
        if self._figure:
            from kvroof.plot.roofline import offload_roofline_figure

            where = self._where()
            hardware = where["system"] if "system" in where else (
                where["accelerator"], self._registry.accelerator(where["accelerator"]).host_link)
            settings = {**self._settings()}
            if dep.iteration_tokens is not None:
                settings["iteration_tokens"] = dep.iteration_tokens
            fig = offload_roofline_figure([dep.model.name], [hardware], new_tokens=t,
                                          registry=self._registry, mark_ratio=k / t,
                                          **settings)
            self.image.value = fig._repr_png_()  # type: ignore[attr-defined]

    def _ipython_display_(self) -> None:  # pragma: no cover - needs a notebook front end
        from IPython.display import display

        display(self.widget)  # type: ignore[no-untyped-call]


def explore(registry: Registry | None = None, **options: Any) -> Explorer:
    """Widgets for model, hardware, TP, KV dtype, T, K, link bandwidth and regime that redraw
    the offload roofline and print kappa_crit (both regimes) and the TTFT breakdown. In a
    notebook, ``kvroof.explore()`` as a cell's last line shows them."""
    return Explorer(registry, **options)
