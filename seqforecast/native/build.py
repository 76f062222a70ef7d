"""Building the C kernels for this machine on first use, and loading them with ctypes.

A kernel is one C file in this folder (with the headers beside it), with no dependency but libc
and libm, built by the system's C compiler (`$CC`, else `cc`, else `gcc`) with `-O3
-march=native` into a cache folder (`$SEQFORECAST_CACHE`, else `$XDG_CACHE_HOME/seqforecast`,
else `~/.cache/seqforecast`). A library's name is a hash of its source and headers, the
compiler, the flags and the target the compiler resolves `-march=native` to (its predefined
macros: the architecture, and every instruction-set feature it may use, on x86, ARM or any
other), so an edit, another compiler or another CPU builds anew, and a library built on one
machine of a shared home folder is never loaded on a CPU that lacks its instructions.
Concurrent processes never see a half-written library (it is renamed into place).

Before the first kernel, a probe checks that the compiler builds what the kernels use (GCC's
vector extensions, `#pragma omp simd`); where it does not, or there is no compiler, or a build
fails, `load` returns None and `unavailable()` says why, in one line (warned once a process):
trainer.kernels=auto then runs the torch paths, trainer.kernels=native is refused.
Every function is loaded with its declared argument and return types (`Signature`); ctypes
releases the GIL during a call, so callers may split the work over threads.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from torch import Tensor

# -fno-trapping-math lets GCC vectorise loops with selects (the clamps in exp); -fopenmp-simd
# reads the `omp simd` pragmas without OpenMP's runtime.
FLAGS = ("-O3", "-march=native", "-fopenmp-simd", "-fno-math-errno", "-fno-trapping-math",
         "-fPIC", "-shared")
_SOURCES = Path(__file__).parent

# What every kernel needs of the compiler: vector types, arithmetic and comparisons on them,
# a two-vector shuffle (attention.c's transposes) and the omp simd pragma.
PROBE = r"""
#include "vectors.h"
int probe(float *x) {
    vec a = load(x), b = load(x + LANES);
    ivec wins = a > b;
    store(x, SHUFFLE2(a, b, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30) + (vec)wins);
#pragma omp simd
    for (int i = 0; i < LANES; i++) x[i] += 1.0f;
    return 0;
}
"""


class Signature(NamedTuple):
    """A C function's return type (None: void) and argument types, as ctypes declares them."""

    returns: type | None
    arguments: Sequence[type]


class KernelUnavailable(RuntimeError):
    """No kernel can be built here; str() says why, in one line."""


def cache_dir() -> Path:
    if os.environ.get("SEQFORECAST_CACHE"):
        return Path(os.environ["SEQFORECAST_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "seqforecast"


def pointer(t: Tensor | None) -> ctypes.c_void_p | None:
    """A tensor's data as a C pointer argument (None: NULL)."""
    return None if t is None else ctypes.c_void_p(t.data_ptr())


def load(name: str, signatures: Mapping[str, Signature]) -> ctypes.CDLL | None:
    """The kernel `name` built for this machine (once a process) with its functions' types set
    from `signatures`, or None where it cannot be built (a warning says why, once)."""
    typed = tuple((f, Signature(r, tuple(a))) for f, (r, a) in sorted(signatures.items()))
    return _load(name, typed)


def unavailable(names: Sequence[str] = ("attention", "dropout", "residual_norm")) -> str | None:
    """None when every kernel in `names` builds here, else why not, in one line."""
    for name in names:
        try:
            _built(name)
        except KernelUnavailable as why:
            return str(why)
    return None


@cache
def _load(name: str, signatures: tuple[tuple[str, Signature], ...]) -> ctypes.CDLL | None:
    try:
        library = _built(name)
    except KernelUnavailable as why:
        warnings.warn(f"seqforecast: {why}", stacklevel=4)
        return None
    for function, (returns, arguments) in signatures:
        getattr(library, function).restype = returns
        getattr(library, function).argtypes = list(arguments)
    return library


@cache
def _built(name: str) -> ctypes.CDLL:
    """The kernel `name`.c built and loaded; KernelUnavailable (cached too) where it cannot be."""
    compiler = _compiler()
    target = _target(compiler)
    _check_probe(compiler, target)
    try:
        return ctypes.CDLL(str(_build(compiler, target, _SOURCES / f"{name}.c", name)))
    except (OSError, subprocess.SubprocessError) as error:
        raise KernelUnavailable(f"building {name}.c failed: {_reason(error)}") from None


@cache
def _compiler() -> str:
    given = os.environ.get("CC")
    compiler = shutil.which(given) if given else shutil.which("cc") or shutil.which("gcc")
    if compiler is None or platform.system() == "Windows":
        where = f"$CC={given} is not a program" if given else "none of cc, gcc, $CC"
        raise KernelUnavailable(f"no C compiler found ({where}): the C kernels are off")
    return compiler


@cache
def _target(compiler: str) -> str:
    """What `-march=native` means to this compiler on this machine: its version line and
    every macro it predefines there (architecture and instruction-set features)."""
    try:
        version = subprocess.run([compiler, "--version"], capture_output=True, text=True,
                                 timeout=60, check=True).stdout.splitlines()[:1]
        macros = subprocess.run([compiler, "-march=native", "-dM", "-E", "-"], input="",
                                capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError) as error:
        raise KernelUnavailable(f"{compiler} cannot target this CPU: {_reason(error)}") from None
    return "\n".join([*version, platform.machine(), *sorted(macros.splitlines())])


@cache
def _check_probe(compiler: str, target: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "probe.c"
        source.write_text(PROBE)
        try:
            _compile(compiler, source, Path(folder) / "probe.so")
        except (OSError, subprocess.SubprocessError) as error:
            raise KernelUnavailable(
                f"{compiler} lacks what the C kernels need (GCC vector extensions, omp simd): "
                f"{_reason(error)}; the C kernels are off"
            ) from None


def _build(compiler: str, target: str, source: Path, name: str) -> Path:
    digest = hashlib.sha256(source.read_bytes())
    for header in sorted(_SOURCES.glob("*.h")):  # what a kernel may include
        digest.update(header.read_bytes())
    digest.update("\n".join((compiler, *FLAGS, target)).encode())
    library = cache_dir() / f"{name}-{digest.hexdigest()[:16]}.so"
    if not library.exists():
        _compile(compiler, source, library)
    return library


def _compile(compiler: str, source: Path, library: Path) -> None:
    """Compile into a temporary file beside the target, then rename it into place (atomic)."""
    library.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(suffix=".so", dir=library.parent)
    os.close(handle)
    try:
        subprocess.run([compiler, *FLAGS, f"-I{_SOURCES}", str(source), "-o", partial, "-lm"],
                       check=True, capture_output=True, text=True, timeout=120)
        os.replace(partial, library)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)


def _reason(error: Exception) -> str:
    """The last line the compiler printed (its error), else the exception's own."""
    lines = (getattr(error, "stderr", None) or str(error)).strip().splitlines()
    return lines[-1] if lines else type(error).__name__
