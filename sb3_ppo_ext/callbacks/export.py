"""Export of the deterministic policy, with observation normalisation and action post-processing baked in, as
functions (:func:`export_onnx`, :func:`export_torchscript`) and as an end-of-training callback.

The exported graph maps a batch of raw observations to the actions ``model.predict(normalize_obs(obs),
deterministic=True)`` returns: ``VecNormalize``'s ``clip((obs - mean) / sqrt(var + eps), -clip_obs, clip_obs)``,
the policy network, the distribution's mode, then for ``Box`` actions either the rescaling of a squashed policy to
the bounds or clipping to the bounds.
"""

from __future__ import annotations

import os
import pickle
import warnings
from typing import Any, cast

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.distributions import (
    BernoulliDistribution,
    CategoricalDistribution,
    DiagGaussianDistribution,
    MultiCategoricalDistribution,
    StateDependentNoiseDistribution,
)
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
from stable_baselines3.common.vec_env import VecNormalize, unwrap_vec_normalize

from sb3_ppo_ext.callbacks._dependencies import require_module
from sb3_ppo_ext.files import atomic_path, check_writable_dir
from sb3_ppo_ext.safe_loading import VecNormalizeStatistics, read_vecnormalize_statistics
from sb3_ppo_ext.validation import MIN_ONNX_OPSET, check_int

_MODES = {
    DiagGaussianDistribution: "mean",
    StateDependentNoiseDistribution: "mean",
    CategoricalDistribution: "argmax",
    MultiCategoricalDistribution: "multi_argmax",
    BernoulliDistribution: "sign",
}


def newest_onnx_opset() -> int | None:
    """The newest ONNX opset an exported policy can have: the newest the installed onnx knows
    (``onnx.defs.onnx_opset_version()``), and no newer than torch's ONNX exporter writes (it fails on a newer one);
    ``None`` without onnx (the export then asks for it)."""
    try:
        import onnx  # the export extra
    except ImportError:
        return None
    newest = int(onnx.defs.onnx_opset_version())
    constants = getattr(th.onnx, "_constants", None)  # torch names its exporter's newest opset only there
    return min(newest, int(getattr(constants, "ONNX_MAX_OPSET", newest)))


def check_onnx_opset(name: str, value: Any) -> int:
    """Check an ONNX opset: an integer from :data:`MIN_ONNX_OPSET` to :func:`newest_onnx_opset`, and return it."""
    return check_int(
        name,
        value,
        minimum=MIN_ONNX_OPSET,
        maximum=newest_onnx_opset(),
        limit="the newest the installed onnx and torch write",
    )


class DeterministicPolicy(th.nn.Module):
    """``raw observation -> action`` of an SB3 actor-critic policy, as a traceable module.

    Called with one tensor per observation, or, for a ``Dict`` observation space, one tensor per key in the space's
    key order (:attr:`input_names`).

    :param policy: the trained ``ActorCriticPolicy`` (its modules are shared, not copied).
    :param obs_mean: ``VecNormalize`` observation mean (for a ``Dict`` space: a dict over the normalised keys), or
        ``None`` for no normalisation.
    :param obs_var: ``VecNormalize`` observation variance, shaped like ``obs_mean``.
    :param epsilon: ``VecNormalize.epsilon``.
    :param clip_obs: ``VecNormalize.clip_obs``.
    """

    def __init__(
        self,
        policy: ActorCriticPolicy,
        obs_mean: np.ndarray | dict[str, np.ndarray] | None = None,
        obs_var: np.ndarray | dict[str, np.ndarray] | None = None,
        epsilon: float = 1e-8,
        clip_obs: float = 10.0,
    ) -> None:
        super().__init__()
        check_exportable(policy)
        self.policy = policy
        self.mode = _MODES[type(policy.action_dist)]
        space = policy.observation_space
        self.keys: list[str] | None = list(space.spaces) if isinstance(space, spaces.Dict) else None
        #: The graph's input names: ``obs``, or the observation keys.
        self.input_names = list(self.keys) if self.keys is not None else ["obs"]
        #: Positions of the inputs that are normalised.
        self.normalized: list[int] = []
        if obs_mean is not None:
            if obs_var is None:
                raise ValueError("obs_var must be given with obs_mean, got None")
            # Keyed by observation key (Dict spaces) or by None (the one array of other spaces).
            means: dict[Any, np.ndarray] = obs_mean if isinstance(obs_mean, dict) else {None: obs_mean}
            variances: dict[Any, np.ndarray] = obs_var if isinstance(obs_var, dict) else {None: obs_var}
            for position, key in enumerate(self.keys if self.keys is not None else [None]):
                if key in means:
                    self.register_buffer(f"obs_mean_{position}", th.as_tensor(means[key], dtype=th.float32))
                    std = th.sqrt(th.as_tensor(variances[key], dtype=th.float64) + epsilon).float()
                    self.register_buffer(f"obs_std_{position}", std)
                    self.normalized.append(position)
        self.clip_obs = float(clip_obs)
        # gSDE with squash_output=True applies tanh in the distribution; predict() then rescales [-1, 1] to the bounds.
        self.tanh = isinstance(policy.action_dist, StateDependentNoiseDistribution) and policy.action_dist.bijector is not None
        self.rescale = bool(policy.squash_output)
        action_space = policy.action_space
        self.box = isinstance(action_space, spaces.Box)
        if isinstance(action_space, spaces.Box):
            self.register_buffer("low", th.as_tensor(action_space.low, dtype=th.float32))
            self.register_buffer("high", th.as_tensor(action_space.high, dtype=th.float32))
        if isinstance(action_space, spaces.MultiDiscrete):
            self.splits = [int(n) for n in action_space.nvec.ravel()]

    def forward(self, *inputs: th.Tensor) -> th.Tensor:
        tensors = list(inputs)
        for position in self.normalized:
            mean, std = getattr(self, f"obs_mean_{position}"), getattr(self, f"obs_std_{position}")
            tensors[position] = th.clamp((tensors[position] - mean) / std, -self.clip_obs, self.clip_obs)
        observation = dict(zip(self.keys, tensors, strict=True)) if self.keys is not None else tensors[0]
        policy = self.policy
        features = policy.extract_features(observation)
        if policy.share_features_extractor:  # one features tensor, else an (actor, critic) pair
            latent_pi = policy.mlp_extractor.forward_actor(cast(th.Tensor, features))
        else:
            latent_pi = policy.mlp_extractor.forward_actor(features[0])
        output = policy.action_net(latent_pi)
        if self.mode == "argmax":
            return th.argmax(output, dim=-1)
        if self.mode == "multi_argmax":
            return th.stack([th.argmax(logits, dim=-1) for logits in th.split(output, self.splits, dim=-1)], dim=-1)
        if self.mode == "sign":
            return (output > 0).to(th.int64)
        actions = th.tanh(output) if self.tanh else output
        if not self.box:
            return actions
        low, high = cast(th.Tensor, self.low), cast(th.Tensor, self.high)  # the buffers registered for a Box
        if self.rescale:
            return low + 0.5 * (actions + 1.0) * (high - low)
        return th.maximum(th.minimum(actions, high), low)


def check_exportable(policy: Any) -> ActorCriticPolicy:
    """Raise ``ValueError`` unless ``policy`` is an actor-critic policy on array or flat ``Dict`` observations with a
    known head; return it."""
    if not isinstance(policy, ActorCriticPolicy):
        raise ValueError(f"model.policy must be an ActorCriticPolicy to export, got {type(policy).__name__}")
    space = policy.observation_space
    if isinstance(space, spaces.Dict) and any(isinstance(sub, (spaces.Dict, spaces.Tuple)) for sub in space.spaces.values()):
        raise ValueError(f"export supports array and flat Dict observations, got a nested space {space}")
    if type(policy.action_dist) not in _MODES:
        raise ValueError(
            f"export supports the action distributions {[cls.__name__ for cls in _MODES]}, "
            f"got {type(policy.action_dist).__name__}"
        )
    return policy


#: What the statistics to bake in may be given as: a ``VecNormalize``, its plain-data statistics, a path or ``None``.
Statistics = VecNormalize | VecNormalizeStatistics | str | os.PathLike | None


def resolve_vecnormalize(model: BaseAlgorithm, vecnormalize: Statistics) -> VecNormalize | VecNormalizeStatistics | None:
    """The ``VecNormalize`` (or its plain-data statistics) whose statistics to bake in: the one given, one read from
    a path, or the model's.

    A path is a plain-data statistics file (``.npz``, read without unpickling by
    :func:`~sb3_ppo_ext.safe_loading.vecnormalize.read_vecnormalize_statistics`) or a pickle (``.pkl``, unpickled: only for
    files you trust). With ``None`` the model's own training env is searched; a model without ``VecNormalize``
    exports without normalisation.
    """
    if vecnormalize is None:
        env = model.get_env()
        return unwrap_vec_normalize(env) if env is not None else None
    if isinstance(vecnormalize, (str, os.PathLike)):
        path = os.fspath(vecnormalize)
        if not os.path.isfile(path):
            raise ValueError(f"vecnormalize must be a VecNormalize or the path of a saved one, got missing file {path!r}")
        if path.endswith(".npz"):
            return read_vecnormalize_statistics(path)
        with open(path, "rb") as handle:
            vecnormalize = pickle.load(handle)
    if not isinstance(vecnormalize, (VecNormalize, VecNormalizeStatistics)):
        raise ValueError(
            f"vecnormalize must be a VecNormalize, its statistics, a path to saved ones or None, got {vecnormalize!r}"
        )
    return vecnormalize


def deterministic_policy(model: BaseAlgorithm, vecnormalize: Statistics = None) -> DeterministicPolicy:
    """The traceable ``raw observation -> action`` module of ``model`` (on CPU, in eval mode).

    :param model: a trained actor-critic model (PPO, A2C, ...).
    :param vecnormalize: the ``VecNormalize`` (or its statistics, or their path: see :func:`resolve_vecnormalize`)
        whose observation statistics to bake in; ``None`` uses the model env's one if it has one.
    """
    stats = resolve_vecnormalize(model, vecnormalize)
    policy = cpu_copy(model.policy)
    if stats is not None and stats.norm_obs:
        rms = stats.obs_rms
        mean: np.ndarray | dict[str, np.ndarray]
        var: np.ndarray | dict[str, np.ndarray]
        if isinstance(rms, dict):  # Dict observations: one RunningMeanStd per normalised key
            mean, var = {key: value.mean for key, value in rms.items()}, {key: value.var for key, value in rms.items()}
        elif rms is not None:
            mean, var = rms.mean, rms.var
        else:
            raise ValueError("the VecNormalize statistics normalise observations but hold no observation statistics")
        module = DeterministicPolicy(policy, mean, var, stats.epsilon, stats.clip_obs)
    else:
        module = DeterministicPolicy(policy)
    return module.to("cpu").eval()


def cpu_copy(policy: BasePolicy) -> ActorCriticPolicy:
    """A CPU copy of ``policy`` in eval mode, rebuilt from its constructor parameters and state dict (as SB3's
    ``policy.save`` / ``load`` do), so the model keeps its device and training mode."""
    policy = check_exportable(policy)
    copy = type(policy)(**policy._get_constructor_parameters())
    copy.load_state_dict({name: tensor.detach().cpu() for name, tensor in policy.state_dict().items()})
    copy.set_training_mode(False)
    copy.requires_grad_(False)  # an inference graph: callers get plain tensors
    return copy


def _example_inputs(model: BaseAlgorithm) -> tuple[th.Tensor, ...]:
    """Two float32 observations per graph input (one input, or one per key of a ``Dict`` space)."""
    space = model.observation_space
    parts = list(space.spaces.values()) if isinstance(space, spaces.Dict) else [space]
    return tuple(th.as_tensor(np.stack([part.sample(), part.sample()]), dtype=th.float32) for part in parts)


def export_onnx(model: BaseAlgorithm, path: str, vecnormalize: Statistics = None, opset: int = 17) -> str:
    """Write the deterministic policy of ``model`` as an ONNX graph (input ``obs``, or one float32 input per key of a
    ``Dict`` observation space, named by the key; output ``action``; batch axis free).

    Observation normalisation (``vecnormalize``) and action clipping / rescaling are part of the graph, so the file
    maps raw observations to the actions to send to the env. A CPU copy of the policy is exported.

    :param model: a trained actor-critic model.
    :param path: output ``.onnx`` file (written atomically).
    :param vecnormalize: see :func:`deterministic_policy`.
    :param opset: ONNX opset version (:func:`check_onnx_opset`).
    :return: ``path``.
    """
    require_module("onnx", "export_onnx")
    check_onnx_opset("opset", opset)
    _check_output_path("path", path)
    module = deterministic_policy(model, vecnormalize)
    with atomic_path(path) as temporary, th.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the TorchScript-based exporter needs no onnxscript
        th.onnx.export(
            module,
            _example_inputs(model),
            temporary,
            dynamo=False,
            input_names=module.input_names,
            output_names=["action"],
            dynamic_axes={name: {0: "batch"} for name in [*module.input_names, "action"]},
            opset_version=opset,
        )
        import onnx  # the export extra, needed only here

        onnx.checker.check_model(onnx.load(temporary))
    return path


def export_torchscript(model: BaseAlgorithm, path: str, vecnormalize: Statistics = None) -> str:
    """Write the deterministic policy of ``model`` as a TorchScript module (``torch.jit.load(path)(obs) -> action``;
    for a ``Dict`` observation space one tensor per key, in the space's key order).

    Same graph as :func:`export_onnx`; written atomically.
    """
    _check_output_path("path", path)
    module = deterministic_policy(model, vecnormalize)
    with atomic_path(path) as temporary, th.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        traced = th.jit.trace(module, _example_inputs(model))
        traced.save(temporary)
    return path


def _check_output_path(name: str, path: Any) -> None:
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"{name} must be a file path, got {path!r}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise ValueError(f"{name} must be in an existing writable folder, got {os.fspath(path)!r}")


#: Export format -> file extension.
EXPORT_FORMATS = {"onnx": ".onnx", "torchscript": ".pt"}


def parse_formats(formats: str | list[str] | tuple[str, ...]) -> list[str]:
    """Formats from a comma-separated string (zoo YAML friendly) or a list; each must be a key of ``EXPORT_FORMATS``.

    >>> parse_formats("onnx, torchscript")
    ['onnx', 'torchscript']
    """
    items = formats.split(",") if isinstance(formats, str) else list(formats) if isinstance(formats, (list, tuple)) else None
    if items is None:
        raise ValueError(f"formats must be a comma-separated string or a list of {list(EXPORT_FORMATS)}, got {formats!r}")
    names = [str(item).strip().lower() for item in items if str(item).strip()]
    unknown = [name for name in names if name not in EXPORT_FORMATS]
    if not names or unknown:
        raise ValueError(f"formats must name one or more of {list(EXPORT_FORMATS)}, got {formats!r}")
    return list(dict.fromkeys(names))


class ExportPolicyCallback(BaseCallback):
    """When training ends, export the deterministic policy (see :func:`export_onnx`) to ONNX and/or TorchScript.

    The training env's ``VecNormalize`` observation statistics and the action clipping / rescaling are baked in,
    so the files map raw observations to env actions. Files: ``<output_dir>/<name>.onnx`` and ``<name>.pt``.

    :param output_dir: folder for the files (created; must be writable).
    :param formats: ``"onnx"``, ``"torchscript"`` or both, as a comma-separated string or a list.
    :param name: file name stem.
    :param opset: ONNX opset version (:func:`check_onnx_opset`).
    :param verbose: 0 silent, 1 or more: log the files written.
    """

    def __init__(
        self, output_dir: str, formats: str | list[str] = "onnx", name: str = "policy", opset: int = 17, verbose: int = 0
    ) -> None:
        super().__init__(verbose)
        self.formats = parse_formats(formats)
        self.output_dir = check_writable_dir("output_dir", output_dir)
        if not isinstance(name, str) or not name or os.sep in name:
            raise ValueError(f"name must be a non-empty file name without {os.sep!r}, got {name!r}")
        self.name = name
        self.opset = check_onnx_opset("opset", opset)
        if "onnx" in self.formats:
            require_module("onnx", "ExportPolicyCallback(formats='onnx')")
        #: Paths written by the last export.
        self.exported: list[str] = []

    def _init_callback(self) -> None:
        check_writable_dir("output_dir", self.output_dir)

    def _on_step(self) -> bool:
        return True

    def _on_training_end(self) -> None:
        self.export()

    def export(self) -> list[str]:
        """Export the current policy now; return the paths written."""
        stem = os.path.join(self.output_dir, self.name)
        vec_normalize = self.model.get_vec_normalize_env()
        self.exported = []
        for fmt in self.formats:
            path = stem + EXPORT_FORMATS[fmt]
            if fmt == "onnx":
                export_onnx(self.model, path, vecnormalize=vec_normalize, opset=self.opset)
            else:
                export_torchscript(self.model, path, vecnormalize=vec_normalize)
            self.exported.append(path)
        if self.verbose >= 1:
            self.logger.info(f"Exported the policy to {', '.join(self.exported)}")
        return self.exported
