"""``python -m sb3_ppo_ext.zoo.grid``: the grid's command line (:func:`sb3_ppo_ext.zoo.grid.cli.main`)."""

import sys

from sb3_ppo_ext.zoo.grid.cli import main

sys.exit(main())
