"""benchmarks/research/update_kl.py: the largest approx_kl of any update of each grid cell, from progress.csv."""

import update_kl


def test_the_largest_update_of_a_cell_is_found_among_all_its_updates(tmp_path, capsys):
    run = tmp_path / "T" / "a" / "seed_0" / "ppo_ext" / "T_1"
    run.mkdir(parents=True)
    (run / "progress.csv").write_text(
        "time/total_timesteps,train/approx_kl,rollout/ep_rew_mean\n"
        "8192,0.02,1.0\n"
        "12000,,2.0\n"  # a row without an update (an evaluation's dump)
        "16384,4.04,3.0\n"
        "24576,0.5,4.0\n"
    )
    assert update_kl.update_kls(str(run / "progress.csv")) == [(8192, 0.02), (16384, 4.04), (24576, 0.5)]
    assert update_kl.largest_update_kl(str(run.parents[1])) == (16384, 4.04, 3)
    update_kl.main([str(tmp_path), "--above", "0.15"])
    assert "| T/a/seed_0 | 3 | 4.0400 (above) | 16384 |" in capsys.readouterr().out
