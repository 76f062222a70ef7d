"""The attention core's kernels (attention/kernels.py): chosen once per layer when it is built,
each equal to the explicit path it stands in for (outputs and gradients), refused in one line
where it cannot serve."""

import pytest
import torch

from seqforecast.attention import (
    AttentionCall,
    ResidualQK,
    RotaryEmbedding,
    available_attention,
    build_attention,
    kernel_names,
)
from seqforecast.attention.position import RelativePositionTerms
from seqforecast.config import compose_config, validate_config
from seqforecast.options import ConfigError

from ..native.helpers import WHY
from .helpers import randomize_

# (kernel, the run's set): torch's fused kernel, and the C kernel where it builds
KERNELS = [("sdpa", "torch"), pytest.param("native", "native", marks=pytest.mark.skipif(
    WHY is not None, reason=f"no C kernels here: {WHY}"))]
B, L, E, H = 2, 11, 16, 4


def _pair(name, kernel, kernels="torch", residual=False, **options):
    """The same layer twice: on `kernel`, and on the explicit path."""
    torch.manual_seed(0)
    fast = randomize_(build_attention(name, E, H, kernel=kernel, kernels=kernels,
                                      residual=residual, **options), 0.2)
    explicit = build_attention(name, E, H, kernel="explicit", residual=residual, **options)
    explicit.load_state_dict(fast.state_dict())
    return fast, explicit


def _outputs_and_grads(attn, x, memory, call, padding=None):
    x, memory = x.clone().requires_grad_(), memory.clone().requires_grad_()
    out = attn.attend(x, memory, call, padding).out
    (out * torch.linspace(-1, 1, E)).sum().backward()
    return [out, x.grad, memory.grad, *(p.grad for p in attn.parameters())]


@pytest.mark.parametrize("name,options", [("vanilla", {}), ("einsum", {}), ("diff", {}),
                                          ("diff", {"head_layout": "wide"}),
                                          ("diff", {"block_size": 4})])
@pytest.mark.parametrize("kernel,kernels", KERNELS)
@pytest.mark.parametrize("causal,padded,cross", [(False, False, False), (True, False, False),
                                                 (False, True, False), (False, False, True)])
def test_each_kernel_equals_the_explicit_path(name, options, kernel, kernels, causal, padded,
                                              cross):
    if cross and options.get("block_size"):
        options = {**options, "cross_attention": True}
    fast, explicit = _pair(name, kernel, kernels, **options)
    assert fast.kernel.name == kernel
    x = torch.randn(B, L, E)
    memory = torch.randn(B, 7, E) if cross else x
    padding = None
    if padded:
        padding = torch.zeros(B, memory.shape[1], dtype=torch.bool)
        padding[0, -3:] = True
    call = AttentionCall(causal=causal)
    if padded and kernel == "native":  # it has no use for one (a model never passes one)
        with pytest.raises(ValueError, match="attention.kernel=native takes no key padding"):
            fast.attend(x, memory, call, padding)
        return
    got = _outputs_and_grads(fast, x, memory, call, padding)
    want = _outputs_and_grads(explicit, x, memory, call, padding)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["vanilla", "diff"])
@pytest.mark.parametrize("kernel,kernels", KERNELS)
def test_each_kernel_carries_residual_attention_as_the_explicit_path(name, kernel, kernels):
    stacks = [_pair(name, kernel, kernels, residual=True, layer=i + 1) if name == "diff" else
              _pair(name, kernel, kernels, residual=True) for i in range(3)]
    x = torch.randn(B, L, E)
    results = []
    for side in (0, 1):  # the fast kernels, then the explicit path
        h, call = x, AttentionCall(residual=ResidualQK())
        for pair in stacks:
            h, _, carried = pair[side].attend(h, h, call)
            call = call._replace(residual=carried)
        results.append(h)
    torch.testing.assert_close(results[0], results[1], rtol=1e-5, atol=1e-5)


def test_auto_chooses_once_by_what_the_layer_declares():
    assert build_attention("vanilla", E, H).kernel.name == "sdpa"
    assert build_attention("vanilla", E, H, residual=True).kernel.name == "explicit"
    assert build_attention("diff", E, H, block_size=4).kernel.name == "explicit"
    assert build_attention("diff", E, H, talking_heads=True).kernel.name == "explicit"
    assert build_attention("diff", E, H, dropout=0.1).kernel.name == "explicit"  # combined
    assert build_attention("vanilla", E, H, dropout=0.1).kernel.name == "sdpa"  # per head
    relative = RelativePositionTerms(True, True, "alibi", H)
    assert build_attention("vanilla", E, H, position=relative).kernel.name == "explicit"
    rotary = RotaryEmbedding(E // H, base=10000.0)
    assert build_attention("vanilla", E, H, position=rotary).kernel.name == "sdpa"
    for name in ("flow", "probsparse", "autocorrelation", "destationary"):
        assert build_attention(name, E, H).kernel.name == "explicit"
    if WHY is None:
        assert build_attention("vanilla", E, H, kernels="native",
                               residual=True).kernel.name == "native"
        assert build_attention("vanilla", E, H, kernels="native").kernel.name == "sdpa"


@pytest.mark.parametrize("name", ["vanilla", "einsum"])
def test_the_fused_kernels_dropout_acts_in_training_only(name):
    """Attention dropout on the sdpa kernel: eval is deterministic and equals the explicit path
    (no dropout there either); training drops, a fresh mask a call."""
    fast, explicit = _pair(name, "sdpa", dropout=0.5)
    assert fast.kernel.name == "sdpa"
    x, memory = torch.randn(B, L, E), torch.randn(B, 7, E)
    call = AttentionCall()
    with torch.no_grad():
        fast.eval()
        explicit.eval()
        first, second = (fast.attend(x, memory, call).out for _ in range(2))
        assert torch.equal(first, second), "eval mode must apply no dropout"
        torch.testing.assert_close(first, explicit.attend(x, memory, call).out, rtol=1e-5,
                                   atol=1e-6, msg="eval mode must equal the explicit path")
        fast.train()
        dropped, again = (fast.attend(x, memory, call).out for _ in range(2))
    assert not torch.allclose(dropped, first), "training mode drops"
    assert not torch.allclose(dropped, again), "a fresh mask a call"


def test_weights_asked_for_take_the_explicit_path():
    fast, explicit = _pair("vanilla", "sdpa")
    x = torch.randn(B, L, E)
    out, weights = fast(x, x, need_weights=True)
    assert weights.shape == (B, H, L, L)
    torch.testing.assert_close(out, explicit(x, x)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,options,kernel,kernels,message", [
    ("diff", {"talking_heads": True}, "sdpa", "torch",
     "attention.kernel=sdpa cannot serve diff attention here: talking heads' mixing acts "
     "between the scores and the softmax; use attention.kernel=auto (or explicit)"),
    ("diff", {"dropout": 0.1}, "sdpa", "torch", "its dropout acts on the combined weights"),
    ("flow", {}, "sdpa", "torch", "the mechanism is not a softmax over q.k scores"),
    ("vanilla", {}, "native", "torch", "this run's set is torch (trainer.kernels)"),
    ("vanilla", {"dropout": 0.1}, "native", "native", "it has no dropout on the weights"),
    ("vanilla", {}, "flash", "torch", "kernel='flash' is not allowed: choose one of "
                                      "auto, explicit, sdpa, flex, triton, native"),
])
def test_a_kernel_that_cannot_serve_is_refused_in_one_line(name, options, kernel, kernels,
                                                           message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        build_attention(name, E, H, kernel=kernel, kernels=kernels, **options)
    assert "\n" not in str(err.value)


def test_every_backend_takes_the_kernel_option():
    assert kernel_names()[:2] == ("auto", "explicit")
    for name in available_attention():
        assert build_attention(name, E, H, kernel="explicit", lengths=(L, L)).kernel.name == \
            "explicit"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name,options", [("vanilla", {}), ("diff", {}),
                                          ("diff", {"block_size": 4})])
def test_on_a_gpu_each_layer_equals_its_cpu_explicit_path(name, options):
    """The kernel auto chooses, on CUDA, against the explicit path on the CPU (fp32)."""
    fast, explicit = _pair(name, "auto", **options)
    fast = fast.cuda()
    x = torch.randn(B, L, E)
    call = AttentionCall(causal=True)
    got = fast.attend(x.cuda(), x.cuda(), call).out.cpu()
    torch.testing.assert_close(got, explicit.attend(x, x, call).out, rtol=1e-4, atol=1e-4)


def test_a_registered_kernel_is_selectable_by_name_in_python_and_in_a_config():
    """register_kernel opens the names attention.kernel accepts (they are read when a value is
    checked, not frozen at import)."""
    from seqforecast.attention.kernels import KERNELS, Explicit, register_kernel
    from seqforecast.config import compose_config, validate_config

    @register_kernel
    class Mine(Explicit):  # the explicit path under another name
        name = "mine_in_process"

    try:
        assert "mine_in_process" in kernel_names()
        attn = build_attention("vanilla", E, H, kernel="mine_in_process")
        assert type(attn.kernel) is Mine
        validate_config(compose_config(["experiment=quick", "attention.kernel=mine_in_process"]))
    finally:
        del KERNELS["mine_in_process"]
    with pytest.raises(ConfigError, match="attention.kernel='mine_in_process' is not allowed: "
                                          "choose one of auto, explicit"):
        validate_config(compose_config(["experiment=quick", "attention.kernel=mine_in_process"]))


PLUGIN_KERNEL = '''
"""A package's kernel: the explicit path, marking the file $MARK when it first runs."""
import os
from pathlib import Path

from seqforecast.attention.kernels import Explicit, register_kernel


@register_kernel
class Marked(Explicit):
    name = "marked"

    def __call__(self, attn, q, k, v, residual, call, key_padding_mask):
        Path(os.environ["MARK"]).write_text("ran")
        return super().__call__(attn, q, k, v, residual, call, key_padding_mask)
'''


@pytest.mark.slow
def test_a_kernel_from_a_package_registers_through_its_entry_point_and_runs(tmp_path):
    """A package of one's own declares a kernel under the entry-point group
    `seqforecast.kernels`; `attention.kernel=<its name>` then trains on it, end to end."""
    import os
    import subprocess
    import sys

    from tests.cli_helpers import REPO

    (tmp_path / "marked_kernel.py").write_text(PLUGIN_KERNEL)
    info = tmp_path / "seqforecast_marked-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: seqforecast-marked\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[seqforecast.kernels]\nmarked = marked_kernel\n")
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{tmp_path}",
               MARK=str(tmp_path / "mark"))
    env.pop("HYDRA_FULL_ERROR", None)
    done = subprocess.run([sys.executable, "-m", "seqforecast.train", "experiment=quick",
                           "attention.kernel=marked", "data.train_size=64", "data.val_size=16",
                           "log.figures=false", "epochs=1", "hydra.run.dir=run"],
                          cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "mark").read_text() == "ran"
    assert (tmp_path / "run" / "metrics.json").exists()


def test_a_kernel_refused_at_the_variate_position_names_that_positions_key():
    """The refusal names the key that chose the kernel: variate_attention.kernel at TimeXer's
    exogenous position, not attention.kernel."""
    with pytest.raises(ConfigError, match=r"^variate_attention.kernel=sdpa cannot serve diff "
                                          r"attention here: talking heads' mixing .*; use "
                                          r"variate_attention.kernel=auto \(or explicit\)$"):
        validate_config(compose_config([
            "model=timexer", "embedding=patch", "embedding.patch_len=4", "embedding.stride=4",
            "in_len=16", "attention@variate_attention=diff", "variate_attention.kernel=sdpa",
            "variate_attention.talking_heads=true"]))
