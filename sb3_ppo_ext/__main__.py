"""``python -m sb3_ppo_ext``: the ``sb3-ppo-ext`` command."""

from sb3_ppo_ext.cli import main

main()
