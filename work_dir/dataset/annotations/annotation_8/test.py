"""Differential tests: lora/layers.py against canonical.py under fixed torch seeds."""
import pytest
import torch
from torch import nn

from lora import canonical as reference
from lora import layers as target

torch.set_num_threads(1)
PARAM_NAMES = {"weight", "bias", "lora_A", "lora_B"}


def make_pair(seed, *args, **kwargs):
    """The same layer built by the target and the reference from the same RNG state."""
    torch.manual_seed(seed)
    got = target.LoRALinear(*args, **kwargs)
    torch.manual_seed(seed)
    want = reference.LoRALinear(*args, **kwargs)
    return got, want


def randomize_b(got, want, seed):
    """B starts at zero; give both layers the same non-zero B so the low-rank branch matters."""
    generator = torch.Generator().manual_seed(seed)
    b = torch.randn(want.lora_B.shape, generator=generator, dtype=want.lora_B.dtype)
    with torch.no_grad():
        got.lora_B.copy_(b)
        want.lora_B.copy_(b)


def assert_close(got, want, atol=1e-6):
    assert isinstance(got, torch.Tensor)
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got, want, rtol=1e-5, atol=atol)


def test_initialization_equivalence():
    for seed, (fan_in, fan_out, r, alpha, bias) in enumerate([(6, 5, 2, 4.0, True), (16, 3, 4, 16.0, False)]):
        got, want = make_pair(seed, fan_in, fan_out, r=r, alpha=alpha, bias=bias)
        assert {name for name, _ in got.named_parameters()} == {name for name, _ in want.named_parameters()}
        assert set(dict(got.named_parameters())) <= PARAM_NAMES
        for name, param in want.named_parameters():
            other = dict(got.named_parameters())[name]
            assert_close(other.detach(), param.detach())
            assert other.requires_grad == param.requires_grad
        assert (got.bias is None) == (want.bias is None)
        assert got.scaling == pytest.approx(want.scaling)
        assert got.r == want.r and got.merged is False
        assert torch.count_nonzero(got.lora_B) == 0
    # a freshly initialised adapter leaves the pretrained function unchanged (Delta W = BA = 0)
    got, want = make_pair(5, 8, 4, r=3, alpha=6.0)
    x = torch.randn(7, 8)
    assert_close(got(x), nn.functional.linear(x, want.weight, want.bias))
    assert_close(got.delta_weight(), torch.zeros(4, 8))


def test_forward_equivalence():
    configs = [(10, 6, 2, 4.0, True), (10, 6, 5, 5.0, False), (4, 9, 1, 1.0, True), (12, 12, 8, 32.0, True)]
    for seed, (fan_in, fan_out, r, alpha, bias) in enumerate(configs):
        got, want = make_pair(seed, fan_in, fan_out, r=r, alpha=alpha, bias=bias)
        randomize_b(got, want, seed + 100)
        for shape in ((5, fan_in), (2, 3, fan_in), (fan_in,)):
            x = torch.randn(shape)
            assert_close(got(x), want(x), atol=1e-5)
        assert_close(got.delta_weight(), want.delta_weight())
    got, want = make_pair(9, 5, 4, r=2, alpha=3.0)
    randomize_b(got, want, 9)
    got.eval()
    want.eval()
    x = torch.randn(3, 5)
    assert_close(got(x), want(x))


def test_dropout_branch_equivalence():
    got, want = make_pair(11, 12, 7, r=3, alpha=6.0, dropout=0.5)
    randomize_b(got, want, 12)
    got.train()
    want.train()
    x = torch.randn(6, 12)
    for seed in (0, 1, 2):
        torch.manual_seed(seed)
        out_got = got(x)
        torch.manual_seed(seed)
        out_want = want(x)
        assert_close(out_got, out_want, atol=1e-5)
    # in eval mode dropout is the identity
    got.eval()
    want.eval()
    assert_close(got(x), want(x), atol=1e-5)


def test_merge_unmerge_equivalence():
    got, want = make_pair(13, 9, 5, r=4, alpha=8.0)
    randomize_b(got, want, 14)
    x = torch.randn(4, 9)
    with torch.no_grad():
        before = got(x)
        original_weight = got.weight.clone()
        got.merge()
        want.merge()
        assert got.merged is True
        assert_close(got.weight, want.weight)
        # the merged layer computes the same function from W0 + Delta W alone
        assert_close(got(x), before, atol=1e-5)
        assert_close(got(x), want(x), atol=1e-5)
        got.merge()  # merging twice must not add Delta W again
        assert_close(got.weight, want.weight)
        got.unmerge()
        want.unmerge()
        assert got.merged is False
        assert_close(got.weight, original_weight, atol=1e-6)
        got.unmerge()  # unmerging an unmerged layer is a no-op
        assert_close(got.weight, want.weight)
        assert_close(got(x), want(x), atol=1e-5)


def test_from_linear_equivalence():
    for seed, (fan_in, fan_out, bias, dtype) in enumerate([(7, 3, True, torch.float32), (5, 6, False, torch.float64)]):
        torch.manual_seed(50 + seed)
        linear = nn.Linear(fan_in, fan_out, bias=bias).to(dtype)
        torch.manual_seed(seed)
        got = target.LoRALinear.from_linear(linear, r=2, alpha=4.0, dropout=0.0)
        torch.manual_seed(seed)
        want = reference.LoRALinear.from_linear(linear, r=2, alpha=4.0, dropout=0.0)
        assert isinstance(got, target.LoRALinear)
        assert_close(got.weight.detach(), linear.weight.detach())
        assert (got.bias is None) == (not bias)
        for name, param in want.named_parameters():
            assert_close(dict(got.named_parameters())[name].detach(), param.detach())
        # the wrapped layer must not share storage with the original one
        assert got.weight.data_ptr() != linear.weight.data_ptr()
        randomize_b(got, want, seed)
        x = torch.randn(3, fan_in, dtype=dtype)
        assert_close(got(x), want(x), atol=1e-5)


def test_gradients_equivalence():
    got, want = make_pair(21, 8, 4, r=2, alpha=2.0)
    x = torch.randn(5, 8)
    target_y = torch.randn(5, 4)
    grads = []
    for layer in (got, want):
        loss = ((layer(x) - target_y) ** 2).mean()
        loss.backward()
        grads.append({name: p.grad for name, p in layer.named_parameters()})
    got_grads, want_grads = grads
    assert got.weight.grad is None and got.bias.grad is None  # the pretrained weights are frozen
    assert not got.weight.requires_grad
    for name in ("lora_A", "lora_B"):
        assert_close(got_grads[name], want_grads[name], atol=1e-6)
    # with B = 0 the gradient reaches B but not A
    assert torch.count_nonzero(got_grads["lora_A"]) == 0
    assert torch.count_nonzero(got_grads["lora_B"]) > 0
    got2, want2 = make_pair(22, 8, 4, r=2, alpha=6.0)
    randomize_b(got2, want2, 23)
    for layer in (got2, want2):
        layer(x).pow(2).sum().backward()
    assert_close(got2.lora_A.grad, want2.lora_A.grad, atol=1e-5)
    assert_close(got2.lora_B.grad, want2.lora_B.grad, atol=1e-5)


def test_invalid_arguments_equivalence():
    bad = [
        dict(in_features=4, out_features=3, r=0),
        dict(in_features=4, out_features=3, r=-2),
        dict(in_features=4, out_features=3, r=1.5),
        dict(in_features=4, out_features=3, r=2, dropout=1.0),
        dict(in_features=4, out_features=3, r=2, dropout=-0.1),
    ]
    for kwargs in bad:
        with pytest.raises(ValueError):
            reference.LoRALinear(**kwargs)
        with pytest.raises(ValueError):
            target.LoRALinear(**kwargs)
    # a rank larger than both dimensions is allowed (the update is then full-rank at most)
    got, want = make_pair(30, 3, 2, r=5, alpha=5.0)
    assert got.lora_A.shape == want.lora_A.shape and got.lora_B.shape == want.lora_B.shape
