"""The architecture's rules, read off the source: no code compares the name of a component of
any kind (an attention backend, a kernel, a kernel set, a model family, an embedding, a
positional encoding, an FFN activation, a loss, a data source) outside that component's own
module, by ==, in, .startswith/.endswith or a match statement (rules, the builder, the FLOP
count, the probe, figures and evaluate ask what the component declares); no generic layer names
a backend's state; and no module of the package imports, through others, itself."""

import ast
import sys
from pathlib import Path

import pytest

import seqforecast.native
from seqforecast.attention import available_attention
from seqforecast.attention.kernels import KERNELS
from seqforecast.attention.registry import _BACKENDS
from seqforecast.data import available_sources, data_source
from seqforecast.model.embedding import EMBEDDINGS
from seqforecast.model.families import available_families, family
from seqforecast.model.ffn import ACTIVATIONS
from seqforecast.model.parts import kernel_set
from seqforecast.model.positional import POSITIONS, available_positions
from seqforecast.probabilistic.outputs import OUTPUTS, available_outputs

PACKAGE = Path(__file__).resolve().parents[1] / "seqforecast"
# Saved configs are read by the names they were written with (former names included).
READS_SAVED_NAMES = {"config/migrations.py"}
# Names that are also values of other options or metrics, so a comparison against them cannot
# be told apart by its string: pos_encoding=none (intervals.method=none, data.scale=none, ...),
# loss=mse (the mse metric, trainer.select_on=mse), trainer.kernels=auto (attention.kernel=auto,
# device=auto, data.date_order=auto, ...) and ffn=tanh's activation (attention=fourier's own
# activation option).
SHARED_WORDS = {"none", "mse", "auto", "tanh"}


def _owners() -> dict[str, set[str]]:
    """Each component name -> the modules (paths under seqforecast/) allowed to compare it."""
    owners: dict[str, set[str]] = {}

    def own(name: str, module: str) -> None:
        if name not in SHARED_WORDS:
            owners.setdefault(name, set()).add(module)

    for name in available_attention():
        own(name, _path(_BACKENDS[name].cls))
    for name, kernel in KERNELS.items():
        own(name, _path(kernel))
    for name in seqforecast.native.KERNELS:  # trainer.kernels: its values resolve there
        own(name, _path(seqforecast.native.resolve))
    for name in ("torch", "native"):
        own(name, _path(type(kernel_set(name))))
    for name in available_families():
        own(name, _path(family(name).cls))
    for name in EMBEDDINGS:
        own(name, "model/embedding.py")
    for name in available_positions():
        own(name, _path(POSITIONS[name].cls))
    for name in ACTIVATIONS:  # the FFN's, and the C kernel's FFN declaring which it computes
        own(name, "model/ffn.py")
        own(name, "native/ffn.py")
    for name in available_outputs():
        own(name, _path(OUTPUTS[name].cls))
    for name in available_sources():
        own(name, _path(type(data_source({"name": name}))))
    return owners


def _path(defined) -> str:
    """The module (path under seqforecast/) a class or function is defined in."""
    return Path(sys.modules[defined.__module__].__file__).relative_to(PACKAGE).as_posix()


def _strings(node: ast.AST) -> list[str]:
    """The string constants a comparison operand is (or holds, as a tuple, list or set)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [s for item in node.elts for s in _strings(item)]
    return []


def compared_names(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of every comparison against a component's name: ==, !=, in, not in, a
    case of a match statement, and .startswith/.endswith/.removeprefix/.removesuffix with a
    part of one (a string some name starts or ends with)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            if any(isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn) for op in node.ops):
                for operand in (node.left, *node.comparators):
                    found += [(node.lineno, s) for s in _strings(operand) if s in names]
        elif isinstance(node, ast.MatchValue):
            found += [(node.lineno, s) for s in _strings(node.value) if s in names]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in AFFIXES):
            at_start = AFFIXES[node.func.attr]
            for arg in node.args:
                for part in _strings(arg):
                    found += [(node.lineno, n) for n in sorted(names) if part and (
                        n.startswith(part) if at_start else n.endswith(part))]
    return found


# str methods that compare a part of a name: True where the part is its start
AFFIXES = {"startswith": True, "removeprefix": True, "endswith": False, "removesuffix": False}


def test_no_component_name_is_compared_outside_its_module():
    owners = _owners()
    offences = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        for line, name in compared_names(path.read_text(), set(owners)):
            if relative not in owners[name] | READS_SAVED_NAMES:
                offences.append(f"{relative}:{line} compares {name!r}")
    assert not offences, "\n".join(offences)


def test_the_check_finds_what_it_looks_for():
    source = 'a = cfg["model"]["name"] == "encoder"\nb = name in ("diff", "x")\nc = x == "y"\n'
    assert compared_names(source, {"encoder", "diff"}) == [(1, "encoder"), (2, "diff")]
    source = ('if name.startswith("di"):\n    pass\nok = name.endswith(("ider", "x"))\n'
              'match name:\n    case "encoder":\n        pass\n    case _:\n        pass\n'
              'fine = arg.startswith("-")\n')
    assert sorted(compared_names(source, {"encoder", "diff", "divider"})) == [
        (1, "diff"), (1, "divider"), (3, "divider"), (5, "encoder")]


def test_every_kind_has_owners():
    """Each registry's names are in the check (a kind left out would escape it)."""
    owners = _owners()
    for names in (available_attention(), KERNELS, available_families(), EMBEDDINGS,
                  available_positions(), ACTIVATIONS, available_outputs(), available_sources()):
        assert set(names) - SHARED_WORDS <= set(owners)
    assert owners["csv"] == {"data/source_csv.py"}
    assert owners["quantile"] == {"probabilistic/outputs.py"}
    assert owners["rope"] == {"model/positional.py"}
    assert "native/attention_kernel.py" in owners["native"]


def import_edges(package: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, anywhere in it (a function's import
    included: a cycle through one is a cycle a call can close); a TYPE_CHECKING block's
    aside (never run)."""
    root = package.name

    def module_name(path: Path) -> str:
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    modules = {module_name(p): p for p in package.rglob("*.py")}
    edges = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
                node.body = []
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = here
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                target = (base + ("." + node.module if node.module else "") if node.level
                          else node.module or "")
                for alias in node.names:  # `from pkg import module` imports the module
                    child = f"{target}.{alias.name}"
                    targets.add(child if child in modules else target)
            elif isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
        edges[name] = {t for t in targets if t in modules and t != name
                       and t.split(".")[0] == root}
    return edges


def import_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(edges) + 100))
    try:
        for v in sorted(edges):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return cycles


def test_no_module_imports_itself_through_others():
    assert import_cycles(import_edges(PACKAGE)) == []


def test_the_cycle_check_finds_a_cycle(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from . import a\n")
    (package / "a.py").write_text("from .sub.b import f\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "b.py").write_text("def f():\n    from ..a import g\n")
    (package / "c.py").write_text("import pkg.a\n")
    assert import_cycles(import_edges(package)) == [["pkg.a", "pkg.sub.b"]]


@pytest.mark.parametrize("module", ["model/layers.py", "model/forecaster.py", "model/kit.py",
                                    "attention/core.py", "attention/kernels.py"])
def test_generic_layers_hold_no_backend_specific_state(module):
    """The layers, the forecaster, the kit and the core pass records: no de-stationary
    factors, no residual-attention argument of their own, no fast-path attribute to look
    for."""
    names = set()
    for node in ast.walk(ast.parse((PACKAGE / module).read_text())):
        names |= {getattr(node, key) for key in ("id", "attr", "arg")
                  if isinstance(getattr(node, key, None), str)}
    for word in ("factors", "destationary", "short_attention", "hasattr", "lambda_value"):
        assert not [n for n in names if word in n], f"{module} names {word}"
