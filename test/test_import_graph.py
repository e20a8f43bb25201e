"""No module of gp_mapper imports itself back, however long the way round, and no layer
imports a layer after it (engine, mapping, io, ros, commands: the project's layering).

The graph: every ``import`` and ``from ... import`` of a module, at its top or inside a function
(a deferred import is still a dependency), less those under ``if TYPE_CHECKING:`` (never run).
Importing ``a.b.c`` runs the packages ``a`` and ``a.b`` first, so their ``__init__``s are
edges too, except the importer's own ancestors: they are running already when it is imported
(a package's ``__init__`` that imports its modules is not a cycle with each of them). The
imports made by name at run time (``import_module``) are edges to what they can reach: the
registry reads each model package's ``entry`` and the settings table its ``settings``. Any
other ``import_module`` of a computed name fails the test until its targets are declared here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from gp_mapper.engine.model_table import model_packages

ROOT = Path(__file__).resolve().parents[1] / "gp_mapper"

# Modules that import a computed name, and the modules of gp_mapper it can be (a package's
# module implies its package's ``__init__``, added below as for any import).
DYNAMIC_TARGETS = {
    "gp_mapper.engine.registry": tuple(f"{p}.entry" for p in model_packages()),
    "gp_mapper.engine.settings": tuple(f"{p}.settings" for p in model_packages()),
    "gp_mapper.ros.msg_types": (),  # ROS message packages: none of gp_mapper
}


def _modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Every module of the package at ``root`` by dotted name: its file and whether it is a
    package."""
    out = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _under_type_checking(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def _imported(name: str, path: Path, is_package: bool, modules: dict) -> Iterator[str]:
    """The dotted names a module imports (of any package), and its computed imports' targets."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom) and _under_type_checking(node, parents):
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield target
            # ``from package import module`` imports the module.
            yield from (f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules)
        elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith("import_module"):
            argument = node.args[0] if node.args else None
            if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                yield argument.value
            elif name in DYNAMIC_TARGETS:
                yield from DYNAMIC_TARGETS[name]
            else:
                raise AssertionError(
                    f"{name} imports a computed name ({ast.unparse(node)}): declare what it "
                    "can import in DYNAMIC_TARGETS"
                )


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Each module of the package at ``root`` and the modules of it that importing it runs."""
    modules = _modules(root)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, (path, is_package) in modules.items():
        running = set(_ancestors(name)) | {name}
        for target in _imported(name, path, is_package, modules):
            if target.split(".")[0] != root.name:
                continue
            graph[name].update(
                m for m in [*_ancestors(target), target] if m in modules and m not in running
            )
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), and modules that
    import themselves."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_gp_mapper_has_no_import_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 100  # the walk found the package
    assert graph["gp_mapper.engine.registry"] >= {"gp_mapper.engine.acgp.entry"}
    assert cycles(graph) == []


def test_the_walk_finds_a_cycle_through_a_deferred_import_and_a_package(tmp_path: Path) -> None:
    """The check itself, on a package of four modules: ``a`` imports ``sub.b`` inside a
    function, and importing ``sub.b`` runs ``sub/__init__``, which imports ``a``. A
    ``TYPE_CHECKING`` import and a package importing its own module are no cycle."""
    files = {
        "__init__.py": "from .a import f\n",
        "a.py": "def f():\n    from toy.sub.b import g\n    return g\n",
        "sub/__init__.py": "from ..a import f\n",
        "sub/b.py": "def g():\n    return 1\n",
        "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from toy.d import h\n",
        "d.py": "from toy.c import TYPE_CHECKING as h\n",
    }
    for name, text in files.items():
        (tmp_path / "toy" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "toy" / name).write_text(text)
    graph = import_graph(tmp_path / "toy")
    assert graph["toy.a"] == {"toy.sub", "toy.sub.b"} and graph["toy.c"] == set()
    assert cycles(graph) == [["toy.a", "toy.sub"]]


# The layers, each importing only those before it (the node and the commands are entry points:
# the command line may start a node; no node runs a command).
LAYERS = ("engine", "mapping", "io", "ros", "commands")


def _layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def test_each_layer_imports_only_the_layers_before_it() -> None:
    graph = import_graph()
    upward = sorted(
        (name, target)
        for name, targets in graph.items()
        for target in targets
        if _layer(name) is not None and _layer(target) is not None and _layer(target) > _layer(name)
    )
    assert upward == []
    assert {_layer(name) for name in graph} >= set(range(len(LAYERS)))
