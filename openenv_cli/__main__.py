"""``python -m openenv_cli``: the CLI, whichever distribution owns the ``openenv`` script."""

from openenv_cli.main import main

main()
