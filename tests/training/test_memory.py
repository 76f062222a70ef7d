"""A run's start (PeakMemory.start) collects the garbage of what ran before and puts the
survivors out of the collector's sight; what comes after is still collected, and the process
still finalises every object at exit."""

import gc
import subprocess
import sys
import weakref

import pytest
import torch

from seqforecast.training.memory import PeakMemory

from ..cli_helpers import REPO


class _Node:
    pass


def test_a_runs_start_freezes_the_survivors_and_what_comes_after_is_still_collected():
    PeakMemory(torch.device("cpu")).start()
    assert gc.get_freeze_count() > 10_000  # the modules at least
    node = _Node()
    node.self = node  # a cycle: only the collector frees it
    alive = weakref.ref(node)
    del node
    gc.collect()
    assert alive() is None


def test_a_process_that_started_a_run_exits_without_leak_reports():
    # Frozen objects are not finalised at exit unless unfrozen first: triton's bindings (loaded
    # by a run on attention.kernel=triton) then print "nanobind: leaked ..." on every exit.
    pytest.importorskip("triton")
    code = ("import torch, triton, seqforecast.train\n"
            "from seqforecast.training.memory import PeakMemory\n"
            "PeakMemory(torch.device('cpu')).start()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO)
    assert proc.returncode == 0 and proc.stderr == ""
