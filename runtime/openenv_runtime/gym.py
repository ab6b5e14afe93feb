"""Remote environments as Gymnasium environments: ``make(url)`` and ``make_vec(urls, num_envs)``."""
