"""PPO as a drop-in: spaces, policies, SB3 semantics, the fast paths, adaptive state and bad input (the objective and
its loss: test_objective.py)."""

import os

import numpy as np
import pytest
import threadpoolctl
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.envs import (
    FakeImageEnv,
    IdentityEnv,
    IdentityEnvBox,
    IdentityEnvMultiBinary,
    IdentityEnvMultiDiscrete,
    SimpleMultiObsEnv,
)
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import MlpExtractor

from sb3_ppo_ext import PPO
from sb3_ppo_ext.ppo.evaluation import ActionEvaluator
from sb3_ppo_ext.ppo.numpy_policy import NumpyActorCritic

TINY = dict(net_arch=[16])


@pytest.mark.parametrize("objective", ["clip", "kl_penalty", "clip_kl_penalty"])
@pytest.mark.parametrize(
    "make_env, kwargs",
    [
        (lambda: IdentityEnv(4), {}),
        (lambda: IdentityEnvBox(-1, 1), {}),
        (lambda: IdentityEnvBox(-1, 1), {"use_sde": True, "sde_sample_freq": 4}),
        (lambda: IdentityEnvMultiDiscrete(3), {}),
        (lambda: IdentityEnvMultiBinary(3), {}),
    ],
    ids=["discrete", "box", "box-gsde", "multidiscrete", "multibinary"],
)
def test_every_action_space_trains(make_env, kwargs, objective):
    model = PPO(
        "MlpPolicy",
        make_env(),
        n_steps=64,
        batch_size=32,
        n_epochs=2,
        objective=objective,
        policy_kwargs=TINY,
        seed=0,
        **kwargs,
    )
    model.learn(256)
    assert model.num_timesteps == 256
    assert model.kl_estimator == "analytic"
    assert np.isfinite(model.logger.name_to_value["train/kl"])


def _weights(model: PPO) -> th.Tensor:
    return th.nn.utils.parameters_to_vector(model.policy.parameters()).detach().clone()


def test_dict_observations_multi_input_policy():
    model = PPO(
        "MultiInputPolicy",
        SimpleMultiObsEnv(random_start=False),
        n_steps=64,
        batch_size=32,
        n_epochs=2,
        policy_kwargs=TINY,
        seed=0,
    )
    before = _weights(model)
    model.learn(128)
    assert model._n_updates == 2 * 2  # two rollouts, two epochs each: every epoch ran
    assert not th.equal(before, _weights(model))  # and the updates moved the weights
    assert np.isfinite(model.logger.name_to_value["train/loss"])


def test_cnn_policy_on_images():
    env = FakeImageEnv(screen_height=36, screen_width=36, n_channels=1, discrete=True)
    model = PPO(
        "CnnPolicy",
        env,
        n_steps=32,
        batch_size=16,
        n_epochs=1,
        policy_kwargs=dict(features_extractor_kwargs=dict(features_dim=16)),
        seed=0,
    )
    before = _weights(model)
    model.learn(64)
    assert model._n_updates == 2
    assert not th.equal(before, _weights(model))
    assert np.isfinite(model.logger.name_to_value["train/loss"])


class WideExtractorPolicy(ActorCriticPolicy):
    """A user policy that builds its own MLP: must go through the torch path."""

    def _build_mlp_extractor(self) -> None:
        self.mlp_extractor = MlpExtractor(self.features_dim, net_arch=[8, 8], activation_fn=th.nn.GELU, device=self.device)


def test_custom_policy_class_falls_back_to_torch():
    model = PPO(WideExtractorPolicy, "Pendulum-v1", n_steps=64, batch_size=32, n_epochs=1, seed=0)
    assert not NumpyActorCritic.supports(model.policy)
    model.learn(128)
    assert model.num_timesteps == 128


class CountingBuffer(RolloutBuffer):
    gets = 0

    def get(self, batch_size=None):
        CountingBuffer.gets += 1
        yield from super().get(batch_size)


def test_custom_rollout_buffer_class_is_used():
    CountingBuffer.gets = 0
    model = PPO(
        "MlpPolicy",
        "CartPole-v1",
        n_steps=64,
        batch_size=32,
        n_epochs=3,
        rollout_buffer_class=CountingBuffer,
        rollout_buffer_kwargs={},
        policy_kwargs=TINY,
        seed=0,
    )
    model.learn(64)
    assert isinstance(model.rollout_buffer, CountingBuffer)
    assert CountingBuffer.gets == 3  # one pass per epoch through the user's own get()


@pytest.mark.parametrize(
    "observation_space, action_space",
    [
        (spaces.Box(-1, 1, (3,)), spaces.Box(-1, 1, (2,))),
        (spaces.Discrete(4), spaces.Discrete(3)),
        (spaces.MultiDiscrete([2, 3]), spaces.MultiBinary(2)),
    ],
)
def test_direct_buffer_writes_equal_rollout_buffer_add(observation_space, action_space):
    from sb3_ppo_ext.ppo.rollout import add_to_rollout_buffer

    n_envs, n_steps = 3, 4
    theirs, ours = (RolloutBuffer(n_steps, observation_space, action_space, n_envs=n_envs) for _ in range(2))
    rng = np.random.default_rng(0)
    observation_space.seed(0)
    action_space.seed(0)
    for _ in range(n_steps):
        observations = np.stack([observation_space.sample() for _ in range(n_envs)])
        actions = np.stack([action_space.sample() for _ in range(n_envs)])
        if isinstance(action_space, spaces.Discrete):
            actions = actions.reshape(-1, 1)  # as the collection loop passes them
        rewards = rng.normal(size=n_envs).astype(np.float32)
        starts = rng.random(n_envs) < 0.3
        values, log_probs = rng.normal(size=n_envs).astype(np.float32), rng.normal(size=n_envs).astype(np.float32)
        theirs.add(observations, actions, rewards, starts, th.from_numpy(values), th.from_numpy(log_probs))
        add_to_rollout_buffer(ours, observations, actions, rewards, starts, values, log_probs)
    for name in ("observations", "actions", "rewards", "episode_starts", "values", "log_probs"):
        assert np.array_equal(getattr(theirs, name), getattr(ours, name)), name
    assert ours.pos == theirs.pos and ours.full and theirs.full


@pytest.mark.parametrize(
    "space_env, kwargs",
    [
        (lambda: IdentityEnvBox(-1, 1), {}),
        (lambda: IdentityEnvBox(-1, 1), {"use_sde": True}),
        (lambda: IdentityEnv(5), {}),
        (lambda: IdentityEnvMultiDiscrete(3), {}),
        (lambda: IdentityEnvMultiBinary(3), {}),
    ],
    ids=["gaussian", "gsde", "categorical", "multicategorical", "bernoulli"],
)
@pytest.mark.parametrize(
    "net_arch, joint",
    [
        ([32, 32], True),  # actor and critic run as one block-diagonal MLP
        ([], True),  # heads straight on the features
        (dict(pi=[32], vf=[16, 16]), False),  # different depths: separate MLPs
        ([200], False),  # too wide for the joint MLP to pay
    ],
    ids=["joint", "no-hidden", "separate", "wide"],
)
def test_numpy_actor_matches_torch_policy(space_env, kwargs, net_arch, joint):
    model = PPO("MlpPolicy", space_env(), policy_kwargs=dict(net_arch=net_arch), seed=1, **kwargs)
    policy = model.policy
    actor = NumpyActorCritic.from_policy(policy)
    assert actor is not None
    assert (actor.joint_layers is not None) == joint
    obs = np.stack([model.observation_space.sample() for _ in range(6)]).astype(np.float32)
    if kwargs.get("use_sde"):
        policy.reset_noise(6)
        actor.refresh_noise()
    actions, values, log_probs = actor.act(obs)
    with th.no_grad():
        obs_t = th.as_tensor(obs)
        act_t = th.as_tensor(actions)
        if isinstance(model.action_space, spaces.Discrete):
            act_t = act_t.long()
        values_t, log_probs_t, _ = policy.evaluate_actions(obs_t, act_t)
    np.testing.assert_allclose(values, values_t.flatten().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(log_probs, log_probs_t.numpy(), rtol=1e-4, atol=1e-4)
    if isinstance(model.action_space, spaces.Box):  # unclipped Gaussian samples: the space's shape, not its bounds
        assert actions.shape == (6, *model.action_space.shape) and actions.dtype == np.float32
        assert np.isfinite(actions).all()
    else:
        assert all(model.action_space.contains(action) for action in actions)


def test_numpy_actor_samples_the_policy_distribution():
    model = PPO("MlpPolicy", IdentityEnv(3), policy_kwargs=dict(net_arch=[8]), seed=3)
    with th.no_grad():
        model.policy.action_net.weight.mul_(10)  # a peaked, non-uniform distribution
    actor = NumpyActorCritic.from_policy(model.policy)
    obs = np.repeat(model.observation_space.sample()[None].astype(np.float32), 20_000, axis=0)
    actions, _, _ = actor.act(obs)
    with th.no_grad():
        probs = model.policy.get_distribution(th.as_tensor(obs[:1])).distribution.probs[0].numpy()
    frequencies = np.bincount(actions, minlength=3) / len(actions)
    np.testing.assert_allclose(frequencies, probs, atol=0.015)

    model = PPO("MlpPolicy", IdentityEnvBox(-1, 1), policy_kwargs=dict(net_arch=[8], log_std_init=-1.0), seed=3)
    actor = NumpyActorCritic.from_policy(model.policy)
    obs = np.repeat(np.array([[0.3]], dtype=np.float32), 20_000, axis=0)
    actions, _, _ = actor.act(obs)
    with th.no_grad():
        mean = model.policy.get_distribution(th.as_tensor(obs[:1])).distribution.mean.item()
    assert actions.mean() == pytest.approx(mean, abs=0.01)
    assert actions.std() == pytest.approx(np.exp(-1.0), rel=0.03)


@pytest.mark.parametrize("n_rows", [1, 5])
@pytest.mark.parametrize(
    "make_env",
    [
        lambda: IdentityEnv(4),
        lambda: IdentityEnvMultiDiscrete(3),
        lambda: IdentityEnvMultiBinary(3),
        lambda: IdentityEnvBox(-1, 1),
    ],
    ids=["categorical", "multi-categorical", "bernoulli", "gaussian"],
)
def test_numpy_actor_draws_what_the_torch_policy_draws(make_env, n_rows):
    """From the same state of torch's generator, the numpy actor samples the torch policy's actions and leaves the
    generator where the torch policy leaves it."""
    model = PPO("MlpPolicy", make_env(), policy_kwargs=TINY, seed=0)
    actor = NumpyActorCritic.from_policy(model.policy)
    obs = np.stack([model.observation_space.sample() for _ in range(n_rows)])
    for seed in range(20):
        th.manual_seed(seed)
        actions, _, log_probs = actor.act(obs)
        after_actor = th.rand(3)
        th.manual_seed(seed)
        with th.no_grad():
            actions_t, _, log_probs_t = model.policy(model.policy.obs_to_tensor(obs)[0])
        assert th.equal(th.rand(3), after_actor)
        if isinstance(model.action_space, spaces.Box):
            np.testing.assert_allclose(actions, actions_t.numpy(), rtol=0, atol=1e-6)
        else:
            np.testing.assert_array_equal(actions, actions_t.numpy())
        np.testing.assert_allclose(log_probs, log_probs_t.numpy(), rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    "env_fn, kwargs",
    [(lambda: IdentityEnvBox(-1, 1), {}), (lambda: IdentityEnvBox(-1, 1), {"use_sde": True}), (lambda: IdentityEnv(4), {})],
    ids=["gaussian", "gsde", "categorical"],
)
def test_direct_evaluation_matches_evaluate_actions(env_fn, kwargs):
    model = PPO("MlpPolicy", env_fn(), policy_kwargs=dict(net_arch=[16]), seed=0, **kwargs)
    obs = th.as_tensor(np.stack([model.observation_space.sample() for _ in range(10)]), dtype=th.float32)
    actions = th.as_tensor(np.stack([model.action_space.sample() for _ in range(10)]))
    if isinstance(model.action_space, spaces.Discrete):
        actions = actions.long()
    else:
        actions = actions.float()
    evaluator = ActionEvaluator(model.policy)
    assert evaluator.head is not None
    with th.no_grad():
        values, log_prob, entropy, _ = evaluator(obs, actions)
        values_ref, log_prob_ref, entropy_ref = model.policy.evaluate_actions(obs, actions)
    assert th.allclose(values, values_ref.flatten(), atol=1e-6)
    assert th.allclose(log_prob, log_prob_ref, atol=1e-5)
    assert th.allclose(entropy, entropy_ref, atol=1e-5)


class LocalsRecorder(BaseCallback):
    def __init__(self):
        super().__init__()
        self.keys = set()
        self.calls = 0

    def _on_step(self) -> bool:
        self.calls += 1
        self.keys |= set(self.locals)
        return True


def test_callbacks_see_sb3_locals_and_can_stop_training():
    recorder = LocalsRecorder()
    model = PPO("MlpPolicy", "Pendulum-v1", n_steps=32, batch_size=32, n_epochs=1, policy_kwargs=TINY, seed=0)
    model.learn(64, callback=recorder)
    assert recorder.calls == 64
    assert {"infos", "dones", "new_obs", "rewards", "actions", "clipped_actions", "values", "log_probs"} <= recorder.keys

    class StopAt10(BaseCallback):
        def _on_step(self) -> bool:
            return self.n_calls < 10

    model.learn(1000, callback=StopAt10())
    assert model.num_timesteps == 10


def test_adaptive_state_moves_and_learning_rate_replaces_schedule():
    model = PPO(
        "MlpPolicy",
        "CartPole-v1",
        n_steps=128,
        batch_size=64,
        n_epochs=2,
        learning_rate=lambda p: 1e-3 * p,
        objective="kl_penalty",
        kl_penalty_target=1e-12,
        lr_kl_target=1e-12,
        lr_min=1e-5,
        lr_max=1e-2,
        policy_kwargs=TINY,
        seed=0,
    )
    assert model.adaptive_learning_rate == pytest.approx(1e-3)
    model.learn(256)
    # KL far above the tiny targets: beta doubled after each of the 2 updates; the lr divided by 1.5 after every
    # minibatch (4 per update) except possibly the first of each update, whose KL is 0 up to rounding.
    assert model.kl_penalty.coef == pytest.approx(4.0) and model.kl_coef == 1.0  # beta now; the setting stays
    divisions = np.log(1e-3 / model.adaptive_learning_rate) / np.log(1.5)
    assert divisions == pytest.approx(round(divisions), abs=1e-6) and 6 <= round(divisions) <= 8
    assert model.policy.optimizer.param_groups[0]["lr"] == pytest.approx(model.adaptive_learning_rate)


def test_epoch_cadence_adapts_once_per_epoch():
    model = PPO(
        "MlpPolicy",
        "CartPole-v1",
        n_steps=128,
        batch_size=32,
        n_epochs=3,
        learning_rate=1e-3,
        lr_kl_target=1e-12,
        lr_kl_cadence="epoch",
        policy_kwargs=TINY,
        seed=0,
    )
    model.learn(128)
    assert model.adaptive_learning_rate == pytest.approx(1e-3 / 1.5**3)


@pytest.mark.parametrize(
    "kwargs, names",
    [
        ({"learning_rate": -1e-3}, ["learning_rate", "-0.001"]),
        ({"learning_rate": 0.0}, ["learning_rate"]),
        ({"batch_size": 1}, ["batch_size", "normalize_advantage"]),
        ({"n_epochs": 0}, ["n_epochs"]),
        ({"gamma": 1.5}, ["gamma", "1.5"]),
        ({"clip_range": 0.0}, ["clip_range"]),
        ({"clip_range_vf": -0.1}, ["clip_range_vf"]),
        ({"max_grad_norm": 0}, ["max_grad_norm"]),
        ({"target_kl": -0.1}, ["target_kl"]),
        ({"objective": "klpenalty"}, ["objective", "klpenalty", "did you mean 'kl_penalty'"]),
        ({"kl_penalty_tolerance": 1.0}, ["kl_penalty_tolerance", "> 1.0"]),
        ({"kl_penalty_factor": 0.5}, ["kl_penalty_factor"]),
        ({"kl_coef_min": 1.0, "kl_coef_max": 0.1}, ["kl_coef_min", "kl_coef_max"]),
        ({"kl_coef": 1e6}, ["kl_coef", "<= 100.0"]),
        ({"lr_kl_target": 0.0}, ["lr_kl_target"]),
        ({"lr_kl_target": 0.01, "lr_kl_tolerance": 0.9}, ["lr_kl_tolerance"]),
        ({"lr_kl_target": 0.01, "learning_rate": 0.5}, ["learning_rate", "<= 0.01"]),
        ({"lr_min": 1e-2, "lr_max": 1e-3}, ["lr_min", "lr_max"]),
        ({"lr_kl_cadence": "update"}, ["lr_kl_cadence", "update"]),
        ({"objective": "kl_penalty", "kl_coef": 0.0, "kl_penalty_target": None}, ["neither clipping nor a penalty"]),
    ],
)
def test_bad_hyperparameters_raise_value_error(kwargs, names):
    params = dict(n_steps=64, batch_size=32) | kwargs
    with pytest.raises(ValueError) as error:
        PPO("MlpPolicy", "CartPole-v1", **params)
    for name in names:
        assert name in str(error.value)
    assert isinstance(error.value, AssertionError)  # what SB3's asserts raise: `except AssertionError` still works


@pytest.mark.parametrize(
    "kwargs",
    [
        {"batch_size": 1},  # SB3: "`batch_size` must be greater than 1"
        {"n_steps": 1, "batch_size": 2},  # SB3: "`n_steps * n_envs` must be greater than 1"
        {"clip_range_vf": -0.1},  # SB3: "`clip_range_vf` must be positive"
    ],
)
def test_settings_sb3_asserts_on_raise_assertion_errors_too(kwargs):
    from stable_baselines3 import PPO as SB3PPO

    params = dict(n_steps=64, batch_size=32) | kwargs
    with pytest.raises(AssertionError):
        SB3PPO("MlpPolicy", "CartPole-v1", **params)
    with pytest.raises(AssertionError, match="|".join(kwargs)):
        PPO("MlpPolicy", "CartPole-v1", **params)


def test_integral_floats_are_ints_and_others_are_refused_by_name():
    """YAML gives ``2048.0`` or ``1e3`` for integers: taken as ints; non-integral values and bools are refused."""
    model = PPO(
        "MlpPolicy",
        "Pendulum-v1",
        n_steps=64.0,
        batch_size=32.0,
        n_epochs=2.0,
        use_sde=True,
        sde_sample_freq=4.0,
        stats_window_size=1e1,
        policy_kwargs=TINY,
        seed=0,
    )
    integers = (("n_steps", 64), ("batch_size", 32), ("n_epochs", 2), ("sde_sample_freq", 4), ("_stats_window_size", 10))
    for name, value in integers:
        assert getattr(model, name) == value and type(getattr(model, name)) is int, name
    model.learn(1.28e2)
    assert model.num_timesteps == 128 and model._n_updates == 4
    for name, value in (("n_steps", 64.5), ("batch_size", 32.5), ("n_epochs", True), ("stats_window_size", 10.5)):
        with pytest.raises(ValueError, match=f"{name} must be an integer, got {value!r}"):
            PPO("MlpPolicy", "Pendulum-v1", **(dict(n_steps=64, batch_size=32) | {name: value}))


def _warnings(algorithm, *args, **kwargs) -> list[tuple[type, str]]:
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        algorithm(*args, **kwargs)
    # A ResourceWarning can be any earlier test's file collected by the garbage collector meanwhile: not ours.
    return [(w.category, str(w.message)) for w in caught if not issubclass(w.category, ResourceWarning)]


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(n_steps=50, batch_size=16),  # truncated last minibatch
        dict(n_steps=64, batch_size=32, device="meta"),  # not on the CPU with an MLP policy ("meta": no GPU needed)
        dict(n_steps=64, batch_size=32, policy_kwargs=dict(net_arch=[dict(pi=[8], vf=[8])])),  # pre-1.8 net_arch format
    ],
    ids=["truncated-minibatch", "mlp-off-cpu", "old-net-arch"],
)
def test_sb3_warnings_in_the_same_situations_with_the_same_text(kwargs):
    from stable_baselines3 import PPO as SB3PPO
    from stable_baselines3.common.env_util import make_vec_env

    theirs = _warnings(SB3PPO, "MlpPolicy", make_vec_env("CartPole-v1", n_envs=2), **kwargs)
    ours = _warnings(PPO, "MlpPolicy", make_vec_env("CartPole-v1", n_envs=2), **kwargs)
    assert theirs and ours == theirs


def test_compiled_policy_takes_the_torch_paths():
    """``model.policy = th.compile(model.policy)`` (SB3's docs): an ``OptimizedModule`` that forwards attributes to
    the policy it wraps; neither fast path can mirror it, so both fall back (``tests/test_parity.py`` compares the run
    with SB3's under the default backend)."""
    model = PPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=32, n_epochs=1, policy_kwargs=TINY, seed=0)
    model.policy = th.compile(model.policy, backend="eager")
    assert ActionEvaluator(model.policy).head is None and not NumpyActorCritic.supports(model.policy)
    model.learn(64)
    assert model._n_updates == 1


def test_numpy_actor_only_mirrors_float32_policies():
    model = PPO("MlpPolicy", "Pendulum-v1", policy_kwargs=TINY, seed=0)
    assert NumpyActorCritic.supports(model.policy)
    model.policy.double()
    assert not NumpyActorCritic.supports(model.policy)


def test_progress_bar_runs(monkeypatch):
    pytest.importorskip("tqdm")
    pytest.importorskip("rich")
    from stable_baselines3.common.callbacks import ProgressBarCallback

    steps = []
    on_step = ProgressBarCallback._on_step

    def counting_on_step(self):
        steps.append(self.num_timesteps)
        return on_step(self)

    monkeypatch.setattr(ProgressBarCallback, "_on_step", counting_on_step)
    model = PPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=32, n_epochs=1, policy_kwargs=TINY)
    model.learn(64, progress_bar=True)
    assert steps == list(range(1, 65))  # the bar advanced at every step of the run


def test_sb3_example_code_runs_with_changed_import(tmp_path):
    """SB3's documented workflow (VecNormalize, evaluate_policy, tensorboard, EvalCallback) with only the import changed."""
    pytest.importorskip("tensorboard")
    from stable_baselines3.common.callbacks import EvalCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import VecNormalize

    env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=2, seed=0))
    eval_env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=1, seed=1), training=False, norm_reward=False)
    model = PPO("MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=1, tensorboard_log=str(tmp_path), verbose=0)
    model.learn(
        256, callback=EvalCallback(eval_env, eval_freq=64, n_eval_episodes=1, log_path=str(tmp_path)), tb_log_name="ours"
    )
    mean, _ = evaluate_policy(model, eval_env, n_eval_episodes=2)
    assert np.isfinite(mean)
    assert any(p.name.startswith("ours") for p in tmp_path.iterdir())
    model.save(tmp_path / "model")
    env.save(str(tmp_path / "vecnormalize.pkl"))
    statistics = VecNormalize.load(str(tmp_path / "vecnormalize.pkl"), make_vec_env("Pendulum-v1", n_envs=2))
    loaded = PPO.load(tmp_path / "model", env=statistics)
    loaded.learn(64, reset_num_timesteps=False)
    assert loaded.num_timesteps == 256 + 128  # one more rollout of 64 steps x 2 envs


@pytest.mark.parametrize("n_envs", [1, 4])
def test_gsde_numpy_actions_equal_the_torch_policy(n_envs):
    """gSDE actions are a deterministic function of the exploration matrices: both paths must give the same."""
    model = PPO(
        "MlpPolicy", IdentityEnvBox(-1, 1), use_sde=True, policy_kwargs=dict(net_arch=[32, 32], log_std_init=-1), seed=2
    )
    model.policy.reset_noise(n_envs)
    actor = NumpyActorCritic.from_policy(model.policy)
    obs = np.stack([model.observation_space.sample() for _ in range(n_envs)]).astype(np.float32)
    actions, values, log_probs = actor.act(obs)
    with th.no_grad():
        actions_t, values_t, log_probs_t = model.policy(th.as_tensor(obs))
    np.testing.assert_allclose(actions, actions_t.numpy(), atol=1e-6)
    np.testing.assert_allclose(values, values_t.flatten().numpy(), atol=1e-6)
    np.testing.assert_allclose(log_probs, log_probs_t.numpy(), atol=1e-5)


def test_a_batch_size_above_the_rollout_warns_as_sb3_and_trains_on_the_whole_rollout():
    from stable_baselines3 import PPO as SB3PPO

    with pytest.warns(UserWarning) as ours:
        model = PPO("MlpPolicy", "CartPole-v1", n_steps=16, batch_size=64, n_epochs=2, seed=0)
    with pytest.warns(UserWarning) as sb3:
        SB3PPO("MlpPolicy", "CartPole-v1", n_steps=16, batch_size=64, n_epochs=2, seed=0)
    assert [str(w.message) for w in ours] == [str(w.message) for w in sb3]
    model.learn(32)
    assert model._n_updates == 4  # 2 rollouts x 2 epochs x one minibatch of 16


def test_kl_estimator_says_which_kl_the_update_uses_and_is_not_saved(tmp_path):
    import zipfile

    model = PPO("MlpPolicy", "Pendulum-v1", n_steps=64, batch_size=32, n_epochs=1, policy_kwargs=TINY, seed=0)
    assert model.kl_estimator == "analytic"
    model.save(tmp_path / "model")
    with zipfile.ZipFile(tmp_path / "model.zip") as archive:
        assert '"kl_estimator"' not in archive.read("data").decode()  # read from the policy, not a saved flag
    custom = PPO(
        "MlpPolicy",
        "Pendulum-v1",
        n_steps=64,
        batch_size=32,
        n_epochs=1,
        rollout_buffer_class=CountingBuffer,
        rollout_buffer_kwargs={},
        policy_kwargs=TINY,
        seed=0,
    )
    assert custom.kl_estimator == "k3"  # a user's buffer class: the collecting policy's distribution is unknown


def test_learning_rate_is_set_and_logged_once_as_sb3_does():
    from stable_baselines3 import PPO as SB3PPO

    kwargs = dict(
        n_steps=64, batch_size=16, n_epochs=3, learning_rate=lambda progress: 1e-3 * progress, policy_kwargs=TINY, seed=0
    )
    ours = PPO("MlpPolicy", "CartPole-v1", **kwargs).learn(128)
    theirs = SB3PPO("MlpPolicy", "CartPole-v1", **kwargs).learn(128)
    assert ours.logger.name_to_value["train/learning_rate"] == theirs.logger.name_to_value["train/learning_rate"]
    assert ours.policy.optimizer.param_groups[0]["lr"] == theirs.policy.optimizer.param_groups[0]["lr"]
    adaptive = PPO("MlpPolicy", "CartPole-v1", **(kwargs | dict(learning_rate=1e-3)), lr_kl_target=1e-12).learn(64)
    # The mean of the rates the steps used: 1e-3, then divided by 1.5 after each of the 12 minibatches but the first
    # (its KL is 0) up to the last, whose rate no step used.
    rates = [1e-3 / 1.5 ** max(0, index - 1) for index in range(12)]
    assert adaptive.logger.name_to_value["train/learning_rate"] == pytest.approx(np.mean(rates), rel=1e-6)


def test_direct_evaluation_is_a_switch():
    model = PPO(
        "MlpPolicy", "Pendulum-v1", n_steps=64, batch_size=32, n_epochs=1, direct_evaluation=False, policy_kwargs=TINY, seed=0
    ).learn(64)
    assert model.update_loss.evaluator.head is None  # policy.evaluate_actions, as SB3
    model.direct_evaluation = True
    model.learn(64)
    assert model.update_loss.evaluator.head == "gaussian"
    with pytest.raises(ValueError, match="direct_evaluation must be True or False, got 'no'"):
        PPO("MlpPolicy", "Pendulum-v1", n_steps=64, batch_size=32, direct_evaluation="no")


#: The folder of the shared libraries a numpy wheel bundles (its BLAS among them).
NUMPY_LIBS = f"{os.sep}numpy.libs{os.sep}"


def numpy_blas_threads() -> set[int]:
    """The thread limits of numpy's own BLAS: what the numpy actor's products run on. Another library's BLAS (scipy's,
    loaded by an earlier test in the same process) is left as it is."""
    pools = threadpoolctl.threadpool_info()
    return {pool["num_threads"] for pool in pools if pool["user_api"] == "blas" and NUMPY_LIBS in pool["filepath"]}


def test_the_numpy_actor_collects_with_one_blas_thread():
    """numpy's BLAS runs on one thread while the numpy actor collects (its idle threads would spin on the cores that
    envs in other processes step on), and gets its previous limit back for the update and after learning."""

    class RecordBlasThreads(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.during_collection: set[int] = set()

        def _on_step(self) -> bool:
            self.during_collection |= numpy_blas_threads()
            return True

    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        assert numpy_blas_threads() == {2}  # numpy's BLAS is loaded: the check below can fail
        model = PPO("MlpPolicy", "Pendulum-v1", n_steps=64, batch_size=64, n_epochs=1, seed=0)
        assert NumpyActorCritic.supports(model.policy)
        recorder = RecordBlasThreads()
        model.learn(128, callback=recorder)
        assert recorder.during_collection == {1}
        assert numpy_blas_threads() == {2}


def test_one_blas_thread_holds_until_the_last_rollout_leaves():
    """Rollouts that overlap (``optimize --n-jobs`` trials in threads): the first to enter limits numpy's BLAS, the
    last to leave restores it, whatever the order they leave in."""
    from sb3_ppo_ext.ppo.numpy_policy import one_blas_thread

    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        first, second = one_blas_thread(), one_blas_thread()
        first.__enter__()
        second.__enter__()
        first.__exit__(None, None, None)
        assert numpy_blas_threads() == {1}  # the second rollout is still collecting
        second.__exit__(None, None, None)
        assert numpy_blas_threads() == {2}
