"""Shipped agents: saved and loaded as plain data (no pickle), played, recorded and exported from the CLI."""

import json
import os
import pickle
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cloudpickle
import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from model_cards import rate_interval
from scipy import stats
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

from sb3_ppo_ext import PPO
from sb3_ppo_ext.cli import main as cli_main
from sb3_ppo_ext.plain_data import policy_kwargs_from_data, policy_kwargs_to_data, space_from_data, space_to_data
from sb3_ppo_ext.pretrained import AGENT_FILE, add_provenance, list_pretrained, load_pretrained, play, save_pretrained


@pytest.fixture(scope="module")
def pendulum_agent(tmp_path_factory):
    """A briefly trained gSDE Pendulum agent with VecNormalize, saved as an agent folder."""
    env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=2, seed=0))
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=64,
        batch_size=64,
        use_sde=True,
        seed=0,
        policy_kwargs={"net_arch": {"pi": [32], "vf": [32]}, "activation_fn": th.nn.ReLU, "log_std_init": -1},
    )
    model.learn(512)
    folder = str(tmp_path_factory.mktemp("agent") / "pendulum")
    save_pretrained(model, folder, env_id="Pendulum-v1", hyperparams={"n_steps": 64}, provenance={"seed": 0})
    return model, env, folder


def test_roundtrip_gives_the_same_actions(pendulum_agent):
    model, env, folder = pendulum_agent
    loaded, loaded_env = load_pretrained(folder, seed=3)
    observation = loaded_env.reset()
    env.training = False
    expected, _ = model.predict(env.normalize_obs(loaded_env.get_original_obs()), deterministic=True)
    actual, _ = loaded.predict(observation, deterministic=True)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-6)
    assert isinstance(loaded_env, VecNormalize) and not loaded_env.training and not loaded_env.norm_reward
    np.testing.assert_array_equal(loaded_env.obs_rms.mean, env.obs_rms.mean)


def test_loading_unpickles_nothing(pendulum_agent, monkeypatch):
    _, _, folder = pendulum_agent

    def refuse(*args, **kwargs):
        raise AssertionError("a pickle was loaded")

    for module in (pickle, cloudpickle):
        monkeypatch.setattr(module, "load", refuse)
        monkeypatch.setattr(module, "loads", refuse)
    monkeypatch.setattr(th, "load", refuse)
    model, env = load_pretrained(folder)
    assert play(model, env, 5) == []


def test_agent_files_are_plain_data_without_the_critic(pendulum_agent):
    _, _, folder = pendulum_agent
    assert sorted(os.listdir(folder)) == ["agent.json", "policy.npz"]
    with np.load(os.path.join(folder, "policy.npz"), allow_pickle=False) as weights:
        names = list(weights.files)
        assert all(weights[name].dtype != object for name in names)
    assert not any(name.startswith(("value_net.", "mlp_extractor.value_net.")) for name in names)
    assert "log_std" in names and "action_net.weight" in names
    with open(os.path.join(folder, AGENT_FILE)) as stream:
        agent = json.load(stream)
    assert agent["env_id"] == "Pendulum-v1" and agent["policy"] == "MlpPolicy" and agent["use_sde"] is True
    assert agent["policy_kwargs"]["activation_fn"] == "ReLU"
    assert agent["provenance"] == {"seed": 0}


@pytest.mark.parametrize(
    "space",
    [
        spaces.Box(-1.0, 1.0, (3,), np.float32),
        spaces.Box(np.array([-np.inf, 0.0]), np.array([np.inf, 2.0]), dtype=np.float64),
        spaces.Discrete(4, start=1),
        spaces.MultiDiscrete([2, 3]),
        spaces.MultiBinary(5),
    ],
)
def test_spaces_round_trip_as_json(space):
    data = json.loads(json.dumps(space_to_data(space)))
    assert space_from_data(data) == space


def test_unsupported_things_are_named():
    with pytest.raises(ValueError, match="Dict"):
        space_to_data(spaces.Dict({"a": spaces.Discrete(2)}))
    with pytest.raises(ValueError, match="features_extractor_class"):
        policy_kwargs_to_data({"features_extractor_class": object})
    with pytest.raises(ValueError, match="activation_fn"):
        policy_kwargs_to_data({"activation_fn": lambda x: x})
    with pytest.raises(ValueError, match=r"not an allow-listed torch\.nn activation"):
        policy_kwargs_from_data({"activation_fn": "system"})
    with pytest.raises(ValueError, match="activation_fn"):
        policy_kwargs_to_data({"activation_fn": th.nn.Module})


def test_add_provenance_keeps_the_rest_of_the_agent(pendulum_agent, tmp_path):
    _, _, folder = pendulum_agent
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    assert add_provenance(str(copy), {"shipped_eval": {"episodes": 3}}) == {"seed": 0, "shipped_eval": {"episodes": 3}}
    with open(os.path.join(folder, AGENT_FILE)) as original, open(copy / AGENT_FILE) as updated:
        before, after = json.load(original), json.load(updated)
    assert {**before, "provenance": after["provenance"]} == after
    load_pretrained(str(copy))


def test_unknown_agent_names_the_shipped_ones():
    with pytest.raises(ValueError, match=r"no pretrained agent for 'CartPole-v1'.*shipped agents"):
        load_pretrained("CartPole-v1")


def test_an_agent_for_other_spaces_is_refused(pendulum_agent, tmp_path):
    _, _, folder = pendulum_agent
    changed = tmp_path / "changed"
    changed.mkdir()
    with open(os.path.join(folder, AGENT_FILE)) as stream:
        agent = json.load(stream)
    agent["observation_space"]["shape"] = [4]
    agent["observation_space"]["low"] = agent["observation_space"]["high"] = [1.0] * 4
    (changed / AGENT_FILE).write_text(json.dumps(agent))
    shutil.copy(os.path.join(folder, "policy.npz"), changed / "policy.npz")
    with pytest.raises(ValueError, match="observation_space of Pendulum-v1"):
        load_pretrained(str(changed))


def test_a_wrapper_off_the_allow_list_is_refused(pendulum_agent, tmp_path):
    _, _, folder = pendulum_agent
    with open(os.path.join(folder, AGENT_FILE)) as stream:
        agent = json.load(stream)
    agent["env_wrapper"] = [{"os.system": {}}]
    (tmp_path / AGENT_FILE).write_text(json.dumps(agent))
    with pytest.raises(ValueError, match=r"'os\.system'.*not an allow-listed"):
        load_pretrained(str(tmp_path))


@pytest.mark.parametrize("normalized", [False, True], ids=["plain", "VecNormalize"])
def test_play_reports_distance_and_speed_on_a_walker(normalized):
    env = make_vec_env("sb3_ppo_ext/Walker2D-v0", n_envs=1, seed=0)
    if normalized:  # how every shipped locomotion agent is played: the start x is read through the wrapper
        env = VecNormalize(env, training=False)

    class Still:
        def predict(self, observation, deterministic=True):
            return np.zeros((1, 6), dtype=np.float32), None

    (episode, *_) = play(Still(), env, 1000)
    assert not episode["truncated"] and episode["length"] < 1000
    assert abs(episode["speed"] - episode["distance"] / (episode["length"] * 0.0165)) < 1e-9
    # the task's reward terms over the episode, which add up to its (unnormalised) return
    terms = episode["reward_terms"]
    assert set(terms) == {"alive", "progress", "electricity", "stall_torque", "joints_at_limit", "feet_collision"}
    assert sum(terms.values()) == pytest.approx(episode["return"], rel=1e-9, abs=1e-6)
    assert terms["electricity"] == 0.0 and terms["alive"] > 0  # no torque; standing for a while
    with pytest.raises(ValueError, match="n_steps"):
        play(Still(), env, 0)


def test_cli_enjoy_record_export(pendulum_agent, tmp_path, capsys):
    onnxruntime = pytest.importorskip("onnxruntime")
    model, env, folder = pendulum_agent
    cli_main(["enjoy", "--pretrained", "--env", folder, "-n", "400", "--no-render"])
    output = capsys.readouterr().out
    assert output.count("Episode Reward:") == 2 and "2 episodes: mean return" in output
    cli_main(["record-video", "--pretrained", "--env", folder, "-n", "20", "-o", str(tmp_path)])
    video = tmp_path / "pendulum-pretrained.mp4"
    assert video.stat().st_size > 1000
    cli_main(["record-video", "--pretrained", "--env", folder, "-n", "5", "-o", str(tmp_path)])
    assert (tmp_path / "pendulum-pretrained-2.mp4").exists() and video.stat().st_size > 1000  # the first one is kept
    onnx_path = tmp_path / "p.onnx"
    cli_main(["export", "--pretrained", "--env", folder, "-o", str(onnx_path)])
    raw = np.array([[0.5, -0.2, 1.0]], dtype=np.float32)
    (onnx_action,) = onnxruntime.InferenceSession(str(onnx_path)).run(None, {"obs": raw})
    env.training = False
    expected, _ = model.predict(env.normalize_obs(raw), deterministic=True)
    np.testing.assert_allclose(onnx_action, expected, atol=1e-5)


def test_enjoy_plays_several_episodes_by_default_and_sums_them_up(pendulum_agent, capsys):
    """The default is a number of episodes, not a number of steps (1000 steps were one humanoid episode)."""
    _, _, folder = pendulum_agent
    cli_main(["enjoy", "--pretrained", "--env", folder, "--n-episodes", "3", "--no-render"])
    output = capsys.readouterr().out
    assert output.count("Episode Reward:") == 3 and output.count("Episode Length: 200  (time limit)") == 3
    assert re.search(
        r"^3 episodes: mean return -?\d+\.\d\d \(std \d+\.\d\d, min -?\d+\.\d\d, max -?\d+\.\d\d\), "
        r"mean length 200$",
        output,
        re.MULTILINE,
    )


def test_episode_lines_and_summary_say_how_each_ended_and_the_success_rate():
    from sb3_ppo_ext.zoo.pretrained_commands import episode_line, episodes_summary

    landings = [
        {"return": 200.0, "length": 230, "truncated": False, "success": True},
        {"return": -100.0, "length": 120, "truncated": False, "success": False, "crash_reason": "hard_touchdown"},
        {"return": 10.0, "length": 400, "truncated": True, "success": False},
        {"return": 150.0, "length": 250, "truncated": False, "success": True},
    ]
    assert episode_line(landings[0]) == "Episode Reward: 200.00  Episode Length: 230  success"
    assert episode_line(landings[1]).endswith("Episode Length: 120  no success (hard_touchdown)")
    assert episode_line(landings[2]).endswith("no success (time limit)")
    assert episodes_summary(landings) == [
        "4 episodes: mean return 65.00 (std 118.00, min -100.00, max 200.00), mean length 250",
        "success rate: 2/4 (50%); the others ended by: hard_touchdown 1, time_limit 1",
    ]
    walks = [
        {"return": 900.0, "length": 1000, "truncated": True, "distance": 30.0, "speed": 1.8},
        {"return": 700.0, "length": 1000, "truncated": True, "distance": 20.0, "speed": 1.2},
    ]
    with_terms = [
        {**walks[0], "reward_terms": {"alive": 2000.0, "progress": -1100.0}},
        {**walks[1], "length": 500, "truncated": False, "reward_terms": {"alive": 1000.0, "progress": -300.0}},
    ]
    assert episodes_summary(with_terms)[-1] == "reward per step: alive 2.000, progress -0.933"
    assert episode_line(walks[0]) == (
        "Episode Reward: 900.00  Episode Length: 1000  distance 30.0 m  mean speed 1.80 m/s  (time limit)"
    )
    assert episodes_summary(walks) == [
        "2 episodes: mean return 800.00 (std 100.00, min 700.00, max 900.00), mean length 1000",
        "mean speed 1.50 m/s",
    ]
    assert episodes_summary([]) == ["no episode finished within the steps played (raise -n)"]


def test_cli_missing_agent_is_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["enjoy", "--pretrained", "--env", "CartPole-v1"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.startswith("sb3-ppo-ext enjoy: error: no pretrained agent for 'CartPole-v1'")


def test_a_run_packs_its_final_model_or_a_checkpoint_with_that_checkpoints_statistics(tmp_path):
    """``save_pretrained_from_run`` (what ``tools/ship_agent.py`` calls) on a zoo run with checkpoints."""
    from sb3_ppo_ext.pretrained import read_agent
    from sb3_ppo_ext.safe_loading import read_vecnormalize_statistics
    from sb3_ppo_ext.zoo.packing import save_pretrained_from_run

    cli_main(
        [
            "train",
            "--env",
            "Pendulum-v1",
            "-n",
            "1024",
            "-f",
            str(tmp_path / "logs"),
            "--seed",
            "3",
            "--save-freq",
            "512",
            "--eval-freq",
            "512",
            "--eval-episodes",
            "1",
            "--no-progress",
            "--verbose",
            "0",
            "--num-threads",
            "1",
            "--hyperparams",
            "n_envs:2",
            "n_steps:256",
            "batch_size:128",
            "n_epochs:1",
            "normalize:True",
        ]
    )
    run = str(tmp_path / "logs" / "ppo_ext" / "Pendulum-v1_1")
    final = save_pretrained_from_run(run, str(tmp_path / "final"))
    early = save_pretrained_from_run(run, str(tmp_path / "early"), model="checkpoint:512")
    assert (final["timesteps"], final["model"]) == (1024, "final")
    assert (early["timesteps"], early["model"]) == (512, "checkpoint:512")
    assert (final["final_eval_timesteps"], early["final_eval_timesteps"]) == (1024, 512)
    checkpoint_statistics = read_vecnormalize_statistics(os.path.join(run, "rl_model_vecnormalize_512_steps.pkl"))
    _, agent = read_agent(str(tmp_path / "early"))
    np.testing.assert_allclose(agent["normalization"]["mean"], checkpoint_statistics.obs_rms.mean)
    _, final_agent = read_agent(str(tmp_path / "final"))
    assert not np.allclose(final_agent["normalization"]["mean"], checkpoint_statistics.obs_rms.mean)
    with pytest.raises(ValueError, match=r"no checkpoint .*rl_model_700_steps.zip; the run has checkpoints at \[512\]"):
        save_pretrained_from_run(run, str(tmp_path / "missing"), model="checkpoint:700")
    with pytest.raises(ValueError, match="'final', 'best' or 'checkpoint:<steps>'"):
        save_pretrained_from_run(run, str(tmp_path / "missing"), model="last")
    assert not os.path.exists(tmp_path / "missing")
    assert "training_env_kwargs" not in final_agent["provenance"]
    # An agent shipped to play other task settings than the run trained on records both.
    lighter = save_pretrained_from_run(run, str(tmp_path / "lighter"), env_kwargs={"g": 9.0})
    _, lighter_agent = read_agent(str(tmp_path / "lighter"))
    assert lighter_agent["env_kwargs"] == {"g": 9.0}
    assert lighter["training_env_kwargs"] == lighter_agent["provenance"]["training_env_kwargs"] == {}
    with pytest.raises(ValueError, match=r"Pendulum-v1 does not take env_kwargs \{'gravity': 9.0\}"):
        save_pretrained_from_run(run, str(tmp_path / "lighter"), env_kwargs={"gravity": 9.0})
    assert read_agent(str(tmp_path / "lighter"))[1]["env_kwargs"] == {"g": 9.0}
    with pytest.raises(ValueError, match=r"lighter/agent.json: env_kwargs must not hold render_mode \(got 'human'\)"):
        save_pretrained_from_run(run, str(tmp_path / "lighter"), env_kwargs={"render_mode": "human"})
    assert read_agent(str(tmp_path / "lighter"))[1]["env_kwargs"] == {"g": 9.0}


# --- the shipped agents ------------------------------------------------------------------------------------------
#
# A shipped agent's trajectory from a given env seed is the same every time on one machine but not across machines:
# the policy's matrix products round differently on different CPUs (instruction sets, BLAS kernels), and a walking
# robot amplifies a last-bit difference into another episode. So each check counts successes over enough episodes
# that a machine's draw cannot fail it: of ``episodes`` played from env seed 0 at least ``required`` succeed, sized
# so that an agent whose true success rate is at the *lower* end of the 95% interval of its measured rate fails with
# probability below 1/1000 (binomial tail), while an agent that does not work (untrained, or the walker a flag run
# starts from) passes with probability below 1/20. ``test_each_check_is_sized_for_any_machine`` checks both.


@dataclass(frozen=True)
class ShippedCheck:
    """The short evaluation a shipped agent must pass on any machine.

    :param episodes: episodes played from env seed 0 (one env, so that no early-ending episode is over-counted).
    :param required: the fewest successful episodes that pass.
    :param measured: (successes, episodes) of the agent's own measurement, on env seeds it was not chosen on.
    :param failing_rate: the success rate of an agent that does not work (what the check must catch).
    :param succeeded: whether one episode (a :func:`play` record) counts as a success.
    :param max_steps: the most steps played (enough for ``episodes`` full-length episodes).
    :param min_mean_speed: for the locomotion agents, the lowest mean speed (m/s) of the successful episodes, so that
        standing still for the whole episode does not pass.
    """

    episodes: int
    required: int
    measured: tuple[int, int]
    failing_rate: float
    succeeded: Callable[[dict[str, Any]], bool]
    max_steps: int
    min_mean_speed: float | None = None


def false_failure_probability(check: ShippedCheck) -> float:
    """The probability that an agent at the lower end of its measured rate's 95% interval fails ``check``."""
    return float(stats.binom.cdf(check.required - 1, check.episodes, rate_interval(*check.measured)[0]))


def false_pass_probability(check: ShippedCheck) -> float:
    """The probability that an agent succeeding at ``check.failing_rate`` passes ``check``."""
    return float(stats.binom.sf(check.required - 1, check.episodes, check.failing_rate))


def _walked_whole(episode: dict[str, Any]) -> bool:
    return bool(episode["truncated"])


def _swung_up(episode: dict[str, Any]) -> bool:
    return episode["return"] > -600.0


def _reached_the_flag(episode: dict[str, Any]) -> bool:
    return not episode["truncated"]


def _landed(episode: dict[str, Any]) -> bool:
    return bool(episode["success"])


def _reached_a_flag(episode: dict[str, Any]) -> bool:
    return episode["flags_reached"] >= 1


#: The check of each shipped agent (every shipped agent needs an entry). The measured rates:
#:
#: - Walker2D: 100 of 100 episodes from env seed 0 walk the 1000 steps without a fall (about 2.82 m/s); an untrained
#:   walker falls within about 100 steps.
#: - Humanoid: 96 of 100 from env seed 0 run the 1000 steps (about 2.0 m/s; its falls come in the first 120 steps);
#:   an untrained humanoid falls within about 60 steps.
#: - HumanoidFlagrun: a flag in 163 of 300 episodes from env seeds 0 and 10000 on the machine it was chosen on, and in
#:   77 of 160 from other env seeds on a 2-core AMD EPYC: 240 of 460. The walker it was trained from reaches one in
#:   about 1 of 10, falling as soon as the flag is not ahead.
#: - Pendulum: 200 of 200 episodes from env seeds 0 and 12345 return above -600 (the worst -471); of 200 episodes of
#:   random actions none does (the best -744, the median -1179).
#: - MountainCar: 100 of 100 episodes from env seed 0 reach the flag before the 200-step limit; a random policy
#:   almost never does.
#: - RocketLander: 96 of 100 landings from env seed 0 (continuous), 95 of 100 (discrete); random actions land at most
#:   2 in 100.
SHIPPED_CHECKS: dict[str, ShippedCheck] = {
    "sb3_ppo_ext/Walker2D-v0": ShippedCheck(10, 7, (100, 100), 0.1, _walked_whole, 11_000, min_mean_speed=1.0),
    "sb3_ppo_ext/Humanoid-v0": ShippedCheck(10, 5, (96, 100), 0.1, _walked_whole, 11_000, min_mean_speed=1.0),
    "sb3_ppo_ext/HumanoidFlagrun-v0": ShippedCheck(40, 9, (240, 460), 0.1, _reached_a_flag, 41_000),
    "Pendulum-v1": ShippedCheck(10, 8, (200, 200), 0.1, _swung_up, 2_000),
    "MountainCar-v0": ShippedCheck(10, 7, (100, 100), 0.1, _reached_the_flag, 2_000),
    "sb3_ppo_ext/RocketLander-v0": ShippedCheck(20, 13, (96, 100), 0.1, _landed, 8_000),
    "sb3_ppo_ext/RocketLanderDiscrete-v0": ShippedCheck(20, 12, (95, 100), 0.1, _landed, 8_000),
}


def test_every_shipped_agent_has_a_check_and_every_check_an_agent():
    """A check for every shipped agent, and no check left standing for an agent that does not ship (it would have
    nothing to play)."""
    assert set(list_pretrained()) == set(SHIPPED_CHECKS), "SHIPPED_CHECKS must name exactly the shipped agents"


def test_the_binomial_tails_are_the_textbook_ones():
    # Clopper-Pearson's 95% intervals: 9 of 10 (0.5550, 0.9975); 10 of 10 (0.6915, 1); 0 of 10 (0, 0.3085)
    assert rate_interval(9, 10) == pytest.approx((0.5550, 0.9975), abs=1e-4)
    assert rate_interval(10, 10) == pytest.approx((0.6915, 1.0), abs=1e-4)
    assert rate_interval(0, 10) == pytest.approx((0.0, 0.3085), abs=1e-4)
    with pytest.raises(ValueError, match="successes <= trials"):
        rate_interval(11, 10)
    check = ShippedCheck(3, 2, (10, 10), 0.5, _landed, 1)
    # fails with 0 or 1 of 3: (1 - p)^3 + 3 p (1 - p)^2; passes at p = 0.5 with 2 or 3 of 3: 1/2
    p = rate_interval(10, 10)[0]
    assert false_failure_probability(check) == pytest.approx((1 - p) ** 3 + 3 * p * (1 - p) ** 2)
    assert false_pass_probability(check) == pytest.approx(0.5)


@pytest.mark.parametrize("env_id", sorted(SHIPPED_CHECKS))
def test_each_check_is_sized_for_any_machine(env_id):
    """An agent at the lower end of its measured rate's 95% interval fails with probability < 1/1000; an agent that
    does not work passes with probability < 1/20."""
    check = SHIPPED_CHECKS[env_id]
    assert 0 < check.required <= check.episodes
    assert false_failure_probability(check) < 1e-3, false_failure_probability(check)
    assert false_pass_probability(check) < 0.05, false_pass_probability(check)


@pytest.mark.parametrize("env_id", sorted(SHIPPED_CHECKS))
def test_shipped_agent_plays(env_id):
    check = SHIPPED_CHECKS[env_id]
    model, env = load_pretrained(env_id, seed=0)
    try:
        episodes = play(model, env, check.max_steps, n_episodes=check.episodes)
    finally:
        env.close()
    outcomes = [check.succeeded(episode) for episode in episodes]
    assert len(episodes) == check.episodes, f"{len(episodes)} episodes finished within {check.max_steps} steps"
    assert sum(outcomes) >= check.required, f"{sum(outcomes)} of {check.episodes} succeeded: {outcomes}"
    if check.min_mean_speed is not None:  # the walker and the humanoid move at about 2.82 and 2.0 m/s
        speeds = [episode["speed"] for episode, success in zip(episodes, outcomes, strict=True) if success]
        assert np.mean(speeds) >= check.min_mean_speed, speeds


def test_shipped_agents_are_package_data():
    """Every shipped agent folder is matched by the package-data globs of pyproject.toml."""
    import tomllib

    with open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "pyproject.toml"), "rb") as stream:
        package_data = tomllib.load(stream)["tool"]["setuptools"]["package-data"]
    assert "trained_agents/*/*" in package_data.get("sb3_ppo_ext", [])
    assert gym.spec("sb3_ppo_ext/Walker2D-v0") is not None


def test_episode_summary_counts_landings_and_how_the_rest_ended():
    from sb3_ppo_ext.pretrained import summarise_episodes

    episodes = [
        {"return": 200.0, "length": 230, "truncated": False, "success": True},
        {"return": -90.0, "length": 120, "truncated": False, "success": False, "crash_reason": "hard_touchdown"},
        {"return": -80.0, "length": 140, "truncated": False, "success": False, "crash_reason": "hard_touchdown"},
        {"return": 10.0, "length": 400, "truncated": True, "success": False},
        {"return": -100.0, "length": 90, "truncated": False, "success": False, "crash_reason": "sea_contact"},
    ]
    summary = summarise_episodes(episodes)
    assert summary["successes"] == 1 and summary["ended_early"] == 4
    assert list(summary["failures"].items()) == [("hard_touchdown", 2), ("time_limit", 1), ("sea_contact", 1)]
    assert summary["failed_episodes"] == {1: "hard_touchdown", 2: "hard_touchdown", 3: "time_limit", 4: "sea_contact"}
    assert summary["mean_return"] == -12.0


def test_play_counts_the_flags_of_a_flag_run():
    """``flags_reached`` from the flag run's info, per episode and in the summary (a reach distance of 100 m counts a
    flag on the first step; of 0.001 m, none)."""
    from sb3_ppo_ext.pretrained import summarise_episodes

    episodes = []
    for reach in (100.0, 0.001):
        env = make_vec_env("sb3_ppo_ext/HumanoidFlagrun-v0", n_envs=1, seed=0, env_kwargs={"flag_reach_distance": reach})
        model = PPO("MlpPolicy", env, n_steps=64, batch_size=64, seed=0)
        episodes += play(model, env, 1000, n_episodes=1)
        env.close()
    assert episodes[0]["flags_reached"] >= 1 and episodes[1]["flags_reached"] == 0
    summary = summarise_episodes(episodes)
    assert summary["with_a_flag"] == 1 and summary["mean_flags"] == episodes[0]["flags_reached"] / 2


def test_an_agent_records_the_contact_flags_it_was_trained_with():
    """A later change of a task's default foot-contact flags leaves a shipped agent on the flags it learned with."""
    from sb3_ppo_ext.pretrained import read_agent, recorded_env_kwargs

    assert recorded_env_kwargs("sb3_ppo_ext/Walker2D-v0", None) == {"foot_contacts": "previous"}
    assert recorded_env_kwargs("sb3_ppo_ext/Humanoid-v0", {"foot_contacts": "previous"}) == {"foot_contacts": "previous"}
    assert recorded_env_kwargs("sb3_ppo_ext/Walker2D-v0", {"foot_contacts": "current"}) == {"foot_contacts": "current"}
    assert recorded_env_kwargs("sb3_ppo_ext/HumanoidFlagrun-v0", {"reference_quirks": True})["foot_contacts"] == "previous"
    assert recorded_env_kwargs("sb3_ppo_ext/Humanoid-v0", {}) == {"foot_contacts": "previous"}
    assert recorded_env_kwargs("sb3_ppo_ext/HumanoidFlagrun-v0", {}) == {"foot_contacts": "current"}
    assert recorded_env_kwargs("sb3_ppo_ext/RocketLander-v0", {}) == {}  # no contact flags to choose
    with pytest.raises(ValueError, match="foot_contacts"):  # the task's own check, not a silent record
        recorded_env_kwargs("sb3_ppo_ext/Walker2D-v0", {"reference_quirks": True, "foot_contacts": "current"})
    for env_id in list_pretrained():
        if env_id.startswith(("sb3_ppo_ext/Walker2D", "sb3_ppo_ext/Humanoid")):
            assert read_agent(env_id)[1]["env_kwargs"].get("foot_contacts") in ("current", "previous"), env_id
