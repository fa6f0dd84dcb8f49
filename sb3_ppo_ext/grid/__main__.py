"""``python -m sb3_ppo_ext.grid``: the grid's command line (:func:`sb3_ppo_ext.grid.cli.main`)."""

import sys

from sb3_ppo_ext.grid.cli import main

sys.exit(main())
