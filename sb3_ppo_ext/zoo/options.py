"""The options that several ``sb3-ppo-ext`` commands share: ``--debug`` (read by the entry point,
:func:`sb3_ppo_ext.cli.main`, and shown in each command's ``--help``) and ``--trust-pickles``."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from sb3_ppo_ext.safe_loading.errors import TRUST_PICKLES_OPTION

#: An option to add to a parser: its flags and the keyword arguments of ``add_argument``.
Option = tuple[tuple[str, ...], Mapping[str, Any]]

#: The option, taken by every command, that shows the traceback of a user error.
DEBUG_OPTION = "--debug"
DEBUG_HELP = (
    "show the traceback of an error; without it, a mistake in the command line, a config file, an env id or a run "
    "folder (a ValueError, AssertionError, OSError or gymnasium error with a message, raised anywhere but inside a "
    "model's learn()) ends the command with one line 'sb3-ppo-ext COMMAND: error: ...' and exit status 2; any other "
    "error shows its traceback anyway"
)
#: ``--debug`` as each command's parser shows it (the entry point removes it before the command parses).
DEBUG: Option = ((DEBUG_OPTION,), {"action": "store_true", "default": argparse.SUPPRESS, "help": DEBUG_HELP})

TRUST_PICKLES_HELP = (
    "load the run's model zip and vecnormalize.pkl by unpickling them, as rl-zoo3 and SB3 do: a crafted file runs "
    "code, so only for files you trust (default: both are rebuilt from plain data, and what cannot be is refused)"
)
#: ``--trust-pickles`` of ``enjoy`` / ``record-video`` / ``export``.
TRUST_PICKLES: Option = ((TRUST_PICKLES_OPTION,), {"action": "store_true", "default": False, "help": TRUST_PICKLES_HELP})
#: ``--trust-pickles`` of ``train`` / ``optimize``: what ``-i`` loads.
TRUST_PICKLES_TRAIN: Option = (
    (TRUST_PICKLES_OPTION,),
    {
        "action": "store_true",
        "default": False,
        "help": "with -i: load the model zip, its VecNormalize statistics and a replay_buffer.pkl by unpickling them, as "
        "rl-zoo3 does: a crafted file runs code, so only for files you trust (default: the model and statistics "
        "are rebuilt from plain data, and what cannot be is refused)",
    },
)

__all__ = [
    "DEBUG",
    "DEBUG_HELP",
    "DEBUG_OPTION",
    "TRUST_PICKLES",
    "TRUST_PICKLES_HELP",
    "TRUST_PICKLES_OPTION",
    "TRUST_PICKLES_TRAIN",
    "Option",
]
