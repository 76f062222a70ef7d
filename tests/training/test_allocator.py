"""keep_freed_memory: on glibc, large freed tensors stay in the heap for the next step."""

import os
import platform
import subprocess
import sys

import pytest
import torch

from seqforecast.training.runtime import keep_freed_memory

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"

# In a fresh process: three 16 MiB tensors alive at once (a training step holds many), then
# freed. glibc's mallinfo2 says how many bytes were mapped from the kernel for them (hblkhd) and
# how many free bytes the heap keeps afterwards (fordblks), with or without the setting.
HEAP = """
import ctypes, sys, torch
from seqforecast.training.runtime import keep_freed_memory
class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks",
                "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
said = keep_freed_memory(torch.device("cpu")) if sys.argv[1] == "on" else None
tensors = [torch.ones(4 << 20) for _ in range(3)]
mapped = libc.mallinfo2().hblkhd
del tensors
print(mapped >> 20, libc.mallinfo2().fordblks >> 20, bool(said))
"""


def _heap(setting: str) -> tuple[int, int, bool]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", HEAP, setting], capture_output=True,
                         text=True, env=env, check=True).stdout.split()
    return int(out[0]), int(out[1]), out[2] == "True"


@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's")
def test_freed_tensors_stay_in_the_heap_instead_of_going_back_to_the_kernel():
    mapped, kept, said = _heap("off")
    assert mapped >= 48 and kept < 16 and not said  # glibc's default: mapped, then unmapped
    mapped, kept, said = _heap("on")
    assert said and mapped < 16 and kept >= 48  # from the heap, and kept there for reuse


def test_it_leaves_other_devices_and_the_users_own_settings_alone(monkeypatch):
    assert keep_freed_memory(torch.device("meta")) is None
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "131072")
    assert keep_freed_memory(torch.device("cpu")) is None
