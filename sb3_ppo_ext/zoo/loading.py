"""How rl-zoo3's ``enjoy`` / ``record_video`` load a run while ``sb3-ppo-ext`` runs them: without unpickling.

Both scripts load the model with ``ALGOS[algo].load(...)`` and the ``VecNormalize`` statistics inside
``create_test_env`` with ``VecNormalize.load(...)``, both of which unpickle. :class:`PlayedRunLoading` provides the
stand-ins swapped into their modules for the time of the script: the model through
:func:`~sb3_ppo_ext.safe_loading.load_without_pickles` (to act: ``training=False``; the saved spaces matched against
the env ``create_test_env`` made), the statistics from their plain-data twin. With ``--trust-pickles`` each stand-in
calls rl-zoo3's own loading instead.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Any

from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from sb3_ppo_ext.safe_loading import TRUST_PICKLES_OPTION, load_vecnormalize_without_pickles, load_without_pickles

TRUST_PICKLES_HELP = (
    "load the run's model zip and vecnormalize.pkl by unpickling them, as rl-zoo3 and SB3 do: a crafted file runs "
    "code, so only for files you trust (default: both are rebuilt from plain data, and what cannot be is refused)"
)


class _AlgorithmLoader:
    """Stands in for an algorithm class in rl-zoo3's ``ALGOS`` while a run is played: only ``load`` is used."""

    def __init__(self, algorithm: type, loading: PlayedRunLoading) -> None:
        self.algorithm = algorithm
        self.loading = loading

    def load(self, path: str, env: VecEnv | None = None, custom_objects: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        if self.loading.trust_pickles:
            return self.algorithm.load(path, env=env, custom_objects=custom_objects, **kwargs)
        return load_without_pickles(path, env, algorithm=self.algorithm, training=False, custom_objects=custom_objects,
                                    reference_env=self.loading.env, **kwargs)


class _StatisticsLoader:
    """Stands in for ``VecNormalize`` in ``rl_zoo3.utils`` while a run is played: only ``load`` is used."""

    def __init__(self, loading: PlayedRunLoading) -> None:
        self.loading = loading

    def load(self, load_path: str, venv: VecEnv) -> VecNormalize:
        if self.loading.trust_pickles:
            return VecNormalize.load(load_path, venv)
        return load_vecnormalize_without_pickles(load_path, venv)


class PlayedRunLoading:
    """The loading of one played run: whether pickles are trusted (set from the parsed options by :meth:`complete`)
    and the env ``create_test_env`` made (the saved spaces are matched against it)."""

    def __init__(self) -> None:
        self.trust_pickles = False
        self.env: VecEnv | None = None

    def complete(self, parsed: argparse.Namespace) -> None:
        """Read ``--trust-pickles`` from the options rl-zoo3's script parsed."""
        self.trust_pickles = bool(getattr(parsed, "trust_pickles", False))

    def algorithms(self, registry: Mapping[str, type]) -> dict[str, _AlgorithmLoader]:
        """rl-zoo3's ``ALGOS`` with each algorithm's ``load`` going through this loading."""
        return {name: _AlgorithmLoader(algorithm, self) for name, algorithm in registry.items()}

    def statistics_loader(self) -> _StatisticsLoader:
        """The stand-in for ``VecNormalize`` in ``rl_zoo3.utils`` (whose ``create_test_env`` calls its ``load``)."""
        return _StatisticsLoader(self)

    def recording(self, create_test_env: Callable[..., VecEnv]) -> Callable[..., VecEnv]:
        """``create_test_env``, remembering the env it returns."""

        def create(*args: Any, **kwargs: Any) -> VecEnv:
            self.env = create_test_env(*args, **kwargs)
            return self.env

        return create


__all__ = ["TRUST_PICKLES_HELP", "TRUST_PICKLES_OPTION", "PlayedRunLoading"]
