"""The package's shape: subpackages that setuptools finds, and modules that
import each other without cycles (imports inside functions count too)."""

import ast
from pathlib import Path

from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "symphys"


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def _imports(path: Path, modules) -> set[str]:
    """The symphys modules `path` imports anywhere in its body (a
    `from package import module` names the module)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("symphys"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                out.add(full if full in modules else node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("symphys")}
    return {m for m in out if m in modules}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` (a list of nodes, first == last), or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_import_cycles():
    """No module imports, directly or through others, one that imports it
    back, counting imports inside functions (the root package, which
    re-exports the public API, is left out: nothing in symphys imports it)."""
    modules = _modules()
    graph = {name: _imports(path, modules) - {"symphys"} for name, path in modules.items()
             if name != "symphys"}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))
    importers = sorted(n for n, path in modules.items()
                       if n != "symphys" and not n.startswith("symphys.experiments")
                       and "symphys" in _imports(path, modules))
    assert importers == [], f"library modules importing the root package: {importers}"


def test_every_folder_is_a_package_setuptools_finds():
    """`packages = find:` in setup.cfg: each folder of symphys/ with Python
    files is a package, the scene files' folder included."""
    found = set(find_packages(str(ROOT), include=["symphys*"]))
    folders = {".".join(p.parent.relative_to(ROOT).parts) for p in PACKAGE.rglob("*.py")}
    assert folders <= found, sorted(folders - found)
    assert "symphys.graphs" in found
    assert "packages = find:" in (ROOT / "setup.cfg").read_text()
