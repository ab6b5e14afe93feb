"""Alias of the reference's ``openenv.core.containers``: see ``containers.runtime``."""
