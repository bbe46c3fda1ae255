"""The package's import rules, read from the source: every ``import`` and ``from ...
import`` of every module under ``bonsai/`` (module level and inside functions,
relative imports resolved; ``if TYPE_CHECKING:`` blocks skipped) makes the module
graph, and

* no bonsai module imports itself back through other bonsai modules (no cycle), and
* no module outside ``bonsai/backends/`` imports ``bonsai.backends.cpu`` or anything
  under it: code above the backends reaches a backend through the registry
  (``bonsai.backends.get_backend`` / ``kernels``).

An edge goes to the module an import names: ``from . import x`` is an edge to the
sibling ``x`` when ``x`` is a submodule, else to the package's ``__init__``;
``import a.b`` is an edge to ``a.b`` only (not to the packages above it, which a
module inside them has already started).  The source read is the bonsai under test
(``bonsai.__file__``).  No dependency beyond the standard library.
"""
import ast
from pathlib import Path

import pytest

import bonsai

PACKAGE_DIR = Path(bonsai.__file__).resolve().parent
FORBIDDEN = "bonsai.backends.cpu"
BACKENDS = "bonsai.backends"


# ---------------------------------------------------------------------------- the graph
def module_files(pkg_dir, pkg_name):
    """{module name: path} of every .py file under ``pkg_dir`` (``__init__.py`` is
    the package's own name)."""
    out = {}
    for path in sorted(Path(pkg_dir).rglob("*.py")):
        rel = path.relative_to(pkg_dir).with_suffix("")
        parts = [pkg_name, *rel.parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(test):
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


class _Imports(ast.NodeVisitor):
    """(line, target module, imported names or None) of every import statement,
    anywhere in the module except under ``if TYPE_CHECKING:``."""

    def __init__(self):
        self.found = []

    def visit_If(self, node):
        if _is_type_checking(node.test):
            for child in node.orelse:       # the else branch runs
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node):
        for alias in node.names:
            self.found.append((node.lineno, 0, alias.name, None))

    def visit_ImportFrom(self, node):
        self.found.append((node.lineno, node.level, node.module or "",
                           [a.name for a in node.names]))


def _resolve(module, is_package, level, name):
    """The absolute name of ``from <level dots><name>`` written in ``module``."""
    if level == 0:
        return name
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[:-(level - 1)]
    return ".".join(base + ([name] if name else []))


def import_graph(pkg_dir, pkg_name):
    """{module: {imported module: first line}} over the modules of the package (edges
    to modules outside it are dropped)."""
    files = module_files(pkg_dir, pkg_name)
    graph = {}
    for mod, path in files.items():
        is_pkg = path.name == "__init__.py"
        visitor = _Imports()
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        edges = {}
        for line, level, name, names in visitor.found:
            target = _resolve(mod, is_pkg, level, name)
            if names is None:                           # import a.b.c
                hits = [target]
            else:                                        # from target import x, y
                subs = [f"{target}.{n}" for n in names if f"{target}.{n}" in files]
                hits = subs + ([target] if len(subs) < len(names) else [])
            for t in hits:
                if t in files and t != mod:
                    edges.setdefault(t, line)
        graph[mod] = edges
    return graph


def find_cycles(graph):
    """One cycle (a list of modules, first == last) per strongly connected component
    of more than one module (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, comps = {}, {}, set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    comps.append(set(comp))
    return [_cycle_in(graph, comp) for comp in comps]


def _cycle_in(graph, comp):
    """A shortest cycle through the first module of the component (breadth first)."""
    start = min(comp)
    prev = {start: None}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph[node]):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return path[::-1] + [start]
            if nxt in comp and nxt not in prev:
                prev[nxt] = node
                queue.append(nxt)
    raise AssertionError(f"no cycle found in component {sorted(comp)}")


def _show(graph, cycle):
    return " -> ".join(f"{a} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:])) \
        + f" -> {cycle[-1]}"


def forbidden_imports(graph):
    """[(module, imported module, line)]: a module outside ``bonsai.backends`` that
    imports the CPU backend or anything under it."""
    bad = []
    for mod, edges in graph.items():
        if mod == BACKENDS or mod.startswith(BACKENDS + "."):
            continue
        for t, line in edges.items():
            if t == FORBIDDEN or t.startswith(FORBIDDEN + "."):
                bad.append((mod, t, line))
    return sorted(bad)


# ---------------------------------------------------------------------------- bonsai
@pytest.fixture(scope="module")
def graph():
    return import_graph(PACKAGE_DIR, "bonsai")


def test_graph_sees_the_package(graph):
    # the walk reads real modules and real edges (so the rules below can fail)
    assert len(graph) > 40
    assert "bonsai.grow" in graph["bonsai.boosting"]          # module level
    assert "bonsai.sklearn.estimators" in graph["bonsai.sklearn"]
    assert "bonsai.inspection" in graph["bonsai.booster"]     # inside a method
    assert "bonsai.backends.cpu.histogram" in graph["bonsai.backends.cpu"]


def test_no_import_cycle(graph):
    cycles = find_cycles(graph)
    assert not cycles, "import cycles among bonsai modules:\n" + "\n".join(
        _show(graph, c) for c in cycles)


def test_nothing_above_the_backends_imports_the_cpu_backend(graph):
    bad = forbidden_imports(graph)
    assert not bad, "imports of bonsai.backends.cpu from outside bonsai/backends/:\n" + \
        "\n".join(f"{m}:{line} imports {t}" for m, t, line in bad)


# ---------------------------------------------------------------------------- the checker
def _write(root, files):
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_checker_finds_a_cycle_and_the_edges_it_must(tmp_path):
    pkg = tmp_path / "pkg"
    _write(pkg, {
        "__init__.py": "from .a import f\n",
        "a.py": "def f():\n    from . import b\n",              # inside a function
        "b.py": "from .sub.c import g\n",
        "sub/__init__.py": "",
        "sub/c.py": "import pkg.a\n",                           # absolute, back to a
        "d.py": "from . import VERSION\nfrom .sub import c\n",  # __init__, then a sibling
        "e.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                 "    from . import d\nelse:\n    from . import a\n"),
    })
    g = import_graph(pkg, "pkg")
    assert g["pkg.d"] == {"pkg": 1, "pkg.sub.c": 2}
    assert g["pkg.e"] == {"pkg.a": 5}                            # TYPE_CHECKING skipped
    assert g["pkg.sub"] == {}
    cycles = find_cycles(g)
    assert cycles == [["pkg.a", "pkg.b", "pkg.sub.c", "pkg.a"]]
    assert "pkg.a (line 2) -> pkg.b (line 1) -> pkg.sub.c (line 1) -> pkg.a" == \
        _show(g, cycles[0])


def test_checker_finds_a_forbidden_import(tmp_path):
    pkg = tmp_path / "bonsai"
    _write(pkg, {
        "__init__.py": "", "tree.py": "from .backends.cpu import predict\n",
        "ok.py": "from .backends import get_backend\n",
        "backends/__init__.py": "", "backends/cpu/__init__.py": "from . import predict\n",
        "backends/cpu/predict.py": "",
    })
    g = import_graph(pkg, "bonsai")
    assert forbidden_imports(g) == [("bonsai.tree", "bonsai.backends.cpu.predict", 1)]
    assert find_cycles(g) == []


# ---------------------------------------------------------------------------- public paths
def test_public_names_resolve_after_the_moves():
    import bonsai.preprocessing
    import bonsai.sklearn
    for name in bonsai.__all__:
        assert getattr(bonsai, name) is not None, name
    assert bonsai.BonsaiClassifier is bonsai.sklearn.BonsaiClassifier
    assert bonsai.BonsaiRegressor is bonsai.sklearn.BonsaiRegressor
    assert bonsai.preprocessing.OrderedTargetEncoder is bonsai.sklearn.OrderedTargetEncoder
    from bonsai._version import __version__
    assert bonsai.__version__ == __version__


# -------------------------------------------------------------- kernels release the GIL
def njit_calls(tree):
    """Every ``njit(...)`` call in a module's syntax tree (decorator or not)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", None)
            if name == "njit":
                yield node


def test_every_kernel_releases_the_gil():
    """A Dask worker runs a fit in a task thread while its event loop answers
    heartbeats and peers' histograms: every compiled kernel is ``nogil=True``.  A bare
    ``@njit`` (no call) would hold the GIL, so it is refused too."""
    missing = []
    for name, path in module_files(PACKAGE_DIR, "bonsai").items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for d in node.decorator_list:
                    if isinstance(d, (ast.Name, ast.Attribute)) and \
                            getattr(d, "id", getattr(d, "attr", None)) == "njit":
                        missing.append(f"{name}:{d.lineno}")
        for call in njit_calls(tree):
            kw = {k.arg: k.value for k in call.keywords}
            v = kw.get("nogil")
            if not (isinstance(v, ast.Constant) and v.value is True):
                missing.append(f"{name}:{call.lineno}")
    assert not missing, f"njit without nogil=True at {missing}"


def test_only_bonsai_dask_imports_dask():
    """``import bonsai`` never imports Dask: no module outside ``bonsai/dask/``
    imports ``dask`` or ``distributed`` (at module level or inside a function)."""
    bad = []
    for mod, path in module_files(PACKAGE_DIR, "bonsai").items():
        if mod == "bonsai.dask" or mod.startswith("bonsai.dask."):
            continue
        visitor = _Imports()
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        for line, level, name, names in visitor.found:
            top = (name or "").split(".")[0]
            if level == 0 and top in ("dask", "distributed"):
                bad.append(f"{mod}:{line} imports {name}")
    assert not bad, bad
