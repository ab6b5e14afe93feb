"""This project's build backend: setuptools, without one note that does not apply here.

The project folder is itself the package (`package-dir` in pyproject.toml maps it to "."),
so `pip install -e .` installs it through an import finder, and setuptools then prints a
boxed note, "Editable installation ... be careful with folders in your working directory
with the same name as your package". The folder of that name is this very project, so the
note only alarms; this module leaves it out. Everything else is setuptools' own: every
other hook, message and error comes from `setuptools.build_meta` unchanged.
"""

import warnings

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403  (the other PEP 517 hooks)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """setuptools' editable build, minus its note on folders named like the package."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Editable installation\.")
        return _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)
