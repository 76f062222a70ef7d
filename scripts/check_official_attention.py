"""The literature's attention backends beside their authors' code: the same weights copied in,
the same inputs, outputs and input gradients compared (docs/attention.md#the-forecasting-
literatures-mechanisms).

    python scripts/check_official_attention.py --tslib Time-Series-Library \\
        --informer Informer2020 --flowformer Flowformer --itransformer iTransformer

Each DIR is a checkout of the authors' repository (thuml/Time-Series-Library,
zhouhaoyi/Informer2020, thuml/Flowformer, thuml/iTransformer; the Time-Series-Library's
`models/Nonstationary_Transformer.py` imports its layers only); their modules are imported from
there, never copied here (the Time-Series-Library's and iTransformer's attention files import
reformer_pytorch, which is stubbed: no checked module uses it). For every case the authors'
layer is built with torch's generator at one seed, its weights copied into the backend, and
both run on the same random inputs, in fp32 (the authors' Fourier modules compute in
complex64) and, where their code allows, float64. ProbSparse samples its keys from torch's
generator: both sides run from the same seed, so they draw the same keys. Prints
max |official - seqforecast| / max |official| for the outputs and the input gradients (of a
random projection of the outputs), and saves them with --out.
"""

from __future__ import annotations

import argparse
import json
import sys
import types
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from seqforecast.attention import build_attention  # noqa: E402

PROJECTIONS = (("q_proj", "query_projection"), ("k_proj", "key_projection"),
               ("v_proj", "value_projection"), ("out_proj", "out_projection"))
D_MODEL, HEADS = 64, 4


def _import(root: Path, module: str):
    sys.modules.setdefault("reformer_pytorch", types.SimpleNamespace(LSHSelfAttention=None))
    for name in [m for m in sys.modules if m.split(".")[0] in ("layers", "models", "utils")]:
        del sys.modules[name]  # each repository's own `layers` / `models` package
    sys.path.insert(0, str(root))
    try:
        return __import__(module, fromlist=["_"])
    finally:
        sys.path.remove(str(root))


def _copy(ours, theirs, names=PROJECTIONS) -> None:
    with torch.no_grad():
        for mine, official in names:
            if hasattr(ours, mine):
                getattr(ours, mine).weight.copy_(getattr(theirs, official).weight)
                getattr(ours, mine).bias.copy_(getattr(theirs, official).bias)


def _compare(run_official, run_ours, q_len: int, k_len: int, cross: bool, dtype,
             seed: int = 5) -> dict:
    x = torch.randn(3, q_len, D_MODEL, dtype=dtype, requires_grad=True)
    memory = torch.randn(3, k_len, D_MODEL, dtype=dtype) if cross else x
    torch.manual_seed(seed)
    theirs = run_official(x, memory)
    torch.manual_seed(seed)
    ours = run_ours(x, memory)
    weight = torch.randn_like(theirs)
    g_theirs, = torch.autograd.grad((theirs * weight).sum(), x)
    g_ours, = torch.autograd.grad((ours * weight).sum(), x)
    return {"output": ((theirs - ours).abs().max() / theirs.abs().max()).item(),
            "gradient": ((g_theirs - g_ours).abs().max() / g_theirs.abs().max()).item()}


def flow_cases(flowformer: Path | None, itransformer: Path | None) -> dict:
    found = {}
    if flowformer is not None:
        module = _import(flowformer, "Flow_Attention")
        for causal, cls in ((False, module.Flow_Attention), (True, module.Flow_Attention_Causal)):
            for dtype in (torch.float32, torch.float64):
                torch.manual_seed(0)
                theirs = cls(D_MODEL, D_MODEL, D_MODEL, HEADS, drop_out=0.0).to(dtype)
                ours = build_attention("flow", D_MODEL, HEADS).to(dtype)
                _copy(ours, theirs)
                found[f"flow, Flowformer {'causal' if causal else 'normal'}, {str(dtype)[6:]}"] = \
                    _compare(lambda x, m, t=theirs: t(x, m, m),
                             lambda x, m, o=ours, c=causal: o(x, m, causal=c)[0],
                             48, 48 if causal else 40, not causal, dtype)
    if itransformer is not None:
        module = _import(itransformer, "layers.SelfAttention_Family")
        torch.manual_seed(0)
        theirs = module.AttentionLayer(module.FlowAttention(0.1), D_MODEL, HEADS).double()
        ours = build_attention("flow", D_MODEL, HEADS, source_clamp=False).double()
        _copy(ours, theirs)
        found["flow source_clamp=false, iTransformer FlowAttention, float64"] = _compare(
            lambda x, m: theirs(x, m, m, None)[0], lambda x, m: ours(x, m)[0], 11, 9, True,
            torch.float64)
    return found


def probsparse_cases(informer: Path | None, tslib: Path | None) -> dict:
    found = {}
    for root, layout, module_name in ((informer, "paper", "models.attn"),
                                      (tslib, "tslib", "layers.SelfAttention_Family")):
        if root is None:
            continue
        module = _import(root, module_name)
        for causal, q_len, k_len in ((False, 96, 96), (True, 96, 96), (False, 48, 96)):
            torch.manual_seed(0)
            theirs = module.AttentionLayer(module.ProbAttention(causal, 5, attention_dropout=0.0),
                                           D_MODEL, HEADS).double()
            ours = build_attention("probsparse", D_MODEL, HEADS, layout=layout,
                                   leaky_mask=causal).double()
            _copy(ours, theirs)
            label = "Informer2020" if layout == "paper" else "Time-Series-Library"
            found[f"probsparse layout={layout}, {label}, {'masked' if causal else 'no mask'}, "
                  f"Lq {q_len} Lk {k_len}, float64"] = _compare(
                lambda x, m, t=theirs: t(x, m, m, None)[0],
                lambda x, m, o=ours, c=causal: o(x, m, causal=c)[0],
                q_len, k_len, q_len != k_len, torch.float64)
    return found


def autocorrelation_cases(tslib: Path) -> dict:
    module = _import(tslib, "layers.AutoCorrelation")
    found = {}
    for training in (True, False):
        for q_len, k_len in ((96, 96), (48, 96), (96, 48)):
            torch.manual_seed(0)
            theirs = module.AutoCorrelationLayer(
                module.AutoCorrelation(False, 1, attention_dropout=0.0), D_MODEL, HEADS).double()
            ours = build_attention("autocorrelation", D_MODEL, HEADS).double()
            _copy(ours, theirs)
            theirs.train(training)
            ours.train(training)
            found[f"autocorrelation, {'training' if training else 'evaluation'}, Lq {q_len} "
                  f"Lk {k_len}, float64"] = _compare(
                lambda x, m, t=theirs: t(x, m, m, None)[0], lambda x, m, o=ours: o(x, m)[0],
                q_len, k_len, q_len != k_len, torch.float64)
    return found


def fourier_cases(tslib: Path) -> dict:
    module = _import(tslib, "layers.FourierCorrelation")
    layer = _import(tslib, "layers.AutoCorrelation").AutoCorrelationLayer
    found = {}
    cases = [(False, 96, 96, "random", "tanh"), (False, 96, 96, "lowest", "tanh"),
             (True, 144, 96, "random", "tanh"), (True, 144, 96, "random", "softmax")]
    for cross, q_len, k_len, select, activation in cases:
        np.random.seed(0)  # the published modes are drawn with numpy
        torch.manual_seed(0)
        if cross:
            inner = module.FourierCrossAttention(D_MODEL, D_MODEL, q_len, k_len, modes=32,
                                                 mode_select_method=select,
                                                 activation=activation, num_heads=HEADS)
        else:
            inner = module.FourierBlock(D_MODEL, D_MODEL, HEADS, q_len, modes=32,
                                        mode_select_method=select)
        theirs = layer(inner, D_MODEL, HEADS)
        ours = build_attention("fourier", D_MODEL, HEADS, mode_select=select,
                               activation=activation, layout="code", lengths=(q_len, k_len),
                               cross_attention=cross)
        _copy(ours, theirs)
        with torch.no_grad():
            ours.weight_real.copy_(inner.weights1)
            ours.weight_imag.copy_(inner.weights2)
            ours.modes_q.copy_(torch.tensor(inner.index_q if cross else inner.index))
            if cross:
                ours.modes_k.copy_(torch.tensor(inner.index_kv))
        form = f"cross ({activation})" if cross else "block"
        found[f"fourier layout=code, {form}, modes {select}, Lq {q_len} Lk {k_len}, fp32"] = \
            _compare(lambda x, m, t=theirs: t(x, m, m, None)[0], lambda x, m, o=ours: o(x, m)[0],
                     q_len, k_len, cross, torch.float32)
    return found


def destationary_cases(tslib: Path) -> dict:
    from seqforecast.attention import AttentionCall
    from seqforecast.attention.destationary import DestationaryFactors, Factors

    module = _import(tslib, "layers.SelfAttention_Family")
    found = {}
    for causal, q_len, k_len in ((False, 48, 48), (True, 48, 48), (False, 30, 48)):
        torch.manual_seed(0)
        theirs = module.AttentionLayer(module.DSAttention(causal, 5, attention_dropout=0.0),
                                       D_MODEL, HEADS).double()
        ours = build_attention("destationary", D_MODEL, HEADS).double()
        _copy(ours, theirs)
        tau = torch.rand(3, 1, dtype=torch.float64) + 0.5
        delta = torch.randn(3, k_len, dtype=torch.float64)
        factors = Factors(tau[:, 0], delta)
        found[f"destationary, DSAttention, {'causal' if causal else 'no mask'}, Lq {q_len} "
              f"Lk {k_len}, float64"] = _compare(
            lambda x, m, t=theirs, a=tau, d=delta: t(x, m, m, None, tau=a, delta=d)[0],
            lambda x, m, o=ours, c=causal, f=factors: o.attend(
                x, m, AttentionCall(causal=c, side=f)).out,
            q_len, k_len, q_len != k_len, torch.float64)
    projector = _import(tslib, "models.Nonstationary_Transformer").Projector
    torch.manual_seed(0)
    channels, length = 7, 96
    tau_learner = projector(channels, length, [128, 128], 2, 1).double()
    delta_learner = projector(channels, length, [128, 128], 2, length).double()
    ours = DestationaryFactors(channels, length, length, [128, 128]).double()
    ours.tau_learner.load_state_dict(tau_learner.state_dict())
    ours.delta_learner.load_state_dict(delta_learner.state_dict())
    window = torch.randn(4, length, channels, dtype=torch.float64) * 3 + 1
    mean = window.mean(1, keepdim=True)
    std = torch.sqrt(torch.var(window - mean, dim=1, keepdim=True, unbiased=False) + 1e-5)
    tau = tau_learner(window, std).clamp(max=80.0).exp()[:, 0]
    delta = delta_learner(window, mean)
    factors = ours(window)
    found["destationary factors, the Non-stationary Transformer's Projectors, float64"] = {
        "output": max(((tau - factors.tau).abs().max() / tau.abs().max()).item(),
                      ((delta - factors.delta).abs().max() / delta.abs().max()).item()),
        "gradient": float("nan")}
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in ("tslib", "informer", "flowformer", "itransformer"):
        parser.add_argument(f"--{name}", type=Path, help="a checkout of the authors' code")
    parser.add_argument("--out", type=Path, help="save the comparison as JSON")
    args = parser.parse_args(argv)
    found = {**flow_cases(args.flowformer, args.itransformer),
             **probsparse_cases(args.informer, args.tslib)}
    if args.tslib is not None:
        found.update(autocorrelation_cases(args.tslib))
        found.update(fourier_cases(args.tslib))
        found.update(destationary_cases(args.tslib))
    print("| case | output | input gradient |\n|---|---|---|")
    for case, diff in found.items():
        print(f"| {case} | {diff['output']:.1e} | {diff['gradient']:.1e} |")
    if args.out is not None:
        args.out.write_text(json.dumps(found, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
