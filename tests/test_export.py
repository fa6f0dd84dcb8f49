"""Export of the deterministic policy to ONNX and TorchScript, checked against model.predict."""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

from sb3_ppo_ext import PPO
from sb3_ppo_ext.callbacks import ExportPolicyCallback
from sb3_ppo_ext.callbacks.export import export_onnx, export_torchscript

ort = pytest.importorskip("onnxruntime")

th.set_num_threads(1)
TINY = {"net_arch": [16]}


def _trained(env_id: str, steps: int = 128, **kwargs) -> tuple[PPO, VecNormalize]:
    env = VecNormalize(make_vec_env(env_id, n_envs=2, seed=0), clip_obs=2.0)
    kwargs.setdefault("policy_kwargs", TINY)
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=32, n_epochs=1, seed=0, **kwargs)
    model.learn(steps)
    return model, env


def _raw_observations(model: PPO, count: int = 64) -> np.ndarray:
    """Observations spread widely enough that some normalised values hit clip_obs and some actions hit the bounds."""
    rng = np.random.default_rng(1)
    shape = model.observation_space.shape
    assert shape is not None
    return (rng.normal(size=(count, *shape)) * 3.0).astype(np.float32)


def _reference_actions(model: PPO, env: VecNormalize, raw: np.ndarray) -> np.ndarray:
    actions, _ = model.predict(env.normalize_obs(raw), deterministic=True)
    return actions


def _onnx_actions(path: str, raw: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return session.run(["action"], {"obs": raw})[0]


@pytest.mark.parametrize(
    ("env_id", "kwargs"),
    [
        ("Pendulum-v1", {}),
        ("CartPole-v1", {}),
        ("Pendulum-v1", {"use_sde": True}),
        ("Pendulum-v1", {"use_sde": True, "policy_kwargs": {"net_arch": [16], "squash_output": True}}),
    ],
    ids=["box", "discrete", "gsde", "gsde-squashed"],
)
def test_onnx_matches_predict_on_normalised_clipped_observations(tmp_path, env_id, kwargs):
    model, env = _trained(env_id, **kwargs)
    weight = model.policy.action_net.weight
    with th.no_grad():  # large action outputs, so that Box actions hit the bounds
        weight.copy_(3.0 * th.randn(weight.shape, generator=th.Generator().manual_seed(0)))
    raw = _raw_observations(model)
    assert np.abs(env.normalize_obs(raw)).max() == pytest.approx(2.0)  # the clip is exercised
    path = export_onnx(model, str(tmp_path / "policy.onnx"), vecnormalize=env)
    expected = _reference_actions(model, env, raw)
    got = _onnx_actions(path, raw)
    assert got.shape == expected.shape
    if env_id == "CartPole-v1":
        np.testing.assert_array_equal(got, expected)
    else:
        np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)
        low, high = model.action_space.low, model.action_space.high
        assert np.all(got >= low) and np.all(got <= high)
        if not kwargs.get("policy_kwargs", {}).get("squash_output"):
            assert np.any(got == high) and np.any(got == low)  # clipping is exercised


def test_torchscript_matches_predict(tmp_path):
    model, env = _trained("Pendulum-v1")
    raw = _raw_observations(model)
    path = export_torchscript(model, str(tmp_path / "policy.pt"), vecnormalize=env)
    loaded = th.jit.load(path)
    got = loaded(th.as_tensor(raw)).numpy()
    np.testing.assert_allclose(got, _reference_actions(model, env, raw), atol=1e-5, rtol=0)


def test_vecnormalize_defaults_to_the_model_env_and_accepts_a_saved_pickle(tmp_path):
    model, env = _trained("Pendulum-v1")
    raw = _raw_observations(model)
    expected = _reference_actions(model, env, raw)
    default = export_onnx(model, str(tmp_path / "default.onnx"))
    np.testing.assert_allclose(_onnx_actions(default, raw), expected, atol=1e-5, rtol=0)
    env.save(str(tmp_path / "stats.pkl"))
    from_file = export_onnx(model, str(tmp_path / "file.onnx"), vecnormalize=str(tmp_path / "stats.pkl"))
    np.testing.assert_allclose(_onnx_actions(from_file, raw), expected, atol=1e-5, rtol=0)


def test_export_without_vecnormalize_matches_predict_on_raw_observations(tmp_path):
    model = PPO("MlpPolicy", "Pendulum-v1", n_steps=32, batch_size=32, n_epochs=1, policy_kwargs=TINY, seed=0)
    model.learn(64)
    raw = _raw_observations(model)
    path = export_onnx(model, str(tmp_path / "policy.onnx"))
    expected, _ = model.predict(raw, deterministic=True)
    np.testing.assert_allclose(_onnx_actions(path, raw), expected, atol=1e-5, rtol=0)


def test_export_callback_writes_both_formats_at_training_end(tmp_path):
    env = VecNormalize(make_vec_env("CartPole-v1", n_envs=1, seed=0))
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=32, n_epochs=1, policy_kwargs=TINY, seed=0)
    callback = ExportPolicyCallback(str(tmp_path / "export"), formats="onnx,torchscript", name="cartpole")
    model.learn(64, callback=callback)
    onnx_path = tmp_path / "export" / "cartpole.onnx"
    assert sorted(os.listdir(tmp_path / "export")) == ["cartpole.onnx", "cartpole.pt"]
    raw = _raw_observations(model)
    np.testing.assert_array_equal(_onnx_actions(str(onnx_path), raw), _reference_actions(model, env, raw))


def test_bad_export_inputs(tmp_path):
    model = PPO("MlpPolicy", "CartPole-v1", n_steps=32, batch_size=32, policy_kwargs=TINY)
    with pytest.raises(ValueError, match="vecnormalize"):
        export_onnx(model, str(tmp_path / "p.onnx"), vecnormalize=str(tmp_path / "missing.pkl"))
    with pytest.raises(ValueError, match="vecnormalize"):
        export_onnx(model, str(tmp_path / "p.onnx"), vecnormalize=42)
    with pytest.raises(ValueError, match="path"):
        export_onnx(model, str(tmp_path / "no_such_dir" / "p.onnx"))
    (tmp_path / "a_file").write_text("not a folder")
    with pytest.raises(ValueError, match="output_dir must be a folder that can be written"):
        ExportPolicyCallback(str(tmp_path / "a_file" / "export"))
    with pytest.raises(ValueError, match="formats"):
        ExportPolicyCallback(str(tmp_path), formats="onnx,tflite")
    with pytest.raises(ValueError, match="formats"):
        ExportPolicyCallback(str(tmp_path), formats="")


def test_export_callback_fails_at_creation_without_onnx(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_onnx(name, *args, **kwargs):
        if name == "onnx" or name.startswith("onnx."):
            raise ImportError("No module named 'onnx'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_onnx)
    monkeypatch.delitem(__import__("sys").modules, "onnx", raising=False)
    with pytest.raises(ImportError, match=r"sb3-ppo-ext\[export\]"):
        ExportPolicyCallback(str(tmp_path), formats="onnx")
    ExportPolicyCallback(str(tmp_path), formats="torchscript")  # TorchScript needs only torch


class _BoxAndDiscreteObservations(gym.Env):
    """A Dict observation with a vector and a Discrete key (one-hot encoded by the policy's preprocessing)."""

    def __init__(self):
        from gymnasium import spaces

        self.observation_space = spaces.Dict({"position": spaces.Box(-5, 5, (3,)), "mode": spaces.Discrete(4)})
        self.action_space = spaces.Box(-1, 1, (2,))

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), float(np.sum(action)), False, False, {}


@pytest.mark.parametrize("env_class", [_BoxAndDiscreteObservations, "SimpleMultiObsEnv"], ids=["box-discrete", "image-vector"])
def test_dict_observations_export_one_input_per_key(tmp_path, env_class):
    from gymnasium.wrappers import TimeLimit
    from stable_baselines3.common.envs import SimpleMultiObsEnv

    make = SimpleMultiObsEnv if env_class == "SimpleMultiObsEnv" else env_class
    normalized_key = "vec" if env_class == "SimpleMultiObsEnv" else "position"
    env = VecNormalize(
        make_vec_env(lambda: TimeLimit(make(), 50), n_envs=2, seed=0), norm_obs_keys=[normalized_key], clip_obs=2.0
    )
    model = PPO("MultiInputPolicy", env, n_steps=32, batch_size=32, n_epochs=1, policy_kwargs=TINY, seed=0)
    model.learn(64)
    space = model.observation_space
    space.seed(2)  # the same inputs every run
    rng = np.random.default_rng(2)
    raw = {key: np.stack([sub.sample() for _ in range(16)]).astype(np.float32) for key, sub in space.spaces.items()}
    raw[normalized_key] = (rng.normal(size=raw[normalized_key].shape) * 3.0).astype(np.float32)  # some hit clip_obs
    expected, _ = model.predict(env.normalize_obs(raw), deterministic=True)
    onnx_path = export_onnx(model, str(tmp_path / "policy.onnx"))
    session = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    assert [node.name for node in session.get_inputs()] == list(space.spaces)
    exported = session.run(["action"], raw)[0]
    if isinstance(model.action_space, gym.spaces.Discrete):
        # An argmax flips between two float computations only where the two best logits (nearly) tie: compare the rows
        # where the best action is clear.
        with th.no_grad():
            observations, _ = model.policy.obs_to_tensor(env.normalize_obs(raw))
            logits = model.policy.get_distribution(observations).distribution.logits
        best_two = logits.topk(2, dim=1).values
        clear = (best_two[:, 0] - best_two[:, 1] > 1e-4).numpy()
        assert clear.sum() >= 12
        exported, expected = exported[clear], expected[clear]
    np.testing.assert_allclose(exported, expected, atol=1e-5, rtol=0)
    scripted = th.jit.load(export_torchscript(model, str(tmp_path / "policy.pt")))
    with th.no_grad():
        actions = scripted(*(th.as_tensor(raw[key]) for key in space.spaces)).numpy()
    np.testing.assert_allclose(actions, expected, atol=1e-5, rtol=0)


class _OnnxableSB3Policy(th.nn.Module):
    """The wrapper of SB3's "Export to ONNX" recipe (``docs/guide/export.rst`` of SB3's repository): actions, values
    and log-probabilities."""

    def __init__(self, policy: th.nn.Module) -> None:
        super().__init__()
        self.policy = policy

    def forward(self, observation: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        return self.policy(observation, deterministic=True)


def test_sb3_documented_recipe_exports_with_the_export_extra(tmp_path):
    """SB3's recipe, ``th.onnx.export(policy, dummy_input, path, opset_version=17, input_names=["input"])``, with the
    exporter torch >= 2.9 uses by default: it needs onnxscript (in the ``[export]`` extra), and it cannot trace the
    argument checks of ``torch.distributions``, which are therefore off while it exports (``dynamo=False``, the
    TorchScript-based exporter ``export_onnx`` uses, needs neither)."""
    import onnx

    model = PPO("MlpPolicy", "Pendulum-v1", n_steps=32, batch_size=32, policy_kwargs=TINY, seed=0, device="cpu")
    path = str(tmp_path / "my_ppo_model.onnx")
    dummy_input = th.randn(1, *model.observation_space.shape)
    validate_args = th.distributions.Distribution._validate_args
    th.distributions.Distribution.set_default_validate_args(False)
    try:
        th.onnx.export(_OnnxableSB3Policy(model.policy), dummy_input, path, opset_version=17, input_names=["input"])
    finally:
        th.distributions.Distribution.set_default_validate_args(validate_args)
    onnx.checker.check_model(onnx.load(path))
    observation = np.zeros((1, *model.observation_space.shape), dtype=np.float32)
    actions, values, _ = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"input": observation})
    with th.no_grad():
        expected_actions, expected_values, _ = model.policy(th.as_tensor(observation), deterministic=True)
    np.testing.assert_allclose(actions, expected_actions.numpy(), atol=1e-5)
    np.testing.assert_allclose(values, expected_values.numpy(), atol=1e-5)
