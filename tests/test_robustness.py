"""The robustness campaigns, one parametrized case each: untrusted files never run code, hostile inputs end in a
named error at once.

Three campaigns:

- malicious zoo configs, command-line values and run folders (``train``, ``enjoy``, ``record-video``): each payload
  would create a marker file if it ran; each must end the command with a one-line refusal, leave no marker, and (the
  denial-of-service ones: alias bombs, absurd sizes) do so in well under a second;
- bad env and config inputs: each must raise a ``ValueError`` (``RuntimeError`` for a closed env) whose message names
  the parameter, at construction or at the call, never a ``TypeError`` / ``KeyError`` / ``AttributeError`` later;
- bad settings of ``sb3_ppo_ext.PPO(...)``: each must raise a ``HyperparameterError`` naming the setting when the
  model is made, never hang in ``learn`` or fail inside numpy or torch.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
import pytest

from sb3_ppo_ext import PPO
from sb3_ppo_ext.cli import main
from sb3_ppo_ext.validation import HyperparameterError

pytestmark = pytest.mark.usefixtures("one_torch_thread")

#: Most CPU time a denial-of-service case may take to be refused (s, this process's CPU time, so that other load on a
#: shared machine does not count; refusals take well under a second); before the YAML limits, the alias bomb alone
#: took 66 s and 8 GB.
DOS_SECONDS = 5.0
#: The arguments of every ``train`` case, after the case's own: a run folder, no evaluation, no output.
QUIET = ["-f", "runs", "--seed", "0", "--eval-freq", "-1", "--no-progress", "--verbose", "0"]


def billion_laughs(levels: int = 9) -> str:
    """A ~600-byte YAML alias bomb: each anchor a list of nine aliases of the previous one (9**levels strings)."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def touch(marker: str) -> str:
    return f"__import__('os').system('touch {marker}')"


def run_cli(argv: list[str], capsys) -> tuple[int | str | None, str, float]:
    """Run ``sb3-ppo-ext argv``: its exit status (``None`` when it returned), its last stderr line, the CPU seconds
    taken.

    An exception other than ``SystemExit`` counts as a traceback (``"Traceback ..."``), i.e. no one-line refusal.
    """
    started = time.process_time()
    try:
        main(argv)
        status = None
    except SystemExit as exit_info:
        status = exit_info.code
    except Exception as error:  # any other ending is what the case checks
        return None, f"Traceback: {type(error).__name__}: {error}", time.process_time() - started
    seconds = time.process_time() - started
    err = capsys.readouterr().err
    if "Traceback" in err:
        return status, "Traceback", seconds
    lines = err.strip().splitlines()
    return status, lines[-1] if lines else "", seconds


# --- malicious configs, command-line values and run folders ----------------------------------------------------

#: id -> (config block lines, with {marker}; extra train arguments; whether it is a denial-of-service case).
MALICIOUS_BLOCKS: dict[str, tuple[str, list[str], bool]] = {
    "policy_kwargs eval": ('policy_kwargs: "{touch}"', [], False),
    "normalize eval": ('normalize: "{touch}"', [], False),
    "monitor_kwargs eval": ('monitor_kwargs: "{touch}"', [], False),
    "replay_buffer_class eval (sac)": ('replay_buffer_class: "{touch}"', ["--algo", "sac"], False),
    "callback import": ("callback:\n    - os.system:\n        command: 'touch {marker}'", [], False),
    "env_wrapper import": ("env_wrapper:\n    - os.system:\n        command: 'touch {marker}'", [], False),
    "vec_env_wrapper import": ("vec_env_wrapper: subprocess.getoutput", [], False),
    "policy import": ("policy: os.system", [], False),
    "schedule string": ('learning_rate: "lin_{touch}"', [], False),
    "python tag": ("normalize: !!python/object/apply:os.system ['touch {marker}']", [], False),
    "n_envs 1e11": ("n_envs: 100000000000", [], True),
    "n_steps 1e9": ("n_steps: 1000000000", [], True),
    "net_arch 1e6 wide": ('policy_kwargs: "dict(net_arch=[1000000, 1000000])"', [], True),
    "buffer_size 1e11 (sac)": ("buffer_size: 100000000000", ["--algo", "sac"], True),
    "frame_stack 1e9": ("frame_stack: 1000000000", [], True),
    "n_epochs 1e30": ("n_epochs: 1000000000000000000000000000000", [], True),
    "policy_kwargs of 100,000 minus signs": ('policy_kwargs: "' + "-" * 100_000 + '1"', [], True),
}

#: id -> (train arguments, denial of service?). Config files are named relative to the folder that
#: :func:`write_malicious_configs` fills (the case runs there); ``{touch}`` stands for the payload.
MALICIOUS_TRAIN_CASES: dict[str, tuple[list[str], bool]] = {
    **{
        f"config: {name}": (["-conf", f"block_{index}.yml", *extra], dos)
        for index, (name, (_, extra, dos)) in enumerate(MALICIOUS_BLOCKS.items())
    },
    "config: python file": (["-conf", "hyperparams.py"], False),
    "config: billion laughs": (["-conf", "bomb.yml"], True),
    "config: aliases of a 640 kB string": (["-conf", "long_string.yml"], True),
    "config: 200,000 nested lists": (["-conf", "deep.yml"], True),
    "config: 2 MB file": (["-conf", "huge.yml"], True),
    "--hyperparams eval": (["--hyperparams", "policy_kwargs:{touch}"], False),
    "--env-kwargs eval": (["--env-kwargs", "g:{touch}"], False),
    "--hyperparams n_envs 1e11": (["--hyperparams", "n_envs:100000000000"], True),
}


def write_malicious_configs(folder, marker: str) -> None:
    """The config files that :data:`MALICIOUS_TRAIN_CASES` name, written under ``folder``; each payload touches
    ``marker``."""
    for index, (line, _, _) in enumerate(MALICIOUS_BLOCKS.values()):
        (folder / f"block_{index}.yml").write_text(
            f"Pendulum-v1:\n  policy: 'MlpPolicy'\n  n_timesteps: 1000\n  {line.format(marker=marker, touch=touch(marker))}\n"
        )
    (folder / "hyperparams.py").write_text(f"{touch(marker)}\nhyperparams = {{}}\n")
    (folder / "bomb.yml").write_text(
        billion_laughs() + "Pendulum-v1:\n  policy: 'MlpPolicy'\n  n_timesteps: 1000\n  env_kwargs: {x: *l8}\n"
    )
    # 8,000 aliases of a 640 kB string: few nodes, 5 GB once printed
    (folder / "long_string.yml").write_text(
        "a: &a '" + "x" * 640_000 + "'\nPendulum-v1:\n  policy: 'MlpPolicy'\n  n_timesteps: 1000\n"
        "  env_kwargs: {x: [" + ", ".join(["*a"] * 8000) + "]}\n"
    )
    (folder / "deep.yml").write_text("Pendulum-v1: " + "[" * 200_000 + "\n")
    (folder / "huge.yml").write_text("Pendulum-v1:\n  policy: 'MlpPolicy'\n" + "# padding\n" * 200_000)


def write_run(folder, run: int, files: dict[str, str]) -> None:
    """A run folder ``<folder>/ppo_ext/CartPole-v1_<run>/`` with an (empty) model zip and ``files`` in its
    ``CartPole-v1/`` parameter folder."""
    params = folder / "ppo_ext" / f"CartPole-v1_{run}" / "CartPole-v1"
    params.mkdir(parents=True)
    (params.parent / "CartPole-v1.zip").write_bytes(b"")
    for name, text in files.items():
        (params / name).write_text(text)


#: id -> arguments after ``--env CartPole-v1``, naming the run folders that :func:`write_malicious_runs` writes
#: (the case runs in the folder that holds them).
MALICIOUS_PLAY_CASES: dict[str, list[str]] = {
    "python tag, -f": ["-f", "newest"],
    "python tag, --folder=": ["--folder=newest"],
    "python tag, -fFOLDER": ["-fnewest"],
    "python tag, --fold (abbreviation)": ["--fold", "newest"],
    "python tag, --exp-id 1": ["-f", "older", "--exp-id", "1"],
    "python tag, --exp 1 (abbreviation)": ["-f", "older", "--exp", "1"],
    "python tag, --algo given": ["-f", "newest", "--algo", "ppo_ext"],
    "normalize eval string": ["-f", "eval_string"],
    "python tag in args.yml": ["-f", "args_tag"],
    "billion laughs in config.yml": ["-f", "bomb"],
}


def write_malicious_runs(root, marker: str) -> None:
    """The run folders :data:`MALICIOUS_PLAY_CASES` name, under ``root``.

    ``root/logs`` (the default folder) holds a clean run, so that a check of the default folder passes; ``newest``
    holds one malicious run; ``older`` a malicious run 1 and a clean run 2 (the latest), so that a check of the
    latest run passes. An option abbreviation (``--fold``, ``--exp``) that rl-zoo3 expanded while our check read the
    option as absent would load the malicious run after checking a clean one.
    """
    clean = {"config.yml": "normalize: false\n", "args.yml": "env_kwargs: null\n"}
    tag = f"normalize: !!python/object/apply:os.system ['touch {marker}']\n"
    write_run(root / "logs", 1, clean)
    write_run(root / "newest", 1, {"config.yml": tag})
    write_run(root / "older", 1, {"config.yml": tag})
    write_run(root / "older", 2, clean)
    write_run(root / "eval_string", 1, {"config.yml": f'normalize: "{touch(marker)}"\n'})
    write_run(
        root / "args_tag",
        1,
        {"config.yml": "normalize: false\n", "args.yml": f"env_kwargs: !!python/object/apply:os.system ['touch {marker}']\n"},
    )
    write_run(root / "bomb", 1, {"config.yml": billion_laughs() + "normalize: false\nenv_kwargs: {x: *l8}\n"})


@pytest.fixture(scope="module")
def malicious_folder(tmp_path_factory):
    """A folder holding every malicious config file, and the malicious run folders under ``enjoy/`` and
    ``record-video/``, written once for all the cases; every payload touches ``<folder>/pwned``."""
    import rl_zoo3.enjoy
    import rl_zoo3.train  # noqa: F401  (imported before any case's clock starts)

    folder = tmp_path_factory.mktemp("malicious")
    marker = str(folder / "pwned")
    write_malicious_configs(folder, marker)
    for command in ("enjoy", "record-video"):
        write_malicious_runs(folder / command, marker)
    return folder


def payload_ran(folder) -> bool:
    """Whether a payload touched the marker (removed, so that the next case starts without it)."""
    marker = folder / "pwned"
    ran = marker.exists()
    marker.unlink(missing_ok=True)
    return ran


@pytest.mark.parametrize("name", MALICIOUS_TRAIN_CASES)
def test_malicious_train_input_is_refused_without_running(name, malicious_folder, monkeypatch, capsys):
    extra, dos = MALICIOUS_TRAIN_CASES[name]
    monkeypatch.chdir(malicious_folder)
    payload = touch(str(malicious_folder / "pwned"))
    extra = [argument.replace("{touch}", payload) for argument in extra]
    status, line, seconds = run_cli(["train", "--env", "Pendulum-v1", *QUIET, *extra], capsys)
    assert not payload_ran(malicious_folder), f"the payload ran; the command ended with: {line}"
    assert status == 2 and line.startswith("sb3-ppo-ext train: error: "), (status, line)
    if dos:
        assert seconds < DOS_SECONDS, f"refused after {seconds:.2f} s: {line}"


@pytest.mark.parametrize("command", ["enjoy", "record-video"])
@pytest.mark.parametrize("name", MALICIOUS_PLAY_CASES)
def test_malicious_run_folder_is_refused_without_running(command, name, malicious_folder, monkeypatch, capsys):
    monkeypatch.chdir(malicious_folder / command)
    status, line, seconds = run_cli([command, "--env", "CartPole-v1", "--no-render", *MALICIOUS_PLAY_CASES[name]], capsys)
    assert not payload_ran(malicious_folder), f"the payload ran; the command ended with: {line}"
    assert status == 2 and line.startswith(f"sb3-ppo-ext {command}: error: "), (status, line)
    if "laughs" in name:
        assert seconds < DOS_SECONDS, f"refused after {seconds:.2f} s: {line}"


# --- bad env and config inputs -------------------------------------------------------------------------------


def rocket(**kwargs):
    from sb3_ppo_ext.envs.rocket_lander import RocketLanderEnv

    return RocketLanderEnv(**kwargs)


def walker(**kwargs):
    from sb3_ppo_ext.envs.walker2d import Walker2DEnv

    return Walker2DEnv(**kwargs)


def after_reset(make: Callable, call: Callable) -> Callable[[], object]:
    """A case that builds an env, resets it, then makes ``call(env)`` (closing the env in any case)."""

    def case() -> object:
        env = make()
        try:
            env.reset(seed=0)
            return call(env)
        finally:
            env.close()

    return case


def after_close(make: Callable, call: Callable) -> Callable[[], object]:
    """A case that builds, resets and closes an env, then makes ``call(env)``."""

    def case() -> object:
        env = make()
        env.reset(seed=0)
        env.close()
        return call(env)

    return case


#: id -> (the call, the error type it must raise, a text its message must hold: the parameter's name).
BAD_ENV_INPUTS: dict[str, tuple[Callable[[], object], type[Exception], str]] = {
    "rocket continuous='no'": (lambda: rocket(continuous="no"), ValueError, "continuous"),
    "rocket frame_skip=True": (lambda: rocket(frame_skip=True), ValueError, "frame_skip"),
    "rocket frame_skip=2.5": (lambda: rocket(frame_skip=2.5), ValueError, "frame_skip"),
    "rocket physics_time_step=nan": (lambda: rocket(physics_time_step=math.nan), ValueError, "physics_time_step"),
    "rocket thrust_to_weight=inf": (lambda: rocket(thrust_to_weight=math.inf), ValueError, "thrust_to_weight"),
    "rocket deck_motion=inf": (lambda: rocket(deck_motion=math.inf), ValueError, "deck_motion"),
    "rocket wind_speed=nan": (lambda: rocket(wind_speed=math.nan), ValueError, "wind_speed"),
    "rocket start_tilt=-0.1": (lambda: rocket(start_tilt=-0.1), ValueError, "start_tilt"),
    "rocket success_tilt=-0.1": (lambda: rocket(success_tilt=-0.1), ValueError, "success_tilt"),
    "rocket crash_tilt=-1": (lambda: rocket(crash_tilt=-1.0), ValueError, "crash_tilt"),
    "rocket reward_weights='x'": (lambda: rocket(reward_weights="x"), ValueError, "reward_weights"),
    "rocket start_altitude=(nan, 10)": (lambda: rocket(start_altitude=(math.nan, 10.0)), ValueError, "start_altitude"),
    "rocket bounds='ab'": (lambda: rocket(bounds="ab"), ValueError, "bounds"),
    "rocket discrete action True": (
        after_reset(lambda: rocket(continuous=False), lambda env: env.step(True)),
        ValueError,
        "action",
    ),
    "rocket discrete action 2.0": (
        after_reset(lambda: rocket(continuous=False), lambda env: env.step(2.0)),
        ValueError,
        "action",
    ),
    "rocket discrete action [[1]]": (
        after_reset(lambda: rocket(continuous=False), lambda env: env.step([[1]])),
        ValueError,
        "action",
    ),
    "rocket reset(options='bad')": (after_reset(rocket, lambda env: env.reset(options="bad")), ValueError, "options"),
    "rocket reset after close": (after_close(rocket, lambda env: env.reset()), RuntimeError, "closed"),
    "rocket step after close": (after_close(rocket, lambda env: env.step(np.zeros(6))), RuntimeError, "closed"),
    "walker alive_weight=True": (lambda: walker(alive_weight=True), ValueError, "alive_weight"),
    "walker friction_range='12'": (lambda: walker(friction_range="12"), ValueError, "friction_range"),
    "walker push_force=inf": (lambda: walker(push_force=math.inf), ValueError, "push_force"),
    "walker reset(options='bad')": (after_reset(walker, lambda env: env.reset(options="bad")), ValueError, "options"),
    "walker reset after close": (after_close(walker, lambda env: env.reset()), RuntimeError, "closed"),
    "walker step after close": (after_close(walker, lambda env: env.step(np.zeros(6))), RuntimeError, "closed"),
}

#: id -> (config text of the Pendulum-v1 run, a text the one-line error must hold: the setting's name).
BAD_CONFIGS: dict[str, tuple[str, str]] = {
    "empty file": ("", "is empty"),
    "top-level list": ("- Pendulum-v1\n", "holds a list at the top level"),
    "block is a number": ("Pendulum-v1: 5\n", "block must be a mapping"),
    "n_envs: 'four'": (
        "Pendulum-v1:\n  policy: MlpPolicy\n  n_timesteps: 64\n  n_envs: 'four'\n",
        "n_envs must be an integer",
    ),
    "n_steps: 'x'": ("Pendulum-v1:\n  policy: MlpPolicy\n  n_timesteps: 64\n  n_steps: 'x'\n", "n_steps must be an integer"),
    "batch_size: 2.5": ("Pendulum-v1:\n  policy: MlpPolicy\n  n_timesteps: 64\n  batch_size: 2.5\n", "batch_size"),
    "n_timesteps: .inf": ("Pendulum-v1:\n  policy: MlpPolicy\n  n_timesteps: .inf\n", "n_timesteps must be a finite number"),
    "env_kwargs: 5": (
        "Pendulum-v1:\n  policy: MlpPolicy\n  n_timesteps: 64\n  env_kwargs: 5\n",
        "env_kwargs must be a mapping",
    ),
    "normalize: 3": ("Pendulum-v1:\n  policy: MlpPolicy\n  n_timesteps: 64\n  normalize: 3\n", "normalize must be"),
    "net_arch: '64'": (
        "Pendulum-v1:\n  policy: MlpPolicy\n  n_timesteps: 64\n  policy_kwargs: \"dict(net_arch='64')\"\n",
        "net_arch must be a list",
    ),
}
#: Settings that used to train to the end (rl-zoo3 turns numbers and lin_ strings into schedules, which escaped the
#: algorithm's number checks), to fail inside numpy / torch, or to end in a TypeError: line -> a text the error holds.
BAD_SETTINGS: dict[str, str] = {
    "clip_range: 0": "clip_range must be > 0.0, got 0",
    "clip_range: lin_-0.2": "clip_range (the schedule SimpleLinearSchedule(initial_value=-0.2)",
    "learning_rate: lin_0": "learning_rate (the schedule SimpleLinearSchedule(initial_value=0.0)",
    "vf_learning_rate: lin_-1": "vf_learning_rate (the schedule SimpleLinearSchedule(initial_value=-1.0)",
    "normalize: 'dict(norm_obs=5)'": "normalize norm_obs must be True or False, got 5",
    "frame_stack: -3": "frame_stack must be >= 1, got -3",
    "policy_kwargs: \"dict(ortho_init='no')\"": "policy_kwargs ortho_init must be True or False",
    "policy_kwargs: \"dict(activation_fn='tanh')\"": "policy_kwargs activation_fn must be a class",
    'policy_kwargs: "dict(optimizer_kwargs=[1])"': "policy_kwargs optimizer_kwargs must be a dict",
    'policy_kwargs: "dict(featurs_extractor_class=None)"': "takes no argument 'featurs_extractor_class' (did you mean",
    'policy_kwargs: "dict(use_sde=True)"': "policy_kwargs must not set 'use_sde'",
    'policy_kwargs: "{[1]: 2}"': "dict keys and set members must be hashable",
    "env_kwargs: {1: 2}": "env_kwargs: argument names must be identifier strings",
}
_SETTING_CONFIG = "Pendulum-v1:\n  policy: MlpPolicy\n  n_timesteps: 64\n  n_steps: 64\n  batch_size: 64\n  {setting}\n"
BAD_CONFIGS.update({setting: (_SETTING_CONFIG.format(setting=setting), message) for setting, message in BAD_SETTINGS.items()})


@pytest.mark.parametrize("name", BAD_ENV_INPUTS)
def test_bad_env_input_raises_a_named_error(name):
    call, error_type, text = BAD_ENV_INPUTS[name]
    with pytest.raises(error_type) as raised:
        call()
    assert text in str(raised.value), repr(raised.value)


@pytest.mark.parametrize("name", BAD_CONFIGS)
def test_bad_config_is_a_one_line_error_naming_the_setting(name, tmp_path, monkeypatch, capsys):
    text, expected = BAD_CONFIGS[name]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.yml").write_text(text)
    status, line, _ = run_cli(["train", "--env", "Pendulum-v1", "-conf", "config.yml", *QUIET], capsys)
    assert status == 2 and line.startswith("sb3-ppo-ext train: error: "), (status, line)
    assert expected in line, line


# --- bad settings of the algorithm ------------------------------------------------------------------------------

#: id -> (PPO keyword arguments on CartPole, a text the HyperparameterError must hold).
BAD_API_SETTINGS: dict[str, tuple[dict, str]] = {
    "n_epochs=10**30 (learn(128) ran for hours)": (dict(n_epochs=10**30), "n_epochs must be <= 1000 (MAX_N_EPOCHS)"),
    "batch_size=1e30 (accepted)": (dict(batch_size=1e30), "batch_size must be <= 4194304 (MAX_ROLLOUT_TRANSITIONS)"),
    "n_steps=1e30 (numpy: maximum dimension)": (dict(n_steps=1e30), "n_steps must be <= 4194304"),
    "n_steps * n_envs too large": (dict(n_steps=4_000_000, n_envs=2), "n_steps * n_envs must be <= 4194304"),
    "clip_range=1e300 (torch: overflow)": (dict(clip_range=1e300), "clip_range must be <= 1000.0"),
    "clip_range_vf=1e300 (torch: overflow)": (dict(clip_range_vf=1e300), "clip_range_vf must be <= 1000000000.0"),
    "clip_range schedule of -0.2 (accepted)": (dict(clip_range=lambda progress: -0.2), "at progress_remaining=1) must be > 0"),
    "learning_rate schedule ending at -1": (
        dict(learning_rate=lambda progress: progress - 1e-3),
        "at progress_remaining=0) must be >= 0.0, got -0.001",
    ),
    "vf_learning_rate schedule that fails": (dict(vf_learning_rate=lambda progress: 1 / 0), "vf_learning_rate: the schedule"),
    "policy_kwargs a string (TypeError)": (dict(policy_kwargs="dict(net_arch=[64])"), "policy_kwargs must be a dict"),
    "rollout_buffer_kwargs a string (TypeError)": (dict(rollout_buffer_kwargs="x"), "rollout_buffer_kwargs must be a dict"),
    "net_arch [64, dict(...)] (TypeError)": (
        dict(policy_kwargs=dict(net_arch=[64, dict(pi=[32])])),
        "policy_kwargs net_arch holds a dict",
    ),
    "net_arch dict with qf (ignored)": (dict(policy_kwargs=dict(net_arch=dict(pi=[8], qf=[8]))), "got the key 'qf'"),
    "activation_fn a name (TypeError)": (dict(policy_kwargs=dict(activation_fn="relu")), "activation_fn must be a class"),
    "policy_kwargs unknown key (TypeError)": (
        dict(policy_kwargs=dict(ortho_int=False)),
        "takes no argument 'ortho_int' (did you mean 'ortho_init'?",
    ),
}


@pytest.mark.parametrize("name", BAD_API_SETTINGS)
def test_bad_api_setting_raises_a_hyperparameter_error_at_once(name):
    from stable_baselines3.common.env_util import make_vec_env

    kwargs = dict(n_steps=64, batch_size=32) | BAD_API_SETTINGS[name][0]
    text = BAD_API_SETTINGS[name][1]
    env = make_vec_env("CartPole-v1", n_envs=kwargs.pop("n_envs", 1))
    started = time.process_time()
    with pytest.raises(HyperparameterError) as raised:
        PPO("MlpPolicy", env, device="cpu", **kwargs).learn(128)
    seconds = time.process_time() - started
    assert text in str(raised.value), repr(raised.value)
    assert seconds < DOS_SECONDS, f"refused after {seconds:.2f} s"


def test_the_settings_of_sb3s_own_examples_stay_valid():
    """A schedule that ends at 0, the pre-1.8 net_arch (SB3 warns)."""
    with pytest.warns(UserWarning, match="shared layers in the mlp_extractor are removed"):
        PPO(
            "MlpPolicy",
            "CartPole-v1",
            n_steps=64,
            batch_size=32,
            clip_range=lambda progress: progress * 0.2,
            learning_rate=lambda progress: progress * 3e-4,
            policy_kwargs=dict(net_arch=[dict(pi=[8], vf=[8])]),
        )
