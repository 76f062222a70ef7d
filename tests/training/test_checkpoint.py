"""Checkpoints: atomic writes, weights_only loads, one clear line for a bad file."""

import os
import pickle

import pytest
import torch

from seqforecast.training import CheckpointError, load_checkpoint, save_checkpoint


def test_round_trip(tmp_path):
    state = {"model": {"w": torch.randn(3)}, "epoch": 4, "config": "a: 1\n"}
    save_checkpoint(tmp_path / "ckpt.pt", state)
    loaded = load_checkpoint(tmp_path / "ckpt.pt")
    assert torch.equal(loaded["model"]["w"], state["model"]["w"])
    assert loaded["epoch"] == 4 and loaded["config"] == "a: 1\n"
    assert os.listdir(tmp_path) == ["ckpt.pt"]  # no temporary file left behind


def test_a_failed_write_keeps_the_previous_checkpoint(tmp_path):
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, {"epoch": 1})

    class Unsaveable:
        def __reduce__(self):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        save_checkpoint(path, {"epoch": 2, "bad": Unsaveable()})
    assert load_checkpoint(path)["epoch"] == 1
    assert os.listdir(tmp_path) == ["ckpt.pt"]


def test_truncated_checkpoint_is_refused(tmp_path):
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, {"model": {"w": torch.randn(100)}})
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="ckpt.pt: not a readable seqforecast checkpoint"):
        load_checkpoint(path)


def test_random_bytes_are_refused(tmp_path):
    path = tmp_path / "noise.pt"
    path.write_bytes(os.urandom(2048))
    with pytest.raises(CheckpointError, match="noise.pt"):
        load_checkpoint(path)


class _RunsCode:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def test_a_pickle_that_would_run_code_is_refused(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"format": "seqforecast-checkpoint-1", "x": _RunsCode()}, path)
    with pytest.raises(CheckpointError, match="evil.pt: .*weights_only"):
        load_checkpoint(path)
    path.write_bytes(pickle.dumps(_RunsCode(), protocol=2))
    with pytest.raises(CheckpointError, match="evil.pt"):
        load_checkpoint(path)


def test_a_foreign_torch_file_is_refused(tmp_path):
    path = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(2)}, path)
    with pytest.raises(CheckpointError, match="other.pt: not a seqforecast checkpoint"):
        load_checkpoint(path)
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        load_checkpoint(tmp_path / "missing.pt")
