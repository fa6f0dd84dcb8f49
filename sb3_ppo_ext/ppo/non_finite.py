"""Non-finite values during rollout collection: one check that every collection path goes through.

Collection stops within the step where a NaN or an infinity appears, raising :class:`NonFiniteCollectionError` (a
``ValueError``) that names the field, the env index and the step (counted as ``num_timesteps``, the step that
produced the value). What is checked:

* through :class:`CollectionGuard`, the env as both collection loops step it (ours, ``fast_collect=True``, and SB3's,
  for Dict observations, other policies or ``fast_collect=False``): each step's observations (every key of a Dict
  observation), rewards, and the ``infos[i]["terminal_observation"]`` of episodes cut by a time limit (the ones the
  algorithm bootstraps from), as the algorithm receives them and, under ``VecNormalize``, as ``VecNormalize``
  received them (``old_obs``, ``old_reward``: what its statistics are updated with). The first observation of a
  rollout is checked with :meth:`CollectionGuard.check_observations` before it is acted on (at the start of training
  it comes from the reset in SB3's ``learn`` set-up, where a ``VecNormalize`` has already updated its statistics);
* the values the policy computes from checked observations, which are non-finite only when its weights are (or the
  observations overflow them): on our loop each step's values and both bootstraps (``terminal_value`` of a
  truncated episode, ``last_value`` of the rollout's last observation) before they are used; on SB3's loop, which
  computes them inside itself, the filled buffer's values, rewards and returns with :func:`check_filled_buffer`
  (these are then in the buffer, but no update is made from it).

``VecNormalize`` updates ``obs_rms`` and ``ret_rms`` (and its discounted ``returns``) inside ``step_wait``, before
any caller sees the step. So the guard copies them before each step and writes the copies back into the same
``RunningMeanStd`` objects when the step fails the check: after the error, the statistics are those before the bad
step, and ``model.save`` / ``VecNormalize.save`` keep the last good state. ``VecNormalize`` clips a terminal
observation's infinities to ``+-clip_obs`` before anyone can see them (its statistics never see terminal
observations), so there only a NaN shows; neither reaches the buffer or the statistics.

Cost per step: each field is one dot product of the array with itself (:func:`squared_norm`: NaN or infinite if an
entry is; an overflow only leads to the per-env look), and the results of all fields are summed into one test. Measured
with ``timeit`` on the guard around a stand-in env that does no work (the least of 400 repeats of 500 steps, 1 to 16
envs, 3 to 376 observation dimensions, on a shared 2-core machine): about 2.5-3 us per step without ``VecNormalize``,
6-8 us with one (of which 2 us copy its statistics), plus 0.7 us for the check of the policy's values on our loop.
A fast-path step of one Pendulum env costs about 90-100 us, ``VecNormalize``'s own work about 55 us; the checks that
our loop made before this guard (values and rewards, no observations) cost about 0.7 us.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper, VecNormalize
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn

_ENV_HINT = "look at the env, or at wrappers that divide by zero"
_RECEIVED = "as VecNormalize received it"
_POLICY_HINT = (
    "the policy computed it from finite observations, so its weights are non-finite or the observations overflow them "
    "(was the model loaded from a run that diverged?)"
)


class NonFiniteCollectionError(ValueError):
    """A NaN or infinite value met during rollout collection (see :mod:`~sb3_ppo_ext.ppo.non_finite`).

    :param field: what held it: ``"observation"``, ``"reward"``, ``"terminal_observation"`` (a Dict observation's
        key in brackets), ``"value"``, ``"terminal_value"`` or ``"last_value"``.
    :param env_indices: the envs whose ``field`` is non-finite.
    :param step: the step that produced it, counted as ``num_timesteps``.
    :param examples: a few of the non-finite values, for the message.
    :param consequence: what was kept from the step, for the message.
    :param source: where ``field`` was read when not where the algorithm reads it, for the message.
    """

    def __init__(
        self, field: str, env_indices: Sequence[int], step: int, examples: str, consequence: str, source: str = ""
    ) -> None:
        self.field = field
        self.env_indices = list(env_indices)
        self.step = step
        where = f" ({source})" if source else ""
        super().__init__(
            f"non-finite {field}{where} from env(s) {self.env_indices} at step {step} ({examples}); {consequence}"
        )

    @property
    def env_index(self) -> int:
        """The first env whose ``field`` is non-finite."""
        return self.env_indices[0]


def squared_norm(values: Any) -> float:
    """The sum of the squares of the entries of ``values`` (an array, or a dict of them), in one dot product per
    array: NaN or infinite if an entry is, and also infinite if the sum overflows (entries above about 1e19 in float32),
    so a non-finite result only says where to look closer. Integer and boolean arrays give a finite number."""
    if isinstance(values, dict):
        return sum(float(np.vdot(part, part)) for part in values.values())
    return float(np.vdot(values, values))


def check_finite(
    field: str,
    values: Any,
    step: int,
    consequence: str,
    env_indices: Sequence[int] | None = None,
    source: str = "",
) -> None:
    """Raise :class:`NonFiniteCollectionError` if a row of ``values`` (one per env; a Dict observation: each key's)
    holds a NaN or an infinity.

    :param field: the field's name in the message (a Dict observation's keys are added in brackets).
    :param values: an array with one row per env, or a dict of them.
    :param step: the step that produced ``values``.
    :param consequence: what was kept from the step, for the message.
    :param env_indices: the env of each row, when the rows are not envs ``0..n-1`` in order.
    :param source: where ``values`` were read when not where the algorithm reads them, for the message.
    """
    if math.isfinite(squared_norm(values)):
        return
    if isinstance(values, dict):
        for key, part in values.items():
            check_finite(f"{field}[{key!r}]", part, step, consequence, env_indices, source)
        return
    per_env = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
    rows = np.flatnonzero(~np.isfinite(per_env).all(axis=1))
    if not len(rows):
        return  # the sum of squares overflowed; every entry is finite
    envs = [int(row) if env_indices is None else int(env_indices[int(row)]) for row in rows]
    examples = ", ".join(
        f"env {env}: {per_env[row][~np.isfinite(per_env[row])][:3].tolist()}"
        for env, row in zip(envs[:3], rows[:3], strict=True)
    )
    raise NonFiniteCollectionError(field, envs, step, examples, consequence, source)


def vec_normalizers(env: VecEnv) -> list[VecNormalize]:
    """Every ``VecNormalize`` in ``env``'s chain of wrappers, outermost first."""
    found = []
    while isinstance(env, VecEnvWrapper):
        if isinstance(env, VecNormalize):
            found.append(env)
        env = env.venv
    return found


Moments = tuple[np.ndarray, np.ndarray, float]


class Statistics(NamedTuple):
    """A copy of a ``VecNormalize``'s state as of one step (:func:`copy_statistics`)."""

    obs_moments: Any  # obs_rms's mean, var and count (a dict of them for Dict observations; None without norm_obs)
    ret_moments: Moments
    returns: np.ndarray  # the discounted returns that ret_rms is updated with
    old_obs: Any  # the last raw observations and rewards (get_original_obs, get_original_reward); rebound at each
    old_reward: np.ndarray  # step, never written into, so kept by reference


def _copy_moments(rms: Any) -> Any:
    if rms is None:
        return None
    if isinstance(rms, dict):
        return {key: (part.mean.copy(), part.var.copy(), part.count) for key, part in rms.items()}
    return rms.mean.copy(), rms.var.copy(), rms.count


def _restore_moments(rms: Any, saved: Any) -> None:
    if rms is None:
        return
    if isinstance(rms, dict):
        for key, part in rms.items():
            part.mean, part.var, part.count = saved[key]
        return
    rms.mean, rms.var, rms.count = saved


def copy_statistics(normalizer: VecNormalize) -> Statistics:
    """A copy of a ``VecNormalize``'s statistics (``obs_rms``: absent without ``norm_obs``, a dict of them for Dict
    observations; ``ret_rms``; ``returns``) and of its last raw step."""
    return Statistics(
        _copy_moments(getattr(normalizer, "obs_rms", None)),
        _copy_moments(normalizer.ret_rms),
        normalizer.returns.copy(),
        normalizer.old_obs,
        normalizer.old_reward,
    )


def restore_statistics(normalizer: VecNormalize, saved: Statistics) -> None:
    """Write :func:`copy_statistics`' copy back, the moments into the same ``RunningMeanStd`` objects."""
    _restore_moments(getattr(normalizer, "obs_rms", None), saved.obs_moments)
    _restore_moments(normalizer.ret_rms, saved.ret_moments)
    normalizer.returns = saved.returns
    normalizer.old_obs = saved.old_obs
    normalizer.old_reward = saved.old_reward


class CollectionGuard(VecEnvWrapper):
    """The training env as collection steps it: each step's observations, rewards and bootstrapped terminal
    observations are checked (:func:`check_finite`), and a step that fails raises :class:`NonFiniteCollectionError`
    with every ``VecNormalize``'s statistics put back as they were before the step. Kept across rollouts: building
    a ``VecEnvWrapper`` asks every env for its ``render_mode`` (a remote call for subprocess or Ray envs).

    :param venv: the training env.
    """

    def __init__(self, venv: VecEnv) -> None:
        super().__init__(venv)
        #: The step count of the last step that passed the check, as the collection loops count ``num_timesteps``
        #: (they set it at the start of each rollout).
        self.num_timesteps = 0
        self.normalizers = vec_normalizers(venv)
        self._saved: list[Statistics] = []
        statistics = " or VecNormalize's statistics (restored to before the step)" if self.normalizers else ""
        self._consequence = (
            f"collection stopped within that step: nothing of it reached the rollout buffer{statistics}; {_ENV_HINT}"
        )

    def reset(self) -> VecEnvObs:
        return self.venv.reset()

    def step_async(self, actions: np.ndarray) -> None:
        if self.normalizers:
            self._saved = [copy_statistics(normalizer) for normalizer in self.normalizers]
        self.venv.step_async(actions)

    def step_wait(self) -> VecEnvStepReturn:
        observations, rewards, dones, infos = self.venv.step_wait()
        step = self.num_timesteps + self.num_envs
        try:
            self._check(step, observations, rewards, dones, infos)
        except NonFiniteCollectionError:
            for normalizer, saved in zip(self.normalizers, self._saved, strict=False):
                restore_statistics(normalizer, saved)
            raise
        self.num_timesteps = step
        return observations, rewards, dones, infos

    def check_observations(self, observations: VecEnvObs) -> None:
        """Check the observations that the rollout starts from (an env reset's, or the last step's)."""
        consequence = "collection stopped before acting on it"
        if self.normalizers:
            consequence += " (a VecNormalize in training mode updates its statistics at a reset)"
        for normalizer in self.normalizers:
            check_finite("observation", normalizer.old_obs, self.num_timesteps, consequence, source=_RECEIVED)
        check_finite("observation", observations, self.num_timesteps, f"{consequence}; {_ENV_HINT}")

    def _check(self, step: int, observations: VecEnvObs, rewards: np.ndarray, dones: np.ndarray, infos: list[dict]) -> None:
        # One finite sum of squares says that every field is finite; otherwise each is looked at.
        total = squared_norm(rewards) + squared_norm(observations)
        for normalizer in self.normalizers:  # what its statistics were updated with (its outputs can be clipped)
            total += squared_norm(normalizer.old_reward) + squared_norm(normalizer.old_obs)
        if not math.isfinite(total):
            for normalizer in self.normalizers:
                check_finite("reward", normalizer.old_reward, step, self._consequence, source=_RECEIVED)
                check_finite("observation", normalizer.old_obs, step, self._consequence, source=_RECEIVED)
            check_finite("reward", rewards, step, self._consequence)
            check_finite("observation", observations, step, self._consequence)
        if not dones.any():
            return
        for index in np.flatnonzero(dones):
            terminal = infos[index].get("terminal_observation")
            if terminal is not None and infos[index].get("TimeLimit.truncated", False):
                check_finite("terminal_observation", _one_row(terminal), step, self._consequence, env_indices=[int(index)])


def _one_row(observation: Any) -> Any:
    """One env's observation (a dict: each key's) as a batch of one row."""
    if isinstance(observation, dict):
        return {key: np.asarray(part)[None] for key, part in observation.items()}
    return np.asarray(observation)[None]


def check_policy_values(field: str, values: np.ndarray, step: int, env_indices: Sequence[int] | None = None) -> None:
    """Check values the policy computed from checked observations, before they are used.

    :param field: ``"value"``, ``"terminal_value"`` or ``"last_value"``.
    :param values: one per env (or per ``env_indices``).
    :param step: the step that produced the observations.
    """
    check_finite(field, values, step, f"collection stopped before it was used; {_POLICY_HINT}", env_indices)


def check_filled_buffer(buffer: RolloutBuffer, first_step: int) -> None:
    """Check the policy's values in a buffer filled by SB3's loop, which computes them inside itself.

    In order: ``values`` (of each row's observation); ``rewards`` (finite at their step, so non-finite only where a
    truncated episode's ``gamma * terminal_value`` was added); ``returns`` (from those and ``last_value``, which enters
    at the last row and spreads backwards: the last non-finite row is reported). Raises
    :class:`NonFiniteCollectionError` naming, as our loop does, the step that produced the observation.

    :param first_step: the step count before the rollout's first step.
    """
    consequence = f"it is in the rollout buffer, which no update has used; {_POLICY_HINT}"
    # field, and the row's observation (0: the one the row acted on; 1: the one its step produced)
    for name, field, produced in (("values", "value", 0), ("rewards", "terminal_value", 1), ("returns", "last_value", 1)):
        array = np.asarray(getattr(buffer, name))
        bad_rows = np.flatnonzero(~np.isfinite(array.reshape(len(array), -1)).all(axis=1))
        if len(bad_rows):
            row = int(bad_rows[-1] if field == "last_value" else bad_rows[0])
            check_finite(field, array[row], first_step + (row + produced) * buffer.n_envs, consequence)
