"""Deploying environments to Hugging Face Spaces (``openenv push``).

- :mod:`.space`: Space ids, URLs, the README card and the Space variables;
- :mod:`.upload`: what a push uploads (staged locally; ``--dry-run`` stops there);
- :mod:`.errors`: the token, redaction of secrets, one clear error per Hub failure;
- :mod:`.deploy`: creating or updating the Space through ``huggingface_hub``.
"""
