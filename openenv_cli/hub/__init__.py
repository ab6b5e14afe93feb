"""Environments on Hugging Face Spaces: deploy (``openenv push``), copy (``openenv fork``),
find (``openenv discover``).

- :mod:`.space`: Space ids, URLs, the README card and the Space variables;
- :mod:`.upload`: what a push uploads (staged locally; ``--dry-run`` stops there);
- :mod:`.errors`: the token, redaction of secrets, one clear error per Hub failure;
- :mod:`.account`: whose token it is and which namespaces it may write;
- :mod:`.deploy`: creating or updating the Space through ``huggingface_hub``;
- :mod:`.fork`: the Hub's duplicate of a Space into your namespace;
- :mod:`.discover`: the Hub's search for Spaces tagged ``openenv``, with their versions.
"""
