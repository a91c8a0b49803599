"""The product's imports point one way: protocol and storage → broker → sparklog → connectors → jobs →
the `pylog` command; neither the product nor the benchmarks import the tests; the product never
imports the peers (other brokers started by tests and benchmarks), which import only the product.
Read from the source with `ast`, so a new upward edge or circle fails here."""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("broker", "sparklog", "connectors", "jobs", "pylog")
TOP_MODULES = ("pyspark_pylog", "pyspark_pylog_delta")

# Import circles through function-level imports that predate this test (issue 10: a sans-I/O
# connection and a registry that hands handlers the API table remove them). Never add to this list.
KNOWN_CIRCLES = {frozenset({"broker.apis.api_versions", "broker.apis.registry"})}


def layer(module: str) -> int:
    if module.startswith(("broker.protocol", "broker.log")) or module in ("broker.errors", "broker.config"):
        return 0
    if module.startswith("broker"):
        return 1
    if module.startswith("sparklog") or module == "pyspark_pylog":
        return 2
    if module.startswith("connectors") or module == "pyspark_pylog_delta":
        return 3
    if module.startswith("jobs"):
        return 4
    return 5   # pylog: the command


def _modules() -> dict[str, Path]:
    out = {m: REPO / f"{m}.py" for m in TOP_MODULES}
    for pkg in PACKAGES:
        for f in (REPO / pkg).rglob("*.py"):
            parts = list(f.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = f
    return out


def _is_type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(path: Path, known: set[str]) -> set[str]:
    """Product modules imported anywhere in the file (function-level too), TYPE_CHECKING blocks aside."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            return
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for n in names:
            while n and n not in known:
                n = n.rpartition(".")[0]
            if n:
                found.add(n)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {m: _imports(f, known) - {m} for m, f in modules.items()}


def test_no_product_module_imports_a_higher_layer_or_tests_or_bench():
    upward = [f"{m} (layer {layer(m)}) imports {d} (layer {layer(d)})"
              for m, deps in sorted(_graph().items()) for d in sorted(deps) if layer(d) > layer(m)]
    assert upward == []
    for m, f in _modules().items():
        assert not _imports_of(f, ("tests", "bench", "peers")), f"{m} imports tests, bench or peers"


def _imports_of(path: Path, roots: tuple[str, ...]) -> list[ast.AST]:
    """The import statements of `path` (function-level too) that import a package under `roots`."""
    return [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, (ast.Import, ast.ImportFrom))
            and any(name.split(".")[0] in roots
                    for name in ([a.name for a in n.names] if isinstance(n, ast.Import) else [n.module or ""]))]


def test_benchmarks_never_import_the_tests():
    bad = sorted(str(f.relative_to(REPO)) for f in (REPO / "bench").rglob("*.py") if _imports_of(f, ("tests",)))
    assert bad == []


def test_peers_import_neither_tests_nor_bench():
    bad = sorted(str(f.relative_to(REPO)) for f in (REPO / "peers").rglob("*.py")
                 if _imports_of(f, ("tests", "bench")))
    assert bad == []


def test_no_import_circles_beyond_the_known_ones():
    graph = _graph()
    circles = {frozenset({a, b}) for a, deps in graph.items() for b in deps if a in graph.get(b, set())}
    assert circles <= KNOWN_CIRCLES, sorted(map(sorted, circles - KNOWN_CIRCLES))
