# Interim placeholder while the from-scratch PPO is written (replaced in the next commit).
from stable_baselines3 import PPO  # noqa: F401
