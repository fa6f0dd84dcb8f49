"""The opt-in compiled update: same loss as eager, and a clean fall-back where compiling fails."""

import warnings

import pytest
import torch as th

from sb3_ppo_ext import PPO
from sb3_ppo_ext.ppo.rollout import UpdateRollout

TINY = dict(net_arch=[16])


def _first_minibatch(model: PPO):
    return next(UpdateRollout(model.rollout_buffer).minibatches(model.batch_size)).samples


def test_compile_failure_falls_back_to_eager(monkeypatch):
    def broken_compile(function, **kwargs):
        def raise_error(*args, **kw):
            raise RuntimeError("no C++ compiler found")

        return raise_error

    monkeypatch.setattr(th, "compile", broken_compile)
    model = PPO("MlpPolicy", "Pendulum-v1", n_steps=64, batch_size=32, n_epochs=2, compile_update=True, policy_kwargs=TINY, seed=0)
    with pytest.warns(RuntimeWarning, match="compile_update: torch.compile failed .*no C\\+\\+ compiler"):
        model.learn(128)
    assert model.update_loss.failed
    assert model.num_timesteps == 128 and model._n_updates == 4

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once only
        model.learn(64)


@pytest.mark.slow
def test_compiled_loss_matches_eager():
    model = PPO("MlpPolicy", "Pendulum-v1", n_steps=64, batch_size=32, n_epochs=1, compile_update=True,
                objective="clip_kl_penalty", policy_kwargs=TINY, seed=0)
    model.learn(64)  # compiles inside the update
    assert not model.update_loss.failed and model.update_loss.compiled is not None
    minibatch = _first_minibatch(model)
    head = model._direct_head()
    eager_loss, eager_stats = model._minibatch_loss(minibatch, None, head, None, 0.2, None, 1.0)
    constants = model.update_loss.constants(0.2, None, 1.0)
    compiled_loss, compiled_stats = model.update_loss(minibatch, None, head, None, *constants)
    assert th.allclose(eager_loss, compiled_loss, atol=1e-5)
    assert th.allclose(th.stack(eager_stats), th.stack(compiled_stats), atol=1e-5)
    assert type(compiled_stats).__name__ == "LossStats"
    assert not model.update_loss.failed
