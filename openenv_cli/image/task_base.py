"""The base image of a project ``openenv import harbor:/PATH`` wrote: the task's own image.

Such a project's Dockerfile starts from the image of its Harbor task (``task/environment/``),
which no registry has. :func:`build_task_base` builds it first (never pulling) and tags it
with the name ``build.base_image`` gives, so ``openenv build`` of the project is one command.
"""

from __future__ import annotations

from openenv_cli.errors import OpenEnvError
from openenv_cli.image.plan import BuildPlan

TASK_FOLDER = "task"


def is_harbor_project(plan: BuildPlan) -> bool:
    family = plan.manifest.family
    return family is not None and family.target.startswith("harbor:")


def build_task_base(plan: BuildPlan) -> str | None:
    """Build the task's image of a Harbor project and tag it as the plan's base image; None
    (nothing built) for any other project, or when ``--base-image`` (or its variable) names
    another base."""
    if not is_harbor_project(plan) or plan.base_image.source not in {"manifest", "default"}:
        return None
    from openenv_runtime.adapters.harbor import build_image
    from openenv_runtime.adapters.harbor_task import read_task
    from openenv_runtime.errors import AdapterError
    from openenv_runtime.providers.base import ProviderError
    from openenv_runtime.providers.docker import engine_client

    base = plan.base_image.value
    try:
        task = read_task(str(plan.project_dir / TASK_FOLDER))
        client = engine_client(timeout=int(task.build_timeout) + 60)
    except (AdapterError, ProviderError) as exc:
        raise OpenEnvError(
            f"The Harbor task's image cannot be built: {exc}",
            hint="Fix task/ (it is the task folder openenv import copied), or start Docker.",
        ) from None
    try:
        built = build_image(client, task)
        repository, _, tag = base.rpartition(":")
        if not repository or "/" in tag:
            repository, tag = base, "latest"
        client.images.get(built).tag(repository, tag)
    except AdapterError as exc:
        raise OpenEnvError(
            str(exc), hint="Fix task/environment/Dockerfile; its base image must be local."
        ) from None
    finally:
        client.close()
    return base
