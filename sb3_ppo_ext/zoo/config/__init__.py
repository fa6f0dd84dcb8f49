"""Config checking, in one place: everything ``sb3-ppo-ext`` reads as settings is checked here before rl-zoo3 acts
on it, and nothing is ``eval``'d or unpickled.

- :mod:`~sb3_ppo_ext.zoo.config.yaml_files`: YAML files read within size, nesting and alias-expansion limits;
- :mod:`~sb3_ppo_ext.zoo.config.expressions`: config strings (``dict(net_arch=[64])``, ``lin_3e-4``) parsed by a
  restricted parser, never evaluated;
- :mod:`~sb3_ppo_ext.zoo.config.blocks`: the keys, values, schedules and class paths of one config block;
- :mod:`~sb3_ppo_ext.zoo.config.command_line`: ``--hyperparams`` / ``--env-kwargs`` items;
- :mod:`~sb3_ppo_ext.zoo.config.reading`: a config file's block as ``train`` reads it (rl-zoo3's
  ``read_hyperparameters``, checked);
- :mod:`~sb3_ppo_ext.zoo.config.run_files`: a run folder's ``config.yml`` and ``args.yml``.
"""
