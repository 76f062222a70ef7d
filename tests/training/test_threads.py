"""trainer.num_threads: explicit numbers win; auto takes the free usable cores, logged."""

import subprocess
import sys
import time

import pytest
import torch

from seqforecast.config import ConfigError, compose_config, validate_config
from seqforecast.training.runtime import TINY_MODEL, busy_cores, choose_threads, usable_cores


def test_an_explicit_count_wins_and_zero_keeps_torchs_default():
    assert choose_threads(3, 10**6) == (3, "trainer.num_threads")
    threads, why = choose_threads(0, 10**6)
    assert threads == torch.get_num_threads() and "torch's default" in why


def test_auto_gives_a_tiny_model_one_thread():
    threads, why = choose_threads("auto", TINY_MODEL - 1)
    assert threads == 1 and "parameters" in why


def test_auto_leaves_a_core_that_another_process_keeps_busy():
    cores = usable_cores()
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        busy = busy_cores(cores)
        threads, why = choose_threads("auto", 10**6)
    finally:
        hog.kill()
        hog.wait()
    assert busy is not None and 0.5 <= busy <= len(cores) + 0.01
    assert 1 <= threads <= max(1, len(cores) - 1), why
    assert f"{len(cores)} usable cores" in why


@pytest.mark.parametrize("value", ["many", -1, 1.5])
def test_a_bad_thread_setting_gets_one_line(value):
    with pytest.raises(ConfigError, match="trainer.num_threads=.* is not allowed: auto, 0"):
        validate_config(compose_config([f"trainer.num_threads={value}"]))
