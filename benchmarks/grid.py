"""Learning grids from the repository: ``python benchmarks/grid.py run|snapshot|evaluate|failures|collect|report``.

An alias of ``sb3-ppo-ext grid`` (the same subcommands and options, documented in :mod:`sb3_ppo_ext.grid.cli`,
``--help``), with one difference: a grid file's relative ``conf`` and ``trained_agent`` paths start from the
repository root, wherever the command is started, as the grid files in ``benchmarks/grids/`` write them::

    python benchmarks/grid.py run benchmarks/grids/classic.yml --root ~/runs/grid --jobs 2
    python benchmarks/grid.py collect --root ~/runs/grid --csv docs/results/classic.csv
    python benchmarks/grid.py report docs/results/classic.csv --plot docs/results/classic.png
"""

import os
import sys

from sb3_ppo_ext.grid.cli import main

#: The repository root: where the grid files' relative paths start.
REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

if __name__ == "__main__":
    sys.exit(main(relative_to=REPOSITORY))
