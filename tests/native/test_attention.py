"""The C attention kernel (seqforecast/native/attention.c through native/attention.py) against
torch's own attention, forward and backward: widths in pieces, lengths off the 16-lane grid,
strided inputs, masks, threads; and what the builder does where a kernel cannot be built."""

import ctypes

import pytest
import torch
import torch.nn.functional as F

from seqforecast.native import attention as native
from seqforecast.native import build

from .helpers import needs_kernels

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
    )
    expected.backward(grad)
    torch.testing.assert_close(ours, expected, rtol=1e-5, atol=1e-6)
    for mine, theirs in zip(leaves, refs, strict=True):
        torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-4, atol=1e-5)
    with torch.no_grad():  # no backward: the same function
        torch.testing.assert_close(native.attention(q, k, v, 0.4, blocked), expected.detach(),
                                   rtol=1e-5, atol=1e-6)
    return ours


@needs_kernels
@pytest.mark.parametrize("widths", [(4,), (4, 4, 4), (3, 5), (2,), (2, 2, 2), (16,), (7,)])
@pytest.mark.parametrize("q_len,k_len", [(42, 42), (9, 11), (33, 16), (1, 17), (16, 48)])
@pytest.mark.parametrize("dv", [4, 5, 8])
def test_equals_torch_attention_forward_and_backward(widths, q_len, k_len, dv):
    """Seven of the compiled (q/k width, v width) pairs (4/8/12/2/6 with 4, 8/16 with 8) and
    the generic code, queries and keys from 1 to 48 (one, several and partial 16-lane blocks),
    q and k in pieces (residual attention's layers)."""
    _against_torch(widths, q_len, k_len, dv)


@needs_kernels
@pytest.mark.parametrize("q_len,k_len", [(42, 42), (9, 20)])
def test_with_a_mask_equals_torch_attention(q_len, k_len):
    torch.manual_seed(0)
    blocked = torch.rand(q_len, k_len) < 0.6
    blocked[torch.arange(q_len), torch.arange(q_len) % k_len] = False  # every query keeps a key
    _against_torch((4, 4), q_len, k_len, 4, blocked)
    causal = torch.ones(q_len, k_len, dtype=torch.bool).triu(1)
    _against_torch((8,), q_len, k_len, 4, causal)


@needs_kernels
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


@needs_kernels
def test_mismatched_pieces_are_refused():
    with pytest.raises(ValueError, match="pieces of the same widths"):
        native.attention([_heads(5, 4)], [_heads(5, 3)], _heads(5, 4), 0.5)


def test_the_short_attention_takes_short_float32_cpu_sequences_only():
    q, k, v = [_heads(42, 4)], [_heads(42, 4)], _heads(42, 4)
    assert native.applies(q, k, v)
    assert not native.applies([_heads(129, 4)], [_heads(129, 4)], _heads(129, 4))  # too long
    assert not native.applies([t.double() for t in q], k, v)
    assert not native.applies([_heads(42, 100), _heads(42, 40)], [_heads(42, 100),
                                                                   _heads(42, 40)], v)  # wide
    assert not native.applies([t.to("meta") for t in q], k, v)


def test_a_build_that_cannot_happen_says_why_and_returns_none(tmp_path, monkeypatch):
    (tmp_path / "broken.c").write_text("this is not C\n")
    (tmp_path / "fine.c").write_text("int answer(void) { return 42; }\n")
    (tmp_path / "vectors.h").write_text((build._SOURCES / "vectors.h").read_text())
    monkeypatch.setattr(build, "_SOURCES", tmp_path)
    monkeypatch.setenv("SEQFORECAST_CACHE", str(tmp_path / "cache"))
    answer = {"answer": build.Signature(ctypes.c_int, [])}
    caches = (build._load, build._built, build._compiler, build._target, build._check_probe)
    try:
        for cached in caches:
            cached.cache_clear()
        if build.unavailable(["fine"]) is None:  # a compiler here: it builds, once, named
            assert build.load("fine", answer).answer() == 42
            assert len(list((tmp_path / "cache").glob("fine-*.so"))) == 1
            assert build.unavailable(["broken"]).startswith("building broken.c failed")
            with pytest.warns(UserWarning, match="building broken.c failed"):
                assert build.load("broken", answer) is None
            assert not list((tmp_path / "cache").glob("broken*"))  # nothing half-written left
        for cached in caches:
            cached.cache_clear()
        monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
        why = build.unavailable(["fine"])
        assert why is not None and "no-such-compiler" in why and "\n" not in why
        with pytest.warns(UserWarning, match="no-such-compiler"):
            assert build.load("fine", answer) is None
    finally:
        for cached in caches:
            cached.cache_clear()


@needs_kernels
def test_a_compiler_without_what_the_kernels_need_is_refused_by_the_probe(tmp_path, monkeypatch):
    """GCC before 4.7 or a compiler without vector extensions: one line, no kernel built."""
    fake = tmp_path / "cc"
    real = build._compiler()
    fake.write_text(f"#!/bin/sh\ncase \"$*\" in *probe.c*) echo 'error: no vectors' >&2; "
                    f"exit 1;; esac\nexec {real} \"$@\"\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    caches = (build._built, build._compiler, build._target, build._check_probe)
    try:
        for cached in caches:
            cached.cache_clear()
        why = build.unavailable(["attention"])
        assert "lacks what the C kernels need" in why and "no vectors" in why
    finally:
        for cached in caches:
            cached.cache_clear()


@needs_kernels
def test_the_library_name_holds_what_march_native_resolves_to():
    """The cache key is the compiler's own view of the target: its -march=native macros (the
    architecture and every instruction-set feature), not /proc/cpuinfo's x86-only lines."""
    target = build._target(build._compiler())
    assert "__" in target and len(target.splitlines()) > 20
