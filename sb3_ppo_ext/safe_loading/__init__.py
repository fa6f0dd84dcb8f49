"""Load Stable-Baselines3 model zips and ``VecNormalize`` statistics without unpickling anything.

SB3 writes what JSON cannot hold in a model's ``data`` entry as base64 cloudpickles, which ``PPO.load`` unpickles;
``VecNormalize.load`` unpickles ``vecnormalize.pkl``. A crafted file runs code when either is loaded. Here nothing
is unpickled, one module per kind of file:

- :mod:`~sb3_ppo_ext.safe_loading.models`: :func:`~sb3_ppo_ext.safe_loading.models.load_without_pickles` rebuilds
  every pickled entry of a model zip from its readable fields and hands the results to the algorithm's own ``load``;
- :mod:`~sb3_ppo_ext.safe_loading.vecnormalize`:
  :func:`~sb3_ppo_ext.safe_loading.vecnormalize.load_vecnormalize_without_pickles` reads the plain-data twin of a
  ``vecnormalize.pkl`` (``vecnormalize.npz``, written beside it by
  :func:`~sb3_ppo_ext.safe_loading.vecnormalize.save_vecnormalize_statistics`); a pickle without its twin is refused;
- what both share: the refusal (:mod:`~sb3_ppo_ext.safe_loading.errors`) and the size check of a zip before any of
  it is read (:mod:`~sb3_ppo_ext.safe_loading.zips`).

What cannot be rebuilt is refused with a :class:`~sb3_ppo_ext.safe_loading.errors.PickleRefusedError` naming the
entry or file; loading it is what ``PPO.load`` / ``VecNormalize.load`` (the CLI's ``--trust-pickles``) do, for files
you trust. Every public name of the four modules can be imported from this package. For example::

    from sb3_ppo_ext import load_without_pickles, load_vecnormalize_without_pickles
    env = load_vecnormalize_without_pickles("logs/ppo_ext/Pendulum-v1_1/Pendulum-v1/vecnormalize.pkl",
                                            make_vec_env("Pendulum-v1"))
    model = load_without_pickles("logs/ppo_ext/Pendulum-v1_1/Pendulum-v1.zip", env)
"""

from sb3_ppo_ext.safe_loading.errors import TRUST_PICKLES_OPTION, PickleRefusedError, refusal
from sb3_ppo_ext.safe_loading.models import (
    ACTING_PLACEHOLDERS,
    DERIVED_ENTRIES,
    MAX_DATA_ENTRY_BYTES,
    RESET_ENTRIES,
    STRUCTURE_ENTRIES,
    UnreadableEntry,
    allowed_classes,
    check_finite_tensors,
    class_reference,
    dict_from_fields,
    is_pickled,
    load_without_pickles,
    matching_spaces,
    parse_printed_array,
    read_zip_data,
    rebuild_entry,
    rebuilt_entries,
    schedule_from_fields,
    schedule_from_repr,
    space_data_from_fields,
    space_from_fields,
    type_path,
)
from sb3_ppo_ext.safe_loading.vecnormalize import (
    MAX_SETTINGS_CHARACTERS,
    MAX_STATISTICS_VALUES,
    STATISTICS_FORMAT_VERSION,
    VecNormalizeStatistics,
    check_statistics_arrays,
    check_statistics_settings,
    load_vecnormalize_without_pickles,
    read_vecnormalize_statistics,
    save_vecnormalize_statistics,
    statistics_path,
    statistics_saved,
)
from sb3_ppo_ext.safe_loading.zips import (
    MAX_COMPRESSION_RATIO,
    MIN_RATIO_CHECKED_BYTES,
    check_zip_sizes,
    load_bounded_npz,
    npz_headers,
)

__all__ = [
    "ACTING_PLACEHOLDERS",
    "DERIVED_ENTRIES",
    "MAX_COMPRESSION_RATIO",
    "MAX_DATA_ENTRY_BYTES",
    "MAX_SETTINGS_CHARACTERS",
    "MAX_STATISTICS_VALUES",
    "MIN_RATIO_CHECKED_BYTES",
    "RESET_ENTRIES",
    "STATISTICS_FORMAT_VERSION",
    "STRUCTURE_ENTRIES",
    "TRUST_PICKLES_OPTION",
    "PickleRefusedError",
    "UnreadableEntry",
    "VecNormalizeStatistics",
    "allowed_classes",
    "check_finite_tensors",
    "check_statistics_arrays",
    "check_statistics_settings",
    "check_zip_sizes",
    "class_reference",
    "dict_from_fields",
    "is_pickled",
    "load_bounded_npz",
    "load_vecnormalize_without_pickles",
    "load_without_pickles",
    "matching_spaces",
    "npz_headers",
    "parse_printed_array",
    "read_vecnormalize_statistics",
    "read_zip_data",
    "rebuild_entry",
    "rebuilt_entries",
    "refusal",
    "save_vecnormalize_statistics",
    "schedule_from_fields",
    "schedule_from_repr",
    "space_data_from_fields",
    "space_from_fields",
    "statistics_path",
    "statistics_saved",
    "type_path",
]
