"""The architecture's rules, read off the source: no code compares a model family's, an
embedding's or an attention backend's name outside that component's own module (rules, the
builder, the FLOP count, the probe, figures and evaluate ask what the component declares), and
no generic layer names a backend's state."""

import ast
from pathlib import Path

import pytest

from seqforecast.attention import available_attention
from seqforecast.attention.registry import _BACKENDS
from seqforecast.model.embedding import EMBEDDINGS
from seqforecast.model.families import available_families, family

PACKAGE = Path(__file__).resolve().parents[1] / "seqforecast"
# Saved configs are read by the names they were written with (former names included).
READS_SAVED_NAMES = {"config/migrations.py"}


def _owners() -> dict[str, set[str]]:
    """Each component name -> the modules (paths under seqforecast/) allowed to compare it."""
    owners: dict[str, set[str]] = {}
    for name in available_attention():
        owners.setdefault(name, set()).add(_path(_BACKENDS[name].cls))
    for name in available_families():
        owners.setdefault(name, set()).add(_path(family(name).cls))
    for name in EMBEDDINGS:
        owners.setdefault(name, set()).add("model/embedding.py")
    return owners


def _path(cls) -> str:
    return cls.__module__.removeprefix("seqforecast.").replace(".", "/") + ".py"


def _strings(node: ast.AST) -> list[str]:
    """The string constants a comparison operand is (or holds, as a tuple, list or set)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [s for item in node.elts for s in _strings(item)]
    return []


def compared_names(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of every ==, !=, in or not in comparison against a component's name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        if not any(isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn) for op in node.ops):
            continue
        for operand in (node.left, *node.comparators):
            found += [(node.lineno, s) for s in _strings(operand) if s in names]
    return found


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
