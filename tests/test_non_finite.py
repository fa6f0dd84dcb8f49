"""NaN never reaches the weights: collection stops at the first non-finite observation or reward, and an update whose
gradients are non-finite raises before its step, with the weights and the optimizer state as they were."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv

from sb3_ppo_ext import PPO
from sb3_ppo_ext.ppo.optim import ClippedStep, NonFiniteGradientError


class PoisonAt(gym.Wrapper):
    """Returns a NaN observation or reward at step ``at`` (counted over the env's life) and records every action."""

    def __init__(self, env: gym.Env, at: int, what: str):
        super().__init__(env)
        self.at, self.what, self.steps, self.actions = at, what, 0, []

    def step(self, action):
        self.actions.append(np.asarray(action, dtype=float).copy())
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        if self.steps == self.at:
            if self.what == "observation":
                observation = np.full_like(observation, np.nan)
            else:
                reward = float("nan")
        return observation, reward, terminated, truncated, info


def _poisoned_vec_env(what: str, env_id: str = "Pendulum-v1") -> DummyVecEnv:
    """Two envs; the second returns a NaN ``what`` at its 40th step (step 80 of the run)."""
    return DummyVecEnv([lambda: Monitor(gym.make(env_id)), lambda: PoisonAt(Monitor(gym.make(env_id)), 40, what)])


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "CartPole-v1"])
def test_a_nan_observation_stops_collection_before_any_nan_action(env_id):
    env = _poisoned_vec_env("observation", env_id)
    model = PPO("MlpPolicy", env, n_steps=64, batch_size=64, seed=0)
    with pytest.raises(ValueError, match=r"non-finite observation from env\(s\) \[1\] at step 80"):
        model.learn(256)
    poisoned = env.envs[1]
    assert poisoned.steps == 40 and all(np.isfinite(action).all() for action in poisoned.actions)


def test_a_nan_reward_stops_collection_at_its_step():
    model = PPO("MlpPolicy", _poisoned_vec_env("reward"), n_steps=64, batch_size=64, seed=0)
    with pytest.raises(ValueError, match=r"non-finite reward from env\(s\) \[1\] at step 80"):
        model.learn(256)
    assert model.num_timesteps == 78  # the poisoned step is not counted: nothing of it went into the rollout


class PoisonReturns(BaseCallback):
    """Makes the returns of rollout ``rollout`` NaN (so its first minibatch's gradients are) and snapshots the model
    then."""

    def __init__(self, rollout: int):
        super().__init__()
        self.rollout, self.seen, self.weights, self.optimizer_state = rollout, 0, None, None

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        self.seen += 1
        if self.seen == self.rollout:
            self.model.rollout_buffer.returns[:] = np.nan
            self.weights = copy.deepcopy(self.model.policy.state_dict())
            self.optimizer_state = copy.deepcopy(self.model.policy.optimizer.state_dict())


@pytest.mark.parametrize("rollout", [1, 2])  # the first step goes through torch, later ones through ClippedStep's own path
def test_non_finite_gradients_raise_before_the_step_and_leave_the_model_intact(rollout):
    model = PPO("MlpPolicy", "Pendulum-v1", n_steps=64, batch_size=32, n_epochs=2, seed=0)
    poison = PoisonReturns(rollout)
    with pytest.raises(FloatingPointError, match="non-finite gradients in update .* No step was taken"):
        model.learn(64 * 3, callback=poison)
    for name, tensor in model.policy.state_dict().items():
        assert th.equal(tensor, poison.weights[name]), name
    state = model.policy.optimizer.state_dict()["state"]
    for key, saved in poison.optimizer_state["state"].items():
        for field in saved:
            assert th.equal(state[key][field], saved[field])


def test_clipped_step_refuses_non_finite_gradients_only_when_asked():
    network = th.nn.Linear(3, 2)
    parameters = list(network.parameters())
    step = ClippedStep(th.optim.Adam(parameters, fused=True), parameters, 0.5, error_if_nonfinite=True)
    for _ in range(2):  # through torch, then the direct path
        network.weight.grad = th.full_like(network.weight, np.inf)
        network.bias.grad = th.zeros_like(network.bias)
        before = [parameter.detach().clone() for parameter in parameters]
        with pytest.raises(NonFiniteGradientError):
            step.step()
        assert all(th.equal(a, b) for a, b in zip(before, parameters))
        network.weight.grad = th.ones_like(network.weight)
        step.step()  # finite gradients step as usual
    lenient = ClippedStep(th.optim.Adam(parameters, fused=True), parameters, 0.5)
    network.weight.grad = th.full_like(network.weight, np.nan)
    lenient.step()  # torch's default: no check
    assert th.isnan(network.weight).all()
