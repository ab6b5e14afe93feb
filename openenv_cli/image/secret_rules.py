"""What counts as a secret by its name: files never shipped unless named, Dockerfiles refused,
and Space variables that must be Space secrets instead.

File names are matched with ``pathspec`` (gitignore syntax) at any depth, case-insensitively
(``.ENV`` and ``.Env`` are ``.env``), and with backup endings taken off first (``.env~``,
``.netrc.bak``, ``.git-credentials.old``, ``#.env#`` are the files they back up).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pathspec

# Gitignore syntax; every entry matches at any depth (an entry with an inner slash is written
# with a leading **/ so that it does).
SECRET_PATTERNS: tuple[str, ...] = (
    # environment files and tool logins
    "*.env",
    ".env",
    ".env.*",
    ".envrc",
    ".netrc",
    "_netrc",
    ".npmrc",
    ".pypirc",
    ".yarnrc",
    ".yarnrc.yml",
    ".git-credentials",
    ".pgpass",
    ".my.cnf",
    ".vault-token",
    ".s3cfg",
    ".boto",
    ".htpasswd",
    "**/.cargo/credentials*",
    "**/.gem/credentials",
    "**/.m2/settings.xml",
    "**/.config/gh/",
    "**/.config/gcloud/",
    "**/.cache/huggingface/",
    "**/.docker/config.json",
    ".aws/",
    ".ssh/",
    ".hf/",
    ".huggingface/",
    ".kube/",
    "kubeconfig*",
    ".gnupg/",
    ".azure/",
    ".password-store/",
    # cloud and infrastructure state
    "credentials.json",
    "service-account*.json",
    "secrets.yaml",
    "secrets.yml",
    "terraform.tfstate",
    "*.tfstate",
    "*.tfstate.*",
    "*.tfvars",
    "*.tfvars.json",
    ".terraform/",
    # keys and key stores
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.ppk",
    "*.jks",
    "*.keystore",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    # histories and notebook autosaves (outputs may hold tokens)
    ".*_history",
    ".history",
    "fish_history",
    ".ipynb_checkpoints/",
)

_SECRETS = pathspec.GitIgnoreSpec.from_lines(SECRET_PATTERNS)
# Endings that editors and people give to copies: the copy is as secret as the original.
_BACKUP = re.compile(
    r"(?:~|\.~\d+~|#|\.(?:bak|backup|old|orig|save|sav|swp|swo|tmp|temp|copy|prev|\d+))$"
)


def _names(name: str) -> Iterator[str]:
    """``name`` and the names it is a backup of: ``.netrc.bak~`` → ``.netrc.bak``, ``.netrc``."""
    yield name
    while True:
        stripped = _BACKUP.sub("", name)
        stripped = stripped.removeprefix("#").removeprefix(".#")
        if stripped.startswith(".."):  # vim's swap file of a dot file
            stripped = stripped[1:]
        if stripped == name or not stripped:
            return
        name = stripped
        yield name


def secret_pattern(relative: str, is_dir: bool = False) -> str | None:
    """The deny-list pattern ``relative`` (a project path, POSIX) matches, or None."""
    parent, _, last = relative.lower().rpartition("/")
    for name in _names(last):
        probe = f"{parent}/{name}" if parent else name
        result = _SECRETS.check_file(probe + "/" if is_dir else probe)
        if result.include and result.index is not None:
            return SECRET_PATTERNS[result.index]
    return None


# Space variable names that say "secret": whole words (TOKEN, KEY, ...) and parts of words.
_SECRET_WORDS = frozenset(
    {"TOKEN", "KEY", "APIKEY", "PASS", "PWD", "PASSWD", "AUTH", "COOKIE", "CREDS", "PAT"}
)
_SECRET_PARTS = ("SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")


def secret_variable_name(name: str) -> bool:
    """True when a variable called ``name`` most likely holds a secret (``HF_TOKEN``,
    ``OPENAI_API_KEY``, ``DB_PASSWORD``, ``CLIENT_SECRET``, ...).

    ``TOKEN`` counts inside a word only at its end (``HFTOKEN``, not ``TOKENIZERS_PARALLELISM``).
    """
    upper = name.upper()
    words = [w for w in re.split(r"[^A-Z0-9]+", upper) if w]
    if any(w in _SECRET_WORDS for w in words):
        return True
    if any(w.endswith(("TOKEN", "APIKEY", "KEY")) and w not in _NOT_KEYS for w in words):
        return True
    return any(part in upper for part in _SECRET_PARTS)


# Words ending in KEY that are not keys.
_NOT_KEYS = frozenset({"MONKEY", "DONKEY", "TURKEY", "HOCKEY", "JOCKEY", "WHISKEY", "HOTKEY"})
