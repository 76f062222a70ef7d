"""Small C kernels for the CPU, compiled for this machine on first use and loaded with ctypes.

A kernel is one C file beside this module (with the headers beside it), with no dependency but
libc and libm, built by the system's C compiler (`cc -O3 -march=native`) into a cache folder
(`$SEQFORECAST_CACHE`, else `$XDG_CACHE_HOME/seqforecast`, else `~/.cache/seqforecast`), named
by a hash of its source and headers, the flags and this CPU's model and features: an edit or
another CPU builds anew, and concurrent processes never see a half-written library (it is
renamed into place). Where there is no compiler or the build fails, `build` returns None and
callers keep their torch path (a warning says why, once a process); `SEQFORECAST_NATIVE=0` in
the environment switches them to it too. ctypes releases the GIL during a call, so callers can
split the work over threads.
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
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import Tensor

# -fno-trapping-math lets GCC vectorise loops with selects (the clamps in exp); -fopenmp-simd
# reads the `omp simd` pragmas without OpenMP's runtime.
FLAGS = ("-O3", "-march=native", "-fopenmp-simd", "-fno-math-errno", "-fno-trapping-math",
         "-fPIC", "-shared")  # fmt: skip
_SOURCES = Path(__file__).parent


def enabled() -> bool:
    """False when SEQFORECAST_NATIVE=0 (the torch paths everywhere: A/B checks, debugging)."""
    return os.environ.get("SEQFORECAST_NATIVE", "1") != "0"


def cache_dir() -> Path:
    if os.environ.get("SEQFORECAST_CACHE"):
        return Path(os.environ["SEQFORECAST_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "seqforecast"


def load(name: str, returns: tuple[tuple[str, type | None], ...] = ()) -> ctypes.CDLL | None:
    """The kernel `name` to call, or None: switched off (`enabled()`, read at each call, so the
    switch works at any time) or not built (`build`). Its functions' return types are set from
    `returns` ((function, ctypes type or None), ...); the rest return int, ctypes' default."""
    return _load(name, returns) if enabled() else None


def pointer(t: Tensor | None) -> ctypes.c_void_p | None:
    """A tensor's data as a C pointer argument (None: NULL)."""
    return None if t is None else ctypes.c_void_p(t.data_ptr())


@cache
def _load(name: str, returns: tuple[tuple[str, type | None], ...]) -> ctypes.CDLL | None:
    library = build(name)
    for function, restype in returns if library is not None else ():
        getattr(library, function).restype = restype
    return library


@cache
def build(name: str) -> ctypes.CDLL | None:
    """The kernel `name`.c built for this machine (once a process), or None where it cannot be
    (see above)."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None or platform.system() == "Windows":
        warnings.warn(f"seqforecast: no C compiler found, {name} runs on torch ops", stacklevel=3)
        return None
    source = _SOURCES / f"{name}.c"
    digest = hashlib.sha256(source.read_bytes())
    for header in sorted(_SOURCES.glob("*.h")):  # what a kernel may include
        digest.update(header.read_bytes())
    digest.update(" ".join((compiler, *FLAGS, platform.machine(), _cpu_signature())).encode())
    library = cache_dir() / f"{name}-{digest.hexdigest()[:16]}.so"
    try:
        if not library.exists():
            _compile(compiler, source, library)
        return ctypes.CDLL(str(library))
    except (OSError, subprocess.SubprocessError) as error:
        lines = (getattr(error, "stderr", None) or str(error)).strip().splitlines()
        reason = lines[-1] if lines else type(error).__name__
        warnings.warn(f"seqforecast: building {name}.c failed, it runs on torch ops: {reason}",
                      stacklevel=3)  # fmt: skip
        return None


def _compile(compiler: str, source: Path, library: Path) -> None:
    """Compile into a temporary file beside the target, then rename it into place (atomic)."""
    library.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(suffix=".so", dir=library.parent)
    os.close(handle)
    try:
        subprocess.run([compiler, *FLAGS, str(source), "-o", partial, "-lm"], check=True,
                       capture_output=True, text=True, timeout=120)  # fmt: skip
        os.replace(partial, library)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)


def _cpu_signature() -> str:
    """This CPU's model and feature flags (a library built with -march=native runs only where
    they match)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor()
    keep = [line for line in lines if line.startswith(("model name", "flags"))]
    return "\n".join(sorted(set(keep)))
