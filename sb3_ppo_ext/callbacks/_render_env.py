"""The separate environment that the video and live-view callbacks play: checks of the ``env`` argument and its
creation in a render mode (whether a window can open: ``sb3_ppo_ext.envs._bullet.display_available``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator
from stable_baselines3.common.vec_env import VecEnv

from sb3_ppo_ext.envs._bullet import display_available


def headless_sdl_settings() -> dict[str, str]:
    """``SDL_VIDEODRIVER=dummy`` on a machine without a display, unless an SDL video driver is chosen already.

    pygame renders gymnasium's classic-control envs, ``rgb_array`` included; on such a machine SDL otherwise probes
    its Wayland driver, whose client library prints "error: XDG_RUNTIME_DIR is invalid or not set in the environment."
    before SDL renders off-screen anyway. The command line applies it at start; :func:`make_render_env` (the video and
    live-view callbacks) before it builds an env that renders off-screen.
    """
    if display_available() or "SDL_VIDEODRIVER" in os.environ:
        return {}
    return {"SDL_VIDEODRIVER": "dummy"}


def check_env_spec(name: str, env: Any, env_kwargs: Any) -> None:
    """Check an environment argument given as an env id (with keyword arguments) or as an environment instance.

    :raises ValueError: for an unknown env id, non-dict ``env_kwargs``, or another type.
    """
    if env_kwargs is not None and not isinstance(env_kwargs, dict):
        raise ValueError(f"env_kwargs must be a dict or None, got {env_kwargs!r}")
    if isinstance(env, str):
        try:
            gym.spec(env)
        except gym.error.Error as error:
            raise ValueError(f"{name} must be a registered gymnasium env id, got {env!r} ({error})") from error
        return
    if isinstance(env, VecEnv):
        raise ValueError(f"{name} must be a single gymnasium.Env or an env id, not a VecEnv, got {env!r}")
    if not isinstance(env, gym.Env):
        raise ValueError(f"{name} must be a gymnasium env id string or a gymnasium.Env, got {env!r}")
    if env_kwargs:
        raise ValueError(f"env_kwargs is only used when {name} is an env id string, got env_kwargs={env_kwargs!r}")


def make_render_env(
    name: str,
    env: str | gym.Env,
    env_kwargs: dict[str, Any] | None,
    render_mode: str,
    env_wrapper: Callable[[gym.Env], gym.Env] | None = None,
) -> gym.Env:
    """The environment to render: created from an id with ``render_mode`` (then wrapped by ``env_wrapper``), or an
    instance checked for that mode.

    Off-screen (any mode but ``"human"``) on a machine without a display, SDL's video driver is set to ``dummy``
    first unless the user chose one (:func:`headless_sdl_settings`).

    :raises ValueError: when the environment does not support ``render_mode``.
    """
    if render_mode != "human":
        os.environ.update(headless_sdl_settings())
    if isinstance(env, str):
        check_declared_render_mode(name, env, env_kwargs, render_mode)
        created = gym.make(env, render_mode=render_mode, **(env_kwargs or {}))
        check_render_mode(name, created, render_mode)
        return created if env_wrapper is None else env_wrapper(created)
    check_render_mode(name, env, render_mode)
    return env


def check_env_wrapper(env: str | gym.Env, env_wrapper: Any) -> Callable[[gym.Env], gym.Env] | None:
    """``env_wrapper`` if it is ``None`` or a callable applied to an env created from an id; else ``ValueError``."""
    if env_wrapper is None:
        return None
    if not callable(env_wrapper):
        raise ValueError(f"env_wrapper must be a callable taking and returning a gymnasium.Env, got {env_wrapper!r}")
    if not isinstance(env, str):
        raise ValueError("env_wrapper applies to an env created from an id; wrap an env instance before passing it")
    return env_wrapper


def declared_render_modes(env_id: str, env_kwargs: dict[str, Any] | None = None) -> list[str]:
    """The ``metadata["render_modes"]`` of a registered env, read from its class when possible (no env is built)."""
    spec = gym.spec(env_id)
    creator = load_env_creator(spec.entry_point) if isinstance(spec.entry_point, str) else spec.entry_point
    metadata = getattr(creator, "metadata", None)
    if isinstance(metadata, dict):
        return list(metadata.get("render_modes", []))
    probe = gym.make(env_id, **(env_kwargs or {}))  # a factory function: build one to read its metadata
    try:
        return list(probe.metadata.get("render_modes", []))
    finally:
        probe.close()


def check_declared_render_mode(name: str, env_id: str, env_kwargs: dict[str, Any] | None, render_mode: str) -> None:
    """Raise ``ValueError`` unless the registered env ``env_id`` declares ``render_mode``."""
    supported = declared_render_modes(env_id, env_kwargs)
    if render_mode not in supported:
        raise ValueError(f"{name} must render in {render_mode!r} mode, got {env_id} (it supports {supported})")


def check_render_mode(name: str, env: gym.Env, render_mode: str) -> None:
    """Raise ``ValueError`` unless ``env`` declares ``render_mode`` and was created with it."""
    supported = env.metadata.get("render_modes", [])
    if render_mode not in supported or env.render_mode != render_mode:
        env_id = env.spec.id if env.spec is not None else type(env.unwrapped).__name__
        raise ValueError(
            f"{name} must render in {render_mode!r} mode, got {env_id} with render_mode={env.render_mode!r} "
            f"(it supports {supported})"
        )
