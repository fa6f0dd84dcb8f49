"""The line ``train`` ends with: the final model's and the best model's last evaluations, and how to play the best."""

import math

import pytest

from sb3_ppo_ext.cli import main
from sb3_ppo_ext.zoo.run_summary import Evaluation, clearly_worse, end_of_training_line, last_and_best


def test_an_evaluation_is_the_mean_and_population_std_of_its_returns():
    evaluation = Evaluation.of(100, [1.0, 3.0])
    assert evaluation == Evaluation(100, 2.0, 1.0, 2)


def test_last_and_best_are_the_last_and_the_first_highest_mean():
    last, best = last_and_best([10, 20, 30, 40], [[1.0], [5.0, 7.0], [6.0], [2.0]])
    assert (last.timesteps, last.mean) == (40, 2.0)
    assert (best.timesteps, best.mean, best.std) == (20, 6.0, 1.0)  # 30's equal mean came later: not saved as best
    assert last_and_best([], []) is None
    with pytest.raises(ValueError):  # a history whose steps and results differ in length is not one history
        last_and_best([10], [])


@pytest.mark.parametrize(
    ("last", "best", "worse"),
    [
        # the reported collapse: 190 at the end of a run whose best was 2764
        (Evaluation(2_000_000, 190.0, 80.0, 10), Evaluation(1_500_000, 2764.0, 9.0, 10), True),
        # 7% below the best: a maximum of noisy evaluations sits above the policy's level
        (Evaluation(2_000_000, 2822.0, 10.0, 10), Evaluation(1_900_000, 3022.0, 10.0, 10), False),
        # 20% below but inside the noise of two 10-episode means
        (Evaluation(2_000_000, 2000.0, 1200.0, 10), Evaluation(1_000_000, 2500.0, 900.0, 10), False),
        # negative returns: -400 against a best of -150
        (Evaluation(1000, -400.0, 20.0, 10), Evaluation(500, -150.0, 20.0, 10), True),
        (Evaluation(1000, -160.0, 20.0, 10), Evaluation(500, -150.0, 20.0, 10), False),
    ],
)
def test_clearly_worse_needs_a_gap_beyond_a_tenth_and_beyond_the_noise(last, best, worse):
    assert clearly_worse(last, best) is worse
    assert ("--load-best" in end_of_training_line(last, best, "PLAY --load-best")) is worse


def test_the_line_names_both_evaluations():
    line = end_of_training_line(Evaluation(200, 10.0, 1.0, 5), Evaluation(100, 10.5, 0.5, 5), "PLAY")
    assert line == (
        "Final model: last evaluation 10.00 +/- 1.00 at 200 steps; best model (best_model.zip): 10.50 +/- 0.50 at 100 steps."
    )
    assert "\n" not in line and not math.isnan(Evaluation.of(1, [3.0]).std)


def test_train_ends_with_the_line_and_its_command_plays_the_best_model(tmp_path, capsys, monkeypatch):
    from sb3_ppo_ext.zoo import run_summary

    # whether this short run's final model ends up clearly worse depends on the CPU's rounding: force the case
    monkeypatch.setattr(run_summary, "clearly_worse", lambda last, best: True)
    folder = tmp_path / "logs"
    run = ["--env", "CartPole-v1", "-f", str(folder), "-n", "2048", "--seed", "1", "--eval-freq", "512"]
    main(["train", *run, "--eval-episodes", "2", "--no-progress", "--num-threads", "1", "--hyperparams", "n_envs:2"])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Final model: last evaluation")]
    assert len(lines) == 1 and " at 2048 steps; best model (best_model.zip): " in lines[0], lines
    command = lines[0].split("`")[1]
    assert command == f"sb3-ppo-ext enjoy --env CartPole-v1 -f {folder} --exp-id 1 --load-best"
    main([*command.split()[1:], "--no-render", "-n", "10"])
    assert f"Loading {folder / 'ppo_ext' / 'CartPole-v1_1' / 'best_model.zip'}" in capsys.readouterr().out
