"""The PPO algorithm (``sb3_ppo_ext.PPO``, defined in :mod:`sb3_ppo_ext.ppo.ppo`) and its update's modules: one per role
and one per speed trick, each saying what it mirrors."""

from sb3_ppo_ext.ppo.ppo import PPO

__all__ = ["PPO"]
