from sb3_ppo_ext.ppo.ppo import PPO

__all__ = ["PPO"]
