"""The C attention kernel (seqforecast/native/attention.c through attention/native.py) against
torch's own attention, forward and backward: widths in pieces, lengths off the 16-lane grid,
strided inputs, masks, threads; and the switch back to the torch path."""

import pytest
import torch
import torch.nn.functional as F

from seqforecast import native as native_build
from seqforecast.attention import cache_sized, native

pytestmark = pytest.mark.skipif(not native.available(), reason="no C compiler to build the kernel")

B, H = 3, 2


def _heads(length: int, width: int) -> torch.Tensor:
    """[B, H, L, w] as a view of [B, L, H, w] storage (the layout the model hands over)."""
    return torch.randn(B, length, H, width).transpose(1, 2)


def _against_torch(widths, q_len, k_len, dv, blocked=None):
    q = [_heads(q_len, w) for w in widths]
    k = [_heads(k_len, w) for w in widths]
    v = _heads(k_len, dv)
    grad = torch.randn(B, H, q_len, dv)
    leaves = [t.clone().requires_grad_() for t in (*q, *k, v)]
    n = len(widths)
    ours = native.attention(leaves[:n], leaves[n : 2 * n], leaves[-1], 0.4, blocked)
    ours.backward(grad)
    refs = [t.clone().requires_grad_() for t in (*q, *k, v)]
    expected = F.scaled_dot_product_attention(
        torch.cat(refs[:n], -1), torch.cat(refs[n : 2 * n], -1), refs[-1],
        attn_mask=None if blocked is None else ~blocked, scale=0.4,
    )  # fmt: skip
    expected.backward(grad)
    torch.testing.assert_close(ours, expected, rtol=1e-5, atol=1e-6)
    for mine, theirs in zip(leaves, refs, strict=True):
        torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-4, atol=1e-5)
    with torch.no_grad():  # no backward: the same function
        torch.testing.assert_close(native.attention(q, k, v, 0.4, blocked), expected.detach(),
                                   rtol=1e-5, atol=1e-6)  # fmt: skip
    return ours


@pytest.mark.parametrize("widths", [(4,), (4, 4, 4), (3, 5), (2,), (2, 2, 2), (16,), (7,)])
@pytest.mark.parametrize("q_len,k_len", [(42, 42), (9, 11), (33, 16), (1, 17), (16, 48)])
@pytest.mark.parametrize("dv", [4, 5, 8])
def test_equals_torch_attention_forward_and_backward(widths, q_len, k_len, dv):
    """Seven of the compiled (q/k width, v width) pairs (4/8/12/2/6 with 4, 8/16 with 8) and
    the generic code, queries and keys from 1 to 48 (one, several and partial 16-lane blocks),
    q and k in pieces (residual attention's layers)."""
    _against_torch(widths, q_len, k_len, dv)


@pytest.mark.parametrize("q_len,k_len", [(42, 42), (9, 20)])
def test_with_a_mask_equals_torch_attention(q_len, k_len):
    torch.manual_seed(0)
    blocked = torch.rand(q_len, k_len) < 0.6
    blocked[torch.arange(q_len), torch.arange(q_len) % k_len] = False  # every query keeps a key
    _against_torch((4, 4), q_len, k_len, 4, blocked)
    causal = torch.ones(q_len, k_len, dtype=torch.bool).triu(1)
    _against_torch((8,), q_len, k_len, 4, causal)


def test_the_batch_split_over_threads_gives_the_same_bits():
    """Forward and backward: each window is computed alone, so the split cannot change a bit."""
    q, k, v = [_heads(42, 4)], [_heads(42, 4)], _heads(42, 4)
    grad = torch.randn(B, H, 42, 4)

    def run():
        leaves = [t.clone().requires_grad_() for t in (*q, *k, v)]
        out = native.attention(leaves[:1], leaves[1:2], leaves[2], 0.5)
        out.backward(grad)
        return [out.detach(), *(t.grad for t in leaves)]

    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = run()
        torch.set_num_threads(3)  # 3 threads over a batch of 3
        for split, alone in zip(run(), one, strict=True):
            assert torch.equal(split, alone)
    finally:
        torch.set_num_threads(threads)


def test_mismatched_pieces_are_refused():
    with pytest.raises(ValueError, match="pieces of the same widths"):
        native.attention([_heads(5, 4)], [_heads(5, 3)], _heads(5, 4), 0.5)


def test_switched_off_the_torch_path_computes_the_same(monkeypatch):
    q, k, v = [_heads(42, 4), _heads(42, 8)], [_heads(42, 4), _heads(42, 8)], _heads(42, 4)
    kernel = cache_sized.heads_attention(q, k, v, 0.5)
    calls, original = [], cache_sized.attention
    monkeypatch.setattr(cache_sized, "attention", lambda *a: calls.append(1) or original(*a))
    monkeypatch.setenv("SEQFORECAST_NATIVE", "0")
    assert not native.available()
    torch.testing.assert_close(cache_sized.heads_attention(q, k, v, 0.5), kernel,
                               rtol=1e-5, atol=1e-6)  # fmt: skip
    assert calls == [1]


def test_a_build_that_cannot_happen_warns_and_returns_none(tmp_path, monkeypatch):
    (tmp_path / "broken.c").write_text("this is not C\n")
    (tmp_path / "fine.c").write_text("int answer(void) { return 42; }\n")
    monkeypatch.setattr(native_build, "_SOURCES", tmp_path)
    monkeypatch.setenv("SEQFORECAST_CACHE", str(tmp_path / "cache"))
    try:
        assert native_build.build("fine").answer() == 42
        assert len(list((tmp_path / "cache").glob("fine-*.so"))) == 1  # built once, named
        with pytest.warns(UserWarning, match="building broken.c failed"):
            assert native_build.build("broken") is None
        assert not list((tmp_path / "cache").glob("broken*"))  # nothing half-written left
        monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))  # another name: a build
        native_build.build.cache_clear()
        with pytest.warns(UserWarning, match="building fine.c failed"):
            assert native_build.build("fine") is None
    finally:
        native_build.build.cache_clear()
