"""Loading model zips and VecNormalize statistics without unpickling: the readable parts SB3 stores, the plain-data
twins our saves write, the CLI's default and its ``--trust-pickles`` opt-in, and crafted files that would run code."""

from __future__ import annotations

import base64
import glob
import io
import json
import os
import pickle
import re
import shutil
import struct
import zipfile
import zlib

import cloudpickle
import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from rl_zoo3.utils import SimpleLinearSchedule
from stable_baselines3 import PPO as SB3PPO
from stable_baselines3 import SAC
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.save_util import data_to_json
from stable_baselines3.common.utils import ConstantSchedule, FloatSchedule, LinearSchedule
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

from sb3_ppo_ext import PPO, PickleRefusedError, load_vecnormalize_without_pickles, load_without_pickles
from sb3_ppo_ext.cli import main
from sb3_ppo_ext.safe_loading import (
    UnreadableEntry,
    class_reference,
    read_vecnormalize_statistics,
    rebuild_entry,
    save_vecnormalize_statistics,
    schedule_from_fields,
    space_from_fields,
    statistics_path,
)

ENV = "Pendulum-v1"
#: A tiny normalised Pendulum run: 512 steps, checkpoints every 256, an evaluation (and new best) every 256.
TRAIN = [
    "train",
    "--env",
    ENV,
    "-n",
    "512",
    "--seed",
    "0",
    "--eval-freq",
    "256",
    "--eval-episodes",
    "1",
    "--save-freq",
    "256",
    "--no-progress",
    "--verbose",
    "0",
    "--num-threads",
    "1",
    "--hyperparams",
    "normalize:True",
    "n_envs:2",
    "n_steps:128",
    "batch_size:64",
    "n_epochs:1",
]


class MarkerPayload:
    """Unpickling this creates the folder ``marker`` (``os.makedirs(marker, exist_ok=True)``, so several payloads
    can run): it stands in for any code a crafted pickle could run."""

    def __init__(self, marker) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return os.makedirs, (self.marker, 0o777, True)


def pickled_entries(obj) -> dict:
    """SB3's ``data`` entries of ``{"value": obj}``, as SB3 writes them into a model zip."""
    return json.loads(data_to_json({"value": obj}))["value"]


def rewrite_data_entry(zip_path: str, key: str, payload) -> None:
    """Replace the pickle of the ``data`` entry ``key`` of a model zip by ``payload``'s (readable fields unchanged)."""
    with zipfile.ZipFile(zip_path) as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    data = json.loads(entries["data"])
    data[key][":serialized:"] = base64.b64encode(cloudpickle.dumps(payload)).decode()
    entries["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(zip_path, "w") as archive:
        for name, content in entries.items():
            archive.writestr(name, content)


@pytest.fixture
def no_unpickling(monkeypatch):
    """Make any pickle or cloudpickle load fail the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("a pickle was loaded")

    for module in (pickle, cloudpickle):
        monkeypatch.setattr(module, "load", refuse)
        monkeypatch.setattr(module, "loads", refuse)


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """The log folder of a tiny normalised Pendulum run trained by the CLI."""
    folder = tmp_path_factory.mktemp("logs")
    th.set_num_threads(1)
    main([*TRAIN, "-f", str(folder)])
    return folder


@pytest.fixture
def run_copy(trained_run, tmp_path):
    """A copy of the trained run's log folder, to tamper with: (log folder, run folder)."""
    folder = tmp_path / "logs"
    shutil.copytree(trained_run, folder)
    return folder, folder / "ppo_ext" / f"{ENV}_1"


#: How a load that unpickled a crafted file ends after the payload ran (what it returns, None, is no model or
#: statistics): a TypeError / AttributeError, or the one-line exit of a ValueError.
AFTER_THE_PAYLOAD = (TypeError, AttributeError, SystemExit)


def run_trusting(argv) -> None:
    """Run a command that unpickles a crafted file, as rl-zoo3 would."""
    with pytest.raises(AFTER_THE_PAYLOAD):
        main(argv)


def small_ppo(algorithm=PPO, env=None, **kwargs):
    env = env if env is not None else VecNormalize(make_vec_env(ENV, n_envs=2, seed=0))
    return algorithm(
        "MlpPolicy",
        env,
        n_steps=64,
        batch_size=64,
        n_epochs=1,
        seed=0,
        device="cpu",
        policy_kwargs={"net_arch": {"pi": [16], "vf": [16]}, "activation_fn": th.nn.ReLU},
        **kwargs,
    )


# --- spaces, schedules and classes from their readable parts ----------------------------------------------------


@pytest.mark.parametrize(
    "space",
    [
        spaces.Box(
            np.array([-4.8, -np.inf, -0.41887903, -np.inf], dtype=np.float32),
            np.array([4.8, np.inf, 0.41887903, np.inf], dtype=np.float32),
        ),
        spaces.Box(-1.0, 2.5, (2, 3), dtype=np.float64),
        spaces.Box(0, 255, (3, 4), dtype=np.uint8),
        spaces.Discrete(5, start=-2),
        spaces.MultiDiscrete(np.array([[2, 3], [4, 5]]), start=np.array([[0, 1], [2, 3]])),
        spaces.MultiBinary([2, 3]),
    ],
    ids=lambda space: type(space).__name__,
)
def test_spaces_are_rebuilt_from_the_fields_sb3_writes(space):
    rebuilt = space_from_fields(pickled_entries(space))
    assert type(rebuilt) is type(space) and rebuilt == space and rebuilt.dtype == space.dtype


def test_an_abridged_box_and_a_dict_space_are_rebuilt_only_from_a_matching_env():
    image = spaces.Box(0, 255, (3, 40, 40), dtype=np.uint8)  # over 1000 values: numpy prints it with '...'
    with pytest.raises(UnreadableEntry, match="abridged"):
        space_from_fields(pickled_entries(image))
    assert space_from_fields(pickled_entries(image), [image]) is image
    nested = spaces.Dict({"a": spaces.Box(-1, 1, (2,)), "b": spaces.Discrete(3)})
    with pytest.raises(UnreadableEntry, match="pass env"):
        space_from_fields(pickled_entries(nested))
    assert space_from_fields(pickled_entries(nested), [nested]) is nested
    other = spaces.Dict({"a": spaces.Box(-1, 1, (3,)), "b": spaces.Discrete(3)})
    with pytest.raises(UnreadableEntry):
        space_from_fields(pickled_entries(nested), [other])


def test_a_matching_env_space_replaces_the_printed_bounds():
    space = spaces.Box(np.float32(0.123456789), np.float32(1.0), (1,))
    assert space_from_fields(pickled_entries(space), [space]) is space


@pytest.mark.parametrize(
    "schedule",
    [
        FloatSchedule(0.2),
        FloatSchedule(SimpleLinearSchedule(3e-4)),
        FloatSchedule(LinearSchedule(1.0, 0.05, 0.1)),
        SimpleLinearSchedule(3e-4),
        LinearSchedule(1.0, 0.05, 0.1),
        ConstantSchedule(0.5),
    ],
    ids=repr,
)
def test_schedules_are_rebuilt_from_their_fields(schedule):
    rebuilt = schedule_from_fields(pickled_entries(schedule))
    assert repr(rebuilt) == repr(schedule)
    assert [rebuilt(progress) for progress in (1.0, 0.5, 0.0)] == [schedule(progress) for progress in (1.0, 0.5, 0.0)]


def test_a_function_schedule_is_stored_only_as_a_pickle():
    for schedule in (lambda progress: 3e-4 * progress, FloatSchedule(lambda progress: 3e-4 * progress)):
        with pytest.raises(UnreadableEntry):
            schedule_from_fields(pickled_entries(schedule))


def test_classes_are_read_from_the_opcodes_and_looked_up_in_the_allow_list(tmp_path):
    from stable_baselines3.common.policies import ActorCriticPolicy

    assert class_reference(pickled_entries(ActorCriticPolicy)) == "stable_baselines3.common.policies.ActorCriticPolicy"
    assert rebuild_entry("policy_class", pickled_entries(ActorCriticPolicy), PPO) is ActorCriticPolicy
    with pytest.raises(UnreadableEntry, match="not a plain reference to a class"):
        class_reference(pickled_entries(MarkerPayload(tmp_path / "pwned")))
    with pytest.raises(UnreadableEntry, match=r"posix\.system, which is not on the allow-list"):
        rebuild_entry("policy_class", pickled_entries(os.system), PPO)
    kwargs = rebuild_entry("policy_kwargs", pickled_entries({"activation_fn": th.nn.Tanh, "net_arch": [8]}), PPO)
    assert kwargs == {"activation_fn": th.nn.Tanh, "net_arch": [8]}
    with pytest.raises(UnreadableEntry, match="not on the allow-list"):
        rebuild_entry("policy_kwargs", pickled_entries({"activation_fn": zipfile.ZipFile}), PPO)
    with pytest.raises(UnreadableEntry, match="kept only as text"):
        rebuild_entry("policy_kwargs", pickled_entries({"activation_fn": th.nn.Tanh, "log_std_init": np.float32(-1)}), PPO)
    assert not (tmp_path / "pwned").exists()


# --- the Python API ---------------------------------------------------------------------------------------------


def test_load_without_pickles_gives_the_model_load_gives(tmp_path, no_unpickling):
    env = VecNormalize(make_vec_env(ENV, n_envs=2, seed=0))
    model = small_ppo(
        env=env, learning_rate=SimpleLinearSchedule(1e-3), clip_range_vf=0.3, vf_learning_rate=2e-3, use_sde=True
    )
    model.learn(256)
    model.save(tmp_path / "model.zip")
    save_vecnormalize_statistics(env, str(tmp_path / "vecnormalize.npz"))

    play_env = load_vecnormalize_without_pickles(str(tmp_path / "vecnormalize.npz"), make_vec_env(ENV, n_envs=2, seed=1))
    loaded = load_without_pickles(tmp_path / "model", play_env, device="cpu")  # SB3 adds the .zip
    observations = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    np.testing.assert_array_equal(
        loaded.predict(observations, deterministic=True)[0], model.predict(observations, deterministic=True)[0]
    )
    for name in (
        "learning_rate",
        "lr_schedule",
        "clip_range",
        "clip_range_vf",
        "vf_learning_rate",
        "policy_kwargs",
        "observation_space",
        "action_space",
        "rollout_buffer_class",
        "policy_class",
        "num_timesteps",
    ):
        assert repr(getattr(loaded, name)) == repr(getattr(model, name)), name
    for saved, restored in zip(
        model.policy.optimizer.state_dict()["state"].values(),
        loaded.policy.optimizer.state_dict()["state"].values(),
        strict=True,
    ):
        th.testing.assert_close(saved["exp_avg"], restored["exp_avg"])
    np.testing.assert_array_equal(play_env.obs_rms.var, env.obs_rms.var)
    assert play_env.ret_rms.count == env.ret_rms.count and play_env.training == env.training
    loaded.learn(128, reset_num_timesteps=False)  # the rebuilt schedules train
    assert loaded.num_timesteps == 384


def test_sb3_algorithms_load_without_pickles_and_unreadable_training_entries_are_refused(tmp_path, no_unpickling):
    ppo = small_ppo(SB3PPO, learning_rate=lambda progress: 1e-3 * progress)
    ppo.save(tmp_path / "ppo.zip")
    with pytest.raises(PickleRefusedError, match=r"'learning_rate' \(function\).*--trust-pickles \(Python: PPO.load\)"):
        load_without_pickles(tmp_path / "ppo.zip", algorithm=SB3PPO)
    acting = load_without_pickles(tmp_path / "ppo.zip", algorithm=SB3PPO, training=False)
    assert type(acting) is SB3PPO and acting.learning_rate == 0.0
    continued = load_without_pickles(tmp_path / "ppo.zip", algorithm=SB3PPO, learning_rate=5e-4)  # e.g. from the config
    assert continued.lr_schedule(1.0) == 5e-4

    sac = SAC(
        "MlpPolicy",
        ENV,
        learning_starts=32,
        buffer_size=1000,
        batch_size=32,
        seed=0,
        device="cpu",
        policy_kwargs={"net_arch": [16]},
    )
    sac.learn(64)
    sac.save(tmp_path / "sac.zip")
    observation = np.zeros((1, 3), dtype=np.float32)
    acting_sac = load_without_pickles(tmp_path / "sac.zip", algorithm=SAC, training=False, buffer_size=1)
    np.testing.assert_array_equal(
        acting_sac.predict(observation, deterministic=True)[0], sac.predict(observation, deterministic=True)[0]
    )
    with pytest.raises(PickleRefusedError, match="'train_freq'"):  # a TrainFreq tuple keeps no readable fields
        load_without_pickles(tmp_path / "sac.zip", algorithm=SAC)
    assert load_without_pickles(tmp_path / "sac.zip", algorithm=SAC, train_freq=1).train_freq.frequency == 1


def test_a_crafted_model_zip_runs_no_code(tmp_path):
    model = small_ppo()
    model.save(tmp_path / "model.zip")
    marker = tmp_path / "pwned"
    rewrite_data_entry(str(tmp_path / "model.zip"), "observation_space", MarkerPayload(marker))
    rewrite_data_entry(str(tmp_path / "model.zip"), "lr_schedule", MarkerPayload(marker))
    loaded = load_without_pickles(tmp_path / "model.zip")  # both are rebuilt from readable parts
    assert loaded.observation_space == model.observation_space and not marker.exists()
    rewrite_data_entry(str(tmp_path / "model.zip"), "policy_class", MarkerPayload(marker))
    with pytest.raises(PickleRefusedError, match=r"'policy_class'.*not a plain reference to a class"):
        load_without_pickles(tmp_path / "model.zip")
    assert not marker.exists()
    with pytest.raises(ValueError, match="The space is of type <class 'NoneType'>"):  # SB3's load ran the payloads
        PPO.load(tmp_path / "model.zip")
    assert marker.exists()


def test_statistics_round_trip_and_refusals(tmp_path):
    class DictEnv(gym.Env):
        observation_space = spaces.Dict({"position": spaces.Box(-1, 1, (2,)), "goal": spaces.Box(-5, 5, (3,))})
        action_space = spaces.Box(-1, 1, (1,))

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return self.observation_space.sample(), {}

        def step(self, action):
            return self.observation_space.sample(), 1.0, False, False, {}

    for make in (lambda: make_vec_env(ENV, n_envs=2, seed=0), lambda: DummyVecEnv([DictEnv])):
        env = VecNormalize(make(), norm_reward=False, clip_obs=5.0, gamma=0.9)
        env.reset()
        for _ in range(20):
            env.step(np.zeros((env.num_envs, 1), dtype=np.float32))
        path = str(tmp_path / "vecnormalize.pkl")
        env.save(path)
        save_vecnormalize_statistics(env, statistics_path(path))
        expected, loaded = VecNormalize.load(path, make()), load_vecnormalize_without_pickles(path, make())
        for name in ("training", "norm_obs", "norm_reward", "clip_obs", "clip_reward", "gamma", "epsilon", "norm_obs_keys"):
            assert getattr(loaded, name) == getattr(expected, name), name
        pairs = (
            zip(expected.obs_rms.values(), loaded.obs_rms.values(), strict=True)
            if isinstance(expected.obs_rms, dict)
            else [(expected.obs_rms, loaded.obs_rms)]
        )
        for saved, read in [*pairs, (expected.ret_rms, loaded.ret_rms)]:
            np.testing.assert_array_equal(read.mean, saved.mean)
            np.testing.assert_array_equal(read.var, saved.var)
            assert read.count == saved.count

    pendulum = save_vecnormalize_statistics(VecNormalize(make_vec_env(ENV)), str(tmp_path / "pendulum.npz"))
    with pytest.raises(ValueError, match=r"statistics have shape \(3,\), the env's observations \(4,\)"):
        load_vecnormalize_without_pickles(pendulum, make_vec_env("CartPole-v1"))
    lonely = tmp_path / "lonely.pkl"
    lonely.write_bytes(pickle.dumps(MarkerPayload(tmp_path / "pwned")))
    with pytest.raises(PickleRefusedError, match=r"saved only as a pickle.*--trust-pickles.*VecNormalize\.load"):
        read_vecnormalize_statistics(str(lonely))
    assert not (tmp_path / "pwned").exists()


# --- resource bombs ---------------------------------------------------------------------------------------------

#: A bomb must be refused within these CPU seconds and this growth of the process's peak memory (the attacks used 3.4 to
#: 4.5 GB before they failed).
BOMB_SECONDS = 5.0
BOMB_BYTES = 1 << 30
GIB = 1 << 30


def deflated_zeros(size: int, prefix: bytes = b"") -> bytes:
    """A raw deflate stream of ``prefix`` followed by ``size`` zero bytes (a multiple of 1 MiB), built in milliseconds:
    after a full flush the compressor starts afresh, so every MiB after the first compresses to the same bytes."""
    chunk = bytes(1 << 20)
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = compressor.compress(prefix + chunk) + compressor.flush(zlib.Z_FULL_FLUSH)
    repeated = compressor.compress(chunk) + compressor.flush(zlib.Z_FULL_FLUSH)
    return first + repeated * ((size >> 20) - 1) + compressor.flush(zlib.Z_FINISH)


def zip_with_bomb(entries: dict[str, bytes], name: str, stream: bytes, inflated_size: int, crc: int = 0) -> bytes:
    """The zip of ``entries`` with the entry ``name`` holding the raw deflate ``stream`` that inflates to
    ``inflated_size`` bytes, declared as such (zipfile cannot write a given stream: it is stored, then its two headers
    are patched to say deflated, the inflated size and ``crc``; a wrong CRC shows only once all is inflated)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for entry, content in entries.items():
            archive.writestr(entry, stream if entry == name else content)
    raw = bytearray(buffer.getvalue())
    local = zipfile.ZipFile(io.BytesIO(bytes(raw))).getinfo(name).header_offset
    struct.pack_into("<H", raw, local + 8, zipfile.ZIP_DEFLATED)
    struct.pack_into("<I", raw, local + 14, crc)
    struct.pack_into("<I", raw, local + 22, inflated_size)
    central = raw.find(b"PK\x01\x02")
    while raw[central + 46 : central + 46 + struct.unpack_from("<H", raw, central + 28)[0]] != name.encode():
        central = raw.find(b"PK\x01\x02", central + 4)
    struct.pack_into("<H", raw, central + 10, zipfile.ZIP_DEFLATED)
    struct.pack_into("<I", raw, central + 16, crc)
    struct.pack_into("<I", raw, central + 24, inflated_size)
    return bytes(raw)


def zip_entries(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_a_model_zip_that_inflates_to_gigabytes_is_refused_before_reading(tmp_path, refused_within):
    small_ppo().save(tmp_path / "model.zip")
    entries = zip_entries((tmp_path / "model.zip").read_bytes())
    deflated = zlib.compress(entries["data"])[2:-4]  # a raw deflate stream: without zlib's header and checksum
    assert zip_entries(zip_with_bomb(entries, "data", deflated, len(entries["data"]), zlib.crc32(entries["data"]))) == entries
    # A 3 MB zip whose 'data' entry inflates to 3 GiB.
    bomb = tmp_path / "bomb.zip"
    bomb.write_bytes(zip_with_bomb(entries, "data", deflated_zeros(3 * GIB), 3 * GIB))
    assert bomb.stat().st_size < 4_000_000
    error, seconds, grown = refused_within(lambda: load_without_pickles(bomb))
    assert f"{bomb}: its entry 'data' inflates to {3 * GIB} bytes, the limit is {64 << 20}" in str(error)
    assert seconds < BOMB_SECONDS and grown < BOMB_BYTES
    # policy.pth is a zip too (torch's), which torch.load inflates: a 3 GiB record inside it.
    weights = zip_entries(entries["policy.pth"])
    record = next(name for name in weights if "/data/" in name)
    inner = zip_with_bomb(weights, record, deflated_zeros(3 * GIB), 3 * GIB)
    with zipfile.ZipFile(tmp_path / "nested.zip", "w") as archive:
        for name, content in entries.items():
            archive.writestr(name, inner if name == "policy.pth" else content)
    error, seconds, grown = refused_within(lambda: load_without_pickles(tmp_path / "nested.zip"))
    assert re.search(
        rf"nested.zip:policy.pth: its entry '{record}' inflates to {3 * GIB} bytes from \d+ "
        r"\(\d+ times; the limit is 100, MAX_COMPRESSION_RATIO\): a zip bomb",
        str(error),
    ), error
    assert seconds < BOMB_SECONDS and grown < BOMB_BYTES


def npy_header(shape: tuple[int, ...]) -> bytes:
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": shape})
    return header.getvalue()


def test_statistics_arrays_are_sized_before_they_are_read(tmp_path, refused_within):
    path = save_vecnormalize_statistics(VecNormalize(make_vec_env(ENV)), str(tmp_path / "vecnormalize.npz"))
    entries = zip_entries((tmp_path / "vecnormalize.npz").read_bytes())
    elements = 400_000_000  # 3.2 GB of float64 each
    # Deflated: 400M zeros in a few MB.
    size = 3052 << 20
    bomb = tmp_path / "deflated.npz"
    bomb.write_bytes(
        zip_with_bomb(
            entries, "obs.mean.npy", deflated_zeros(size, npy_header((elements,))), len(npy_header((elements,))) + size
        )
    )
    error, seconds, grown = refused_within(lambda: load_vecnormalize_without_pickles(str(bomb), make_vec_env(ENV)))
    assert "its entry 'obs.mean.npy' inflates to" in str(error) and "a zip bomb" in str(error)
    assert seconds < BOMB_SECONDS and grown < BOMB_BYTES
    # Stored, with headers that claim 400M values (numpy allocates what the header says, then reads).
    claims = dict(entries, **{"obs.mean.npy": npy_header((elements,)) + bytes(8), "obs.var.npy": npy_header((elements,))})
    with zipfile.ZipFile(tmp_path / "claims.npz", "w") as archive:
        for name, content in claims.items():
            archive.writestr(name, content)
    for read in (
        lambda: read_vecnormalize_statistics(str(tmp_path / "claims.npz")),
        lambda: load_vecnormalize_without_pickles(str(tmp_path / "claims.npz"), make_vec_env(ENV)),
    ):
        error, seconds, grown = refused_within(read)
        assert (
            f"its array 'obs.mean' has shape ({elements},) of float64, more than {1 << 22} numbers "
            "(MAX_STATISTICS_VALUES); refused before reading it"
        ) in str(error)
        assert seconds < BOMB_SECONDS and grown < BOMB_BYTES
    # Shapes are compared with the env's on the headers, before the arrays are read.
    with pytest.raises(ValueError, match=r"statistics have shape \(3,\), the env's observations \(4,\)"):
        read_vecnormalize_statistics(path, make_vec_env("CartPole-v1").observation_space)
    settings = dict(json.loads(str(np.load(path)["settings"][()])), norm_obs="yes")
    with zipfile.ZipFile(tmp_path / "settings.npz", "w") as archive:
        for name, content in entries.items():
            if name == "settings.npy":
                content = io.BytesIO()
                np.save(content, np.array(json.dumps(settings)))
                content = content.getvalue()
            archive.writestr(name, content)
    with pytest.raises(ValueError, match="the setting norm_obs must be True or False, got 'yes'"):
        read_vecnormalize_statistics(str(tmp_path / "settings.npz"))


# --- the CLI ----------------------------------------------------------------------------------------------------


def test_every_statistics_pickle_of_a_run_has_its_plain_twin(trained_run):
    run = trained_run / "ppo_ext" / f"{ENV}_1"
    pickles = sorted(glob.glob(str(run / "**" / "*.pkl"), recursive=True))
    # The final statistics (also saved at each new best evaluation), the best model's and the checkpoint's.
    assert [os.path.relpath(path, run) for path in pickles] == [
        f"{ENV}/vecnormalize.pkl",
        "best_model_vecnormalize.pkl",
        "rl_model_vecnormalize_256_steps.pkl",
    ]
    for path in pickles:
        with open(path, "rb") as handle:
            saved = pickle.load(handle)  # our own run: trusted
        twin = read_vecnormalize_statistics(statistics_path(path))
        np.testing.assert_array_equal(twin.obs_rms.mean, saved.obs_rms.mean)
        assert twin.obs_rms.count == saved.obs_rms.count and twin.ret_rms.count == saved.ret_rms.count


def test_the_evaluation_saves_a_plain_twin_with_each_statistics_pickle(tmp_path):
    from sb3_ppo_ext.zoo.safe_run_files import SaveVecNormalizeStatisticsCallback

    model = small_ppo()
    callback = SaveVecNormalizeStatisticsCallback(save_freq=1, save_path=str(tmp_path))
    callback.init_callback(model)
    callback.on_step()  # what the evaluation calls on each new best model
    assert sorted(os.listdir(tmp_path)) == ["vecnormalize.npz", "vecnormalize.pkl"]
    assert read_vecnormalize_statistics(str(tmp_path / "vecnormalize.npz")).clip_obs == model.get_vec_normalize_env().clip_obs


def test_a_new_best_model_keeps_its_statistics_beside_it_while_training_moves_on(tmp_path):
    from types import SimpleNamespace

    from sb3_ppo_ext.zoo.safe_run_files import SaveVecNormalizeStatisticsCallback

    model = small_ppo()
    callback = SaveVecNormalizeStatisticsCallback(save_freq=1, save_path=str(tmp_path / ENV))
    callback.parent = SimpleNamespace(best_model_save_path=str(tmp_path))  # the evaluation that saved best_model.zip
    callback.init_callback(model)
    model.learn(128)
    callback.on_step()
    at_best = model.get_vec_normalize_env().obs_rms.count
    model.learn(128)
    callback.save_freq = 10  # no new best: nothing saved
    callback.on_step()
    best = read_vecnormalize_statistics(str(tmp_path / "best_model_vecnormalize.pkl"))  # through the plain twin
    assert best.obs_rms.count == at_best < model.get_vec_normalize_env().obs_rms.count


def test_the_statistics_saved_with_the_played_model_are_chosen(tmp_path):
    from sb3_ppo_ext.zoo.loading import played_model_statistics

    run = tmp_path / "run"
    (run / "Env-v0").mkdir(parents=True)
    final = str(run / "Env-v0" / "vecnormalize.pkl")
    for name in ("rl_model_100_steps.zip", "rl_model_200_steps.zip", "rl_model_vecnormalize_100_steps.npz"):
        (run / name).write_bytes(b"")
    assert played_model_statistics(str(run), "Env-v0") == final
    assert played_model_statistics(str(run), "Env-v0", load_best=True) == final  # none of its own: the final ones
    (run / "best_model_vecnormalize.npz").write_bytes(b"")
    assert played_model_statistics(str(run), "Env-v0", load_best=True) == str(run / "best_model_vecnormalize.pkl")
    assert played_model_statistics(str(run), "Env-v0", load_checkpoint=100) == str(run / "rl_model_vecnormalize_100_steps.pkl")
    assert played_model_statistics(str(run), "Env-v0", load_last_checkpoint=True) == final  # 200 has none
    (run / "rl_model_vecnormalize_200_steps.pkl").write_bytes(b"")
    assert played_model_statistics(str(run), "Env-v0", load_last_checkpoint=True) == str(
        run / "rl_model_vecnormalize_200_steps.pkl"
    )


def test_the_best_model_and_a_checkpoint_are_played_and_exported_with_their_own_statistics(
    trained_run, tmp_path, capsys, monkeypatch, no_unpickling
):
    import sb3_ppo_ext.zoo.run_commands

    folder = str(trained_run)
    run = trained_run / "ppo_ext" / f"{ENV}_1"
    main(["enjoy", "--env", ENV, "-f", folder, "-n", "10", "--no-render", "--load-best"])
    assert f"Loading the statistics saved with the model: {run / 'best_model_vecnormalize.pkl'}" in capsys.readouterr().out
    main(["enjoy", "--env", ENV, "-f", folder, "-n", "10", "--no-render", "--load-checkpoint", "256"])
    assert "rl_model_vecnormalize_256_steps.pkl" in capsys.readouterr().out
    exported = {}
    monkeypatch.setattr(
        sb3_ppo_ext.zoo.run_commands,
        "export_onnx",
        lambda model, output, statistics=None, **kwargs: exported.update(statistics=statistics),
    )
    main(["export", "--env", ENV, "-f", folder, "--load-checkpoint", "256", "-o", str(tmp_path / "policy.onnx")])
    checkpoint = read_vecnormalize_statistics(str(run / "rl_model_vecnormalize_256_steps.npz"))
    final = read_vecnormalize_statistics(str(run / ENV / "vecnormalize.npz"))
    assert exported["statistics"].obs_rms.count == checkpoint.obs_rms.count != final.obs_rms.count


def test_a_run_is_played_exported_recorded_and_continued_without_unpickling(trained_run, tmp_path, capsys, no_unpickling):
    folder = str(trained_run)
    main(["enjoy", "--env", ENV, "-f", folder, "-n", "210", "--no-render"])
    assert "Episode Reward" in capsys.readouterr().out
    pytest.importorskip("onnx")
    main(["export", "--env", ENV, "-f", folder, "-o", str(tmp_path / "policy.onnx")])
    assert (tmp_path / "policy.onnx").stat().st_size > 0
    main(["record-video", "--env", ENV, "-f", folder, "-n", "10", "-o", str(tmp_path / "videos")])
    assert glob.glob(str(tmp_path / "videos" / "*.mp4"))
    run = trained_run / "ppo_ext" / f"{ENV}_1"
    for model in (run / f"{ENV}.zip", run / "rl_model_256_steps.zip"):
        main(
            [
                *TRAIN[:4],
                "128",
                *TRAIN[5:],
                "--eval-freq",
                "-1",
                "--save-freq",
                "-1",
                "-f",
                str(tmp_path / "continued"),
                "-i",
                str(model),
            ]
        )
    assert len(glob.glob(str(tmp_path / "continued" / "ppo_ext" / f"{ENV}_*" / f"{ENV}.zip"))) == 2


def test_trust_pickles_loads_as_rl_zoo3_does(trained_run, monkeypatch):
    loads = []
    original = cloudpickle.loads
    monkeypatch.setattr(cloudpickle, "loads", lambda *args, **kwargs: loads.append(1) or original(*args, **kwargs))
    main(["enjoy", "--env", ENV, "-f", str(trained_run), "-n", "5", "--no-render", "--trust-pickles"])
    assert loads  # SB3's load unpickled the zip's data entries


def test_a_crafted_vecnormalize_pickle_is_refused_unless_trusted(run_copy, tmp_path, user_error):
    folder, run = run_copy
    marker = tmp_path / "pwned"
    statistics = run / ENV / "vecnormalize.pkl"
    statistics.write_bytes(pickle.dumps(MarkerPayload(marker)))
    # With its plain twin beside it the pickle is never read.
    main(["enjoy", "--env", ENV, "-f", str(folder), "-n", "5", "--no-render"])
    assert not marker.exists()
    os.unlink(statistics_path(str(statistics)))
    played = ["--env", ENV, "-f", str(folder)]
    for argv in (
        ["enjoy", *played, "-n", "5", "--no-render"],
        ["record-video", *played, "-n", "5"],
        ["export", *played, "-o", str(tmp_path / "p.onnx")],
    ):
        line = user_error(argv)
        assert line.startswith(
            f"sb3-ppo-ext {argv[0]}: error: {statistics}: the VecNormalize statistics are saved only as a pickle"
        )
        assert "--trust-pickles" in line and not marker.exists()
    line = user_error([*TRAIN, "-f", str(tmp_path / "continued"), "-i", str(run / f"{ENV}.zip")])
    assert "saved only as a pickle" in line and "--trust-pickles" in line and not marker.exists()
    run_trusting(["enjoy", "--env", ENV, "-f", str(folder), "-n", "5", "--no-render", "--trust-pickles"])
    assert marker.exists()  # as rl-zoo3 does: the pickle ran


def test_a_crafted_model_zip_is_refused_or_loaded_safely_unless_trusted(run_copy, tmp_path, user_error):
    folder, run = run_copy
    marker = tmp_path / "pwned"
    model = str(run / f"{ENV}.zip")
    for key in ("observation_space", "lr_schedule", "clip_range", "_last_obs"):
        rewrite_data_entry(model, key, MarkerPayload(marker))
    main(["enjoy", "--env", ENV, "-f", str(folder), "-n", "5", "--no-render"])  # all rebuilt from readable parts
    main(
        [
            *TRAIN[:4],
            "128",
            *TRAIN[5:],
            "--eval-freq",
            "-1",
            "--save-freq",
            "-1",
            "-f",
            str(tmp_path / "continued"),
            "-i",
            model,
        ]
    )
    assert not marker.exists()
    rewrite_data_entry(model, "policy_class", MarkerPayload(marker))
    for argv in (
        ["enjoy", "--env", ENV, "-f", str(folder), "-n", "5", "--no-render"],
        ["export", "--env", ENV, "-f", str(folder), "-o", str(tmp_path / "p.onnx")],
        [*TRAIN, "-f", str(tmp_path / "continued"), "-i", model],
    ):
        line = user_error(argv)
        assert "its entry 'policy_class'" in line and "--trust-pickles" in line and not marker.exists()
    run_trusting(["enjoy", "--env", ENV, "-f", str(folder), "-n", "5", "--no-render", "--trust-pickles"])
    assert marker.exists()  # as rl-zoo3 does: the pickles ran
    marker.rmdir()
    run_trusting([*TRAIN, "-f", str(tmp_path / "continued"), "-i", model, "--trust-pickles"])
    assert marker.exists()
