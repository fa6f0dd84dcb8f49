"""Side-by-side training speed: SB3's PPO against ours, same task, same settings, in one run.

Prints env steps per second for both, their ratio, the env-only rate through the same VecEnv (the ceiling), and
where the time goes (env, policy inference and loop overhead, update). Runs alternate (SB3, ours, SB3, ours, ...)
so that machine noise hits both alike; the ratio of the medians is reported, in wall-clock steps per second and
in steps per CPU second of the process (all of it runs on one thread, so on a busy machine the latter is the
steadier measure). Each run starts with one untimed
warm-up iteration (where ``compile_update=True`` compiles).

    python benchmarks/bench_ppo.py                       # both configurations on our Walker2D
    python benchmarks/bench_ppo.py --config default --repeats 3 --compile   # adds compile_update=True
    python benchmarks/bench_ppo.py --env Walker2DBulletEnv-v0               # pybullet_envs_gymnasium's walker
    python benchmarks/bench_ppo.py --config default --ablation              # adds ours with each speed trick off

``--ablation`` adds one contender per speed trick, ours with that trick alone switched off, so that each trick's gain
is the difference to "ours": the numpy actor (``fast_collect=False``), the direct evaluation of log-probabilities
(``direct_evaluation=False``), ``ClippedStep``'s direct path and fused Adam (``optimizer_kwargs=dict(fused=False)``,
which also takes ``ClippedStep``'s direct path away). Each trick's module docstring quotes its measured gain.

Configurations: ``default`` is SB3's defaults (1 env, n_steps 2048, batch 64, 10 epochs, 64x64 tanh); ``zoo`` is
rl-zoo3's tuned PyBullet walker block, read from rl-zoo3's own ``hyperparams/ppo.yml`` (16 envs, n_steps 512, batch
128, 20 epochs, 256x256 ReLU, gSDE, VecNormalize); ``zoo_8x10`` the same with minibatches of 1024 and 10 epochs;
``walker`` the bundled Walker2D block, read from ``zoo_configs/ppo_ext.yml`` (``zoo_8x10`` with gamma 0.98 and plain
Gaussian noise). ``--threads 2`` gives the update both cores (the floor's wall clock then drops
below its CPU time).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium as gym
import numpy as np
import rl_zoo3
import torch as th
from stable_baselines3 import PPO as SB3PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper, VecNormalize

from sb3_ppo_ext import PPO
from sb3_ppo_ext.ppo import optim
from sb3_ppo_ext.zoo.config.blocks import SCHEDULE_KEYS, ZOO_KEYS, as_schedule, preprocess_block
from sb3_ppo_ext.zoo.config.yaml_files import load_yaml_file

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def zoo_block(config_file: str, env_id: str) -> dict[str, Any]:
    """A zoo config block as the benchmark's settings: ``n_envs``, ``normalize`` (whether observations and returns are
    normalised) and the algorithm's keyword arguments (schedules and ``policy_kwargs`` read as rl-zoo3 reads them).

    The block's callbacks, wrappers and budget are left out: they change what is learned, not the time per step.

    :param config_file: a zoo config file (YAML).
    :param env_id: the block's key in it.
    """
    block = preprocess_block(dict(load_yaml_file(config_file)[env_id]), where=f"{config_file}: {env_id}", algorithm=PPO)
    kwargs = {key: value for key, value in block.items() if key not in ZOO_KEYS and key != "policy"}
    kwargs.update({key: as_schedule(kwargs[key]) for key in SCHEDULE_KEYS if key in kwargs})
    return dict(n_envs=int(block.get("n_envs", 1)), normalize=bool(block.get("normalize", False)), kwargs=kwargs)


CONFIGS: dict[str, dict[str, Any]] = {
    "default": dict(n_envs=1, normalize=False, kwargs={}),
    #: rl-zoo3's tuned PyBullet walker block, from the file rl-zoo3 installs.
    "zoo": zoo_block(os.path.join(os.path.dirname(rl_zoo3.__file__), "hyperparams", "ppo.yml"), "Walker2DBulletEnv-v0"),
    #: The bundled Walker2D block (zoo_configs/ppo_ext.yml).
    "walker": zoo_block(os.path.join(REPOSITORY, "zoo_configs", "ppo_ext.yml"), "sb3_ppo_ext/Walker2D-v0"),
}
#: The walker block screened with 16 times fewer gradient steps (benchmarks/grids/walker_fast.yml, ``clip_8x10``):
#: minibatches of 1024, 10 epochs, a constant rate of 3e-4 and clip 0.2, the rest the ``zoo`` block's.
CONFIGS["zoo_8x10"] = dict(
    CONFIGS["zoo"], kwargs=dict(CONFIGS["zoo"]["kwargs"], batch_size=1024, n_epochs=10, learning_rate=3e-4, clip_range=0.2)
)


class TimedVecEnv(VecEnvWrapper):
    """Accumulates the wall time spent inside the wrapped VecEnv's step."""

    def __init__(self, venv: VecEnv) -> None:
        super().__init__(venv)
        self.seconds = 0.0

    def reset(self) -> Any:
        return self.venv.reset()

    def step_async(self, actions: np.ndarray) -> None:
        self._start = time.perf_counter()
        self.venv.step_async(actions)

    def step_wait(self) -> Any:
        result = self.venv.step_wait()
        self.seconds += time.perf_counter() - self._start
        return result


def timed(algorithm: type) -> type:
    """A subclass of ``algorithm`` that records the time spent in ``train()``."""

    class Timed(algorithm):  # type: ignore[misc, valid-type]
        train_seconds = 0.0

        def train(self) -> None:
            start = time.perf_counter()
            super().train()
            self.train_seconds += time.perf_counter() - start

    return Timed


@contextlib.contextmanager
def patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    """``owner.name`` set to ``value`` inside the block (a speed trick switched off for one contender)."""
    original = owner.__dict__[name]
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


Ablation = Callable[[], contextlib.AbstractContextManager]
#: label -> (keyword arguments of ours, the switch-off of a trick that has no keyword)
ABLATIONS: dict[str, tuple[dict[str, Any], Ablation]] = {
    "-numpy actor": ({"fast_collect": False}, contextlib.nullcontext),
    "-direct eval": ({"direct_evaluation": False}, contextlib.nullcontext),
    "-ClippedStep": ({}, lambda: patched(optim.ClippedStep, "supports", staticmethod(lambda optimizer, parameters: False))),
    "-fused Adam": ({"policy_kwargs": {"optimizer_kwargs": {"fused": False}}}, contextlib.nullcontext),
}


def make_env(env_id: str, n_envs: int, normalize: bool, seed: int, gamma: float = 0.99) -> tuple[VecEnv, TimedVecEnv]:
    """The benchmark's VecEnv and the timer inside it; normalised with the config's discount, as rl-zoo3 does."""
    venv = make_vec_env(env_id, n_envs=n_envs, seed=seed)
    timer = TimedVecEnv(venv)
    env: VecEnv = timer
    if normalize:
        env = VecNormalize(timer, gamma=gamma)
    return env, timer


def measure(algorithm: type, env_id: str, config: dict[str, Any], iterations: int, seed: int, extra: dict) -> dict:
    env, timer = make_env(env_id, config["n_envs"], config["normalize"], seed, config["kwargs"].get("gamma", 0.99))
    kwargs = dict(config["kwargs"], **extra)
    if "policy_kwargs" in config["kwargs"] and "policy_kwargs" in extra:
        kwargs["policy_kwargs"] = dict(config["kwargs"]["policy_kwargs"], **extra["policy_kwargs"])
    model = timed(algorithm)("MlpPolicy", env, seed=seed, device="cpu", **kwargs)
    steps = model.n_steps * config["n_envs"] * iterations
    model.learn(model.n_steps * config["n_envs"])  # warm-up iteration, not timed (torch.compile compiles here)
    timer.seconds, model.train_seconds = 0.0, 0.0
    start, cpu_start = time.perf_counter(), time.process_time()
    model.learn(steps, reset_num_timesteps=False)
    total, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    env.close()
    return dict(
        fps=steps / total,
        cpu_fps=steps / cpu,
        env=timer.seconds / total,
        update=model.train_seconds / total,
        other=(total - timer.seconds - model.train_seconds) / total,
        ms_per_step_outside_env=1e3 * (total - timer.seconds - model.train_seconds) / steps,
        ms_per_update_step=1e3 * model.train_seconds / steps,
    )


def update_floor_ms_per_step(env_id: str, config: dict[str, Any], minibatches: int = 200) -> tuple[float, float]:
    """The update's compute floor: forward, backward and a fused Adam step of the very same policy networks on
    minibatches of the configured size with a trivial loss (no PPO maths, no data handling), per env step.

    :return: CPU time and wall clock per env step (ms); they differ where torch runs more than one thread.
    """
    env, _ = make_env(env_id, 1, False, seed=0)
    model = PPO("MlpPolicy", env, device="cpu", **config["kwargs"])
    policy = model.policy
    batch = th.as_tensor(np.stack([env.observation_space.sample() for _ in range(model.batch_size)]), dtype=th.float32)
    parameters = list(policy.parameters())
    optimizer = th.optim.Adam(parameters, lr=1e-5, fused=True)

    def step() -> None:
        latent_pi, latent_vf = policy.mlp_extractor(policy.extract_features(batch))
        loss = policy.action_net(latent_pi).sum() + policy.value_net(latent_vf).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    for _ in range(20):
        step()
    start, wall_start = time.process_time(), time.perf_counter()
    for _ in range(minibatches):
        step()
    cpu_per_minibatch = (time.process_time() - start) / minibatches
    wall_per_minibatch = (time.perf_counter() - wall_start) / minibatches
    env.close()
    rollout = model.n_steps * config["n_envs"]
    minibatches_per_step = model.n_epochs * -(-rollout // model.batch_size) / rollout
    return 1e3 * cpu_per_minibatch * minibatches_per_step, 1e3 * wall_per_minibatch * minibatches_per_step


def env_only_rate(env_id: str, config: dict[str, Any], seconds: float = 5.0) -> float:
    env, _ = make_env(env_id, config["n_envs"], config["normalize"], 0, config["kwargs"].get("gamma", 0.99))
    env.reset()
    env.action_space.seed(0)
    actions = np.stack([env.action_space.sample() for _ in range(config["n_envs"])])
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        env.step(actions)
        steps += config["n_envs"]
    rate = steps / (time.perf_counter() - start)
    env.close()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="sb3_ppo_ext/Walker2D-v0")
    parser.add_argument("--config", choices=[*CONFIGS, "all"], default="all")
    parser.add_argument("--repeats", type=int, default=3, help="alternating runs per algorithm")
    parser.add_argument("--iterations", type=int, default=2, help="timed rollout+update iterations per run")
    parser.add_argument("--compile", action="store_true", help="also run ours with compile_update=True")
    parser.add_argument("--threads", type=int, default=1, help="torch threads for both (rl-zoo3's default: all cores)")
    parser.add_argument("--ablation", action="store_true", help="also run ours with each speed trick switched off")
    parser.add_argument("--no-sb3", action="store_true", help="leave SB3's PPO out (ours and the ablations only)")
    args = parser.parse_args()
    th.set_num_threads(args.threads)
    if "Bullet" in args.env:
        import pybullet_envs_gymnasium  # noqa: F401  (registers the reference PyBullet tasks)
    gym.make(args.env).close()  # fail early on an unknown id

    names = list(CONFIGS) if args.config == "all" else [args.config]
    for name in names:
        config = CONFIGS[name]
        contenders: dict[str, tuple[type, dict, Ablation]] = {
            "SB3 PPO": (SB3PPO, {}, contextlib.nullcontext),
            "ours": (PPO, {}, contextlib.nullcontext),
        }
        if args.no_sb3:
            del contenders["SB3 PPO"]
        if args.compile:
            contenders["ours+compile"] = (PPO, {"compile_update": True}, contextlib.nullcontext)
        if args.ablation:
            contenders.update({label: (PPO, *ablation) for label, ablation in ABLATIONS.items()})
        results: dict[str, list[dict]] = {label: [] for label in contenders}
        for repeat in range(args.repeats):
            for label, (algorithm, extra, switched_off) in contenders.items():
                with switched_off():
                    results[label].append(measure(algorithm, args.env, config, args.iterations, repeat, extra))
        ceiling = env_only_rate(args.env, config)
        floor_cpu, floor_wall = update_floor_ms_per_step(args.env, config)
        print(
            f"\n== {args.env}, config '{name}' ({config['n_envs']} envs), {args.threads} torch thread(s), "
            f"{args.repeats} alternating runs each =="
        )
        print(f"env only (random actions, same VecEnv stack): {ceiling:8.0f} steps/s")
        print(
            f"update floor (the networks' forward+backward+Adam alone): {floor_cpu:.3f} ms CPU time, "
            f"{floor_wall:.3f} ms wall clock per env step"
        )
        medians, cpu_medians = {}, {}
        for label, runs in results.items():
            medians[label] = statistics.median(run["fps"] for run in runs)
            cpu_medians[label] = statistics.median(run["cpu_fps"] for run in runs)
            mean = {key: statistics.mean(run[key] for run in runs) for key in runs[0]}
            each = ", ".join(f"{run['fps']:.0f}" for run in runs)
            print(
                f"{label:13s} fps median {medians[label]:6.0f} (runs: {each}; per CPU second: {cpu_medians[label]:.0f}) | "
                f"time in env {mean['env']:5.1%}, update {mean['update']:5.1%}, policy+loop {mean['other']:5.1%} | "
                f"per env step: {mean['ms_per_step_outside_env']:.3f} ms policy+loop, "
                f"{mean['ms_per_update_step']:.3f} ms update"
            )
        reference = "ours" if args.no_sb3 else "SB3 PPO"
        for label in contenders:
            if label != reference:
                print(
                    f"speed-up ({label} / {reference}, medians): {medians[label] / medians[reference]:.2f}x "
                    f"wall-clock, {cpu_medians[label] / cpu_medians[reference]:.2f}x per CPU second"
                )


if __name__ == "__main__":
    main()
