"""Process set-up: seeds, device, threads, the CPU allocator."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import random
import time

import numpy as np
import torch
from torch import nn

from ..options import ConfigError

log = logging.getLogger(__name__)


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (every device), so a seed fixes a CPU run's numbers."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def resolve_device(name: str) -> torch.device:
    """`auto` -> cuda, else mps, else cpu. An explicit device that is absent is an error."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"trainer.device={name!r}: CUDA is not available here; use auto or cpu")
    if name == "mps" and not torch.backends.mps.is_available():
        raise ConfigError("trainer.device='mps': MPS is not available here; use auto or cpu")
    return torch.device(name)


# Below this many parameters a step's matmuls are too small to share between threads.
TINY_MODEL = 20_000


def usable_cores() -> list[int]:
    """The cores this process may run on (its affinity), else every core."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def busy_cores(cores: list[int], seconds: float = 0.25) -> float | None:
    """How many of `cores` other processes keep busy now: their non-idle share over
    `seconds` (/proc/stat; None where there is none). Instant, unlike the load average,
    which lags a process that started seconds ago."""

    def sample() -> dict[int, tuple[int, int]]:
        found = {}
        with open("/proc/stat") as f:
            for line in f:
                name, *fields = line.split()
                if name.startswith("cpu") and name[3:].isdigit():
                    ticks = [int(x) for x in fields]
                    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
                    found[int(name[3:])] = (sum(ticks), idle)
        return found

    try:
        before = sample()
        time.sleep(seconds)
        after = sample()
    except (OSError, ValueError, IndexError):
        return None
    busy = 0.0
    for core in cores:
        if core in before and core in after:
            total = after[core][0] - before[core][0]
            idle = after[core][1] - before[core][1]
            busy += (total - idle) / total if total > 0 else 0.0
    return busy


def choose_threads(setting, parameters: int) -> tuple[int, str]:
    """The torch thread count for `trainer.num_threads` and why. An explicit number wins;
    0 keeps torch's default (one per core); `auto` takes the cores this process may use that
    no other process keeps busy (torch's threads spin: on a core another process needs, both
    crawl), and one thread for a tiny model."""
    if setting != "auto":
        threads = int(setting) or torch.get_num_threads()
        why = "trainer.num_threads" if int(setting) else "torch's default, one per core"
        return threads, why
    cores = usable_cores()
    if parameters < TINY_MODEL:
        return 1, f"auto: a model of {parameters} parameters gains nothing from more"
    busy = busy_cores(cores)
    if busy is None:
        return len(cores), f"auto: {len(cores)} usable cores (their load is unknown here)"
    free = max(1, min(len(cores), round(len(cores) - busy)))
    return free, f"auto: {len(cores)} usable cores, {busy:.1f} kept busy by other processes"


def configure_threads(setting, parameters: int) -> int:
    """Set torch's intra-op threads from `trainer.num_threads` and log the choice."""
    threads, why = choose_threads(setting, parameters)
    torch.set_num_threads(threads)
    log.info("torch threads: %d (%s)", threads, why)
    return threads


# glibc's mallopt parameters (malloc.h) and the largest mmap threshold it accepts on 64 bits.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD_MAX = 32 << 20


def keep_freed_memory(device: torch.device) -> str | None:
    """On the CPU with glibc: keep freed blocks of up to 32 MiB in the heap for reuse. By
    default glibc maps each large tensor anew from the kernel and unmaps it when freed, so every
    step of training pays a page fault on each of its pages (a published-PatchTST step: about a
    sixth of its time, measured on one thread here). The cost: the process keeps its peak
    memory until it exits. The MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ environment
    variables, when set, win. Returns what was done (for the log), or None."""
    if device.type != "cpu" or os.name != "posix":
        return None
    if any(f"MALLOC_{name}_" in os.environ for name in ("MMAP_THRESHOLD", "TRIM_THRESHOLD")):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt  # glibc only (absent from macOS's and musl's libc)
    except (OSError, AttributeError):
        return None
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    if mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX) != 1:
        return None
    mallopt(M_TRIM_THRESHOLD, 2**31 - 1)
    return "CPU allocator: freed blocks up to 32 MiB kept for reuse (glibc mallopt)"


MATMUL_PRECISIONS = ("highest", "high", "medium")  # torch.set_float32_matmul_precision's


def float32_products(device: torch.device, precision: str) -> str | None:
    """On a CUDA device, float32 matrix products and convolutions at `precision`
    (trainer.matmul_precision): `high` lets them run on TF32 tensor cores (10-bit mantissas, a
    several-fold rate on Ampere and later: the habit of GPU training), `highest` keeps full fp32,
    `medium` allows bf16. The CPU is left alone: its products stay fp32. Returns what was done
    (for the log), or None."""
    if device.type != "cuda":
        return None
    torch.set_float32_matmul_precision(precision)
    torch.backends.cudnn.allow_tf32 = precision != "highest"
    return f"float32 products on {device}: matmul precision {precision}"


def cpu_has_bf16_products() -> bool:
    """Whether this CPU multiplies bf16 matrices in hardware (AVX512-BF16 or AMX, as oneDNN
    sees it). Without them torch's bf16 products take a generic fallback: on an AVX2 CPU here
    (AMD EPYC) 0.3 GFLOP/s against fp32's 35-76 at TimeXer's shapes, and its training step
    about 18x slower (1,070 ms against fp32's 55-60, each beside two training runs;
    benchmarks/profile_step.json's timexer_etth1 profiles). Where torch cannot say, assumed yes
    (nothing is held back on a guess)."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a torch without oneDNN's probe
        return True


def slow_bf16(device: torch.device, precision: str) -> str | None:
    """The warning for bf16 autocast on a CPU without bf16 products, or None: the run is
    valid (the same config may serve a GPU, or a CPU that has them), only much slower than
    fp32 here."""
    if precision != "bf16" or device.type != "cpu" or cpu_has_bf16_products():
        return None
    return (f"trainer.precision=bf16 on a CPU without bf16 matrix instructions (torch sees "
            f"{torch.backends.cpu.get_cpu_capability()}, no AVX512-BF16 or AMX): its bf16 "
            f"products take a slow fallback, often tens of times slower than fp32's; "
            f"trainer.precision=fp32 trains faster here")


# torch.compile's modes (trainer.compile_mode): reduce-overhead also records the compiled step
# as CUDA graphs on a GPU, replaying a step's hundreds of kernel launches as one (on the CPU
# it compiles as default does); max-autotune also benchmarks kernel choices while compiling.
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")


def compile_model(model: nn.Module, mode: str = "default") -> bool:
    """torch.compile `model` in place (state-dict keys unchanged), in `mode` (COMPILE_MODES).
    Where torch.compile cannot
    work (no C++ toolchain, an unsupported platform), say so once and train eagerly. A graph
    break runs its part eagerly, as torch does; an error while compiling is raised, not hidden
    (every family and backend traces as one graph: tests/training/test_compile.py). Returns
    whether compiling is on."""
    try:
        torch.compile(lambda x: x * 2 + 1)(torch.ones(4))  # the toolchain works at all
    except Exception as err:  # whatever the backend raises: compiling is an optimisation
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        log.warning("trainer.compile=true: torch.compile is unavailable here (%s); "
                    "training without it", reason)
        return False
    model.compile(mode=mode)
    return True
