"""Differential tests: roformer/layers/rotary.py against the reference canonical.py under fixed seeds."""
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import canonical  # noqa: E402
from roformer.layers import rotary as target  # noqa: E402

TOL = {torch.float32: (1e-5, 1e-5), torch.float64: (1e-6, 1e-6)}


def assert_close(actual, expected):
    """Same shape and dtype, equal within the dtype's tolerance."""
    assert isinstance(actual, torch.Tensor)
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    rtol, atol = TOL[expected.dtype]
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol)


def tables(module_under_test, head_dim, positions, base=10000.0):
    return module_under_test.RotaryEmbedding(head_dim, base=base)(positions)


def test_inv_freq_and_validation():
    for head_dim, base in ((2, 10000.0), (8, 10000.0), (16, 500.0)):
        assert_close(target.rotary_inv_freq(head_dim, base), canonical.rotary_inv_freq(head_dim, base))
    assert_close(target.rotary_inv_freq(6), canonical.rotary_inv_freq(6))
    for head_dim in (7, 0):
        with pytest.raises(ValueError):
            target.rotary_inv_freq(head_dim)


def test_rotary_embedding_tables():
    module = target.RotaryEmbedding(8, base=100.0)
    assert list(module.parameters()) == []
    assert "inv_freq" in dict(module.named_buffers())
    assert_close(module.inv_freq, canonical.rotary_inv_freq(8, 100.0))
    positions = torch.arange(11)
    batched = torch.tensor([[0, 1, 2, 3], [5, 6, 7, 8]])
    for pos in (positions, batched, positions.to(torch.float64)):
        got = tables(target, 8, pos, base=100.0)
        want = tables(canonical, 8, pos, base=100.0)
        assert isinstance(got, tuple) and len(got) == 2
        assert_close(got[0], want[0])
        assert_close(got[1], want[1])


def test_apply_rotary_matches_canonical():
    torch.manual_seed(0)
    cos, sin = tables(canonical, 8, torch.arange(5))
    for dtype in (torch.float32, torch.float64):
        x = torch.randn(2, 3, 5, 8, dtype=dtype)
        assert_close(target.apply_rotary(x, cos, sin), canonical.apply_rotary(x, cos, sin))
    q, k = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8)
    got = target.apply_rotary_pos_emb(q, k, cos, sin)
    want = canonical.apply_rotary_pos_emb(q, k, cos, sin)
    assert_close(got[0], want[0])
    assert_close(got[1], want[1])
    with pytest.raises(ValueError):
        target.apply_rotary(torch.randn(2, 5), cos[:, :2], sin[:, :2])


def test_identity_at_zero_and_norm_preservation():
    torch.manual_seed(1)
    x = torch.randn(1, 2, 6, 16, dtype=torch.float64)
    cos, sin = tables(canonical, 16, torch.zeros(6, dtype=torch.long))
    assert_close(target.apply_rotary(x, cos, sin), x)
    cos, sin = tables(canonical, 16, torch.arange(6) * 7)
    rotated = target.apply_rotary(x, cos, sin)
    assert_close(rotated.norm(dim=-1), x.norm(dim=-1))
    assert_close(rotated, canonical.apply_rotary(x, cos, sin))


def test_relative_position_property():
    torch.manual_seed(2)
    q = torch.randn(1, 1, 4, 8, dtype=torch.float64)
    k = torch.randn(1, 1, 4, 8, dtype=torch.float64)
    scores = []
    for shift in (0, 9):
        cos, sin = tables(target, 8, torch.arange(4) + shift)
        q_rot, k_rot = target.apply_rotary_pos_emb(q, k, cos, sin)
        ref_q, ref_k = canonical.apply_rotary_pos_emb(q, k, *tables(canonical, 8, torch.arange(4) + shift))
        assert_close(q_rot, ref_q)
        assert_close(k_rot, ref_k)
        scores.append(q_rot @ k_rot.transpose(-2, -1))
    assert_close(scores[0], scores[1])


def test_batched_positions_broadcast_over_heads():
    torch.manual_seed(3)
    q, k = torch.randn(2, 4, 3, 6), torch.randn(2, 4, 3, 6)
    positions = torch.tensor([[0, 1, 2], [3, 4, 5]])
    cos, sin = tables(canonical, 6, positions)
    got = target.apply_rotary_pos_emb(q, k, cos, sin)
    want = canonical.apply_rotary_pos_emb(q, k, cos, sin)
    assert_close(got[0], want[0])
    assert_close(got[1], want[1])
    shared = target.apply_rotary_pos_emb(q, k, cos[1], sin[1])
    assert_close(got[0][1], shared[0][1])


def test_attention_integration(monkeypatch):
    from roformer import model as model_module
    from roformer.layers import attention

    def run():
        torch.manual_seed(4)
        net = model_module.TinyRoFormer(vocab_size=20, dim=16, num_heads=2, num_layers=1)
        tokens = torch.randint(0, 20, (2, 5))
        with torch.no_grad():
            return net(tokens), net(tokens, torch.tensor([[0, 2, 4, 6, 8], [3, 4, 5, 6, 7]]))

    got = run()
    monkeypatch.setattr(attention, "RotaryEmbedding", canonical.RotaryEmbedding)
    monkeypatch.setattr(attention, "apply_rotary_pos_emb", canonical.apply_rotary_pos_emb)
    want = run()
    assert_close(got[0], want[0])
    assert_close(got[1], want[1])
