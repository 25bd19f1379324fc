"""The package's layering (docs/architecture.md): no import circles between modules and no
import from a lower layer up to a higher one, read from the source with ``ast``.

Every import counts: module level, inside functions (lazy imports) and under
``TYPE_CHECKING``, since each of them is a dependency a reader has to follow. Importing a
module runs its package's ``__init__`` too; those implicit edges are left out (a package's
``__init__`` is the facade of its package), but a module may not import the facade of its own
package: it imports the sibling module that defines the name.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "kvroof"

# Bottom to top: a module may import its own layer (without a circle) and the layers below.
# docs/architecture.md says what each layer owns; keep the two in step.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("kvroof._version", "kvroof.errors", "kvroof.units", "kvroof.jsonsafe", "kvroof.display"),
    ("kvroof.files", "kvroof.userfiles", "kvroof.yamlfiles", "kvroof.outputs"),
    ("kvroof.specs", "kvroof.lookup"),
    ("kvroof.kernels",),
    ("kvroof.cost",),
    ("kvroof.workload",),
    ("kvroof.simulate", "kvroof.validation", "kvroof.measure"),
    ("kvroof.analysis",),
    ("kvroof.plan",),
    ("kvroof.plot", "kvroof.describe", "kvroof.explore"),
    ("kvroof.report",),
    ("kvroof.cli", "kvroof.__main__"),
    ("kvroof",),
)


def module_names(root: Path = SRC) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    names: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _imported(module: str, is_package: bool, node: ast.Import | ast.ImportFrom,
              modules: dict[str, Path]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
    else:
        if node.level:
            base = module.split(".")
            if not is_package:
                base.pop()
            base = base[:len(base) - (node.level - 1)]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        targets = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
                   for alias in node.names]
    for target in targets:
        while target not in modules and "." in target:
            target = target.rsplit(".", 1)[0]
        if target in modules and target.split(".")[0] == "kvroof":
            yield target


def import_graph(root: Path = SRC) -> dict[str, set[str]]:
    """module -> the kvroof modules it imports anywhere in its source."""
    modules = module_names(root)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        is_package = path.name == "__init__.py"
        graph[name] = {target for node in ast.walk(tree)
                       if isinstance(node, ast.Import | ast.ImportFrom)
                       for target in _imported(name, is_package, node, modules)
                       if target != name}
    return graph


def layer_of(module: str) -> int:
    """The index in LAYERS of the longest prefix that names ``module``'s layer."""
    best: tuple[int, int] | None = None
    for index, layer in enumerate(LAYERS):
        for prefix in layer:
            if (module == prefix or module.startswith(prefix + ".")) and (
                    best is None or len(prefix) > best[1]):
                best = (index, len(prefix))
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS and the docs")
    return best[0]


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return [f"{source} ({layer_of(source)}) -> {target} ({layer_of(target)})"
            for source in sorted(graph) for target in sorted(graph[source])
            if layer_of(target) > layer_of(source)]


def own_facade_imports(graph: dict[str, set[str]], root: Path = SRC) -> list[str]:
    modules = module_names(root)
    found = []
    for source in sorted(graph):
        package = source if modules[source].name == "__init__.py" else source.rsplit(".", 1)[0]
        found += [f"{source} -> {target}" for target in sorted(graph[source])
                  if target != source and modules[target].name == "__init__.py"
                  and package.startswith(target)]
    return found


GRAPH = import_graph()


def test_no_import_circles() -> None:
    assert circles(GRAPH) == []


def test_no_upward_imports() -> None:
    assert upward_imports(GRAPH) == []


def test_modules_import_siblings_not_their_own_facade() -> None:
    assert own_facade_imports(GRAPH) == []


def test_every_module_has_a_layer() -> None:
    for module in GRAPH:
        layer_of(module)


def test_the_docs_list_every_layer() -> None:
    text = (SRC.parent.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    for layer in LAYERS:
        for prefix in layer:
            assert f"`{prefix}`" in text, prefix


# The checks themselves, on small packages written here: each kind of fault is found.

def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "kvroof" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "kvroof"


@pytest.mark.parametrize("style", ["top", "lazy", "type_checking", "relative"])
def test_a_circle_is_found_however_it_is_imported(tmp_path: Path, style: str) -> None:
    back = {
        "top": "from kvroof.cost.a import f\n",
        "lazy": "def g():\n    from kvroof.cost.a import f\n    return f\n",
        "type_checking": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                         "    from kvroof.cost.a import f\n",
        "relative": "from .a import f\n",
    }[style]
    root = _write(tmp_path, {"__init__.py": "", "cost/__init__.py": "",
                             "cost/a.py": "from kvroof.cost.b import g\ndef f(): pass\n",
                             "cost/b.py": back})
    assert circles(import_graph(root)) == [["kvroof.cost.a", "kvroof.cost.b"]]


def test_an_upward_import_is_found(tmp_path: Path) -> None:
    root = _write(tmp_path, {"__init__.py": "", "specs/__init__.py": "", "cost/__init__.py": "",
                             "specs/base.py": "def r():\n    import kvroof.cost.kv\n",
                             "cost/kv.py": "from kvroof.specs.base import r\n"})
    graph = import_graph(root)
    assert circles(graph) == [["kvroof.cost.kv", "kvroof.specs.base"]]
    assert upward_imports(graph) == ["kvroof.specs.base (2) -> kvroof.cost.kv (4)"]


def test_importing_the_top_package_from_inside_is_upward(tmp_path: Path) -> None:
    root = _write(tmp_path, {"__init__.py": "__version__ = '0'\n",
                             "outputs.py": "from kvroof import __version__\n"})
    assert upward_imports(import_graph(root)) == ["kvroof.outputs (1) -> kvroof (12)"]


def test_importing_the_own_facade_is_found(tmp_path: Path) -> None:
    root = _write(tmp_path, {"__init__.py": "", "cost/__init__.py": "from .a import f\n",
                             "cost/a.py": "def f(): pass\n",
                             "cost/b.py": "from kvroof.cost import f\n"})
    assert own_facade_imports(import_graph(root), root) == ["kvroof.cost.b -> kvroof.cost"]
