"""Calling an environment: sync or async, inline or on the thread pool, its results checked."""
