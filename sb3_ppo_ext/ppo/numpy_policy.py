"""A numpy copy of a standard SB3 ``ActorCriticPolicy`` for acting during rollout collection.

Why: collecting one step with the torch policy costs about 0.3-0.5 ms of eager dispatch (feature extraction,
two MLPs, a ``torch.distributions`` object with argument validation, sampling, log-prob), which is as much as a
PyBullet step. The same maths on a handful of small float32 numpy arrays costs a few tens of microseconds. The
weights do not change during a rollout, so they are copied once per rollout.

Measured gain: ``python benchmarks/bench_ppo.py --config default --ablation --no-sb3 --repeats 5`` (SB3's defaults
on Walker2D-v0: 1 env, 64x64 MLP, one torch thread; idle 2-core machine, 2026-12-02): the whole training loop runs
1.50x as many env steps per CPU second with it as without it (1420 against 946), collection's policy and loop time
falling from 0.48 to 0.12 ms per env step.

Only the standard building blocks are mirrored (``FlattenExtractor``, ``MlpExtractor`` with common activations,
float32 weights, Gaussian / gSDE / categorical / multi-categorical / Bernoulli heads, each family's maths from
:mod:`~sb3_ppo_ext.ppo.distributions`); :meth:`NumpyActorCritic.from_policy`
returns ``None`` for anything else and the algorithm then collects with the torch policy, exactly as SB3 does.

Same seed, same actions: the randomness comes from torch's global generator on the policy's device, drawn exactly as
SB3's ``policy(obs)`` draws it (same calls, shapes and order), and only the arithmetic around it runs in numpy:

- Gaussian (``Normal.rsample``): ``mean + eps * std`` with ``eps = torch.empty(shape).normal_()``.
- gSDE: no draw per step (the exploration matrices come from ``policy.reset_noise``, in torch).
- categorical (``Categorical.sample`` is ``torch.multinomial(probs, 1)``, which draws ``q ~ Exp(1)`` of the shape of
  ``probs`` and returns ``argmax(probs / q)``): the same ``q`` and argmax, one draw per sub-action for multi-categorical.
- Bernoulli (``torch.bernoulli(probs)``): the same call on the numpy probabilities.

So the actions equal the torch policy's up to float32 rounding of the network's outputs (numpy's and torch's matmuls
sum in different orders): Gaussian actions differ in the last bits, and a discrete action can differ only where the
drawn noise falls within that rounding of a category boundary (no such case in 4 x 10^6 draws of each discrete head).
Log-probabilities and values equal the torch policy's to float32 rounding.

What it guards: numpy's BLAS threads (:func:`one_blas_thread`). The actor's matrix products are a few dozen rows,
too small for threads to pay, yet OpenBLAS runs them on one thread per core and the idle threads then spin for a
while, taking a core from envs that step in other processes. ``sb3-ppo-ext train`` with the Humanoid block (64 envs,
SharedMemoryVecEnv, idle 2-core machine, 2026-12-03) logged 1790-1799 fps with numpy's default of two BLAS threads
against 3389 with ``OMP_NUM_THREADS=1`` and 3459 with ``OPENBLAS_NUM_THREADS=1`` (the envs in the driver alone: 1803-1849
either way), so collection runs with one BLAS thread.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.distributions import (
    BernoulliDistribution,
    CategoricalDistribution,
    DiagGaussianDistribution,
    MultiCategoricalDistribution,
    StateDependentNoiseDistribution,
)
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.preprocessing import is_image_space
from stable_baselines3.common.torch_layers import FlattenExtractor, MlpExtractor
from threadpoolctl import ThreadpoolController
from torch import nn

from sb3_ppo_ext.ppo.distributions import (
    bernoulli_log_prob_numpy,
    bernoulli_probs_numpy,
    categorical_log_probs_numpy,
    gaussian_log_prob_numpy,
    gsde_std_numpy,
    split_logits_numpy,
)

Layer = tuple[np.ndarray, np.ndarray, Callable[[np.ndarray], np.ndarray] | None]


@functools.cache
def _threadpools() -> ThreadpoolController:
    """The thread pools of the native libraries loaded in this process (found once, at the first rollout: about 1 ms).
    numpy's BLAS is among them, as numpy is loaded by then; a library loaded later (scipy's own BLAS) is not limited,
    and the actor's products do not run on it."""
    return ThreadpoolController()


class _OneBlasThread:
    """numpy's BLAS on one thread while at least one rollout of this process is inside (the limit is process-wide:
    ``optimize --n-jobs`` runs trials in threads, so the first to enter sets it and the last to leave restores it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inside = 0
        self._limiter: Any = None

    def __enter__(self) -> None:
        with self._lock:
            if self._inside == 0:
                self._limiter = _threadpools().limit(limits=1, user_api="blas")
            self._inside += 1

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:
            self._inside -= 1
            if self._inside == 0:
                self._limiter.restore_original_limits()
                self._limiter = None


_ONE_BLAS_THREAD = _OneBlasThread()


def one_blas_thread() -> AbstractContextManager[None]:
    """A context in which numpy's BLAS (OpenBLAS, MKL, BLIS) runs on one thread, its previous limits restored when the
    last rollout in it leaves (threadpoolctl; about 15 microseconds to enter and leave): for a whole rollout of the
    numpy actor, whose small matrix products threads only slow down (see the module's docstring)."""
    return _ONE_BLAS_THREAD


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0, out=x)


def _tanh(x: np.ndarray) -> np.ndarray:
    return np.tanh(x, out=x)


def _activation(module: nn.Module) -> Callable[[np.ndarray], np.ndarray] | None:
    """The numpy twin of a torch activation module; raises ``KeyError`` when there is none here."""
    if type(module) is nn.Tanh:
        return _tanh
    if type(module) is nn.ReLU:
        return _relu
    if type(module) is nn.ELU:
        alpha = module.alpha
        return lambda x: np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0.0))).astype(np.float32, copy=False)
    if type(module) is nn.LeakyReLU:
        slope = module.negative_slope
        return lambda x: np.where(x > 0, x, slope * x).astype(np.float32, copy=False)
    if type(module) is nn.SiLU:
        return lambda x: x / (1.0 + np.exp(-x))
    if type(module) is nn.Identity:
        return None
    raise KeyError(type(module).__name__)


def _mlp_layers(sequential: nn.Sequential) -> list[Layer]:
    """Linear layers of ``sequential`` with the activation after each, as float32 numpy arrays."""
    layers: list[Layer] = []
    for module in sequential:
        if type(module) is nn.Linear:
            weight = module.weight.detach().cpu().numpy().T.astype(np.float32).copy()
            bias = module.bias.detach().cpu().numpy().astype(np.float32).copy()
            layers.append((weight, bias, None))
        else:
            if not layers or layers[-1][2] is not None:
                raise KeyError(type(module).__name__)
            weight, bias, _ = layers[-1]
            layers[-1] = (weight, bias, _activation(module))
    return layers


def _forward(layers: list[Layer], x: np.ndarray) -> np.ndarray:
    for weight, bias, activation in layers:
        x = x @ weight
        x += bias
        if activation is not None:
            x = activation(x)
    return x


def _joint_layers(actor: list[Layer], critic: list[Layer], max_width: int = 128) -> list[Layer] | None:
    """Actor and critic MLPs (heads included) as one MLP of twice the width: the first layer's weights side by
    side (both read the features), the later ones block-diagonal, so that one matmul serves both networks (at a
    few rows, each numpy call costs far more than its arithmetic). The zero blocks add exact zeros.

    ``None`` when the two differ in depth or in an activation, or when a hidden layer is wider than
    ``max_width``: then the zero blocks' arithmetic would cost more than the calls it saves."""
    if len(actor) != len(critic) or any(a[2] is not c[2] for a, c in zip(actor, critic, strict=True)):
        return None
    if any(layer[0].shape[1] > max_width for layer in actor[:-1] + critic[:-1]):
        return None
    joint: list[Layer] = []
    pairs = enumerate(zip(actor, critic, strict=True))
    for index, ((actor_weight, actor_bias, activation), (critic_weight, critic_bias, _)) in pairs:
        if index == 0:
            weight = np.concatenate([actor_weight, critic_weight], axis=1)
        else:
            shape = (actor_weight.shape[0] + critic_weight.shape[0], actor_weight.shape[1] + critic_weight.shape[1])
            weight = np.zeros(shape, dtype=np.float32)
            weight[: actor_weight.shape[0], : actor_weight.shape[1]] = actor_weight
            weight[actor_weight.shape[0] :, actor_weight.shape[1] :] = critic_weight
        joint.append((weight, np.concatenate([actor_bias, critic_bias]), activation))
    return joint


class NumpyActorCritic:
    """Float32 numpy mirror of a standard ``ActorCriticPolicy``, refreshed at the start of each rollout.

    :param policy: the torch policy to mirror (read only).
    """

    def __init__(self, policy: ActorCriticPolicy) -> None:
        self.policy = policy
        self.device = policy.device  # where SB3's policy draws its noise: that device's generator
        self._noise_buffers: dict[tuple[int, ...], tuple[th.Tensor, np.ndarray | None]] = {}
        extractor = policy.mlp_extractor
        self.pi_layers = _mlp_layers(extractor.policy_net)
        self.vf_layers = _mlp_layers(extractor.value_net)
        self.action_layer = _mlp_layers(nn.Sequential(policy.action_net))
        self.value_layer = _mlp_layers(nn.Sequential(policy.value_net))
        self.joint_layers = _joint_layers(self.pi_layers + self.action_layer, self.vf_layers + self.value_layer)
        self.n_action_params = self.action_layer[0][0].shape[1]
        self.pi_width = self.pi_layers[-1][0].shape[1] if self.pi_layers else None
        self.action_dist: Any = policy.action_dist  # one of the kinds :meth:`supports` lists, each read for its attributes
        self.action_shape: tuple[int, ...] = policy.action_space.shape or ()
        # SB3's preprocessing: Discrete observations are one-hot encoded, MultiDiscrete ones are concatenated one-hots.
        observation_space = policy.observation_space
        self.one_hot_offsets: np.ndarray | None = None
        if isinstance(observation_space, spaces.Discrete):
            self.one_hot_offsets = np.array([-observation_space.start])
            self.one_hot_size = int(observation_space.n)
        elif isinstance(observation_space, spaces.MultiDiscrete):
            sizes = observation_space.nvec.reshape(-1)
            self.one_hot_offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]) - observation_space.start.reshape(-1)
            self.one_hot_size = int(sizes.sum())
        self.std: np.ndarray | None = None
        self.sde_std: np.ndarray | None = None
        if isinstance(self.action_dist, DiagGaussianDistribution):
            # DiagGaussianDistribution's scale, exp(log_std), computed by torch (once per rollout) so that the actions'
            # mean + noise * scale has SB3's operands.
            with th.no_grad():
                self.std = policy.log_std.exp().cpu().numpy()
            self.log_std = policy.log_std.detach().cpu().numpy()
        elif isinstance(self.action_dist, StateDependentNoiseDistribution):
            with th.no_grad():
                self.sde_std = self.action_dist.get_std(policy.log_std).cpu().numpy().astype(np.float32)
            self.refresh_noise()

    @staticmethod
    def supports(policy: ActorCriticPolicy) -> bool:
        """Whether ``policy`` is built only from the blocks this class mirrors exactly."""
        cls = type(policy)
        base = ActorCriticPolicy
        if not isinstance(policy, base) or any(
            getattr(cls, name) is not getattr(base, name)
            for name in ("forward", "extract_features", "_get_action_dist_from_latent", "predict_values")
        ):
            return False
        if type(policy.mlp_extractor) is not MlpExtractor:
            return False
        extractors = [policy.features_extractor, policy.pi_features_extractor, policy.vf_features_extractor]
        if any(type(extractor) is not FlattenExtractor for extractor in extractors):
            return False
        observation_space = policy.observation_space
        if not isinstance(observation_space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)):
            return False
        if is_image_space(observation_space, check_channels=False) and policy.normalize_images:
            return False
        dist = policy.action_dist
        if type(dist) not in (
            DiagGaussianDistribution,
            CategoricalDistribution,
            MultiCategoricalDistribution,
            BernoulliDistribution,
            StateDependentNoiseDistribution,
        ):
            return False
        if isinstance(dist, StateDependentNoiseDistribution) and dist.bijector is not None:
            return False
        if policy.squash_output:
            return False
        if any(parameter.dtype != th.float32 for parameter in policy.parameters()):
            return False  # the mirror computes in float32; SB3 would also draw float64 noise
        try:
            _mlp_layers(policy.mlp_extractor.policy_net)
            _mlp_layers(policy.mlp_extractor.value_net)
        except KeyError:
            return False
        return type(policy.action_net) is nn.Linear and type(policy.value_net) is nn.Linear

    @classmethod
    def from_policy(cls, policy: ActorCriticPolicy) -> NumpyActorCritic | None:
        """A mirror of ``policy``, or ``None`` when the policy uses a block not mirrored here."""
        return cls(policy) if cls.supports(policy) else None

    def _draw(self, shape: tuple[int, ...], fill: Callable[[th.Tensor], th.Tensor]) -> np.ndarray:
        """``fill`` (an in-place sampler such as ``Tensor.normal_``) applied to a float32 tensor of ``shape`` on the
        policy's device, as a numpy array. The tensor is kept and refilled at the next draw of that shape (what a draw
        gives depends on the shape and the generator, not on the tensor it fills); on the CPU its numpy view is kept
        too, so a draw costs only the sampling. The array is valid until the next draw of that shape."""
        buffers = self._noise_buffers.get(shape)
        if buffers is None:
            tensor = th.empty(shape, dtype=th.float32, device=self.device)
            buffers = self._noise_buffers[shape] = (tensor, tensor.numpy() if tensor.device.type == "cpu" else None)
        tensor, view = buffers
        fill(tensor)
        return view if view is not None else tensor.cpu().numpy()

    def _standard_normal(self, shape: tuple[int, ...]) -> np.ndarray:
        """``torch.distributions.utils._standard_normal``: the noise of ``Normal.rsample``, from torch's generator."""
        return self._draw(shape, th.Tensor.normal_)

    def _sample_categorical(self, log_probs: np.ndarray) -> np.ndarray:
        """One category per row, as ``torch.multinomial(probs, 1, replacement=True)`` draws it: ``argmax(probs / q)``
        with ``q = torch.empty_like(probs).exponential_()`` (the same draw from torch's generator)."""
        exponential = self._draw(log_probs.shape, th.Tensor.exponential_)
        return np.argmax(np.exp(log_probs) / exponential, axis=-1)

    def _sample_bernoulli(self, probs: np.ndarray) -> np.ndarray:
        """``torch.bernoulli(probs)`` (which fills ``empty_like(probs)`` with ``bernoulli_(probs)``)."""
        probs_tensor = th.from_numpy(probs).to(self.device)
        return self._draw(probs.shape, lambda tensor: tensor.bernoulli_(probs_tensor)).copy()

    def refresh_noise(self) -> None:
        """Copy gSDE's exploration matrices after ``policy.reset_noise()`` resampled them."""
        dist = self.action_dist
        self.exploration_mat = dist.exploration_mat.detach().cpu().numpy().astype(np.float32)
        self.exploration_matrices = dist.exploration_matrices.detach().cpu().numpy().astype(np.float32)

    def _features(self, observation: np.ndarray) -> np.ndarray:
        if self.one_hot_offsets is not None:
            n = len(observation)
            columns = np.asarray(observation, dtype=np.int64).reshape(n, -1) + self.one_hot_offsets
            features = np.zeros((n, self.one_hot_size), dtype=np.float32)
            features[np.arange(n)[:, None], columns] = 1.0
            return features
        return np.asarray(observation, dtype=np.float32).reshape(len(observation), -1)

    def predict_values(self, observation: np.ndarray) -> np.ndarray:
        """State values, shape ``(n,)``."""
        latent_vf = _forward(self.vf_layers, self._features(observation))
        return _forward(self.value_layer, latent_vf).reshape(-1)

    def act(self, observation: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sample actions for a batch of observations.

        :return: actions (shaped like the torch policy's), values ``(n,)`` and log-probabilities ``(n,)``.
        """
        features = self._features(observation)
        if self.joint_layers is not None:
            hidden = _forward(self.joint_layers[:-1], features)
            latent_pi = hidden[:, : self.pi_width] if self.pi_width is not None else features
            outputs = _forward(self.joint_layers[-1:], hidden)
            params, values = outputs[:, : self.n_action_params], outputs[:, self.n_action_params]
        else:
            latent_pi = _forward(self.pi_layers, features)
            values = _forward(self.value_layer, _forward(self.vf_layers, features)).reshape(-1)
            params = _forward(self.action_layer, latent_pi)
        n = len(features)
        dist = self.action_dist
        if self.std is not None:
            noise = self._standard_normal(params.shape)
            actions = params + noise * self.std  # Normal.rsample: loc + eps * scale
            log_probs = gaussian_log_prob_numpy(noise, self.log_std)
        elif self.sde_std is not None:
            std = gsde_std_numpy(latent_pi, self.sde_std, dist.epsilon)
            if n == 1 or n != len(self.exploration_matrices):
                noise = latent_pi @ self.exploration_mat
            else:
                noise = np.einsum("bi,bij->bj", latent_pi, self.exploration_matrices)
            actions = params + noise
            log_probs = gaussian_log_prob_numpy(noise / std, np.log(std))
        elif isinstance(dist, CategoricalDistribution):
            log_p = categorical_log_probs_numpy(params)
            actions = self._sample_categorical(log_p)
            log_probs = log_p[np.arange(n), actions]
        elif isinstance(dist, MultiCategoricalDistribution):
            columns, log_probs = [], np.zeros(n, dtype=np.float32)
            for logits in split_logits_numpy(params, dist.action_dims):
                log_p = categorical_log_probs_numpy(logits)
                choice = self._sample_categorical(log_p)
                log_probs += log_p[np.arange(n), choice]
                columns.append(choice)
            actions = np.stack(columns, axis=1)
        else:  # Bernoulli
            actions = self._sample_bernoulli(bernoulli_probs_numpy(params))
            log_probs = bernoulli_log_prob_numpy(params, actions)
        actions = actions.reshape((-1, *self.action_shape))
        return actions, values.astype(np.float32, copy=False), log_probs.astype(np.float32, copy=False)
