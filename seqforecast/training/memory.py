"""A run's peak memory: the resident set's high-water mark from the run's start, and on CUDA
the allocator's peak.

Sweeps run several jobs in one process (Hydra's basic launcher, joblib's reused workers), and
the CPU allocator keeps freed blocks for reuse (runtime.keep_freed_memory), so a process's
lifetime peak says little about one run. At the start of a run the freed heap goes back to the
kernel (glibc's malloc_trim) and the kernel's high-water mark is reset (/proc/self/clear_refs),
so the mark counts this run only. Where either is unavailable (not Linux, not glibc), the peak
is the process's lifetime one and `peak_scope` says so.
"""

from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import functools
import gc
import resource
import sys
from pathlib import Path

import torch

STATUS = Path("/proc/self/status")
CLEAR_REFS = Path("/proc/self/clear_refs")


def status_mib(field: str) -> float | None:
    """VmRSS or VmHWM from /proc/self/status, in MiB; None where there is no such file."""
    try:
        for line in STATUS.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        return None
    return None


def _release_freed_heap() -> None:
    gc.collect()
    # What survives the collection (the modules: about 250k objects once torch, Hydra and
    # TensorBoard are imported, and whatever earlier runs keep) is moved out of the collector's
    # sight: each full collection, this one at every run's start and the automatic ones during
    # it, scanned them all (0.25 s each here); now only what came after. Objects alive now that
    # later become garbage in a cycle are not reclaimed, so this freezes only what was just
    # found alive; unfrozen at exit, so that finalisation sees every object as usual.
    gc.freeze()
    _unfreeze_at_exit()
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim(0)  # glibc only
    except (OSError, AttributeError):
        pass


@functools.cache
def _unfreeze_at_exit() -> None:
    atexit.register(gc.unfreeze)


def reset_high_water_mark() -> bool:
    """The kernel's peak RSS back to the current RSS; False where that cannot be done."""
    try:
        CLEAR_REFS.write_text("5")  # "5": reset the peak RSS (proc(5), Linux >= 4.0)
    except OSError:
        return False
    return True


class PeakMemory:
    """start() at the run's start, then report() at its end (a dict for metrics.json)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.scope = "process"
        self.rss_at_start = None

    def start(self) -> None:
        _release_freed_heap()
        if reset_high_water_mark():
            self.scope = "run"
        self.rss_at_start = status_mib("VmRSS")
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)

    def report(self) -> dict:
        peak = status_mib("VmHWM")
        if peak is None:  # no /proc: the lifetime peak (ru_maxrss: KiB on Linux, bytes on macOS)
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            peak /= 1024**2 if sys.platform == "darwin" else 1024
        out = {
            "peak_rss_mib": round(peak, 1),
            "rss_at_start_mib": None if self.rss_at_start is None else round(self.rss_at_start, 1),
            "peak_scope": self.scope,
        }
        if self.device.type == "cuda":
            out["peak_cuda_mib"] = round(torch.cuda.max_memory_allocated(self.device) / 2**20, 1)
        return out
