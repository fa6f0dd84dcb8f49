"""The refusal both loaders of :mod:`sb3_ppo_ext.safe_loading` raise for what only unpickling could load, and the
command-line option that loads it instead."""

from __future__ import annotations

#: The command-line option that loads pickles instead (named in every refusal).
TRUST_PICKLES_OPTION = "--trust-pickles"


class PickleRefusedError(ValueError):
    """A file holds something that only unpickling could load, and unpickling can run code: refused by default."""


def refusal(what: str, why: str, trusted_alternative: str) -> PickleRefusedError:
    """The one-line refusal of ``what``: why it cannot be loaded from plain data, and the opt-in that would load it.

    :param what: the file, and the entry of it, that is refused.
    :param why: why it cannot be rebuilt without unpickling.
    :param trusted_alternative: the Python call that unpickles it (``PPO.load``, ``VecNormalize.load``).
    """
    return PickleRefusedError(
        f"{what} {why}; unpickling can run code, so it is refused: pass {TRUST_PICKLES_OPTION} (Python: "
        f"{trusted_alternative}) only for a file you trust"
    )
