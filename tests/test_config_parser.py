"""The restricted parser that replaces rl-zoo3's eval() of config strings, and the config-block checks."""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
import time

import optuna
import pytest
import rl_zoo3
from torch import nn, optim

from sb3_ppo_ext import PPO
from sb3_ppo_ext.allow_list import allowed_names, resolve_name
from sb3_ppo_ext.zoo.config.blocks import (
    MAX_N_ENVS,
    MAX_ROLLOUT_TRANSITIONS,
    ZOO_KEYS,
    check_block_keys,
    check_block_values,
    check_class_paths,
    check_config_document,
    number_from_text,
    preprocess_block,
    valid_keys,
)
from sb3_ppo_ext.zoo.config.command_line import parse_key_value_arguments
from sb3_ppo_ext.zoo.config.expressions import parse_expression
from sb3_ppo_ext.zoo.config.run_files import check_run_folder, load_run_yaml
from sb3_ppo_ext.zoo.config.yaml_files import (
    MAX_YAML_BYTES,
    MAX_YAML_DEPTH,
    MAX_YAML_EXPANDED_CHARACTERS,
    MAX_YAML_NODES,
    load_yaml,
    load_yaml_file,
)
from sb3_ppo_ext.zoo.registration import default_config_path
from sb3_ppo_ext.zoo.sampler import convert_ppo_ext_params, sample_ppo_ext_params

#: A resource bomb must be refused within these CPU seconds and this growth of the process's peak memory (the attacks
#: took 42 s and 5 GB before their MemoryError).
BOMB_SECONDS = 5.0
BOMB_BYTES = 1 << 30


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", 1),
        ("-2", -2),
        ("+2.5e-3", 2.5e-3),
        ("'lin_0.3'", "lin_0.3"),
        ("True", True),
        ("None", None),
        ("[64, 64]", [64, 64]),
        ("(1, 2)", (1, 2)),
        ("{'a': 1}", {"a": 1}),
        ("dict(norm_obs=True, norm_reward=False)", {"norm_obs": True, "norm_reward": False}),
        ("list((1, 2))", [1, 2]),
        ("tuple([3])", (3,)),
        ("dict()", {}),
    ],
)
def test_literals_and_builtin_calls(text, expected):
    assert parse_expression(text) == expected


def test_zoo_policy_kwargs_string_parses_to_the_objects_eval_would_give():
    text = """dict(log_std_init=-2,
                   ortho_init=False,
                   activation_fn=nn.ReLU,
                   net_arch=dict(pi=[256, 256], vf=[256, 256])
                   )"""
    assert parse_expression(text) == {
        "log_std_init": -2,
        "ortho_init": False,
        "activation_fn": nn.ReLU,
        "net_arch": {"pi": [256, 256], "vf": [256, 256]},
    }


@pytest.mark.parametrize(
    ("name", "expected"),
    [("nn.Tanh", nn.Tanh), ("th.nn.ELU", nn.ELU), ("torch.nn.LeakyReLU", nn.LeakyReLU), ("th.optim.AdamW", optim.AdamW)],
)
def test_allowed_names(name, expected):
    assert parse_expression(f"dict(x={name})") == {"x": expected}


def test_our_wrappers_and_callbacks_are_allow_listed_by_import_path():
    from sb3_ppo_ext.wrappers import FrameSkip

    assert resolve_name("sb3_ppo_ext.wrappers.FrameSkip") is FrameSkip
    names = allowed_names()
    assert "sb3_ppo_ext.wrappers.FrameSkip" in names
    assert "stable_baselines3.common.callbacks.CheckpointCallback" in names
    assert resolve_name("os.system") is None


@pytest.mark.parametrize(
    ("text", "offending"),
    [
        ("__import__('os').system('echo hacked')", "__import__('os').system('echo hacked')"),
        ("dict(a=__import__('os'))", "__import__('os')"),
        ("os.system('ls')", "os.system('ls')"),
        ("dict(activation_fn=nn.Module.__subclasses__)", "nn.Module.__subclasses__"),
        ("().__class__.__bases__", "().__class__.__bases__"),
        ("(lambda: 1)()", "(lambda: 1)()"),
        ("[x for x in range(3)]", "[x for x in range(3)]"),
        ("open('/etc/passwd')", "open('/etc/passwd')"),
        ("dict(**{'a': 1})", "dict(**{'a': 1})"),
        ("{**{'a': 1}}", "{**{'a': 1}}"),
        ("2 ** 100000", "2 ** 100000"),
        ("[1][0]", "[1][0]"),
        ("f'{1}'", "f'{1}'"),
        ("dict([('a', 1)])", "dict([('a', 1)])"),
        ("-'a'", "-'a'"),
        ("b'x'", "b'x'"),
        ("{[1]: 2}", "{[1]: 2}"),  # unhashable keys: a TypeError inside a dict display
        ("{[1]}", "{[1]}"),
        ("dict(a={(1, [2]): 3})", "{(1, [2]): 3}"),
    ],
)
def test_refuses_anything_else_naming_the_offending_text(text, offending):
    with pytest.raises(ValueError) as error:
        parse_expression(text, what="policy_kwargs")
    message = str(error.value)
    assert message.startswith("policy_kwargs: ")
    assert repr(offending) in message


@pytest.mark.parametrize(
    "text",
    ["-" * 100_000 + "1", "-" * 9_000 + "1", "-" * 5_000 + "1", "-" * 100 + "1", "not " * 2_000 + "1", "[" * 150 + "]" * 150],
)
def test_long_or_deeply_nested_expressions_are_refused_by_name(text, refused_within):
    # Python's parser ends a long chain of signs in a MemoryError or RecursionError, the evaluator in a RecursionError.
    error, seconds, grown = refused_within(lambda: parse_expression(text, what="policy_kwargs"))
    assert re.fullmatch(
        r"policy_kwargs: the expression (is \d+ characters long, the limit is 10000 \(MAX_EXPRESSION_LENGTH\)|"
        r"nests deeper than 32 levels \(MAX_EXPRESSION_DEPTH\)); it starts '.{40}'",
        str(error),
    ), error
    assert seconds < BOMB_SECONDS and grown < BOMB_BYTES
    assert parse_expression("-" * 20 + "1") == 1


def test_syntax_error_is_a_value_error():
    with pytest.raises(ValueError, match="not a valid Python expression"):
        parse_expression("dict(a=", what="normalize")


def test_key_value_arguments():
    assert parse_key_value_arguments(
        ["learning_rate:0.01", "policy_kwargs:dict(net_arch=[8])", "x:'a:b'"], option="--hyperparams"
    ) == {"learning_rate": 0.01, "policy_kwargs": {"net_arch": [8]}, "x": "a:b"}
    with pytest.raises(ValueError, match="key:value"):
        parse_key_value_arguments(["learning_rate"], option="--hyperparams")
    with pytest.raises(ValueError, match="__import__"):
        parse_key_value_arguments(["x:__import__('os')"], option="--env-kwargs")


def test_a_linear_schedule_on_the_command_line_needs_no_quotes():
    """``learning_rate:lin_3e-4`` (the option's help example) is the schedule string, as in a config file; the quoted
    form gives the same; elsewhere the same text is an expression and refused."""
    bare = parse_key_value_arguments(["learning_rate:lin_3e-4", "vf_learning_rate:lin_1e-3"], option="--hyperparams")
    assert bare == {"learning_rate": "lin_3e-4", "vf_learning_rate": "lin_1e-3"}
    assert parse_key_value_arguments(["learning_rate:'lin_3e-4'"], option="-params")["learning_rate"] == "lin_3e-4"
    assert parse_key_value_arguments(["clip_range:lin_0.2"], option="-params") == {"clip_range": "lin_0.2"}
    for item, option in (("n_epochs:lin_3e-4", "--hyperparams"), ("learning_rate:lin_3e-4", "--env-kwargs")):
        with pytest.raises(ValueError):
            parse_key_value_arguments([item], option=option)


def test_an_unknown_name_asks_for_quotes_or_names_the_nearest_allowed_one():
    with pytest.raises(ValueError, match=r"not an allowed name: string values need quotes, e\.g\. 'relu'"):
        parse_expression("dict(activation_fn=relu)", what="policy_kwargs")
    with pytest.raises(ValueError, match=r"not an allowed name; did you mean nn\.ReLU\?"):
        parse_expression("dict(activation_fn=nn.Relu)", what="policy_kwargs")
    # On the command line the example carries the quotes the shell removes.
    with pytest.raises(ValueError) as error:
        parse_key_value_arguments(["objective:kl_penalty"], option="--hyperparams")
    assert str(error.value).startswith(
        "--hyperparams objective: kl_penalty is not an allowed name; string values need quotes: objective:\"'kl_penalty'\""
    )


def test_valid_keys_are_constructor_parameters_plus_zoo_keys():
    keys = valid_keys(PPO)
    assert {"learning_rate", "objective", "lr_kl_target", "kl_penalty_target", "fast_collect", "policy"} <= keys
    assert ZOO_KEYS <= keys
    assert not {"env", "seed", "device", "verbose", "tensorboard_log", "self"} & keys


def test_unknown_key_names_the_key_and_the_nearest_valid_one():
    with pytest.raises(ValueError) as error:
        check_block_keys({"policy": "MlpPolicy", "lerning_rate": 1e-3}, valid_keys(PPO), where="'CartPole-v1' in x.yml")
    message = str(error.value)
    assert "'lerning_rate'" in message and "did you mean 'learning_rate'?" in message and "'CartPole-v1' in x.yml" in message
    with pytest.raises(ValueError, match="did you mean 'lr_kl_target'"):
        check_block_keys({"lr_kl_targt": 0.01}, valid_keys(PPO), where="block")
    with pytest.raises(ValueError, match="unknown key 'seed'"):
        check_block_keys({"seed": 1}, valid_keys(PPO), where="block")


def test_preprocess_block_parses_eval_strings_and_checks_the_rest():
    block = {
        "policy_kwargs": "dict(activation_fn=nn.Tanh)",
        "normalize": "dict(norm_reward=False)",
        "learning_rate": "lin_3e-4",
        "env_wrapper": [{"sb3_ppo_ext.wrappers.FrameSkip": {"skip": 6}}],
        "callback": "stable_baselines3.common.callbacks.ProgressBarCallback",
    }
    parsed = preprocess_block(block, where="test")
    assert parsed["policy_kwargs"] == {"activation_fn": nn.Tanh}
    assert parsed["normalize"] == {"norm_reward": False}
    assert block["policy_kwargs"] == "dict(activation_fn=nn.Tanh)"  # the input is not modified
    assert preprocess_block({"normalize": True}, where="test") == {"normalize": True}


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ({"learning_rate": "lin_abc"}, "learning_rate must be a number or a linear schedule"),
        ({"clip_range": "exp_0.2"}, "clip_range must be a number or a linear schedule"),
        ({"callback": "os.system"}, "callback: 'os.system' is not an allow-listed"),
        ({"callback": [{"subprocess.run": {"args": "ls"}}]}, "callback: 'subprocess.run' is not an allow-listed"),
        ({"env_wrapper": "builtins.exec"}, "env_wrapper: 'builtins.exec' is not an allow-listed"),
        ({"vec_env_wrapper": {"a.B": 1, "c.D": 2}}, "one-key mapping"),
        ({"policy": "os.system"}, "policy: 'os.system' is not an allow-listed"),
        ({"normalize": "__import__('os')"}, "normalize in test: \"__import__('os')\""),
        ({"monitor_kwargs": "exec('1')"}, "monitor_kwargs in test"),
        ({"replay_buffer_kwargs": "globals()"}, "replay_buffer_kwargs in test"),
        # Numbers and lin_ strings become schedules in rl-zoo3, which the algorithm cannot check as numbers: the ends
        # of the schedule are checked here, by the algorithm's rule.
        ({"clip_range": 0}, "clip_range must be > 0.0, got 0: it bounds the probability ratio"),
        ({"clip_range": 1e300}, "clip_range must be <= 1000.0, got 1e+300"),
        (
            {"clip_range": "lin_-0.2"},
            "clip_range (the schedule SimpleLinearSchedule(initial_value=-0.2) at "
            "progress_remaining=1) must be > 0.0, got -0.2",
        ),
        (
            {"learning_rate": "lin_0"},
            "learning_rate (the schedule SimpleLinearSchedule(initial_value=0.0) at "
            "progress_remaining=1) must be > 0.0, got 0.0",
        ),
        (
            {"vf_learning_rate": "lin_-1"},
            "vf_learning_rate (the schedule SimpleLinearSchedule(initial_value=-1.0) at "
            "progress_remaining=1) must be > 0.0, got -1.0",
        ),
        ({"clip_range_vf": -1}, "clip_range_vf must be > 0.0, got -1"),
    ],
)
def test_preprocess_block_rejects(block, message):
    with pytest.raises(ValueError) as error:
        preprocess_block(block, where="test")
    assert message in str(error.value)


def test_schedules_that_start_above_zero_pass_the_schedule_check():
    block = {"learning_rate": "lin_3e-4", "clip_range": "lin_0.2", "clip_range_vf": 0.5, "vf_learning_rate": None}
    parsed = preprocess_block(block, where="test")
    assert parsed["clip_range"] == "lin_0.2" and parsed["vf_learning_rate"] is None  # rl-zoo3 builds its schedules
    assert preprocess_block({"vf_learning_rate": "lin_1e-3"}, where="test")["vf_learning_rate"](0.5) == 5e-4


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1e-3", 0.001),
        ("3E-4", 3e-4),
        (" 1e6 ", 1_000_000),
        ("64", 64),
        ("-0.5", -0.5),
        (".5", 0.5),
        ("+2", 2),
        ("lin_1e-3", "lin_1e-3"),
        ("1e-3x", "1e-3x"),
        ("abc", "abc"),
        ("", ""),
        (0.5, 0.5),
        (None, None),
    ],
)
def test_numbers_written_as_strings_read_as_numbers(text, expected):
    """PyYAML (YAML 1.1) reads ``1e-3`` as a string: a float needs a dot there."""
    value = number_from_text(text)
    assert value == expected and type(value) is type(expected)


def test_a_yaml_number_without_a_dot_is_the_number_where_a_number_is_expected():
    block = load_yaml(
        "learning_rate: 1e-3\nent_coef: 1e-2\nn_timesteps: 2e5\nvf_learning_rate: 5e-4\nobjective: 1e3\n", where="test"
    )
    assert block["learning_rate"] == "1e-3"  # what PyYAML gives
    parsed = preprocess_block(block, where="test", algorithm=PPO)
    assert parsed["learning_rate"] == 1e-3 and parsed["ent_coef"] == 1e-2 and parsed["n_timesteps"] == 200_000
    assert parsed["vf_learning_rate"] == 5e-4
    assert parsed["objective"] == "1e3"  # a string setting stays a string (and the algorithm refuses it by name)
    assert preprocess_block({"learning_rate": "1e-3"}, where="test")["learning_rate"] == 1e-3  # schedules: any algorithm
    with pytest.raises(ValueError, match=r"learning_rate must be > 0\.0, got -0\.001"):
        preprocess_block({"learning_rate": "-1e-3"}, where="test", algorithm=PPO)
    assert parse_key_value_arguments(["learning_rate:1e-3"], option="--hyperparams") == {"learning_rate": 1e-3}


@pytest.mark.parametrize("refused", ["1e-3x", "lin_abc", "exp_1e-3"])
def test_a_string_that_is_neither_a_number_nor_a_schedule_is_refused_by_name(refused):
    with pytest.raises(ValueError, match=f"learning_rate must be a number or a linear schedule .* got '{refused}'"):
        preprocess_block({"learning_rate": refused}, where="test", algorithm=PPO)


def test_hyperparameter_error_is_importable_from_the_package_without_torch():
    """The README's ``from sb3_ppo_ext import HyperparameterError``, in a fresh process that imports no torch for it."""
    code = (
        "import sys; from sb3_ppo_ext import HyperparameterError; from sb3_ppo_ext.validation import check_int; "
        "assert issubclass(HyperparameterError, (ValueError, AssertionError)); "
        "print('torch' in sys.modules, 'HyperparameterError' in __import__('sb3_ppo_ext').__all__)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "True"]


def test_class_paths_accept_kwargs_items():
    check_class_paths("env_wrapper", ["sb3_ppo_ext.wrappers.FrameSkip", {"sb3_ppo_ext.wrappers.FrameSkip": {"skip": 2}}])
    with pytest.raises(ValueError, match="must be a mapping"):
        check_class_paths("env_wrapper", [{"sb3_ppo_ext.wrappers.FrameSkip": [2]}])


def test_convert_ppo_ext_params():
    converted = convert_ppo_ext_params(
        {
            "batch_size_pow": 6,
            "n_steps_pow": 8,
            "one_minus_gamma": 0.01,
            "one_minus_gae_lambda": 0.05,
            "net_arch": "small",
            "activation_fn": "relu",
            "objective": "kl_penalty",
            "kl_coef": 0.5,
            "lr_kl_target": None,
        }
    )
    assert converted == {
        "batch_size": 64,
        "n_steps": 256,
        "gamma": pytest.approx(0.99),
        "gae_lambda": pytest.approx(0.95),
        "policy_kwargs": {"net_arch": {"pi": [64, 64], "vf": [64, 64]}, "activation_fn": nn.ReLU},
        "objective": "kl_penalty",
        "kl_coef": 0.5,
        "lr_kl_target": None,
    }


def test_sampler_searches_the_kl_settings_and_leaves_pinned_ones_alone():
    trial = optuna.trial.FixedTrial(
        {
            "batch_size_pow": 5,
            "one_minus_gamma": 0.01,
            "one_minus_gae_lambda": 0.02,
            "ent_coef": 1e-4,
            "n_epochs": 5,
            "max_grad_norm": 0.5,
            "objective": "clip_kl_penalty",
            "clip_range": 0.2,
            "kl_coef": 1.0,
            "kl_penalty_target": 0.01,
            "lr_kl_target": 0.01,
            "learning_rate": 1e-3,
            "lr_kl_cadence": "epoch",
            "separate_vf_learning_rate": True,
            "vf_learning_rate": 3e-3,
        }
    )
    # n_steps and policy_kwargs are pinned: FixedTrial would raise if the sampler asked for them.
    params = sample_ppo_ext_params(trial, 1, 1, {}, pinned={"n_steps": 64, "policy_kwargs": {}})
    assert params["objective"] == "clip_kl_penalty" and params["kl_penalty_target"] == 0.01
    assert params["lr_kl_target"] == 0.01 and params["lr_kl_cadence"] == "epoch"
    assert params["vf_learning_rate"] == 3e-3 and "separate_vf_learning_rate" not in params
    assert "n_steps" not in params and "policy_kwargs" not in params
    assert params["batch_size"] == 32


def test_sampler_asks_no_clip_range_for_the_pure_penalty_objective():
    trial = optuna.trial.FixedTrial(
        {"objective": "kl_penalty", "kl_coef": 0.3, "kl_penalty_target": None, "lr_kl_target": None, "learning_rate": 3e-4}
    )
    pinned = dict.fromkeys(
        [
            "batch_size",
            "n_steps",
            "gamma",
            "gae_lambda",
            "ent_coef",
            "n_epochs",
            "max_grad_norm",
            "policy_kwargs",
            "vf_learning_rate",
        ]
    )
    params = sample_ppo_ext_params(trial, 1, 1, {}, pinned=pinned)
    assert params == {
        "objective": "kl_penalty",
        "kl_coef": 0.3,
        "kl_penalty_target": None,
        "lr_kl_target": None,
        "learning_rate": 3e-4,
    }


def test_a_pinned_objective_decides_which_kl_settings_are_searched():
    trial = optuna.trial.FixedTrial(
        {"kl_coef": 2.0, "kl_penalty_target": 0.02, "learning_rate": 1e-4, "lr_kl_cadence": "minibatch"}
    )
    pinned = dict.fromkeys(
        [
            "batch_size",
            "n_steps",
            "gamma",
            "gae_lambda",
            "ent_coef",
            "n_epochs",
            "max_grad_norm",
            "policy_kwargs",
            "vf_learning_rate",
        ]
    )
    params = sample_ppo_ext_params(trial, 1, 1, {}, pinned={**pinned, "objective": "kl_penalty", "lr_kl_target": 0.01})
    assert params == {"kl_coef": 2.0, "kl_penalty_target": 0.02, "learning_rate": 1e-4, "lr_kl_cadence": "minibatch"}


def test_sampler_searches_a_separate_critic_learning_rate_or_none():
    pinned = dict.fromkeys(
        [
            "batch_size",
            "n_steps",
            "gamma",
            "gae_lambda",
            "ent_coef",
            "n_epochs",
            "max_grad_norm",
            "policy_kwargs",
            "learning_rate",
            "objective",
            "clip_range",
            "lr_kl_target",
        ]
    )
    pinned.update(objective="clip", lr_kl_target=None)
    shared = sample_ppo_ext_params(optuna.trial.FixedTrial({"separate_vf_learning_rate": False}), 1, 1, {}, pinned=pinned)
    assert shared == {}
    own = optuna.trial.FixedTrial({"separate_vf_learning_rate": True, "vf_learning_rate": 2e-3})
    assert sample_ppo_ext_params(own, 1, 1, {}, pinned=pinned) == {"vf_learning_rate": 2e-3}


def test_run_files_written_by_plain_rl_zoo3_load_and_other_python_tags_are_refused(tmp_path):
    from collections import OrderedDict

    import yaml

    zoo_written = tmp_path / "config.yml"
    zoo_written.write_text(yaml.dump(OrderedDict([("n_envs", 8), ("normalize", True)])))  # what rl-zoo3 writes
    assert "python/object/apply:collections.OrderedDict" in zoo_written.read_text()
    assert load_run_yaml(str(zoo_written)) == {"n_envs": 8, "normalize": True}
    check_run_folder(str(tmp_path))

    marker = tmp_path / "pwned"
    evil = tmp_path / "args.yml"
    evil.write_text(f"env: !!python/object/apply:os.system ['touch {marker}']\n")
    with pytest.raises(ValueError, match="not plain YAML"):
        load_run_yaml(str(evil))
    with pytest.raises(ValueError, match="not plain YAML"):
        check_run_folder(str(tmp_path))
    evil.unlink()
    zoo_written.write_text("normalize: \"__import__('os').system('touch x')\"\n")
    with pytest.raises(ValueError, match=r"normalize in .*config\.yml"):
        check_run_folder(str(tmp_path))
    assert not marker.exists()


def test_run_files_are_written_as_plain_yaml_values():
    from collections import OrderedDict

    from sb3_ppo_ext.zoo.experiment import to_plain_yaml

    value = OrderedDict([("policy_kwargs", {"activation_fn": nn.ReLU, "net_arch": (64, 64)}), ("x", None)])
    assert to_plain_yaml(value) == {
        "policy_kwargs": {"activation_fn": "torch.nn.modules.activation.ReLU", "net_arch": [64, 64]},
        "x": None,
    }
    assert type(to_plain_yaml(value)) is dict


def test_classes_a_run_file_saves_as_import_paths_are_read_back_as_classes():
    from stable_baselines3.common.torch_layers import NatureCNN

    from sb3_ppo_ext.zoo.experiment import to_plain_yaml

    policy_kwargs = {"activation_fn": nn.ReLU, "optimizer_class": optim.AdamW, "features_extractor_class": NatureCNN}
    saved = to_plain_yaml({"policy_kwargs": policy_kwargs})  # what config.yml holds after --hyperparams policy_kwargs:...
    assert saved["policy_kwargs"]["activation_fn"] == "torch.nn.modules.activation.ReLU"
    parsed = preprocess_block(saved, where="config.yml")
    assert parsed["policy_kwargs"] == policy_kwargs
    check_block_values(parsed, where="config.yml")
    with pytest.raises(ValueError, match=r"activation_fn must be a class deriving from torch\.nn\.Module .* got 'os\.system'"):
        check_block_values(preprocess_block({"policy_kwargs": {"activation_fn": "os.system"}}, where="c"), where="c")


def billion_laughs(levels: int = 9) -> str:
    """A YAML alias bomb: each anchor a list of nine aliases of the previous one (9**levels strings, ~600 bytes)."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_at_once():
    bomb = billion_laughs()
    assert len(bomb) < 700
    started = time.process_time()
    with pytest.raises(ValueError, match=f"more than {MAX_YAML_NODES} YAML nodes once its aliases are expanded"):
        load_yaml(bomb, where="bomb.yml")
    assert time.process_time() - started < BOMB_SECONDS


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 100_000, f"deeper than {MAX_YAML_DEPTH} levels"),  # PyYAML's recursive composer: the recursion limit
        ("a: &a [*a]", "recursive alias"),
        ("a: !!python/object/apply:os.system ['true']", "not plain YAML"),
    ],
    ids=["deep nesting", "recursive alias", "python tag"],
)
def test_yaml_that_is_not_plain_bounded_data_is_refused(text, message):
    with pytest.raises(ValueError, match=message):
        load_yaml(text, where="c.yml")


def test_yaml_files_too_large_or_not_text_are_refused(tmp_path):
    big = tmp_path / "big.yml"
    big.write_text("# " + "x" * MAX_YAML_BYTES + "\n")
    with pytest.raises(ValueError, match=f"{big} is too large"):
        load_yaml_file(str(big))
    binary = tmp_path / "binary.yml"
    binary.write_bytes(b"a: \xff\xfe")
    with pytest.raises(ValueError, match="not a UTF-8 text file"):
        load_yaml_file(str(binary))


def test_yaml_merge_keys_still_load():
    assert load_yaml("base: &base {a: 1}\nx:\n  <<: *base\n  b: 2\n", where="ok.yml")["x"] == {"a": 1, "b": 2}


RL_ZOO3_CONFIGS = sorted(glob.glob(os.path.join(os.path.dirname(rl_zoo3.__file__), "hyperparams", "*.yml")))


def test_rl_zoo3s_configs_are_found():
    assert len(RL_ZOO3_CONFIGS) > 5


@pytest.mark.parametrize(
    "path",
    [*RL_ZOO3_CONFIGS, default_config_path()],
    ids=[*(os.path.basename(path) for path in RL_ZOO3_CONFIGS), "bundled ppo_ext.yml"],
)
def test_every_rl_zoo3_and_bundled_config_is_within_the_limits(path):
    checked, outside_allow_list = 0, []
    for env_id, block in check_config_document(load_yaml_file(path), where=path).items():
        try:
            parsed = preprocess_block(block, where=env_id)
        except ValueError:
            outside_allow_list.append(env_id)  # a class path outside our allow-list (rl-zoo3's own configs name a few)
            continue
        check_block_values(parsed, where=f"{env_id} in {path}")
        checked += 1
    assert checked > len(outside_allow_list), (checked, outside_allow_list)
    if path == default_config_path():
        assert not outside_allow_list  # every bundled block parses


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (None, "is empty"),
        (["CartPole-v1"], "holds a list at the top level"),
        ({1: {}}, "top-level key 1 is not an env id"),
        ({"CartPole-v1": 5}, "the 'CartPole-v1' block must be a mapping of hyperparameters, got 5"),
    ],
)
def test_config_documents_of_the_wrong_shape_are_refused(document, message):
    with pytest.raises(ValueError, match=message):
        check_config_document(document, where="c.yml")


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ({"n_envs": "4"}, "n_envs must be an integer, got '4'"),
        ({"n_envs": 100_000_000_000}, f"n_envs must be <= {MAX_N_ENVS} \\(MAX_N_ENVS\\)"),
        ({"n_envs": 0}, "n_envs must be >= 1"),
        ({"n_envs": 8, "n_steps": 1_000_000}, f"n_steps \\* n_envs must be <= {MAX_ROLLOUT_TRANSITIONS}"),
        ({"n_steps": 2.5}, "n_steps must be an integer"),
        ({"batch_size": 10**9}, "batch_size must be <= "),
        ({"buffer_size": 1e9}, "buffer_size must be <= 10000000"),
        ({"n_timesteps": float("inf")}, "n_timesteps must be a finite number"),
        ({"env_kwargs": 5}, "env_kwargs must be a mapping"),
        ({"normalize": 3}, "normalize must be true, false or a mapping"),
        ({"policy_kwargs": {"net_arch": [64, 100_000]}}, "a layer of policy_kwargs net_arch must be <= 8192"),
        ({"policy_kwargs": {"net_arch": {"pi": [64], "vf": "64"}}}, "net_arch\\['vf'\\] must be a list"),
        ({"policy_kwargs": {"net_arch": [8] * 100}}, "at most 64 layers"),
        ({"policy_kwargs": {"lstm_hidden_size": 10**6}}, "lstm_hidden_size must be <= 8192"),
        ({"n_epochs": 10**30}, "n_epochs must be <= 1000 \\(MAX_N_EPOCHS\\), got 10{30}"),
        ({"frame_stack": 1_000_000_000}, "frame_stack must be <= 256 \\(MAX_FRAME_STACK\\), got 1000000000"),
        ({"frame_stack": -3}, "frame_stack must be >= 1, got -3"),
        ({"normalize": {"norm_obs": 5}}, "normalize norm_obs must be True or False, got 5"),
        ({"normalize": {"clip_obs": -1.0}}, "normalize clip_obs must be a number > 0, got -1.0"),
        ({"normalize": {"clip_ob": 5.0}}, "VecNormalize takes no argument 'clip_ob' \\(did you mean 'clip_obs'"),
        ({"policy_kwargs": {"ortho_init": "no"}}, "policy_kwargs ortho_init must be True or False, got 'no'"),
        ({"policy_kwargs": {"activation_fn": "relu"}}, "activation_fn must be a class deriving from torch.nn.Module"),
        ({"policy_kwargs": {"activation_fn": nn.ReLU()}}, "activation_fn must be a class deriving from torch.nn.Module"),
        ({"policy_kwargs": {"optimizer_class": nn.ReLU}}, "optimizer_class must be a class deriving from torch.optim"),
        ({"policy_kwargs": {"optimizer_kwargs": 5}}, "policy_kwargs optimizer_kwargs must be a dict"),
        ({"policy_kwargs": {"log_std_init": "x"}}, "policy_kwargs log_std_init must be a finite number"),
        ({"policy_kwargs": {"net_arch": [64, {"pi": [32]}]}}, "holds a dict .* among layer widths"),
        ({"env_kwargs": {1: 2}}, "env_kwargs: argument names must be identifier strings, got the key 1"),
    ],
)
def test_block_values_of_the_wrong_type_or_an_absurd_size_are_refused(block, message):
    with pytest.raises(ValueError, match=message):
        check_block_values(block, where="the 'CartPole-v1' block of c.yml")
    check_block_values(
        {
            "n_envs": 8.0,
            "n_steps": 2048,
            "batch_size": 64,
            "buffer_size": 1e6,
            "n_timesteps": 1e6,
            "n_epochs": 10,
            "frame_stack": 4,
            "normalize": {"norm_reward": False, "clip_obs": 5.0},
            "policy_kwargs": {
                "net_arch": {"pi": [64], "vf": [64]},
                "activation_fn": nn.ReLU,
                "optimizer_class": optim.AdamW,
                "ortho_init": False,
                "log_std_init": -1,
            },
        },
        where="fine",
    )
    check_block_values(
        {"frame_stack": None, "policy_kwargs": {"net_arch": [{"pi": [8], "vf": [8]}]}}, where="fine"
    )  # rl-zoo3: no stacking; SB3 still reads the pre-1.8 net_arch


def test_aliases_of_a_long_string_cost_its_length(refused_within):
    # 640 kB: 8,000 aliases of one 640,000-character string are 8,003 nodes, within MAX_YAML_NODES, but print as 5 GB
    # (what rl-zoo3's pprint of the block did, for 42 s).
    bomb = "a: &a '" + "x" * 640_000 + "'\nb: [" + ", ".join(["*a"] * 8000) + "]\n"
    assert len(bomb) < MAX_YAML_BYTES
    error, seconds, grown = refused_within(lambda: load_yaml(bomb, where="long.yml"))
    assert (
        f"long.yml expands to more than {MAX_YAML_EXPANDED_CHARACTERS} characters of keys and values once its "
        "aliases are expanded (line 2)"
    ) in str(error)
    assert seconds < BOMB_SECONDS and grown < BOMB_BYTES
    # A long &defaults block merged into many blocks stays within the limit.
    merges = "defaults: &d {note: '" + "y" * 10_000 + "'}\n" + "".join(f"e{i}:\n  <<: *d\n  n: {i}\n" for i in range(100))
    assert load_yaml(merges, where="merges.yml")["e99"] == {"note": "y" * 10_000, "n": 99}


def test_an_alias_bomb_in_a_run_file_is_refused_quickly(tmp_path):
    (tmp_path / "config.yml").write_text(billion_laughs())
    started = time.process_time()
    with pytest.raises(ValueError, match="aliases are expanded"):
        check_run_folder(str(tmp_path))
    assert time.process_time() - started < BOMB_SECONDS
