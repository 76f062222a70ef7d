"""The GPU kernels for block-local windows (attention.kernel=triton, flex): equal to the explicit
path, and to a dense masked reference written here, forward and backward where the device
allows. Without a GPU, Triton's interpreter runs the kernels on CPU tensors (tests/conftest.py
sets TRITON_INTERPRET=1), and FlexAttention runs its compiled forward; the triton tests skip only
where triton is absent, and the dev extra installs it."""

import pytest
import torch

from seqforecast.attention import AttentionCall, block_local, build_attention
from seqforecast.attention.band_flex import FlexBand, flex_band_attention
from seqforecast.attention.band_triton import band_attention, unavailable
from seqforecast.config import compose_config, validate_config
from seqforecast.options import ConfigError

from .helpers import randomize_

NO_TRITON = unavailable()
needs_triton = pytest.mark.skipif(NO_TRITON is not None, reason=f"{NO_TRITON}")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def dense_band(q, k, v, scale, block, causal):
    """The band as a dense masked softmax: q, k [B, G, L, w], v [B, V, L, d] (group g reads
    value g // (G / V))."""
    length, shared = q.shape[-2], q.shape[1] // v.shape[1]
    blocked = block_local.outside_windows(length, block, 0 if causal else 1, q.device)
    if causal:
        blocked = blocked | torch.ones(length, length, dtype=torch.bool,
                                       device=q.device).triu(1)
    scores = (q @ k.transpose(-1, -2) * scale).masked_fill(blocked, float("-inf"))
    return scores.softmax(-1) @ v.repeat_interleave(shared, dim=1)


def _grads(fn, inputs, weight):
    inputs = [t.detach().clone().requires_grad_() for t in inputs]
    out = fn(*inputs)
    (out * weight).sum().backward()
    return [out, *(t.grad for t in inputs)]


# (batch, values, groups per value, length, q/k width, value width, block): ragged tails, a
# block longer than the sequence, widths below a tile, diff's two groups per value
SHAPES = [(2, 2, 2, 21, 5, 7, 4), (1, 1, 1, 16, 8, 8, 8), (1, 3, 2, 9, 3, 4, 16)]


@needs_triton
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_the_triton_band_equals_a_dense_masked_softmax(shape, causal):
    batch, values, shared, length, width, value_width, block = shape
    torch.manual_seed(0)
    q, k = (torch.randn(batch, values * shared, length, width, device=DEVICE) for _ in "qk")
    v = torch.randn(batch, values, length, value_width, device=DEVICE)
    weight = torch.randn(batch, values * shared, length, value_width, device=DEVICE)
    got = _grads(lambda *t: band_attention(*t, 0.4, block, causal), (q, k, v), weight)
    want = _grads(lambda *t: dense_band(*t, 0.4, block, causal), (q, k, v), weight)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


@needs_triton
@pytest.mark.skipif(not torch.cuda.is_available(), reason=(
    "bf16 needs a GPU: Triton 3.9's interpreter gets bf16 products wrong (a 16 x 16 tl.dot off "
    "by 1e10)"))
@pytest.mark.parametrize("causal", [False, True])
def test_the_triton_band_in_bf16_is_the_float32_function_to_bf16_rounding(causal):
    torch.manual_seed(0)
    q, k = (torch.randn(2, 8, 300, 32, device=DEVICE) for _ in "qk")
    v = torch.randn(2, 4, 300, 64, device=DEVICE)
    weight = torch.randn(2, 8, 300, 64, device=DEVICE)
    got = _grads(lambda *t: band_attention(*t, 0.2, 16, causal),
                 [t.bfloat16() for t in (q, k, v)], weight.bfloat16())
    want = _grads(lambda *t: dense_band(*t, 0.2, 16, causal), (q, k, v), weight)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g.float(), w, rtol=2e-2, atol=2e-2 * w.abs().max().item())


def _pair(kernel, **options):
    torch.manual_seed(0)
    fast = randomize_(build_attention("diff", 16, 2, block_size=4, kernel=kernel, **options),
                      0.2).to(DEVICE)
    explicit = build_attention("diff", 16, 2, block_size=4, kernel="explicit", **options)
    explicit.load_state_dict(fast.state_dict())
    return fast, explicit.to(DEVICE)


@needs_triton
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("options", [{}, {"head_layout": "wide"}])
def test_diff_block_local_on_the_triton_kernel_is_the_explicit_path(options, causal):
    fast, explicit = _pair("triton", **options)
    assert fast.kernel.name == "triton"
    x = torch.randn(2, 13, 16, device=DEVICE)
    weight = torch.linspace(-1, 1, 16, device=DEVICE)
    results = []
    for attn in (fast, explicit):
        h = x.clone().requires_grad_()
        out = attn.attend(h, h, AttentionCall(causal=causal)).out
        (out * weight).sum().backward()
        results.append([out, h.grad, *(p.grad for p in attn.parameters())])
    for g, w in zip(*results, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


# Each case compiles kernels of its own (about 11 s on an empty kernel cache): 40 both ways,
# 13 (not a multiple of the block) where the causal mask cuts its last block.
@pytest.mark.parametrize("length,causal", [(40, False), (40, True), (13, True)])
def test_diff_block_local_on_flexattention_is_the_explicit_path_forward(length, causal):
    """The compiled forward (a GPU's backward too, where there is one); lengths whose unpadded
    compiled CPU forward was wrong in torch 2.13 (40) among them. Without a GPU the kernel is
    refused when built (no CPU backward), so its forward is checked by calling it itself."""
    if torch.cuda.is_available():
        fast, explicit = _pair("flex")
        assert fast.kernel.name == "flex"
    else:
        fast, explicit = _pair("explicit")
        fast.kernel = FlexBand(fast.kernel_facts())
    x = torch.randn(2, length, 16, device=DEVICE)
    with torch.no_grad():
        got = fast.attend(x, x, AttentionCall(causal=causal)).out
        want = explicit.attend(x, x, AttentionCall(causal=causal)).out
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    q, k, v = (torch.randn(1, 2, length, 8, device=DEVICE) for _ in "qkv")
    torch.testing.assert_close(flex_band_attention(q, k, v, 0.3, 4, causal),
                               dense_band(q, k, v, 0.3, 4, causal), rtol=1e-5, atol=1e-5)


def test_flex_is_refused_where_a_run_trains_it_on_the_cpu_and_serves_one_scored_there():
    """FlexAttention has no CPU backward: a layer a run trains on the CPU is refused in one line
    when built (never skipped call by call); one a run trains on a GPU, or a saved run's layer
    read to be scored (not trained) on the CPU, is built on it."""
    with pytest.raises(ConfigError, match="attention.kernel=flex cannot serve diff attention "
                                          "here: on the CPU FlexAttention has no backward, "
                                          "and this run trains there") as err:
        build_attention("diff", 16, 2, block_size=4, kernel="flex", trains_on="cpu")
    assert "\n" not in str(err.value)
    for trains_on in ("cuda", None):
        layer = build_attention("diff", 16, 2, block_size=4, kernel="flex", trains_on=trains_on)
        assert layer.kernel.name == "flex"
    flex = ["model=encoder", "attention=diff", "block_size=4", "attention.kernel=flex",
            "trainer.device=cpu"]
    with pytest.raises(ConfigError, match="on the CPU FlexAttention has no backward"):
        validate_config(compose_config(flex))
    validate_config(compose_config(flex), trains=False)  # evaluate/predict read it so


def test_a_padded_call_is_refused_by_a_kernel_without_padding():
    fast, _ = _pair("explicit")
    fast.kernel = FlexBand(fast.kernel_facts())
    x = torch.randn(2, 12, 16, device=DEVICE)
    with pytest.raises(ValueError, match="attention.kernel=flex takes no key padding mask"):
        fast.attend(x, x, AttentionCall(), torch.zeros(2, 12, dtype=torch.bool, device=DEVICE))


@pytest.mark.parametrize("kernel", ["triton", "flex"])
@pytest.mark.parametrize("name,options,message", [
    ("diff", {}, "it computes block-local windows (attention.block_size > 0)"),
    ("vanilla", {}, "it computes block-local windows"),
    ("diff", {"block_size": 4, "dropout": 0.1}, "it has no dropout on the weights"),
    ("diff", {"block_size": 4, "talking_heads": True}, "talking heads' mixing acts between"),
])
def test_a_band_kernel_that_cannot_serve_is_refused_in_one_line(kernel, name, options,
                                                                message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        build_attention(name, 16, 2, kernel=kernel, **options)
    assert "\n" not in str(err.value)
    assert f"attention.kernel={kernel} cannot serve" in str(err.value)
