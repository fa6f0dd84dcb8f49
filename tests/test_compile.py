"""The opt-in compiled update: same loss as eager, and a clean fall-back where compiling fails."""

import warnings

import pytest
import torch as th

from sb3_ppo_ext import PPO
from sb3_ppo_ext.ppo.compiled import CompiledOrEager
from sb3_ppo_ext.ppo.loss import LossCoefficients
from sb3_ppo_ext.ppo.rollout import UpdateRollout

TINY = dict(net_arch=[16])


def _first_minibatch(model: PPO):
    return next(UpdateRollout(model.rollout_buffer).minibatches(model.batch_size))


def test_compile_failure_falls_back_to_eager(monkeypatch):
    def broken_compile(function, **kwargs):
        def raise_error(*args, **kw):
            raise RuntimeError("no C++ compiler found")

        return raise_error

    monkeypatch.setattr(th, "compile", broken_compile)
    model = PPO(
        "MlpPolicy", "Pendulum-v1", n_steps=64, batch_size=32, n_epochs=2, compile_update=True, policy_kwargs=TINY, seed=0
    )
    with pytest.warns(RuntimeWarning, match="compile_update: torch.compile failed .*no C\\+\\+ compiler"):
        model.learn(128)
    assert model.update_loss.failed
    assert model.num_timesteps == 128 and model._n_updates == 4

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once only
        model.learn(64)


@pytest.mark.slow
def test_compiled_loss_matches_eager():
    model = PPO(
        "MlpPolicy",
        "Pendulum-v1",
        n_steps=64,
        batch_size=32,
        n_epochs=1,
        compile_update=True,
        objective="clip_kl_penalty",
        policy_kwargs=TINY,
        seed=0,
    )
    model.learn(64)  # compiles inside the update
    assert not model.update_loss.failed and model.update_loss.compiled is not None
    minibatch = _first_minibatch(model)
    coefficients = LossCoefficients(0.2, None, 1.0, 0.0, 0.5, True)
    eager_loss, eager_stats = model.update_loss.function(minibatch, coefficients)
    compiled_loss, compiled_stats = model.update_loss(minibatch, coefficients)
    assert th.allclose(eager_loss, compiled_loss, atol=1e-5)
    assert th.allclose(th.stack(eager_stats), th.stack(compiled_stats), atol=1e-5)
    assert type(compiled_stats).__name__ == "LossStats"
    assert not model.update_loss.failed


def test_compiled_calls_get_numbers_as_tensors_converted_once(monkeypatch):
    """While compiled, numbers (alone or in a named tuple of numbers) reach the function as 0-d float32 tensors, so
    that a schedule does not recompile; bools, ``None`` and other arguments pass unchanged, and eagerly nothing
    changes."""
    monkeypatch.setattr(th, "compile", lambda function, **kwargs: function)
    received = []
    compiled = CompiledOrEager(lambda *args: received.append(args), enabled=True)
    coefficients = LossCoefficients(0.2, None, 1, 0.0, 0.5, True)
    marker = object()
    compiled(marker, coefficients, 0.3)
    compiled(marker, coefficients, 0.3)
    (first, second) = received
    assert first[0] is marker and first[1] is second[1]  # converted once for the same tuple
    converted = first[1]
    assert isinstance(converted, LossCoefficients) and converted.clip_range_vf is None
    assert converted.normalize_advantage is True
    for value, tensor in ((0.2, converted.clip_range), (1, converted.kl_coef), (0.3, first[2])):
        assert tensor.dtype == th.float32 and tensor.dim() == 0 and tensor.item() == pytest.approx(value)
    eager = CompiledOrEager(lambda *args: args, enabled=False)
    assert eager(marker, coefficients, 0.3) == (marker, coefficients, 0.3)
