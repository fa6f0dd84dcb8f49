"""The wheel installs envs/ and zoo_configs/ under sb3_ppo_ext, and no top-level module named `envs`."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import sb3_ppo_ext

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_layout(tmp_path):
    pytest.importorskip("setuptools")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
        cwd=tmp_path,
    )
    (wheel,) = tmp_path.glob("sb3_ppo_ext-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "sb3_ppo_ext/envs/walker2d.py" in names
    assert "sb3_ppo_ext/envs/rocket_lander.py" in names
    assert "sb3_ppo_ext/zoo_configs/ppo_ext.yml" in names
    assert "sb3_ppo_ext/ppo/ppo.py" in names
    assert "sb3_ppo_ext/grid/run.py" in names
    assert "sb3_ppo_ext/py.typed" in names  # PEP 561: users' type checkers read our hints
    version = wheel.name.split("-")[1]  # setuptools reads it from the package, the one place it is written
    assert version == sb3_ppo_ext.__version__
    for agent in (ROOT / "sb3_ppo_ext" / "trained_agents").glob("*/agent.json"):  # the shipped agents are package data
        for name in ("agent.json", "policy.npz"):
            assert f"sb3_ppo_ext/trained_agents/{agent.parent.name}/{name}" in names
    top_level = {name.split("/")[0] for name in names}
    assert top_level == {"sb3_ppo_ext", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info"}


def test_installed_package_maps_envs_and_configs(tmp_path):
    """Outside the repository (so that its root is not on sys.path), the install provides sb3_ppo_ext.envs and no `envs`."""
    probe = (
        "import importlib.util, pathlib, sb3_ppo_ext.envs, sb3_ppo_ext.zoo_configs as c;"
        "print(pathlib.Path(sb3_ppo_ext.envs.__file__).parent.name);"
        "print((pathlib.Path(c.__file__).parent / 'ppo_ext.yml').exists());"
        "print(importlib.util.find_spec('envs'))"
    )
    output = subprocess.run([sys.executable, "-c", probe], check=True, cwd=tmp_path, capture_output=True, text=True).stdout
    assert output.split() == ["envs", "True", "None"]
