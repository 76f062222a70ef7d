import pytest
import torch


@pytest.fixture(autouse=True)
def _seeded():
    """Every test starts from the same torch RNG state, so failures reproduce."""
    torch.manual_seed(0)
