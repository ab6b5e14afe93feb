"""Building images of environments: what goes into a build context, how its Dockerfile is
prepared, and talking to the Docker engine.

- :mod:`.selection`: which project files ship (secret deny list, symbolic-link rule, ignore
  files) and what is left out, with reasons;
- :mod:`.safe_files`: reading project files without ever leaving the project;
- :mod:`.runtime_bundle`: ``_openenv_runtime/``, the runtime every context carries;
- :mod:`.dockerfile`: the base image of a Dockerfile (build argument or rewrite);
- :mod:`.context`: staging a context folder (used by ``build`` and ``push``);
- :mod:`.plan`, :mod:`.stream`, :mod:`.engine`: ``openenv build`` itself.
"""

# Environment variables of ``openenv build``, here so that its ``--help`` can name them
# without importing the engine (docker) or the manifest model.
BASE_IMAGE_ENV = "OPENENV_BASE_IMAGE"
TAG_ENV = "OPENENV_IMAGE_TAG"
