"""The Jacobian toolkit against torch.func.jacrev, sample by sample, in float64."""

from __future__ import annotations

import re

import pytest
import torch
from torch import Tensor, nn

from ik_layer.exceptions import IKLayerError, ShapeError
from ik_layer.layer import jacobian as jacobian_module
from ik_layer.layer.jacobian import (
    Diagonal,
    JacobianStrategy,
    batch_jacobian,
    jacobian_rules,
    register_jacobian,
    sequential_jacobian,
)

TOL = {"rtol": 1e-10, "atol": 1e-10}


def _reference(fn, x: Tensor) -> Tensor:
    """jacrev of each sample on its own: (B, out, in)."""
    return torch.stack([torch.func.jacrev(lambda r: fn(r.unsqueeze(0)).squeeze(0))(row) for row in x])


def _inputs(batch: int, features: int, seed: int = 0) -> Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(batch, features, generator=gen, dtype=torch.float64) * 2.0


def _net(*layers: nn.Module) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(*layers).double()


ACTIVATIONS = [
    nn.Tanh(),
    nn.ReLU(),
    nn.Sigmoid(),
    nn.LeakyReLU(0.1),
    nn.ELU(alpha=0.7),
    nn.SiLU(),
    nn.Softplus(beta=2.0, threshold=3.0),
    nn.Identity(),
    nn.Flatten(),
    nn.Dropout(0.5).eval(),
]


@pytest.mark.parametrize("activation", ACTIVATIONS, ids=lambda m: type(m).__name__)
def test_each_rule_matches_jacrev(activation: nn.Module) -> None:
    model = _net(nn.Linear(3, 5), activation, nn.Linear(5, 4))
    x = _inputs(7, 3)
    assert type(activation) in jacobian_rules()
    torch.testing.assert_close(sequential_jacobian(model, x), _reference(model, x), **TOL)


@pytest.mark.parametrize("activation", ACTIVATIONS, ids=lambda m: type(m).__name__)
def test_activation_alone_matches_jacrev(activation: nn.Module) -> None:
    model = nn.Sequential(activation)
    x = _inputs(6, 4, seed=1)
    torch.testing.assert_close(sequential_jacobian(model, x), _reference(model, x), **TOL)


@pytest.mark.parametrize(("n_in", "n_out"), [(6, 7), (7, 2), (4, 4)])
def test_random_nets_both_accumulation_orders(n_in: int, n_out: int) -> None:
    model = _net(
        nn.Linear(n_in, 16),
        nn.Tanh(),
        nn.Linear(16, 16),
        nn.SiLU(),
        nn.Linear(16, 9),
        nn.Softplus(),
        nn.Linear(9, n_out),
    )
    x = _inputs(11, n_in, seed=2)
    torch.testing.assert_close(sequential_jacobian(model, x), _reference(model, x), **TOL)


def test_nested_sequential_is_flattened() -> None:
    model = _net(
        nn.Linear(3, 8),
        nn.Sequential(nn.Tanh(), nn.Sequential(nn.Linear(8, 8), nn.ReLU())),
        nn.Linear(8, 2),
    )
    x = _inputs(5, 3, seed=3)
    torch.testing.assert_close(sequential_jacobian(model, x), _reference(model, x), **TOL)


class _Cube(nn.Module):
    """An unregistered layer: x**3 + sin(x) mixed by a fixed matrix."""

    def __init__(self) -> None:
        super().__init__()
        self.mix = nn.Parameter(torch.randn(4, 3, dtype=torch.float64))

    def forward(self, x: Tensor) -> Tensor:
        return (x**3 + torch.sin(x)) @ self.mix.T


def test_unregistered_layer_falls_back_to_autograd() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 3).double(), _Cube(), nn.Tanh())
    x = _inputs(6, 2, seed=4)
    assert _Cube not in jacobian_rules()
    torch.testing.assert_close(sequential_jacobian(model, x), _reference(model, x), **TOL)


def test_subclass_of_registered_type_is_not_matched() -> None:
    class Doubled(nn.Tanh):
        def forward(self, x: Tensor) -> Tensor:
            return 2.0 * torch.tanh(x)

    model = nn.Sequential(Doubled())
    x = _inputs(4, 3, seed=5)
    torch.testing.assert_close(sequential_jacobian(model, x), _reference(model, x), **TOL)


def test_registered_custom_rule_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jacobian_module, "_RULES", dict(jacobian_module._RULES))  # keep the registry clean

    class Scale(nn.Module):
        def forward(self, x: Tensor) -> Tensor:
            return 3.0 * x

    seen: list[torch.Size] = []

    @register_jacobian(Scale)
    def _scale(module: nn.Module, x: Tensor, y: Tensor) -> Diagonal:
        seen.append(x.shape)
        return Diagonal(torch.full_like(x, 3.0))

    model = _net(nn.Linear(2, 3), Scale(), nn.Linear(3, 2))
    x = _inputs(5, 2, seed=6)
    torch.testing.assert_close(sequential_jacobian(model, x), _reference(model, x), **TOL)
    assert seen == [torch.Size([5, 3])]
    assert jacobian_rules()[Scale] is _scale


def test_sequential_jacobian_is_differentiable_in_parameters() -> None:
    model = _net(nn.Linear(2, 3), nn.Tanh(), _Cube(), nn.Linear(4, 2))
    x = _inputs(3, 2, seed=7)
    params = {name: p.detach() for name, p in model.named_parameters()}

    def jacobian_norm(weight: Tensor) -> Tensor:
        def row(r: Tensor) -> Tensor:
            return torch.func.functional_call(model, {**params, "0.weight": weight}, (r.unsqueeze(0),)).squeeze(0)

        return torch.func.vmap(torch.func.jacrev(row))(x).square().sum()

    jac = sequential_jacobian(model, x)
    (grad,) = torch.autograd.grad(jac.square().sum(), model[0].weight)
    torch.testing.assert_close(grad, torch.func.grad(jacobian_norm)(params["0.weight"]), **TOL)


@pytest.mark.parametrize("strategy", [*list(JacobianStrategy), "sum", "vmap"])
def test_batch_jacobian_strategies_match_jacrev(
    strategy: JacobianStrategy | str,
) -> None:
    model = _net(nn.Linear(3, 6), nn.Tanh(), nn.Linear(6, 2))
    x = _inputs(9, 3, seed=8)
    torch.testing.assert_close(batch_jacobian(model, x, strategy=strategy), _reference(model, x), **TOL)


@pytest.mark.parametrize("strategy", list(JacobianStrategy))
def test_batch_jacobian_any_leading_dims(strategy: JacobianStrategy) -> None:
    def fn(x: Tensor) -> Tensor:
        return torch.stack([x[..., 0] * x[..., 1] ** 2, torch.sin(x[..., 2]), x.sum(-1)], dim=-1)

    x = torch.randn(2, 3, 4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
    jac = batch_jacobian(fn, x, strategy=strategy)
    assert jac.shape == (2, 3, 4, 3, 3)
    flat = x.reshape(-1, 3)
    torch.testing.assert_close(jac.reshape(-1, 3, 3), _reference(fn, flat), **TOL)


def test_batch_jacobian_of_function_ignoring_x_is_zero() -> None:
    x = _inputs(4, 3)
    jac = batch_jacobian(lambda r: torch.ones(r.shape[0], 2, dtype=r.dtype), x)
    torch.testing.assert_close(jac, torch.zeros(4, 2, 3, dtype=torch.float64))


@pytest.mark.parametrize("strategy", list(JacobianStrategy))
def test_batch_jacobian_create_graph(strategy: JacobianStrategy) -> None:
    x = _inputs(5, 2, seed=10).requires_grad_(True)
    jac = batch_jacobian(lambda r: r**3, x, strategy=strategy, create_graph=True)
    (grad,) = torch.autograd.grad(jac.sum(), x)
    torch.testing.assert_close(grad, 6.0 * x.detach(), **TOL)  # d/dx sum(diag(3 x^2)) = 6 x


def test_batch_jacobian_ignores_grad_mode_and_detaches() -> None:
    x = _inputs(4, 2).requires_grad_(True)
    with torch.no_grad():
        jac = batch_jacobian(lambda r: r**2, x)
    assert not jac.requires_grad
    torch.testing.assert_close(jac, torch.diag_embed(2.0 * x.detach()), **TOL)


def test_batch_jacobian_errors() -> None:
    with pytest.raises(IKLayerError, match="unknown strategy 'fast'"):
        batch_jacobian(torch.sin, _inputs(2, 2), strategy="fast")
    with pytest.raises(ShapeError, match="scalar"):
        batch_jacobian(torch.sin, torch.tensor(1.0))
    with pytest.raises(IKLayerError, match="floating point"):
        batch_jacobian(torch.sin, torch.ones(2, 2, dtype=torch.int64))
    with pytest.raises(ShapeError, match="leading dims"):
        batch_jacobian(lambda r: r.sum(0), _inputs(3, 2))


def test_sequential_jacobian_errors() -> None:
    model = _net(nn.Linear(3, 2))
    with pytest.raises(ShapeError, match=r"x must have shape \(B, in\)"):
        sequential_jacobian(model, torch.zeros(2, 4, 3, dtype=torch.float64))
    with pytest.raises(IKLayerError, match=re.escape("must be an nn.Sequential")):
        sequential_jacobian(nn.Linear(3, 2), _inputs(2, 3))  # type: ignore[arg-type]
    with pytest.raises(ShapeError, match=r"layer 1 \(Unflatten\)"):
        sequential_jacobian(_net(nn.Linear(3, 4), nn.Unflatten(1, (2, 2))), _inputs(2, 3))
    with pytest.raises(ShapeError, match=r"layer 0 \(Flatten\)"):
        sequential_jacobian(nn.Sequential(nn.Flatten(start_dim=0)), _inputs(2, 3))
    with pytest.raises(IKLayerError, match=re.escape("model.eval")):
        sequential_jacobian(nn.Sequential(nn.Dropout(0.5)), _inputs(2, 3))


def test_register_jacobian_rejects_non_modules() -> None:
    with pytest.raises(IKLayerError, match=re.escape("nn.Module subclass")):
        register_jacobian(int)  # type: ignore[arg-type]
    with pytest.raises(IKLayerError, match=re.escape("nn.Module subclass")):
        register_jacobian(nn.Tanh())  # type: ignore[arg-type]
    with pytest.raises(IKLayerError, match="flattened"):
        register_jacobian(nn.Sequential)


def test_empty_sequential_is_identity() -> None:
    x = _inputs(3, 2)
    torch.testing.assert_close(
        sequential_jacobian(nn.Sequential(), x),
        torch.eye(2, dtype=torch.float64).expand(3, 2, 2),
    )
