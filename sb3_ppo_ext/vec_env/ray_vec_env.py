"""``RayVecEnv``: an SB3 ``VecEnv`` whose sub-envs live in Ray actors, anywhere in a Ray cluster.

Needs the ``ray`` extra (``pip install "sb3-ppo-ext[ray]"``). The envs are split into groups of ``envs_per_actor``;
each group lives in one Ray actor (:class:`EnvGroup`) and is stepped as one batch per call, so the cost of a Ray
call (a few hundred microseconds) is paid once per actor and step, not once per env. Ray places the actors on any
node of the cluster that has the resources they ask for (``actor_options``).

The behaviour is SB3's ``DummyVecEnv``'s for the same env functions and seeds, step for step: auto reset with
``terminal_observation`` and ``TimeLimit.truncated`` in ``info``, seeds and options passed at the next ``reset``,
``reset_infos``, observations in the observation space's dtype and rewards as float32 (the ``DummyVecEnv`` buffers).

When an actor or its node dies, the default (``on_actor_loss="raise"``) is a :class:`EnvActorLostError` naming the
actor, its node and its envs; nothing else is touched (PPO raises it from ``collect_rollouts``, before any update
or checkpoint). ``on_actor_loss="restart"`` instead rebuilds the lost envs in a new actor (placed by Ray, on
another node if need be) and reports their episodes as ended by truncation: ``done`` with
``TimeLimit.truncated=True``, reward 0 and the last observation seen as ``terminal_observation``, so that PPO
bootstraps the value there rather than treating the cut as a terminal state.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from stable_baselines3.common import env_util
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvObs, VecEnvStepReturn
from stable_baselines3.common.vec_env.patch_gym import _patch_env

try:
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError('RayVecEnv needs Ray: pip install "sb3-ppo-ext[ray]"') from error

ActorLossPolicy = Literal["raise", "restart"]
ACTOR_LOSS_POLICIES: tuple[str, ...] = ("raise", "restart")

#: Ray actor options used unless ``actor_options`` overrides them: one CPU per actor (an actor steps its envs one
#: after the other, on one core) and actors spread over the nodes of the cluster.
DEFAULT_ACTOR_OPTIONS: dict[str, Any] = {"num_cpus": 1, "scheduling_strategy": "SPREAD"}


class EnvActorLostError(RuntimeError):
    """A Ray actor holding envs of a :class:`RayVecEnv` (or its node) died.

    :param actor_index: position of the actor in :attr:`RayVecEnv.actors`.
    :param actor_id: Ray's id of the actor (hex).
    :param node_id: Ray's id of the node it ran on (hex).
    :param env_indices: the indices of the envs it held.
    :param cause: the error Ray raised.
    """

    def __init__(self, actor_index: int, actor_id: str, node_id: str, env_indices: Sequence[int], cause: BaseException):
        self.actor_index = actor_index
        self.actor_id = actor_id
        self.node_id = node_id
        self.env_indices = list(env_indices)
        super().__init__(
            f"Ray actor {actor_index} (actor id {actor_id}, node {node_id}) holding envs {self.env_indices} died: "
            f"{type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}. The model was not updated "
            "with this rollout; pass on_actor_loss='restart' to RayVecEnv to rebuild lost envs and go on"
        )


class EnvGroup:
    """Several envs stepped as one batch: the body of a :class:`RayVecEnv` actor (a plain class, usable without Ray).

    Each method does for its envs what SB3's ``SubprocVecEnv`` worker does for one env.

    :param env_fns: functions that each return a new env.
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]]):
        self.envs = [_patch_env(env_fn()) for env_fn in env_fns]

    def describe(self) -> tuple[spaces.Space, spaces.Space, str]:
        """The observation and action spaces of the first env, and the Ray node this runs on (``"local"`` outside
        Ray)."""
        node_id = ray.get_runtime_context().get_node_id() if ray.is_initialized() else "local"
        return self.envs[0].observation_space, self.envs[0].action_space, node_id

    def step(self, actions: np.ndarray) -> tuple[VecEnvObs, np.ndarray, np.ndarray, list[dict], list[dict]]:
        """Step every env with its action; an env whose episode ends is reset, its last observation kept in ``info``.

        :return: stacked observations, rewards (float32), dones, infos and the infos of the resets (``{}`` for envs
            not reset).
        """
        observations, rewards, dones, infos, reset_infos = [], [], [], [], []
        for env, action in zip(self.envs, actions, strict=True):
            observation, reward, terminated, truncated, info = env.step(action)
            done = terminated or truncated
            info["TimeLimit.truncated"] = truncated and not terminated
            reset_info: dict[str, Any] = {}
            if done:
                info["terminal_observation"] = observation
                observation, reset_info = env.reset()
            observations.append(observation)
            rewards.append(reward)
            dones.append(done)
            infos.append(info)
            reset_infos.append(reset_info)
        space = self.envs[0].observation_space
        return (
            stack_observations(observations, space),
            np.array(rewards, dtype=np.float32),
            np.array(dones, dtype=bool),
            infos,
            reset_infos,
        )

    def reset(self, seeds: Sequence[int | None], options: Sequence[dict[str, Any]]) -> tuple[VecEnvObs, list[dict]]:
        """Reset every env with its seed and options (``{}``: none); the stacked observations and the reset infos."""
        observations, reset_infos = [], []
        for env, seed, option in zip(self.envs, seeds, options, strict=True):
            maybe_options = {"options": option} if option else {}
            observation, reset_info = env.reset(seed=seed, **maybe_options)
            observations.append(observation)
            reset_infos.append(reset_info)
        return stack_observations(observations, self.envs[0].observation_space), reset_infos

    def render(self, local_indices: Sequence[int]) -> list[Any]:
        """The ``render()`` of each env at ``local_indices`` (positions within this group)."""
        return [self.envs[index].render() for index in local_indices]

    def get_attr(self, local_indices: Sequence[int], name: str) -> list[Any]:
        """Attribute ``name`` of each env at ``local_indices``, looked up through its wrappers."""
        return [self.envs[index].get_wrapper_attr(name) for index in local_indices]

    def has_attr(self, name: str) -> bool:
        """Whether every env of the group has attribute ``name`` (on itself or a wrapper)."""
        return all(_has_wrapper_attr(env, name) for env in self.envs)

    def set_attr(self, local_indices: Sequence[int], name: str, value: Any) -> None:
        """Set attribute ``name`` of each env at ``local_indices``."""
        for index in local_indices:
            setattr(self.envs[index], name, value)

    def env_method(self, local_indices: Sequence[int], name: str, args: tuple, kwargs: dict[str, Any]) -> list[Any]:
        """Call method ``name`` of each env at ``local_indices``; the results."""
        return [self.envs[index].get_wrapper_attr(name)(*args, **kwargs) for index in local_indices]

    def is_wrapped(self, local_indices: Sequence[int], wrapper_class: type[gym.Wrapper]) -> list[bool]:
        """Whether each env at ``local_indices`` is wrapped in ``wrapper_class``."""
        return [env_util.is_wrapped(self.envs[index], wrapper_class) for index in local_indices]

    def close(self) -> None:
        """Close every env of the group."""
        for env in self.envs:
            env.close()


def _has_wrapper_attr(env: gym.Env, name: str) -> bool:
    try:
        env.get_wrapper_attr(name)
    except AttributeError:
        return False
    return True


def stack_observations(observations: Sequence[Any], space: spaces.Space) -> VecEnvObs:
    """Observations of several envs stacked on a first axis, in the dtype of ``space`` (as ``DummyVecEnv``'s
    buffers hold them); ``Dict`` and ``Tuple`` spaces per sub-space."""
    # Sub-batches are typed Any: a nested space nests them further than SB3's VecEnvObs (arrays under one level) says.
    if isinstance(space, spaces.Dict):
        by_key: dict[str, Any] = {
            key: stack_observations([obs[key] for obs in observations], sub) for key, sub in space.spaces.items()
        }
        return by_key
    if isinstance(space, spaces.Tuple):
        by_position: tuple[Any, ...] = tuple(
            stack_observations([obs[i] for obs in observations], sub) for i, sub in enumerate(space.spaces)
        )
        return by_position
    return np.stack(observations).astype(space.dtype, copy=False)


def concatenate_observations(parts: Sequence[Any], space: spaces.Space) -> VecEnvObs:
    """The stacked observations of several groups of envs (each a :func:`stack_observations` batch), in group order,
    as one batch."""
    # Sub-batches are typed Any, as in stack_observations.
    if isinstance(space, spaces.Dict):
        by_key: dict[str, Any] = {
            key: concatenate_observations([part[key] for part in parts], sub) for key, sub in space.spaces.items()
        }
        return by_key
    if isinstance(space, spaces.Tuple):
        by_position: tuple[Any, ...] = tuple(
            concatenate_observations([part[i] for part in parts], sub) for i, sub in enumerate(space.spaces)
        )
        return by_position
    return np.concatenate(parts)


def observation_at(observations: VecEnvObs, index: int) -> Any:
    """The observation of env ``index`` in a batch (per key / position for ``Dict`` / ``Tuple`` spaces)."""
    if isinstance(observations, dict):
        return {key: value[index] for key, value in observations.items()}
    if isinstance(observations, tuple):
        return tuple(value[index] for value in observations)
    return observations[index]


def split_into_groups(n_envs: int, envs_per_actor: int) -> list[range]:
    """The env indices of each actor: consecutive groups of ``envs_per_actor``, the last one possibly smaller."""
    return [range(start, min(start + envs_per_actor, n_envs)) for start in range(0, n_envs, envs_per_actor)]


def locate(indices: Sequence[int], envs_per_actor: int) -> dict[int, list[tuple[int, int]]]:
    """For each actor concerned, the ``(position in indices, index within the actor)`` of the requested envs."""
    located: dict[int, list[tuple[int, int]]] = {}
    for position, index in enumerate(indices):
        located.setdefault(index // envs_per_actor, []).append((position, index % envs_per_actor))
    return located


@dataclass(frozen=True)
class ActorRestart:
    """One rebuild of lost envs (``on_actor_loss="restart"``): which actor, which envs, why."""

    actor_index: int
    env_indices: list[int]
    lost_node_id: str
    cause: str


class RayVecEnv(VecEnv):
    """An SB3 ``VecEnv`` whose envs live in Ray actors, ``envs_per_actor`` to an actor, placed anywhere in a Ray
    cluster; behaves as ``DummyVecEnv`` does for the same env functions and seeds.

    :param env_fns: functions that each return a new env (shipped to the actors with cloudpickle: an env id and
        keyword arguments, as ``make_vec_env`` builds them, travel anywhere the package is installed).
    :param envs_per_actor: envs in one actor, stepped one after the other in one call (>= 1). More envs per actor pay
        the Ray call once for more steps; fewer give more parallelism. The last actor may hold fewer.
    :param address: the Ray cluster. ``None``: the one this process is connected to, else ``ray.init()`` (joins
        the cluster of ``RAY_ADDRESS`` or starts a local one); ``"auto"`` joins the cluster started on this machine
        with ``ray start``; ``"ray://host:10001"`` joins a remote one through Ray Client; ``"host:6379"`` a cluster's
        head. Ignored, with a warning, when this process is connected to Ray already.
    :param actor_options: Ray options of each actor (``num_cpus``, ``resources``, ``scheduling_strategy``...),
        merged over :data:`DEFAULT_ACTOR_OPTIONS` (one CPU each, spread over the nodes).
    :param on_actor_loss: ``"raise"``: an :class:`EnvActorLostError` when an actor or its node dies; ``"restart"``:
        rebuild its envs in a new actor and report their episodes as truncated (see the module's docstring).
    :param start_timeout_s: seconds to wait for actors to be placed and their envs built (at the start and at a
        restart) before raising ``TimeoutError``; Ray waits forever for resources it lacks.
    :param ray_init_kwargs: keyword arguments of ``ray.init`` when this constructor calls it.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        envs_per_actor: int = 8,
        address: str | None = None,
        actor_options: dict[str, Any] | None = None,
        on_actor_loss: ActorLossPolicy = "raise",
        start_timeout_s: float = 300.0,
        ray_init_kwargs: dict[str, Any] | None = None,
    ):
        if len(env_fns) < 1:
            raise ValueError("env_fns must hold at least one env function, got none")
        if not isinstance(envs_per_actor, int) or envs_per_actor < 1:
            raise ValueError(f"envs_per_actor must be an int >= 1, got {envs_per_actor!r}")
        if on_actor_loss not in ACTOR_LOSS_POLICIES:
            raise ValueError(f"on_actor_loss must be one of {ACTOR_LOSS_POLICIES}, got {on_actor_loss!r}")
        if start_timeout_s <= 0:
            raise ValueError(f"start_timeout_s must be > 0, got {start_timeout_s!r}")
        connect(address, **(ray_init_kwargs or {}))
        self.env_fns = list(env_fns)
        self.envs_per_actor = envs_per_actor
        self.on_actor_loss = on_actor_loss
        self.start_timeout_s = start_timeout_s
        self.actor_options = {**DEFAULT_ACTOR_OPTIONS, **(actor_options or {})}
        self.groups = split_into_groups(len(self.env_fns), envs_per_actor)
        #: one Ray actor handle per group of envs
        self.actors: list[Any] = [self._start_actor(group) for group in self.groups]
        #: the Ray node id of each actor
        self.actor_nodes: list[str] = []
        #: every rebuild of lost envs, in order
        self.restarts: list[ActorRestart] = []
        self.closed = False
        self._pending: list[Any] | None = None
        self._last_observations: VecEnvObs | None = None
        descriptions = self._wait_started([actor.describe.remote() for actor in self.actors])
        observation_space, action_space, _ = descriptions[0]
        self.actor_nodes = [node_id for _, _, node_id in descriptions]
        super().__init__(len(self.env_fns), observation_space, action_space)

    # -- actors -----------------------------------------------------------------------------------------------------

    def _start_actor(self, group: range) -> Any:
        return remote_env_group().options(**self.actor_options).remote([self.env_fns[index] for index in group])

    def _wait_started(self, references: list[Any]) -> list[Any]:
        try:
            return ray.get(references, timeout=self.start_timeout_s)
        except GetTimeoutError:
            self._kill_actors()
            raise TimeoutError(
                f"the {len(references)} Ray actor(s) of RayVecEnv did not start within {self.start_timeout_s} s: each "
                f"asks for {self.actor_options} and the cluster has {ray.cluster_resources()} in all, "
                f"{ray.available_resources()} free (lower actor_options['num_cpus'] or raise envs_per_actor)"
            ) from None

    def _lost(self, actor_index: int, cause: BaseException) -> EnvActorLostError:
        actor = self.actors[actor_index]
        return EnvActorLostError(
            actor_index, actor._actor_id.hex(), self.actor_nodes[actor_index], list(self.groups[actor_index]), cause
        )

    def _gather(self, references: list[Any]) -> list[Any]:
        """``ray.get`` of one call per actor; an actor found dead raises :class:`EnvActorLostError`, or under
        ``on_actor_loss="restart"`` has ``None`` as its result and the rest are still gathered."""
        try:
            return ray.get(references)
        except RayActorError:
            pass
        results: list[Any] = []
        for actor_index, reference in enumerate(references):
            try:
                results.append(ray.get(reference))
            except RayActorError as cause:
                if self.on_actor_loss == "raise":
                    raise self._lost(actor_index, cause) from cause
                self._restart(actor_index, cause)
                results.append(None)
        return results

    def _restart(self, actor_index: int, cause: BaseException) -> None:
        group = self.groups[actor_index]
        lost_node = self.actor_nodes[actor_index]
        warnings.warn(
            f"Ray actor {actor_index} (node {lost_node}) holding envs {list(group)} died "
            f"({type(cause).__name__}): rebuilding envs {list(group)} in a new actor",
            stacklevel=3,
        )
        ray.kill(self.actors[actor_index], no_restart=True)
        self.actors[actor_index] = self._start_actor(group)
        ((_, _, self.actor_nodes[actor_index]),) = self._wait_started([self.actors[actor_index].describe.remote()])
        self.restarts.append(ActorRestart(actor_index, list(group), lost_node, f"{type(cause).__name__}"))

    def _reset_group(
        self, actor_index: int, seeds: Sequence[int | None] | None = None, options: Sequence[dict[str, Any]] | None = None
    ) -> tuple[VecEnvObs, list[dict]]:
        """Reset the envs of a rebuilt actor, with ``seeds`` and ``options`` (default: none, so a rebuilt env starts
        from fresh entropy rather than replaying its first episode)."""
        group = self.groups[actor_index]
        reference = self.actors[actor_index].reset.remote(seeds or [None] * len(group), options or [{}] * len(group))
        return self._wait_started([reference])[0]

    def _kill_actors(self) -> None:
        for actor in self.actors:
            ray.kill(actor, no_restart=True)

    # -- VecEnv -----------------------------------------------------------------------------------------------------

    def step_async(self, actions: np.ndarray) -> None:
        self._pending = [
            actor.step.remote(actions[group.start : group.stop]) for actor, group in zip(self.actors, self.groups, strict=True)
        ]

    def step_wait(self) -> VecEnvStepReturn:
        if self._pending is None:
            raise RuntimeError("step_wait called without step_async")
        results, self._pending = self._gather(self._pending), None
        for actor_index, result in enumerate(results):
            if result is None:
                results[actor_index] = self._truncated_by_loss(actor_index)
        observations, rewards, dones, infos, reset_infos = zip(*results, strict=True)
        self.reset_infos = [info for part in reset_infos for info in part]
        self._last_observations = concatenate_observations(observations, self.observation_space)
        return (
            self._last_observations,
            np.concatenate(rewards),
            np.concatenate(dones),
            [info for part in infos for info in part],
        )

    def _truncated_by_loss(self, actor_index: int) -> tuple[VecEnvObs, np.ndarray, np.ndarray, list[dict], list[dict]]:
        """The step of envs lost with their actor: truncated episodes (reward 0, the last observation seen as
        ``terminal_observation``), then the first observations of the rebuilt envs."""
        group = self.groups[actor_index]
        if self._last_observations is None:  # stepped before any reset: no observation to report
            raise self._lost(actor_index, RuntimeError("lost before the first reset"))
        observations, reset_infos = self._reset_group(actor_index)
        infos = [
            {
                "TimeLimit.truncated": True,
                "terminal_observation": observation_at(self._last_observations, index),
                "actor_lost": True,
            }
            for index in group
        ]
        return observations, np.zeros(len(group), dtype=np.float32), np.ones(len(group), dtype=bool), infos, reset_infos

    def reset(self) -> VecEnvObs:
        references = [
            actor.reset.remote(self._seeds[group.start : group.stop], self._options[group.start : group.stop])
            for actor, group in zip(self.actors, self.groups, strict=True)
        ]
        results = self._gather(references)
        for actor_index, (result, group) in enumerate(zip(results, self.groups, strict=True)):
            if result is None:
                results[actor_index] = self._reset_group(
                    actor_index, self._seeds[group.start : group.stop], self._options[group.start : group.stop]
                )
        observations, reset_infos = zip(*results, strict=True)
        self.reset_infos = [info for part in reset_infos for info in part]
        self._reset_seeds()
        self._reset_options()
        self._last_observations = concatenate_observations(observations, self.observation_space)
        return self._last_observations

    def close(self) -> None:
        """Close every env in its actor, then end the actors (the Ray cluster itself is left running)."""
        if self.closed:
            return
        references = [actor.close.remote() for actor in self.actors]
        try:
            ray.get(references, timeout=self.start_timeout_s)
        except (RayActorError, GetTimeoutError):
            pass  # a dead actor's envs are gone already
        self._kill_actors()
        self._pending = None
        self.closed = True

    def get_images(self) -> Sequence[np.ndarray | None]:
        if self.render_mode != "rgb_array":
            warnings.warn(
                f"The render mode is {self.render_mode}, but this method assumes it is `rgb_array` to obtain images."
            )
            return [None for _ in range(self.num_envs)]
        return self._call_envs("render", None)

    def has_attr(self, attr_name: str) -> bool:
        references = [actor.has_attr.remote(attr_name) for actor in self.actors]
        return all(self._gather_located(references, list(range(len(self.actors)))))

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return self._call_envs("get_attr", indices, attr_name)

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        self._call_envs("set_attr", indices, attr_name, value)

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any
    ) -> list[Any]:
        return self._call_envs("env_method", indices, method_name, method_args, method_kwargs)

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        return self._call_envs("is_wrapped", indices, wrapper_class)

    def _call_envs(self, method: str, indices: VecEnvIndices, *args: Any) -> list[Any]:
        """Call the :class:`EnvGroup` method ``method`` on the actors of the envs ``indices`` (one call per actor);
        the results in the order of ``indices`` (``set_attr``: nothing)."""
        targets = list(self._get_indices(indices))
        located = locate(targets, self.envs_per_actor)
        references = [
            getattr(self.actors[actor_index], method).remote([local for _, local in places], *args)
            for actor_index, places in located.items()
        ]
        answers = self._gather_located(references, list(located))
        results: list[Any] = [None] * len(targets)
        for places, answer in zip(located.values(), answers, strict=True):
            if answer is None:  # set_attr answers nothing
                continue
            for (position, _), value in zip(places, answer, strict=True):
                results[position] = value
        return results

    def _gather_located(self, references: list[Any], actor_indices: list[int]) -> list[Any]:
        """``ray.get`` of calls to the actors ``actor_indices``; a dead actor raises :class:`EnvActorLostError` under
        either policy (a method call is not a step: there is no episode to report as truncated)."""
        answers = []
        for actor_index, reference in zip(actor_indices, references, strict=True):
            try:
                answers.append(ray.get(reference))
            except RayActorError as cause:
                raise self._lost(actor_index, cause) from cause
        return answers


def connect(address: str | None, **ray_init_kwargs: Any) -> None:
    """Connect this process to Ray: to ``address`` (see :class:`RayVecEnv`), unless it is connected already."""
    if ray.is_initialized():
        if address is not None:
            warnings.warn(f"Ray is initialized already: address {address!r} is ignored", stacklevel=3)
        return
    ray.init(address=address, **ray_init_kwargs)


_REMOTE_ENV_GROUP: Any = None


def remote_env_group() -> Any:
    """:class:`EnvGroup` as a Ray actor class (made once, on first use)."""
    global _REMOTE_ENV_GROUP
    if _REMOTE_ENV_GROUP is None:
        _REMOTE_ENV_GROUP = ray.remote(EnvGroup)
    return _REMOTE_ENV_GROUP
