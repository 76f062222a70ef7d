import pytest
import torch.nn.functional as F


@pytest.fixture
def sdpa_calls(monkeypatch):
    """A list that grows by one each time torch's fused attention kernel is called."""
    calls = []
    original = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    return calls
