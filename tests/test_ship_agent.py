"""tools/ship_agent.py: the wall clock of a shipped checkpoint."""

import json
from pathlib import Path

import pytest
import ship_agent


def write_monitor(path: Path, t_start: float, episodes: list[tuple[int, float]]) -> None:
    """An SB3 monitor file: episodes of (length, end time in seconds after ``t_start``)."""
    lines = ["#" + json.dumps({"t_start": t_start, "env_id": "X"}), "r,l,t"]
    lines += [f"1.0,{length},{end}" for length, end in episodes]
    path.write_text("\n".join(lines) + "\n")


def test_checkpoint_wall_clock_is_read_from_the_monitor_files(tmp_path):
    write_monitor(tmp_path / "0.monitor.csv", 1000.0, [(100, 10.0), (100, 20.0), (100, 30.0)])
    write_monitor(tmp_path / "1.monitor.csv", 1002.0, [(150, 14.0), (150, 29.0)])
    # Episodes end (seconds after the first env's start, cumulative steps): 10 (100), 16 (250), 20 (350), 30 (450),
    # 31 (600).
    assert ship_agent.checkpoint_wall_clock(str(tmp_path), 100) == pytest.approx(10.0)
    assert ship_agent.checkpoint_wall_clock(str(tmp_path), 300) == pytest.approx(20.0)
    assert ship_agent.checkpoint_wall_clock(str(tmp_path), 600) == pytest.approx(31.0)
    assert ship_agent.checkpoint_wall_clock(str(tmp_path), 601) is None
