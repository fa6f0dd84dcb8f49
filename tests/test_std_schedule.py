"""``log_std_schedule``: the Gaussian action log-std set by a schedule (the PPO paper's humanoid recipe), not learned."""

from __future__ import annotations

import pytest
import torch as th
from stable_baselines3.common.callbacks import BaseCallback

from sb3_ppo_ext import PPO
from sb3_ppo_ext.ppo.std_schedule import LogStdSchedule, linear_log_std

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def small_ppo(env="Pendulum-v1", **kwargs):
    return PPO(
        "MlpPolicy",
        env,
        n_steps=128,
        batch_size=64,
        n_epochs=2,
        seed=0,
        device="cpu",
        policy_kwargs={"net_arch": [16]},
        **kwargs,
    )


class RolloutStd(BaseCallback):
    """The log-std and the progress remaining at the start of each rollout."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def _on_rollout_start(self):
        self.seen.append((self.model._current_progress_remaining, float(self.model.policy.log_std[0])))

    def _on_step(self):
        return True


def test_linear_log_std_runs_from_start_to_end_with_the_progress():
    assert linear_log_std(-0.7, -1.6, 1.0) == pytest.approx(-0.7)
    assert linear_log_std(-0.7, -1.6, 0.0) == pytest.approx(-1.6)
    assert linear_log_std(-0.7, -1.6, 0.5) == pytest.approx(-1.15)
    assert LogStdSchedule(-1.0).value(0.3) == -1.0
    assert LogStdSchedule(lambda progress: -2.0 * progress).value(0.25) == -0.5


def test_each_rollout_acts_with_the_scheduled_std_and_the_updates_leave_it_alone():
    model = small_ppo(log_std_schedule=[-0.5, -1.5])
    mean_weights = model.policy.action_net.weight.detach().clone()
    recorder = RolloutStd()
    model.learn(512, callback=recorder)
    # The first rollout at the start value, each next one at the value for the progress reached before it.
    assert [round(progress, 6) for progress, _ in recorder.seen] == [1.0, 0.75, 0.5, 0.25]
    for progress, log_std in recorder.seen:
        assert log_std == pytest.approx(linear_log_std(-0.5, -1.5, progress))
    assert float(model.policy.log_std[0]) == pytest.approx(-1.5)  # set for the next rollout, at progress 0
    assert not model.policy.log_std.requires_grad and model.policy.log_std.grad is None
    assert not th.equal(model.policy.action_net.weight, mean_weights)  # the rest of the policy learns


def test_a_saved_model_continues_with_its_scheduled_std(tmp_path):
    model = small_ppo(log_std_schedule=[-0.5, -1.5])
    model.learn(256)
    model.save(tmp_path / "model.zip")
    loaded = PPO.load(tmp_path / "model.zip", env=model.get_env(), device="cpu")
    assert th.equal(loaded.policy.log_std, model.policy.log_std) and not loaded.policy.log_std.requires_grad
    recorder = RolloutStd()
    loaded.learn(256, reset_num_timesteps=False, callback=recorder)
    assert recorder.seen[0][1] == pytest.approx(float(model.policy.log_std[0]))


@pytest.mark.parametrize(
    ("env", "kwargs", "message"),
    [
        ("CartPole-v1", {"log_std_schedule": -1.0}, "CategoricalDistribution"),
        ("Pendulum-v1", {"log_std_schedule": -1.0, "use_sde": True}, "StateDependentNoiseDistribution"),
        ("Pendulum-v1", {"log_std_schedule": [-1.0, -2.0, -3.0]}, r"a \[start, end\] pair"),
        ("Pendulum-v1", {"log_std_schedule": "lin_-1"}, r"a \[start, end\] pair"),
        ("Pendulum-v1", {"log_std_schedule": [-1.0, float("nan")]}, "finite numbers"),
    ],
)
def test_settings_it_cannot_follow_are_refused_by_name(env, kwargs, message):
    with pytest.raises(ValueError, match=f"log_std_schedule.*{message}") as error:
        small_ppo(env, **kwargs)
    assert isinstance(error.value, AssertionError)  # as every other hyperparameter error
