"""The product's imports follow the layer table of docs/ARCHITECTURE.md, read from that page: each row
names its packages and the product packages they may import, as Kafka's checkstyle/import-control
files do. Neither the product nor the benchmarks import the tests; the product never imports the peers
(other brokers started by tests and benchmarks), which import only the product. Imports are read from
the source with `ast`, function-level ones and `TYPE_CHECKING` blocks included, so a new edge the table
does not allow, or a new circle, fails here."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ARCHITECTURE = REPO / "docs" / "ARCHITECTURE.md"
PACKAGES = ("kafka_protocol", "broker", "sparklog", "connectors", "jobs", "pylog")
TOP_MODULES = ("pyspark_pylog", "pyspark_pylog_delta")

# Import circles allowed: none. Where a lower module must call up, it declares what it needs as a
# typing.Protocol or takes a callback (broker.connection.Acceptor, broker.replication.manager.LocalReplicas,
# the api_keys broker.apis.registry hands the ApiVersions handler).
KNOWN_CIRCLES: set[frozenset[str]] = set()


@dataclass(frozen=True)
class Layer:
    name: str
    packages: tuple[str, ...]
    may_import: tuple[str, ...]
    anything: bool = False


def _names(cell: str) -> tuple[str, ...]:
    """The module names in backticks in a table cell (prose in parentheses aside)."""
    return tuple(n.strip("/") for n in re.findall(r"`([A-Za-z_][\w./]*)`", re.sub(r"\([^)]*\)", "", cell)))


def table() -> list[Layer]:
    """The layer table of docs/ARCHITECTURE.md."""
    text = ARCHITECTURE.read_text()
    section = text[text.index("## Layers and their direction"):]
    rows = [ln for ln in section.splitlines() if ln.startswith("|")][2:]
    out = []
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        out.append(Layer(cells[0], _names(cells[1]), _names(cells[2]), cells[2].startswith("everything")))
    return out


def _matches(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer_of(module: str, layers: list[Layer]) -> Layer:
    found = [(len(p), la) for la in layers for p in la.packages if _matches(module, p)]
    assert found, f"{module} is in no row of the layer table in {ARCHITECTURE.name}"
    return max(found, key=lambda f: f[0])[1]


def allowed(importer: str, imported: str, layers: list[Layer]) -> bool:
    la = layer_of(importer, layers)
    if la.anything or la is layer_of(imported, layers):
        return True
    return any(_matches(imported, p) for p in la.may_import)


def _modules() -> dict[str, Path]:
    out = {m: REPO / f"{m}.py" for m in TOP_MODULES}
    for pkg in PACKAGES:
        for f in (REPO / pkg).rglob("*.py"):
            parts = list(f.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = f
    return out


def _imports(path: Path, known: set[str]) -> set[str]:
    """Product modules imported anywhere in the file: function-level and TYPE_CHECKING imports too."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from pkg import submodule` imports the submodule, not the package's own code
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
                     for a in node.names]
        for n in names:
            while n and n not in known:
                n = n.rpartition(".")[0]
            if n:
                found.add(n)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {m: _imports(f, known) - {m} for m, f in modules.items()}


def test_the_table_names_every_package_and_only_packages_that_exist():
    layers = table()
    named = {p for la in layers for p in la.packages} | {p for la in layers for p in la.may_import}
    modules = set(_modules())
    missing = sorted(p for p in named if p != "pylog_native" and not any(_matches(m, p) for m in modules))
    assert missing == [], f"the table in {ARCHITECTURE.name} names modules that do not exist"
    for m in modules:
        layer_of(m, layers)


def test_every_import_is_one_the_table_allows():
    layers = table()
    bad = [f"{m} ({layer_of(m, layers).name}) imports {d} ({layer_of(d, layers).name})"
           for m, deps in sorted(_graph().items()) for d in sorted(deps) if not allowed(m, d, layers)]
    assert bad == []
    for m, f in _modules().items():
        assert not _imports_of(f, ("tests", "bench", "peers")), f"{m} imports tests, bench or peers"


def test_the_check_refuses_what_the_table_does_not_allow():
    layers = table()
    assert not allowed("sparklog.kafka_client", "broker.server", layers)
    assert not allowed("kafka_protocol.codec", "broker.errors", layers)
    assert not allowed("connectors.delta_commit", "jobs.config", layers)
    assert not allowed("jobs.reprocess", "broker.server", layers) and not allowed("jobs.config", "pylog.cli", layers)
    assert not allowed("broker.server", "pylog.launch.process", layers)
    assert allowed("pylog.cli", "pylog.tools.topics", layers)


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


def _circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan): every import circle, however long."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles_beyond_the_known_ones():
    circles = set(_circles(_graph()))
    assert circles <= KNOWN_CIRCLES, sorted(map(sorted, circles - KNOWN_CIRCLES))
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset("abc")]


def test_the_spark_source_imports_without_the_broker():
    """Every module of the source (and the protocol it uses) imports in a Python that cannot import
    `broker`: the source can be installed, and reasoned about, without the server."""
    code = (
        "import importlib, importlib.abc, pkgutil, sys\n"
        "class NoBroker(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'broker' or name.startswith('broker.'):\n"
        "            raise ImportError('broker is not installed here: ' + name)\n"
        "sys.meta_path.insert(0, NoBroker())\n"
        "import sparklog, kafka_protocol, pyspark_pylog\n"
        "for pkg in (sparklog, kafka_protocol):\n"
        "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "        importlib.import_module(m.name)\n"
        "assert not [m for m in sys.modules if m == 'broker' or m.startswith('broker.')]\n"
        "print('ok', len([m for m in sys.modules if m.startswith(('sparklog', 'kafka_protocol'))]))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("ok"), done.stderr[-3000:]
    assert int(done.stdout.split()[1]) >= 30, done.stdout
