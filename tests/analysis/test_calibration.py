"""Calibration recovers known parameters from synthetic measurements made with the cost model
itself (plus noise), round-trips through CSV/JSON and YAML, and rejects bad results files."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from kvroof.analysis.calibration import (
    calibrate,
    fit_compute_efficiency,
    fit_link,
    stack_deployment,
)
from kvroof.cli import main
from kvroof.cost.timing import ttft
from kvroof.errors import KvroofError
from kvroof.measure.prefill import LayerShape
from kvroof.measure.results import (
    Measurement,
    PrefillRow,
    ResultsError,
    read_results,
    write_results,
)
from kvroof.specs.hardware import Calibration
from kvroof.specs.registry import Registry

REG = Registry(use_env=False)
SYSTEM = REG.system("dgx-h100")
ACCELERATOR = REG.accelerator(SYSTEM.accelerator)
LINK = REG.link(SYSTEM.host_link)
SHAPE = LayerShape(hidden=4096, num_heads=32, num_kv_heads=8, head_dim=128, intermediate=14336)
TRUE = Calibration(compute_efficiency_max=0.7, compute_half_tokens=96.0,
                   link_bandwidth=21e9, link_latency=9e-6, overlap_efficiency=0.8)
LAYERS = 8


def synthetic_results(folder: Path, noise: float, seed: int = 0,
                      layers: int = LAYERS,
                      ts: tuple[int, ...] = (16, 64, 256, 512, 1024, 2048, 4096),
                      ks: tuple[int, ...] = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768,
                                             65536)) -> Path:
    """Rows measured on a 'machine' that behaves exactly like the calibrated cost model: the
    whole-model roofline at the calibrated efficiency curve (what calibration fits)."""
    rng = np.random.default_rng(seed)
    truth = SYSTEM.model_copy(update={"calibration": TRUE})
    dep = dataclasses.replace(stack_deployment(SHAPE, layers, truth, ACCELERATOR, LINK),
                              compute_model="roofline")
    rows = []
    for t in ts:
        for k in ks:
            serial = ttft(dep, t, k, "serial")
            overlapped = float(ttft(dep, t, k, "layerwise").ttft)

            def jitter(value: float) -> float:
                return float(value) * (1 + noise * rng.standard_normal())

            compute, transfer = jitter(serial.compute), jitter(serial.transfer)
            rows.append(PrefillRow(
                model="llama-3.1-8b", layers_run=layers, layers_model=32, T=t, K=k,
                kv_bytes=int(k * layers * 2 * 8 * 128 * 2), flops=float(serial.flops),
                compute_s=compute, transfer_s=transfer, serial_s=jitter(serial.ttft),
                overlap_s=jitter(overlapped), p_oh=transfer / compute,
            ))
    measurement = Measurement("prefill", list(rows), {"model": "llama-3.1-8b"},
                              {"shape": dataclasses.asdict(SHAPE)})
    csv_path, _ = write_results(folder, measurement, {"device": "synthetic"})
    return csv_path


def test_recovers_exact_parameters_without_noise(tmp_path: Path) -> None:
    result = calibrate(read_results(synthetic_results(tmp_path, 0.0)), SYSTEM, ACCELERATOR, LINK)
    fitted = result.calibration
    assert fitted.compute_efficiency_max == pytest.approx(0.7, rel=1e-6)
    assert fitted.compute_half_tokens == pytest.approx(96.0, rel=1e-6)
    assert fitted.link_bandwidth == pytest.approx(21e9, rel=1e-6)
    assert fitted.link_latency == pytest.approx(9e-6, rel=1e-5)
    assert fitted.overlap_efficiency == pytest.approx(0.8, rel=1e-6)
    assert all(e.mape < 1e-6 for e in result.errors)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_recovers_parameters_with_two_percent_noise(tmp_path: Path, seed: int) -> None:
    """2% multiplicative noise on every time: tolerances 5% (efficiency, bandwidth), 25% for
    T_half and latency (small terms), 0.1 absolute for eta; prediction MAPE near the noise."""
    result = calibrate(read_results(synthetic_results(tmp_path, 0.02, seed)), SYSTEM,
                       ACCELERATOR, LINK)
    fitted = result.calibration
    assert fitted.compute_efficiency_max == pytest.approx(0.7, rel=0.05)
    assert fitted.compute_half_tokens == pytest.approx(96.0, rel=0.25)
    assert fitted.link_bandwidth == pytest.approx(21e9, rel=0.05)
    assert fitted.link_latency == pytest.approx(9e-6, rel=0.25)
    assert fitted.overlap_efficiency == pytest.approx(0.8, abs=0.1)
    assert all(e.mape < 0.05 for e in result.errors), result.errors


def test_measured_and_predicted_kappa_agree_on_model_made_data(tmp_path: Path) -> None:
    result = calibrate(read_results(synthetic_results(tmp_path, 0.0)), SYSTEM, ACCELERATOR, LINK)
    crossed = [k for k in result.kappa if k.measured_status == "crossed"]
    assert crossed
    for k in crossed:  # log-linear interpolation between grid points vs the exact crossing
        assert k.measured == pytest.approx(k.predicted, rel=0.1)


def test_fit_helpers_by_hand() -> None:
    """eff = 0.5 T / (T + 10) of 1e12: achieved 0.5e12 T / (T + 10) at T = 10, 30, 90."""
    t = [10.0, 30.0, 90.0]
    achieved = [0.5e12 * x / (x + 10) for x in t]
    eff, half, note = fit_compute_efficiency(t, achieved, 1e12)
    assert (eff, half, note) == (pytest.approx(0.5), pytest.approx(10.0), "")
    bandwidth, latency, _ = fit_link([1e6, 4e6, 16e6], 10,
                                     [1e6 / 2e9 + 1e-5, 4e6 / 2e9 + 1e-5, 16e6 / 2e9 + 1e-5])
    assert bandwidth == pytest.approx(2e9) and latency == pytest.approx(1e-6)


def test_calibrated_yaml_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = synthetic_results(tmp_path / "r", 0.0)
    specs = tmp_path / "specs"
    specs.mkdir()
    out = specs / "lab.yaml"
    code = main(["calibrate", str(results.parent), "--system", "dgx-h100", "--name", "lab",
                 "-o", str(out)])
    text = capsys.readouterr().out
    assert code == 0 and "MAPE" in text and "wrote" in text
    registry = Registry([specs], use_env=False)
    lab = registry.system("lab")
    assert lab.calibration is not None
    assert lab.calibration.link_bandwidth == pytest.approx(21e9, rel=1e-6)
    assert "kvroof calibrate" in lab.sources["calibration"]
    code = main(["--spec-path", str(specs), "ttft", "--model", "llama-3.1-8b", "--system", "lab",
                 "--new-tokens", "64", "--cached-tokens", "4096", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    from kvroof.cost.deployment import deployment

    dep = deployment("llama-3.1-8b", system=lab, registry=registry)
    assert dep.resolved_bandwidth_source == "calibrated"
    assert dep.compute_efficiency_at(64) == pytest.approx(0.7 * 64 / (64 + 96), rel=1e-6)
    assert data["ttft_s"] == pytest.approx(float(ttft(dep, 64, 4096).ttft))


def test_bad_results(tmp_path: Path) -> None:
    path = synthetic_results(tmp_path, 0.0)
    path.with_suffix(".json").unlink()
    with pytest.raises(ResultsError, match="needs the JSON header"):
        calibrate(read_results(path), SYSTEM, ACCELERATOR, LINK)
    broken = tmp_path / "b" / "prefill.csv"
    broken.parent.mkdir()
    lines = synthetic_results(tmp_path / "c", 0.0).read_text().splitlines()
    broken.write_text("\n".join([lines[0], lines[1], lines[2].replace(",16,", ",-16,", 1)]))
    with pytest.raises(ResultsError) as info:
        read_results(broken)
    assert str(broken) in str(info.value) and "\n" not in str(info.value)
    assert "row 2" in str(info.value) or "line 3" in str(info.value), str(info.value)


def test_other_hardware_is_refused(tmp_path: Path) -> None:
    """Measured compute above the claimed accelerator's peak: wrong --system."""
    a100 = REG.accelerator("a100-sxm")
    results = read_results(synthetic_results(tmp_path, 0.0))
    with pytest.raises(KvroofError, match="other hardware"):
        calibrate(results, REG.system("dgx-a100"), a100, REG.link("pcie-gen4-x16"))


def test_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", str(tmp_path / "none.csv"), "--system", "dgx-h100"]) == 2
    assert "cannot read" in capsys.readouterr().err
    results = synthetic_results(tmp_path, 0.0)
    assert main(["calibrate", str(results), "--system", "dgx-h100", "-o",
                 str(tmp_path / "x.txt")]) == 2
    assert "expected a .yaml file" in capsys.readouterr().err


def test_report_with_measurements(tmp_path: Path) -> None:
    from kvroof.report import build_report, load_report_config

    synthetic_results(tmp_path / "m", 0.0)
    config = tmp_path / "c.yaml"
    config.write_text("measurements: m\nmeasured_system: dgx-h100\nmodels: [llama-3.1-8b]\n")
    result = build_report(tmp_path / "out", load_report_config(config, REG), REG)
    assert (tmp_path / "out" / "figures" / "calibration.png").stat().st_size > 1000
    table = next(t for t in result.tables if t.key == "calibration")
    assert any("21 GB/s" in row[1] for row in table.rows)
    bad = tmp_path / "bad.yaml"
    bad.write_text("measurements: m\n")
    with pytest.raises(KvroofError, match="measured_system"):
        load_report_config(bad, REG)


def test_single_t_fits_a_constant_and_says_so(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Rows of one T cannot show how efficiency grows with T: a constant, T_half = 0, and a
    note. Without noise every row achieves TRUE's efficiency at T = 256:
    0.7 x 256 / (256 + 96) = 0.50909."""
    results = synthetic_results(tmp_path, 0.0, ts=(256,))
    result = calibrate(read_results(results), SYSTEM, ACCELERATOR, LINK)
    assert result.calibration.compute_half_tokens == 0.0
    assert result.calibration.compute_efficiency_max == pytest.approx(0.7 * 256 / 352, rel=1e-9)
    assert any(n.startswith("every row has T = 256: the growth of compute efficiency")
               for n in result.notes)
    assert main(["calibrate", str(results), "--system", "dgx-h100"]) == 0
    assert "note: every row has T = 256" in capsys.readouterr().out


def test_degenerate_rows_name_the_file(tmp_path: Path) -> None:
    """One K for every row: the link fit has one size; one layer: nothing overlaps. Both are
    one line naming the results file (they named no file before)."""
    same_k = synthetic_results(tmp_path / "k", 0.0, ks=(4096,))
    with pytest.raises(ResultsError) as info:
        calibrate(read_results(same_k), SYSTEM, ACCELERATOR, LINK)
    assert str(info.value) == (f"{same_k}: link fit: needs at least two different transfer "
                               "sizes")
    one_layer = synthetic_results(tmp_path / "l", 0.0, layers=1)
    with pytest.raises(ResultsError, match=f"^{one_layer}: overlap fit: with one layer"):
        calibrate(read_results(one_layer), SYSTEM, ACCELERATOR, LINK)


def test_name_follows_the_spec_name_rule(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The loader skips a spec named '../../x y'; calibrate refuses to write one."""
    results = synthetic_results(tmp_path, 0.0)
    out = tmp_path / "x.yaml"
    assert main(["calibrate", str(results), "--system", "dgx-h100", "--name", "../../x y",
                 "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == ("kvroof: error: --name: '../../x y' is not a valid spec name (letters, "
                   "digits and . _ + -, starting with a letter or digit)\n")
    assert not out.exists()
    with pytest.raises(KvroofError, match=r"^name: '-x' is not a valid spec name"):
        calibrate(read_results(results), SYSTEM, ACCELERATOR, LINK, "-x")


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"\x89PNG\r\n\x1a\n\xff\xfe", "prefill.csv: not UTF-8 text"),
        (b"model,T\x00\n", "unknown column(s) 'T\\x00'"),  # shown escaped
        (b"x" * 70_000, "prefill.csv: line 1 is longer than 65,536 characters"),
        (b'model,"' + b"x" * 200_000 + b'"\n', "prefill.csv: line 1 is longer"),
    ],
)
def test_hostile_results_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                             content: bytes, fragment: str) -> None:
    path = tmp_path / "prefill.csv"
    path.write_bytes(content)
    assert main(["calibrate", str(path), "--system", "dgx-h100"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err, err


def test_hostile_results_header(tmp_path: Path) -> None:
    path = synthetic_results(tmp_path, 0.0)
    header = path.with_suffix(".json")
    header.write_text('{"benchmark": ' + "[" * 5000 + "]" * 5000 + "}")
    with pytest.raises(ResultsError, match=r"prefill.json: nested deeper than 32 levels"):
        read_results(path)
    header.write_bytes(b"\xff\xfe{}")
    with pytest.raises(ResultsError, match=r"prefill.json: not UTF-8 text"):
        read_results(path)
    header.write_text('{"benchmark": "' + "x" * 10_000 + '", "schema_version": 1}')
    with pytest.raises(ResultsError) as info:
        read_results(path)
    assert len(str(info.value)) < len(str(header)) + 200  # the value is cut, not shown whole


@pytest.mark.parametrize(
    ("machine", "label"),
    [
        ({"device": "cpu", "device_name": "AMD EPYC 7B13"},
         "calibrated on AMD EPYC 7B13 (a CPU run), against DGX"),
        ({"device": "cuda", "device_name": "NVIDIA H200"},
         "calibrated on NVIDIA H200, against DGX"),
        ({"device": "synthetic"}, "DGX (calibrated)"),  # no device name recorded
        (None, "DGX (calibrated)"),
        ({"device_name": "x" * 500}, "calibrated on " + "x" * 57 + "..., against DGX"),
    ],
)
def test_calibrated_system_says_where_it_was_measured(machine: object, label: str) -> None:
    """A CPU run calibrated against the DGX H100's specs must not be shown as a DGX H100."""
    from kvroof.analysis.calibration import calibrated_label

    assert calibrated_label("DGX", machine) == label


def test_calibrated_spec_names_the_results_machine(tmp_path: Path) -> None:
    results = read_results(synthetic_results(tmp_path, 0.0))
    assert results.header is not None
    header = {**results.header, "machine": {"device": "cpu", "device_name": "Test CPU"}}
    result = calibrate(dataclasses.replace(results, header=header), SYSTEM, ACCELERATOR, LINK)
    expected = f"calibrated on Test CPU (a CPU run), against {SYSTEM.label}"
    assert result.system.display_name == expected
