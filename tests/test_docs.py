"""Every command and snippet in README.md and docs/*.md, run and compared with what the docs print.

What is extracted (every fenced block of README.md and docs/*.md):

- a ``text``, ``console``, ``bash`` or unlabelled block with lines that start with ``$ ``: each
  such line is a command (run with ``bash -c``, so ``&&``, quotes and ``# comments`` work), and
  the lines after it, up to the next ``$ `` line or the end of the block, are the output the
  docs show (trailing blank lines dropped);
- a ``bash`` block without prompts: each line (``\\`` continuations joined, comment-only lines
  left out) is a command with no documented output;
- a ``python`` block: a snippet, run statement by statement in one namespace;
- every other block (YAML, output samples, usage synopses) is not runnable and must be listed,
  with its reason, in ``SKIPPED``; so must every command or snippet that is not run. A block
  that is neither run nor listed fails ``test_doc_block``, and a ``SKIPPED`` entry that matches
  nothing fails ``test_skipped_entries_are_used``: nothing is dropped silently.

How it is run: commands in a fresh working folder per block that holds the repository's
top-level entries as symlinks (``examples/`` as a copy), so relative paths work as from the
repository root and files written with ``-o`` land in a temporary folder, never in the
repository; ``kvroof`` is this interpreter's ``python -m kvroof``; ``KVROOF_SPEC_PATH`` is
empty, ``MPLBACKEND=Agg``, ``PYTHONUNBUFFERED=1`` (stdout and stderr merged in the order a
terminal shows them). A command runs after the earlier commands of its block (run once and
shared), so ``workload synth -o nqa.csv`` precedes ``workload stats nqa.csv``. Python snippets run
in-process with the block's folder as working directory; a snippet that uses an optional extra
(``to_frame()``/``to_pandas()``: pandas; ``explore()``: ipywidgets) is skipped with
``pytest.importorskip`` when it is absent; placeholder paths are replaced as ``PLACEHOLDERS``
says.

Comparison rules:

- Exit status: 2 when a documented output line starts with ``kvroof: error:``, else 0. A
  command with no documented output is checked for its exit status only. A command with
  ``-o PATH``, or a ``# writes PATH`` comment, must also have written PATH.
- Output: exact, line by line (trailing whitespace and trailing blank lines ignored), except
  that a documented line that is exactly ``...`` matches any run of lines (none included).
- Volatile fields, and only these (``VOLATILE``): both sides have them replaced by a marker
  before comparing, so the docs keep the real figures of the run they quote: the wall-clock time
  and the "x real time" speed-up on a ``simulated`` line, and the installed package's folder
  (``.../kvroof``).
- Python: a ``print(...)`` statement whose trailing comment, or the comment line right after
  it, starts with a value (a number, ``[``, ``True``/``False``/``None``) is checked against
  what that statement printed, token by token: a documented number matches when the printed one
  rounds to the digits shown (at most half a unit of the last documented digit away; ``148``
  matches 148.13, ``9.894e+14`` matches 989400000000000.0), a word must be equal, unit words
  (``UNITS``) are passed over, and the check stops at the first ``:`` or ``(`` or when the
  printed tokens are used up; every printed token must be matched. Other comments are prose.
- ``kvroof measure`` (torch, seconds of benchmarks whose figures differ from run to run) and
  what depends on its output are skipped; the slowest command run, ``kvroof report``, takes
  about 5 s and runs once.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import io
import itertools
import os
import re
import shlex
import shutil
import subprocess
import sys
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest

import kvroof
from kvroof.specs.registry import ENV_VAR

REPO = Path(__file__).resolve().parent.parent
DOC_FILES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
COMMAND_TIMEOUT_S = 120

# Not run, with the reason: (file, the start of the command, or of the block's first line).
SKIPPED: dict[tuple[str, str], str] = {
    # commands and snippets
    ("README.md", "python3 -m venv .venv && . .venv/bin/activate && pip install . &&"):
        "creates a virtual environment and installs kvroof with pip; its `kvroof report` runs "
        "from docs/report.md",
    ("README.md", "python3 -m venv .venv && . .venv/bin/activate && pip install -e"):
        "creates a virtual environment, installs the test extra and runs the whole test suite",
    ("README.md", "pip install 'kvroof[pandas]'"): "installs an optional extra with pip",
    ("README.md", "pip install 'kvroof[notebook]'"): "installs an optional extra with pip",
    ("README.md", "kvroof measure all --quick --device cpu"):
        "kvroof measure needs torch and runs benchmarks whose figures change from run to run",
    ("README.md", "mkdir my-specs && kvroof calibrate measure-out"):
        "needs the measure-out folder of the kvroof measure run above (skipped)",
    ("README.md", "kvroof --spec-path my-specs kappa"):
        "needs the calibrated spec written by kvroof calibrate above (skipped)",
    ("docs/measure.md", "time kvroof measure all --quick --device cpu"):
        "kvroof measure needs torch and runs benchmarks whose figures change from run to run",
    ("docs/measure.md", "from kvroof.measure import PrefillRow, read_results"):
        "reads measure-out/prefill.csv, the output of kvroof measure (skipped)",
    ("docs/report.md", "kvroof report -o out --config my-report.yaml"):
        "my-report.yaml is a placeholder for the user's config (the keys are in the YAML below)",
    ("docs/validation.md", "kvroof validate --cases my_cases/"):
        "my_cases/ is a placeholder for the user's case files",
    ("docs/crosscheck.md", "pip install -e '.[test,crosscheck]'"):
        "installs the crosscheck extra (transformers, torch) with pip",
    ("docs/crosscheck.md", "pytest -q tests/crosscheck"):
        "runs tests/crosscheck, part of the test suite itself (about 40 s)",
    # blocks that are not commands
    ("README.md", "spec: accelerator"):
        "YAML excerpt of hardware_specs/accelerators/h100-sxm.yaml (sources cut to `...`)",
    ("README.md", "my_specs/gpu.yaml: hbm_capacity:"):
        "an error message quoted for a hypothetical spec file; no command",
    ("docs/attention-families.md", "layers:"): "YAML fragment of a model spec; no command",
    ("docs/measure.md", "kvroof measure {link,compute,prefill,all}"): "usage synopsis",
    ("docs/measure.md", "prefill [###"): "stderr of the kvroof measure run above (skipped)",
    ("docs/measure.md", "model,layers_run,layers_model"):
        "rows of measure-out/prefill.csv from the kvroof measure run above (skipped)",
    ("docs/measure.md", 'kvroof measure all --device cuda'):
        "the command benchmarks/gpu/run_measure.sh runs: needs a CUDA GPU and torch",
    ("docs/measure.md", "kvroof calibrate RESULTS --system SYSTEM"): "usage synopsis",
    ("docs/report.md", "models: [qwen3-235b-a22b, deepseek-v3]"):
        "a report config listing every key; its paths (traces/, measure-out) are placeholders",
    ("docs/simulate.md", "model: llama-3.1-70b"): "a sweep config example; no command",
    ("docs/validation.md", "source:"): "a validation case file's layout (values are `...`)",
}

# Placeholder paths in snippets, replaced by a real file of the repository.
PLACEHOLDERS = {"path/to/config.json": "tests/data/hf_configs/llama-3.2-1b.json"}

# Optional extras a snippet needs, recognised by what it calls.
EXTRAS = {r"\.to_frame\(|\.to_pandas\(": "pandas", r"\bkvroof\.explore\(": "ipywidgets"}

# Volatile fields: (what, pattern, replacement), applied to documented and printed lines alike.
VOLATILE: list[tuple[str, re.Pattern[str], str]] = [
    ("a simulation's wall-clock time and speed-up",
     re.compile(r"^(simulated\s.* in )[\d.,]+ \w+ \([\d.,]+x real time"),
     r"\1<wall time> (<N>x real time"),
    ("the installed package's folder",
     re.compile(re.escape(str(Path(kvroof.__file__).resolve().parent))), ".../kvroof"),
]

UNITS = {"s", "ms", "us", "ns", "B", "kB", "MB", "GB", "B/s", "GB/s", "FLOP", "FLOP/s", "bytes"}
ELLIPSIS = "..."


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the block's first content line
    lang: str
    lines: list[str]

    @property
    def file(self) -> str:
        return self.path.relative_to(REPO).as_posix()


@dataclass
class Command:
    block: Block
    line: int
    command: str
    output: list[str] | None  # None: the docs show no output
    earlier: list[Command] = field(default_factory=list, repr=False)

    @property
    def id(self) -> str:
        return f"{self.block.file}:{self.line}"


def fenced_blocks(path: Path) -> Iterator[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = re.match(r"^```\s*([\w+-]*)\s*$", lines[i])
        if not opening:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        yield Block(path, i + 2, opening.group(1).lower(), lines[i + 1:end])
        i = end + 1


def strip_trailing_blank(lines: list[str]) -> list[str]:
    lines = [line.rstrip() for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def commands_of(block: Block) -> list[Command]:
    """The commands of a shell block, in order; [] for a block that holds none."""
    commands: list[Command] = []
    if block.lang in {"text", "console", "bash", "sh", "shell", ""} and any(
            line.startswith("$ ") for line in block.lines):
        for offset, line in enumerate(block.lines):
            if line.startswith("$ "):
                commands.append(Command(block, block.line + offset, line[2:].strip(), []))
            elif commands:
                output = commands[-1].output
                assert output is not None
                output.append(line)
            elif line.strip():
                where = f"{block.file}:{block.line + offset}"
                raise AssertionError(f"{where}: output before any $ line")
        for command in commands:
            command.output = strip_trailing_blank(command.output or []) or None
    elif block.lang in {"bash", "sh", "shell"}:
        pending, start = "", 0
        for offset, line in enumerate(block.lines):
            if not pending:
                start = block.line + offset
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            text = (pending + line).strip()
            pending = ""
            if text and not text.startswith("#"):
                commands.append(Command(block, start, text, None))
    for i, command in enumerate(commands):
        command.earlier = commands[:i]
    return commands


USED_SKIPS: set[tuple[str, str]] = set()


def skip_reason(file: str, text: str) -> str | None:
    """The reason `SKIPPED` gives for this command or block (the first entry that matches)."""
    for (skip_file, prefix), reason in SKIPPED.items():
        if skip_file == file and text.strip().startswith(prefix):
            USED_SKIPS.add((skip_file, prefix))
            return reason
    return None


def collect() -> tuple[list[object], list[object], list[object]]:
    """pytest params: commands, python snippets, and blocks that are neither."""
    commands: list[object] = []
    snippets: list[object] = []
    others: list[object] = []
    for path in DOC_FILES:
        for block in fenced_blocks(path):
            block_commands = commands_of(block)
            if block_commands:
                for command in block_commands:
                    reason = skip_reason(block.file, command.command)
                    marks = [pytest.mark.skip(reason=reason)] if reason else []
                    commands.append(pytest.param(command, id=command.id, marks=marks))
                continue
            first = next((line for line in block.lines if line.strip()), "")
            reason = skip_reason(block.file, first)
            marks = [pytest.mark.skip(reason=reason)] if reason else []
            param = pytest.param(block, id=f"{block.file}:{block.line}", marks=marks)
            (snippets if block.lang == "python" else others).append(param)
    return commands, snippets, others


COMMANDS, SNIPPETS, OTHER_BLOCKS = collect()


# ---------------------------------------------------------------------------------------------
# running


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a `kvroof` on PATH and a copy of examples/, shared by the block folders."""
    root = tmp_path_factory.mktemp("docs")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "kvroof"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m kvroof "$@"\n')
    shim.chmod(0o755)
    shutil.copytree(REPO / "examples", root / "examples",
                    ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    return root


@cache
def block_dir(sandbox: Path, file: str, line: int) -> Path:
    """The working folder of one block: the repository's top level, examples/ as a copy."""
    folder = sandbox / "blocks" / f"{file.replace('/', '_')}-{line}"
    folder.mkdir(parents=True)
    for entry in REPO.iterdir():
        if entry.name.startswith(".") or entry.name == "examples":
            continue
        (folder / entry.name).symlink_to(entry)
    (folder / "examples").symlink_to(sandbox / "examples")
    return folder


def command_env(sandbox: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({ENV_VAR: "", "MPLBACKEND": "Agg", "PYTHONUNBUFFERED": "1",
                "PATH": f"{sandbox / 'bin'}{os.pathsep}{env.get('PATH', '')}"})
    return env


RESULTS: dict[str, subprocess.CompletedProcess[str]] = {}


def run_command(sandbox: Path, command: Command) -> subprocess.CompletedProcess[str]:
    """Run the command (once per session) after the earlier commands of its block."""
    if command.id in RESULTS:
        return RESULTS[command.id]
    for earlier in command.earlier:
        # what an earlier command writes may be read by this one; its own test checks it, and a
        # command that needs a skipped one is listed in SKIPPED itself
        if not skip_reason(earlier.block.file, earlier.command):
            run_command(sandbox, earlier)
    proc = subprocess.run(["bash", "-c", command.command],
                          cwd=block_dir(sandbox, command.block.file, command.block.line),
                          env=command_env(sandbox), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=COMMAND_TIMEOUT_S, check=False)
    RESULTS[command.id] = proc
    return proc


def expected_status(command: Command) -> int:
    documented = command.output or []
    return 2 if any(line.startswith("kvroof: error:") for line in documented) else 0


# ---------------------------------------------------------------------------------------------
# comparing


def normalize(line: str) -> str:
    line = line.rstrip()
    for _, pattern, replacement in VOLATILE:
        line = pattern.sub(replacement, line)
    return line


def lines_match(documented: list[str], printed: list[str]) -> bool:
    """Exact line by line after `normalize`; a documented `...` line matches any run of lines."""
    doc = [normalize(line) for line in documented]
    out = [normalize(line) for line in printed]

    @cache
    def match(i: int, j: int) -> bool:
        if i == len(doc):
            return j == len(out)
        if doc[i].strip() == ELLIPSIS:
            return any(match(i + 1, k) for k in range(j, len(out) + 1))
        return j < len(out) and doc[i] == out[j] and match(i + 1, j + 1)

    return match(0, 0)


NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
TOKEN = re.compile(rf"(?P<num>{NUMBER})|(?P<word>[A-Za-z_][\w/.-]*)|(?P<stop>[:(])")


def tokens(text: str) -> list[tuple[str, str]]:
    return [(m.lastgroup or "", m.group()) for m in TOKEN.finditer(text)]


def number_matches(documented: str, printed: float) -> bool:
    """`printed` rounds to `documented` at the digits shown."""
    match = re.fullmatch(r"[-+]?(\d*)\.?(\d*)(?:[eE]([-+]?\d+))?", documented)
    assert match, documented
    decimals = len(match.group(2))
    exponent = int(match.group(3) or 0)
    half_unit = 0.5 * 10.0 ** (exponent - decimals)
    value = float(documented)
    return abs(printed - value) <= half_unit * (1 + 1e-9) + 1e-12 * abs(value)


def states_values(comment: str) -> bool:
    return bool(re.match(rf"\s*(\[|{NUMBER}|True\b|False\b|None\b)", comment))


def check_comment(comment: str, printed: str) -> str | None:
    """None when the values the comment states match what was printed, else why not."""
    out = [value for kind, value in tokens(printed) if kind != "stop"]
    doc = tokens(comment)
    i = 0
    for kind, value in doc:
        if i == len(out):
            break
        if kind == "stop":
            break
        if kind == "word" and value in UNITS:
            continue
        if kind == "num":
            try:
                printed_value = float(out[i])
            except ValueError:
                return f"documented {value}, printed {out[i]!r}"
            if not number_matches(value, printed_value):
                return f"documented {value}, printed {out[i]}"
        elif value != out[i]:
            return f"documented {value!r}, printed {out[i]!r}"
        i += 1
    if i < len(out):
        return f"the comment states {i} values, the print printed {len(out)}: {printed.strip()!r}"
    return None


def value_comments(source: str) -> dict[int, str]:
    """Comment text by line (1-based) of `source`; a comment-only line is keyed by its own."""
    comments: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
    return comments


def is_print(statement: ast.stmt) -> bool:
    return (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
            and isinstance(statement.value.func, ast.Name) and statement.value.func.id == "print")


# ---------------------------------------------------------------------------------------------
# tests


@pytest.mark.parametrize("command", COMMANDS)
def test_doc_command(command: Command, sandbox: Path) -> None:
    proc = run_command(sandbox, command)
    printed = strip_trailing_blank(proc.stdout.splitlines())
    where = f"{command.id}: $ {command.command}"
    if proc.returncode != expected_status(command):
        pytest.fail(f"{where}\nexit status {proc.returncode}, expected "
                    f"{expected_status(command)}:\n{proc.stdout}", pytrace=False)
    if command.output is not None and not lines_match(command.output, printed):
        diff = "\n".join(difflib.unified_diff(
            [normalize(line) for line in command.output], [normalize(line) for line in printed],
            "documented", "printed", lineterm=""))
        pytest.fail(f"{where}\nprinted output differs from the docs:\n{diff}", pytrace=False)
    words = shlex.split(command.command, comments=True)
    targets = [target for flag, target in itertools.pairwise(words) if flag == "-o"]
    targets += re.findall(r"#\s*writes\s+(\S+)", command.command)
    folder = block_dir(sandbox, command.block.file, command.block.line)
    for target in targets:
        if not (folder / target).exists():
            pytest.fail(f"{where}\n{target} was not written", pytrace=False)


@pytest.mark.parametrize("block", SNIPPETS)
def test_doc_snippet(block: Block, sandbox: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = "\n".join(block.lines) + "\n"
    for pattern, module in EXTRAS.items():
        if re.search(pattern, source):
            pytest.importorskip(module, reason=f"the snippet needs {module} (an optional extra)")
    for placeholder, real in PLACEHOLDERS.items():
        source = source.replace(placeholder, real)
    monkeypatch.setenv(ENV_VAR, "")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(block_dir(sandbox, block.file, block.line))
    tree = ast.parse(source, filename=f"{block.file}:{block.line}")
    comments = value_comments(source)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    problems: list[str] = []
    for statement in tree.body:
        where = f"{block.file}:{block.line + statement.lineno - 1}"
        buffer = io.StringIO()
        code = compile(ast.Module(body=[statement], type_ignores=[]), where, "exec")
        with contextlib.redirect_stdout(buffer):
            exec(code, namespace)
        end = statement.end_lineno or statement.lineno
        comment = comments.get(end)
        following = comments.get(end + 1)
        if comment is None and following is not None and source.splitlines()[end].lstrip(
                ).startswith("#"):
            comment = following
        if is_print(statement) and comment is not None and states_values(comment):
            problem = check_comment(comment, buffer.getvalue())
            if problem:
                problems.append(f"{where}: {problem}")
    if problems:
        pytest.fail("documented results differ:\n" + "\n".join(problems), pytrace=False)


@pytest.mark.parametrize("block", OTHER_BLOCKS)
def test_doc_block(block: Block) -> None:
    pytest.fail(f"{block.file}:{block.line}: a ```{block.lang} block that is neither a command, "
                "a snippet nor listed in SKIPPED with a reason", pytrace=False)


def test_skipped_entries_are_used() -> None:
    unused = sorted(set(SKIPPED) - USED_SKIPS)
    assert not unused, f"SKIPPED entries that match no command or block: {unused}"


def test_comparison_rules() -> None:
    assert lines_match(["a", "...", "d"], ["a", "b", "c", "d"])
    assert lines_match(["a", "...", "b"], ["a", "b"])
    assert not lines_match(["a", "b"], ["a", "b", "c"])
    assert not lines_match(["a", "c"], ["a", "b"])
    assert lines_match(["simulated  310 s in 136.9 ms (2,265x real time; 7 runs)"],
                       ["simulated  310 s in 72.34 ms (4,286x real time; 7 runs)"])
    assert not lines_match(["simulated  310 s in 136.9 ms (2,265x real time; 7 runs)"],
                           ["simulated  311 s in 72.34 ms (4,286x real time; 7 runs)"])
    assert number_matches("148", 148.13) and not number_matches("148", 148.6)
    assert number_matches("9.894e+14", 989400000000000.0)
    assert number_matches("0.061", 0.06063) and not number_matches("0.061", 0.0604)
    assert check_comment("0.105 s  3.42  transfer", "0.10456 3.4208 transfer\n") is None
    assert check_comment("True: 59.4 GB per GPU", "True\n") is None
    assert check_comment("192512.0 bytes per token (bf16)", "192512.0\n") is None
    assert check_comment("235.09  22.19  (billions)", "235.0936 22.1908\n") is None
    assert check_comment("235.09  (billions)", "235.0936 22.1908\n") is not None
    assert check_comment("[1, 2]  held", "[1, 3]\n") is not None
    assert check_comment("0.105 s  3.42  transfer", "0.10456 3.4208 compute\n") is not None
