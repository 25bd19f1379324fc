"""Nothing lost: outputs are written through temporary files renamed into place, the report is
built apart and moved in whole, kvroof's folders carry a marker, and Ctrl-C ends any command
with one line and exit status 130, leaving the previous outputs intact."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest
from matplotlib.figure import Figure

from kvroof import outputs
from kvroof.cli import INTERRUPTED, main
from kvroof.errors import KvroofError
from kvroof.outputs import (
    MARKER,
    OutputFolder,
    interrupts_deferred,
    read_marker,
    replacing,
    write_text,
)
from kvroof.report import ReportConfig, build_report
from kvroof.specs.registry import Registry
from tests.signal_children import sigint_raises

REG = Registry(use_env=False)
# a small report (one model, one hardware pair, 100 synthetic requests): a few seconds
SMALL = {"models": ["llama-3.1-8b"], "paper_models": ["llama-3.1-70b"],
         "hardware": [{"accelerator": "h100-sxm", "link": "pcie-gen5-x16"}],
         "synthetic_requests": 100}


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (hidden ones too) and its bytes."""
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def temporaries(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if "kvroof-tmp" in p.name]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- files -------------------------------------------------------------------------------------


def test_write_text_replaces_only_when_complete(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    write_text(target, "old")
    with pytest.raises(KeyboardInterrupt), replacing(target) as (temp,):
        temp.write_text("half of the ne")
        raise KeyboardInterrupt
    assert target.read_text() == "old" and temporaries(tmp_path) == []
    write_text(target, "new")
    assert target.read_text() == "new" and temporaries(tmp_path) == []


def test_files_written_together_stay_together(tmp_path: Path) -> None:
    first, second = tmp_path / "a.csv", tmp_path / "a.json"
    first.write_text("old csv")
    second.write_text("old json")
    with pytest.raises(KeyboardInterrupt), replacing(first, second) as (t1, _):
        t1.write_text("new csv")  # the CSV is complete; the interrupt comes before the JSON
        raise KeyboardInterrupt
    assert (first.read_text(), second.read_text()) == ("old csv", "old json")
    assert temporaries(tmp_path) == []


def test_ctrl_c_during_the_renames_waits_for_them(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGINT that arrives between the two renames is held until both are done (a real
    SIGINT, raised in this process: :func:`sigint_raises` makes sure it is not ignored)."""
    first, second = tmp_path / "a.csv", tmp_path / "a.json"
    real_replace = os.replace
    calls: list[str] = []

    def replace_then_interrupt(src: Any, dst: Any) -> None:
        real_replace(src, dst)
        calls.append(str(dst))
        if len(calls) == 1:
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(outputs.os, "replace", replace_then_interrupt)
    with sigint_raises(), pytest.raises(KeyboardInterrupt), \
            replacing(first, second) as (t1, t2):
        t1.write_text("new csv")
        t2.write_text("new json")
    assert (first.read_text(), second.read_text()) == ("new csv", "new json")
    assert calls == [str(first), str(second)]


@sigint_raises()
def test_interrupts_deferred_restores_the_handler() -> None:
    before = signal.getsignal(signal.SIGINT)
    with interrupts_deferred():
        pass
    assert signal.getsignal(signal.SIGINT) is before
    reached = []
    with pytest.raises(KeyboardInterrupt), interrupts_deferred():
        signal.raise_signal(signal.SIGINT)
        reached.append(True)  # the block runs to its end first
    assert reached == [True] and signal.getsignal(signal.SIGINT) is before


def test_a_folder_is_not_a_file_target(tmp_path: Path) -> None:
    with pytest.raises(KvroofError, match="is a folder; give a file name"):
        write_text(tmp_path, "x")


def partial_savefig(self: Figure, fname: Any, *args: Any, **kwargs: Any) -> None:
    fname.write(b"\x89PNG half a figure")
    raise KeyboardInterrupt


def test_plot_interrupted_keeps_the_previous_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "b.png"
    argv = ["plot", "breakdown", "--model", "qwen3-32b", "--system", "dgx-h100", "-o",
            str(target)]
    assert run(capsys, *argv)[0] == 0
    before = target.read_bytes()
    monkeypatch.setattr(Figure, "savefig", partial_savefig)
    code, out, err = run(capsys, *argv)
    assert (code, out, err) == (INTERRUPTED, "", "kvroof: interrupted\n")
    assert target.read_bytes() == before and temporaries(tmp_path) == []


def test_synth_and_calibrate_interrupted_keep_the_previous_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The interrupt comes once the temporary file is complete, just before the rename."""
    from tests.analysis.test_calibration import synthetic_results

    table = tmp_path / "w.csv"
    table.write_text("old\n")
    spec = tmp_path / "lab.yaml"
    spec.write_text("old: spec\n")
    results = synthetic_results(tmp_path / "r", 0.0)

    def interrupted(src: Any, dst: Any) -> None:
        assert Path(src).stat().st_size > 0
        raise KeyboardInterrupt

    monkeypatch.setattr(outputs.os, "replace", interrupted)
    code, _, err = run(capsys, "workload", "synth", "sharegpt", "-n", "100", "-o", str(table))
    assert (code, err) == (INTERRUPTED, "kvroof: interrupted\n")
    code, _, err = run(capsys, "calibrate", str(results), "--system", "dgx-h100", "--name",
                       "lab", "-o", str(spec))
    assert (code, err) == (INTERRUPTED, "kvroof: interrupted\n")
    assert table.read_text() == "old\n" and spec.read_text() == "old: spec\n"
    assert temporaries(tmp_path) == []


def test_measure_results_pair_is_replaced_together(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from kvroof.measure import results as results_module
    from tests.analysis.test_calibration import synthetic_results

    csv_path = synthetic_results(tmp_path, 0.0)
    before = snapshot(tmp_path)
    real_dumps = json.dumps

    def interrupted(*args: Any, **kwargs: Any) -> str:
        if kwargs.get("indent") == 2:  # the header, written after the CSV
            raise KeyboardInterrupt
        return real_dumps(*args, **kwargs)

    monkeypatch.setattr(results_module.json, "dumps", interrupted)
    with pytest.raises(KeyboardInterrupt):
        synthetic_results(tmp_path, 0.01)
    assert snapshot(tmp_path) == before and csv_path.exists()


# -- the CLI -------------------------------------------------------------------------------------


def test_ctrl_c_anywhere_is_one_line_and_130(capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from kvroof.cli import specs

    def interrupted(args: Any) -> None:
        print("half a table")
        raise KeyboardInterrupt

    monkeypatch.setattr(specs, "run_list", interrupted)
    code, out, err = run(capsys, "list", "models")
    assert code == 130 and err == "kvroof: interrupted\n" and out == "half a table\n"


# -- the report folder ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def built_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("built") / "out"
    build_report(folder, ReportConfig.model_validate(SMALL), REG)
    return folder


@pytest.fixture
def previous_report(built_report: Path, tmp_path: Path) -> Path:
    """A copy of a report kvroof wrote (its marker included)."""
    folder = tmp_path / "out"
    shutil.copytree(built_report, folder)
    return folder


def test_report_folder_is_marked(previous_report: Path) -> None:
    files = read_marker(previous_report)
    assert files is not None and "report.html" in files and "figures/roofline.png" in files
    on_disk = sorted(p.relative_to(previous_report).as_posix()
                     for p in previous_report.rglob("*") if p.is_file())
    assert on_disk == sorted([*files, MARKER])


@pytest.mark.parametrize("where", ["html", "third figure"])
def test_interrupted_report_leaves_the_previous_one(
        previous_report: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, where: str) -> None:
    """Ctrl-C while report.html is written (it used to leave it empty) or between figures (it
    used to leave old and new figures mixed): the previous report is intact, byte for byte."""
    before = snapshot(previous_report)
    if where == "html":
        import kvroof.report.run as run_module

        def interrupted(*args: Any, **kwargs: Any) -> str:
            raise KeyboardInterrupt

        monkeypatch.setattr(run_module, "render_html", interrupted)
    else:
        import kvroof.plot.style as style

        real_save = style.save_figure
        saved: list[Path] = []

        def third_interrupts(fig: Figure, path: Any) -> Path:
            if len(saved) == 2:
                raise KeyboardInterrupt
            saved.append(real_save(fig, path))
            return saved[-1]

        monkeypatch.setattr(style, "save_figure", third_interrupts)
    config = tmp_path / "c.yaml"
    config.write_text(json.dumps({**SMALL, "new_tokens": 256}))  # JSON is YAML
    code, out, err = run(capsys, "report", "-o", str(previous_report), "--config", str(config),
                         "--quiet")
    assert (code, out, err) == (INTERRUPTED, "", "kvroof: interrupted\n")
    assert snapshot(previous_report) == before
    assert temporaries(tmp_path) == []


def test_report_replaces_its_own_files_and_keeps_others(previous_report: Path) -> None:
    """A second run with SVG too: figures replaced, SVGs added, a user's note kept; a third
    run with PNG only removes the SVGs the second run listed, and still keeps the note."""
    (previous_report / "notes.txt").write_text("mine")
    build_report(previous_report, ReportConfig.model_validate({**SMALL, "formats": ["png", "svg"]}),
                 REG)
    assert (previous_report / "figures" / "roofline.svg").exists()
    build_report(previous_report, ReportConfig.model_validate(SMALL), REG)
    assert not list((previous_report / "figures").glob("*.svg"))
    assert (previous_report / "notes.txt").read_text() == "mine"
    assert temporaries(previous_report.parent) == []


def test_foreign_folder_needs_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "report.md").write_text("my own report")
    config = tmp_path / "c.yaml"
    config.write_text(json.dumps(SMALL))
    code, out, err = run(capsys, "report", "-o", str(folder), "--config", str(config), "--quiet")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "not empty and not made by kvroof" in err and "--force" in err
    assert snapshot(folder) == {"report.md": b"my own report"}
    (folder / "keep.txt").write_text("keep")
    code, out, err = run(capsys, "report", "-o", str(folder), "--config", str(config),
                         "--quiet", "--force")
    assert code == 0, err
    assert (folder / "report.md").read_text().startswith("# kvroof report")
    assert (folder / "keep.txt").read_text() == "keep" and read_marker(folder) is not None


def test_empty_folder_and_broken_marker(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert outputs.check_output_folder(empty, force=False) is True
    odd = tmp_path / "odd"
    odd.mkdir()
    for text in ('{"written_by": "kvroof", "files": ["../../etc/passwd"]}', "[" * 10_000,
                 '{"files": []}', "\xff"):
        (odd / MARKER).write_text(text)
        assert read_marker(odd) is None  # not trusted: the folder counts as foreign
        with pytest.raises(KvroofError, match="not made by kvroof"):
            outputs.check_output_folder(odd, force=False)


def test_measure_folder(tmp_path: Path) -> None:
    """kvroof measure -o: a foreign non-empty folder is refused before anything runs; the
    folder kvroof makes lists what it wrote."""
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "data.csv").write_text("x")
    with pytest.raises(KvroofError, match=r"-o .*foreign: not empty and not made by kvroof"):
        OutputFolder(foreign, force=False, command="measure", flag="-o")
    folder = OutputFolder(tmp_path / "a" / "m", force=False, command="measure")
    assert not folder.path.exists()  # nothing made until something is written
    folder.create()
    (folder.path / "link.csv").write_text("x")
    folder.add(folder.path / "link.csv")
    assert read_marker(folder.path) == ["link.csv"]
    again = OutputFolder(folder.path, force=False, command="measure")  # its own: fine
    again.add(folder.path / "link.csv")
    assert read_marker(folder.path) == ["link.csv"]
