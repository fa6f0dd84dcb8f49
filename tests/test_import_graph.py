"""The package's import graph: no loops, no import pointing up a layer, and imports inside functions only for
optional dependencies.

The layers are written once, in the package docstring (``sb3_ppo_ext/__init__.py``, "Layers"); this test reads
them from there. The graph is built from the source with :mod:`ast` (nothing is imported): every ``import`` and
``from ... import`` at any depth, relative or absolute, inside ``if TYPE_CHECKING:`` too. An import of
``sb3_ppo_ext.a.b`` also runs the package ``sb3_ppo_ext.a`` (its ``__init__``), so it counts as an import of that
package as well, unless the importer lies inside it.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from dataclasses import dataclass

import pytest
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "sb3_ppo_ext"

#: The optional dependencies (``pyproject.toml`` extras) that a function may import, so that the module holding
#: it imports without them. Each such import needs a comment on its line or the line above. A module of ours that
#: imports an optional dependency when imported counts as that dependency.
OPTIONAL_DEPENDENCIES: dict[str, str] = {
    "rl_zoo3": "zoo extra (and its scripts rl_zoo3.train / rl_zoo3.enjoy, imported when their command runs)",
    "matplotlib": "video extra",
    "onnx": "export extra",
    "rliable": "bench extra",
    f"{PACKAGE}.vec_env": "imports Ray (ray extra)",
}


@dataclass(frozen=True)
class Import:
    """One import statement's edge: the module that imports, the module of ours it imports, where, and whether it
    runs inside a function."""

    importer: str
    imported: str
    line: int
    in_function: bool


def package_dirs() -> dict[str, str]:
    """Every package of the distribution (``pyproject.toml``'s ``packages``) -> its folder (``package-dir``)."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as stream:
        setuptools = tomllib.load(stream)["tool"]["setuptools"]
    mapping = setuptools.get("package-dir", {})
    found = {}
    for package in setuptools["packages"]:
        base = max((name for name in mapping if package == name or package.startswith(name + ".")), key=len)
        found[package] = os.path.join(ROOT, mapping[base], *package[len(base) :].split(".")[1:])
    return found


def module_files() -> dict[str, str]:
    """Every module of the package (``sb3_ppo_ext.zoo.commands``; a package by its own name) -> its source file."""
    files = {}
    for package, folder in package_dirs().items():
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py"):
                stem = name[:-3]
                files[package if stem == "__init__" else f"{package}.{stem}"] = os.path.join(folder, name)
    return files


def is_package(module: str, files: dict[str, str]) -> bool:
    return os.path.basename(files[module]) == "__init__.py"


def owning_module(name: str, modules: set[str]) -> str | None:
    """The longest module of ours that ``name`` is or lies in (an attribute path ends at its module)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str, files: dict[str, str]) -> list[tuple[str, int, bool, bool]]:
    """``(absolute name imported, line, inside a function, has a comment)`` for each name an import statement of
    ``module`` imports (``from a import b`` gives ``a.b``)."""
    path = files[module]
    with open(path, encoding="utf-8") as stream:
        source = stream.read()
    lines = source.splitlines()
    tree = ast.parse(source, filename=path)
    base = module if is_package(module, files) else module.rpartition(".")[0]
    found: list[tuple[str, int, bool, bool]] = []

    def commented(node: ast.stmt) -> bool:
        """A comment on the statement's lines, or on the line above it or above the imports just before it."""
        if any("#" in line for line in lines[node.lineno - 1 : node.end_lineno]):
            return True
        above = node.lineno - 2
        while above >= 0 and lines[above].strip().startswith(("import ", "from ")):
            above -= 1
        return above >= 0 and lines[above].strip().startswith("#")

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.extend((alias.name, child.lineno, in_function, commented(child)) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    parent = base.rsplit(".", child.level - 1)[0] if child.level > 1 else base
                    origin = f"{parent}.{child.module}" if child.module else parent
                else:
                    origin = child.module or ""
                found.extend((f"{origin}.{alias.name}", child.lineno, in_function, commented(child)) for alias in child.names)
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return found


def import_graph() -> tuple[dict[str, str], list[Import], list[tuple[str, str, int]]]:
    """The modules, the edges between them, and the function-level imports that the allow-list does not cover
    (``(module, imported name, line)``, with ``uncommented`` marked in the name)."""
    files = module_files()
    modules = set(files)
    edges: list[Import] = []
    refused: list[tuple[str, str, int]] = []
    for module in sorted(modules):
        for name, line, in_function, has_comment in imports_of(module, files):
            ours = owning_module(name, modules)
            if in_function:
                optional = next(
                    (
                        dependency
                        for dependency in OPTIONAL_DEPENDENCIES
                        if name == dependency or name.startswith(dependency + ".")
                    ),
                    None,
                )
                if optional is None:
                    refused.append((module, name, line))
                elif not has_comment:
                    refused.append((module, f"{name} (an optional dependency, but no comment says so)", line))
            if ours is None:
                continue
            targets = [ours]
            # Importing a.b.c runs the packages a.b and a first; those the importer lies in are running already.
            package = ours.rpartition(".")[0]
            while package and not (module == package or module.startswith(package + ".")):
                targets.append(package)
                package = package.rpartition(".")[0]
            edges.extend(Import(module, target, line, in_function) for target in targets if target != module)
    return files, edges, refused


def layers() -> dict[str, int]:
    """The layer entries of the package docstring (a module or package path, lowest layer 1) -> their layer."""
    files = module_files()
    with open(files[PACKAGE], encoding="utf-8") as stream:
        docstring = ast.get_docstring(ast.parse(stream.read())) or ""
    section = docstring.partition("Layers")[2]
    entries = {}
    for number, text in re.findall(r"^(\d+)\. (.*)$", section, flags=re.MULTILINE):
        for name in re.findall(r"``([\w.]+)``", text.partition(":")[0]):
            entries[name if name == PACKAGE else f"{PACKAGE}.{name}"] = int(number)
    return entries


def layer_of(module: str, entries: dict[str, int]) -> int | None:
    """The layer of the longest entry that is ``module`` or a package holding it."""
    holding = [entry for entry in entries if module == entry or module.startswith(entry + ".")]
    return entries[max(holding, key=len)] if holding else None


def loops(edges: list[Import]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, without recursion)."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.importer, set()).add(edge.imported)
        graph.setdefault(edge.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return groups


def test_the_docstring_places_every_module_in_a_layer():
    files = module_files()
    entries = layers()
    assert entries, "the package docstring has no 'Layers' list"
    assert [module for module in sorted(files) if layer_of(module, entries) is None] == []
    assert [
        entry for entry in entries if not any(module == entry or module.startswith(entry + ".") for module in files)
    ] == [], "layer entries naming no module"


def test_no_import_loops():
    _, edges, _ = import_graph()
    found = loops(edges)
    assert found == [], "import loops:\n" + "\n".join(" <-> ".join(group) for group in found)


def test_no_import_points_up_a_layer():
    _, edges, _ = import_graph()
    entries = layers()
    upward = sorted(
        {
            f"{edge.importer}:{edge.line} (layer {layer_of(edge.importer, entries)}) imports {edge.imported} "
            f"(layer {layer_of(edge.imported, entries)})"
            for edge in edges
            if (layer_of(edge.imported, entries) or 0) > (layer_of(edge.importer, entries) or 0)
        }
    )
    assert upward == [], "imports pointing up a layer:\n" + "\n".join(upward)


def test_imports_inside_functions_are_for_optional_dependencies_only():
    _, _, refused = import_graph()
    by_statement: dict[tuple[str, int], list[str]] = {}
    for module, name, line in refused:
        by_statement.setdefault((module, line), []).append(name)
    listed = [f"{module}:{line} imports {', '.join(names)}" for (module, line), names in by_statement.items()]
    assert listed == [], (
        "imports inside functions (move them to the top of the module, or add the optional "
        "dependency to OPTIONAL_DEPENDENCIES with a comment at the import):\n" + "\n".join(listed)
    )


def in_package(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_grid_imports_the_zoo_and_only_zoo_commands_imports_the_grid():
    """``grid`` and ``zoo`` share a layer, with the arrow grid -> zoo: the grid reads runs through the zoo's readers,
    and of the zoo's modules only ``zoo.commands`` imports the grid (for the ``sb3-ppo-ext grid`` command)."""
    _, edges, _ = import_graph()
    grid, zoo = f"{PACKAGE}.grid", f"{PACKAGE}.zoo"
    assert any(in_package(edge.importer, grid) and in_package(edge.imported, zoo) for edge in edges)
    importers = sorted({edge.importer for edge in edges if in_package(edge.importer, zoo) and in_package(edge.imported, grid)})
    assert importers == [f"{zoo}.commands"]


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        ([("a", "b"), ("b", "c")], []),
        ([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")], [["a", "b", "c"]]),
        ([("a", "b"), ("b", "a"), ("c", "d"), ("d", "c")], [["a", "b"], ["c", "d"]]),
    ],
)
def test_loops_finds_strongly_connected_groups(edges, expected):
    assert sorted(loops([Import(importer, imported, 1, False) for importer, imported in edges])) == expected


@pytest.mark.parametrize(
    "command",
    [
        ["-W", "error", "-c", "import sb3_ppo_ext, sb3_ppo_ext.zoo, sb3_ppo_ext.grid"],
        ["-W", "error::DeprecationWarning", "-m", "sb3_ppo_ext", "train", "--help"],
    ],
    ids=["import", "train --help"],
)
def test_nothing_the_package_runs_is_deprecated(command):
    """The package imports and its commands start without a warning of any deprecated name, its own or its
    dependencies' (the suite does not hide DeprecationWarning either)."""
    done = subprocess.run([sys.executable, *command], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr, done.stderr
