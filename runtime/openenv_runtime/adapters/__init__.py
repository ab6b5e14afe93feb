"""Environments of other libraries served as they are: ``FAMILY:NAME[?key=value&...]`` targets.

:mod:`openenv_runtime.adapters.target` parses a target and builds its app; each family
(Gymnasium, reasoning-gym, TextArena) has one module here, imported only when used, whose
library is an optional extra of ``openenv-runtime``.
"""
