"""Names of the reference OpenEnv (``openenv.core``) that have no other home here.

Wire message models, reference exception types, serialization helpers and the
``HTTPEnvServer`` face over :func:`openenv_runtime.create_app`. Users reach them through
``openenv_runtime`` itself or the alias modules that mirror the reference's paths
(``openenv_runtime.env_server.types``, ...); see README "Coming from OpenEnv".
"""
