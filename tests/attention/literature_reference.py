"""The forecasting literature's mechanisms written from their papers' equations, slowly and
plainly (loops over queries, lags and frequencies; explicit DFT sums instead of torch.fft), on
heads [B, H, L, d] after the projections. The backends must compute the same functions."""

from __future__ import annotations

import math

import torch


def flow(q, k, v, causal: bool, clamp: bool = True, eps: float = 1e-6):
    """Flowformer's flow attention, each sum written out per query (causal: over j <= i)."""
    q, k = torch.sigmoid(q), torch.sigmoid(k)
    length, keys = q.shape[2], k.shape[2]
    out = torch.zeros_like(q[..., :1]).expand(*q.shape[:3], v.shape[-1]).clone()
    if not causal:
        incoming = 1 / ((q + eps) * (k.sum(2, keepdim=True) + eps)).sum(-1)  # [B, H, L]
        outgoing = 1 / ((k + eps) * (q.sum(2, keepdim=True) + eps)).sum(-1)  # [B, H, S]
        sink = ((q + eps) * ((k * outgoing[..., None]).sum(2, keepdim=True) + eps)).sum(-1)
        source = ((k + eps) * ((q * incoming[..., None]).sum(2, keepdim=True) + eps)).sum(-1)
        if clamp:
            source = source.clamp(-1, 1)
        allocation = torch.sigmoid(sink * length / keys)
        competition = source.exp() / source.exp().sum(-1, keepdim=True) * keys
        for i in range(length):
            a = (q[:, :, i, None] * k).sum(-1) * incoming[:, :, i, None] * competition  # [B,H,S]
            out[:, :, i] = allocation[:, :, i, None] * (a[..., None] * v).sum(2)
        return out
    incoming, outgoing, sink, source = (torch.zeros(q.shape[:3], dtype=q.dtype)
                                        for _ in range(4))
    for i in range(length):
        n = i + 1
        incoming[:, :, i] = n / ((q[:, :, i] + eps) * (k[:, :, :n].sum(2) + eps)).sum(-1)
        outgoing[:, :, i] = n / ((k[:, :, i] + eps) * (q[:, :, :n].sum(2) + eps)).sum(-1)
    for i in range(length):
        n = i + 1
        sink[:, :, i] = ((q[:, :, i] + eps) * (
            (k[:, :, :n] * outgoing[:, :, :n, None]).sum(2) + eps)).sum(-1) / n
        source[:, :, i] = ((k[:, :, i] + eps) * (
            (q[:, :, :n] * incoming[:, :, :n, None]).sum(2) + eps)).sum(-1) / n
    if clamp:
        source = source.clamp(-1, 1)
    allocation = torch.sigmoid(sink)
    for i in range(length):
        n = i + 1
        # each key j's competition is its own running softmax: e_j / sum_{m <= j} e_m * (j + 1)
        competition = torch.stack([source[:, :, j].exp() / source[:, :, : j + 1].exp().sum(-1)
                                   * (j + 1) for j in range(n)], dim=-1)
        a = (q[:, :, i, None] * k[:, :, :n]).sum(-1) * incoming[:, :, i, None] / n * competition
        out[:, :, i] = allocation[:, :, i, None] * (a[..., None] * v[:, :, :n]).sum(2)
    return out


def probsparse(q, k, v, sampled, factor: int, causal: bool):
    """Informer's ProbSparse attention, query by query, with the sampled keys given
    (`sampled` [Lq, U])."""
    batch, heads, q_len, width = q.shape
    k_len = k.shape[2]
    active = min(factor * math.ceil(math.log(q_len)), q_len)
    out = torch.zeros(batch, heads, q_len, v.shape[-1], dtype=q.dtype)
    for b in range(batch):
        for h in range(heads):
            measure = []
            for i in range(q_len):
                s = torch.stack([q[b, h, i] @ k[b, h, j] for j in sampled[i].tolist()])
                measure.append(s.max() - s.sum() / k_len)
            top = set(torch.stack(measure).topk(active).indices.tolist())
            for i in range(q_len):
                seen = i + 1 if causal else k_len
                if i in top:
                    s = torch.stack([q[b, h, i] @ k[b, h, j] for j in range(seen)]) / math.sqrt(
                        width)
                    out[b, h, i] = (s.softmax(0)[:, None] * v[b, h, :seen]).sum(0)
                else:
                    out[b, h, i] = v[b, h, :seen].sum(0) if causal else v[b, h].mean(0)
    return out


def autocorrelation(q, k, v, factor: float, training: bool):
    """Autoformer's Auto-Correlation: R(tau) = sum_t q_{t + tau} . k_t (circular), averaged over
    heads and channels; the top floor(factor ln L) lags (the batch's in training); out_t =
    sum_i softmax(R)_i v_{t + tau_i}."""
    length = q.shape[2]
    if k.shape[2] < length:
        pad = length - k.shape[2]
        k, v = (torch.cat([t, t.new_zeros(*t.shape[:2], pad, t.shape[3])], 2) for t in (k, v))
    k, v = k[:, :, :length], v[:, :, :length]
    corr = torch.stack([(torch.roll(q, -tau, dims=2) * k).sum(2).mean((1, 2))
                        for tau in range(length)], dim=-1)  # [B, L]
    lags = int(factor * math.log(length))
    out = torch.zeros_like(v)
    for b in range(len(q)):
        delays = (corr.mean(0) if training else corr[b]).topk(lags).indices
        weights = corr[b, delays].softmax(0)
        for w, tau in zip(weights, delays.tolist(), strict=True):
            out[b] += w * torch.roll(v[b], -tau, dims=1)
    return out


def _dft(x, frequencies):
    """X[f] = sum_t x_t exp(-2 pi i f t / L) along dim 2: [B, H, L, d] -> [B, H, F, d]."""
    length = x.shape[2]
    t = torch.arange(length, dtype=x.dtype)
    basis = torch.exp(-2j * math.pi * torch.outer(frequencies.to(x.dtype), t) / length)
    return torch.einsum("ft,bhtd->bhfd", basis, x.to(basis.dtype))


def _inverse(spectrum, frequencies, length):
    """The real signal with these rfft bins (the others 0), as irfft computes it: the DC bin's
    real part once, every other bin (below the Nyquist) twice its real part."""
    t = torch.arange(length, dtype=torch.float64)
    out = 0
    for f, y in zip(frequencies.tolist(), spectrum.unbind(2), strict=True):
        wave = torch.exp(2j * math.pi * f * t / length)  # [L]
        term = (y[:, :, None, :] * wave[None, None, :, None]).real
        out = out + (term if f == 0 else 2 * term)
    return out / length


def fourier_self(q, weight, modes):
    """FEDformer's frequency-enhanced block: the chosen modes of q, each mixed by its complex
    weight [H, d, d, M], put in the M lowest frequencies."""
    mixed = torch.einsum("bhmi,hiom->bhmo", _dft(q, modes), weight)
    return _inverse(mixed, torch.arange(len(modes)), q.shape[2])


def fourier_cross(q, k, weight, modes_q, modes_k, activation: str, d_model: int):
    """FEDformer's frequency-enhanced cross-attention, put back at the queries' modes."""
    qf, kf = _dft(q, modes_q), _dft(k, modes_k)
    scores = torch.einsum("bhxe,bhye->bhxy", qf, kf)
    if activation == "tanh":
        scores = torch.complex(scores.real.tanh(), scores.imag.tanh())
    else:
        scores = scores.abs().softmax(-1).to(scores.dtype)
    mixed = torch.einsum("bhxe,heox->bhxo", torch.einsum("bhxy,bhye->bhxe", scores, kf), weight)
    return _inverse(mixed / d_model**2, modes_q, q.shape[2])


def destationary(q, k, v, tau, delta, causal: bool):
    """De-stationary attention: softmax((tau q.k + delta_j) / sqrt(d)) v, query by query."""
    width, out = q.shape[-1], torch.zeros_like(q)
    for i in range(q.shape[2]):
        seen = i + 1 if causal else k.shape[2]
        scores = (q[:, :, i, None] * k[:, :, :seen]).sum(-1) * tau[:, None, None]  # [B, H, j]
        if delta is not None:
            scores = scores + delta[:, None, :seen]
        weights = (scores / math.sqrt(width)).softmax(-1)
        out[:, :, i] = (weights[..., None] * v[:, :, :seen]).sum(2)
    return out
