"""The stand-in's tokenizer as a Hugging Face ``PreTrainedTokenizerFast`` (for trainers' tests).

Same ids as ``StubTokenizer``: special tokens 0-5, byte ``b`` as ``b + 6``; built in code
with the ``tokenizers`` library (nothing downloaded). Needs ``transformers``.
"""

from __future__ import annotations

from typing import Any

from .tokenizer import BYTE_OFFSET, SPECIAL_TOKENS

# The StubTokenizer's template in Jinja (tool calls rendered the same way).
CHAT_TEMPLATE = (
    "<|bos|>{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% endif %}"
    "{% for c in m.get('tool_calls') or [] %}<|tool_call|>"
    "{{ {'arguments': c['function']['arguments'], 'name': c['function']['name']} | tojson(ensure_ascii=True, sort_keys=True) }}"
    "{% endfor %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def hf_tokenizer(chat_template: str | None = None) -> Any:
    """A ``PreTrainedTokenizerFast`` with the stand-in's vocabulary (262 ids), padding left."""
    # The train extra's packages; not installed where the runtime's types are checked.
    from tokenizers import (  # type: ignore[import-not-found,unused-ignore]
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
    )
    from tokenizers.pre_tokenizers import (  # type: ignore[import-not-found,unused-ignore]
        ByteLevel,
    )
    from transformers import (  # type: ignore[import-not-found,unused-ignore]
        PreTrainedTokenizerFast,
    )

    alphabet = ByteLevel.alphabet()
    by_byte = _bytes_to_unicode()
    vocab = {name: i for i, name in SPECIAL_TOKENS.items()}
    vocab.update({by_byte[b]: b + BYTE_OFFSET for b in range(256)})
    assert set(by_byte.values()) == set(alphabet)
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call,unused-ignore]
        tokenizer_object=core,
        bos_token=SPECIAL_TOKENS[1],
        eos_token=SPECIAL_TOKENS[4],
        pad_token=SPECIAL_TOKENS[0],
        additional_special_tokens=[SPECIAL_TOKENS[i] for i in (2, 3, 5)],
        padding_side="left",
    )
    tokenizer.chat_template = chat_template or CHAT_TEMPLATE
    return tokenizer


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in character for every byte (the ByteLevel alphabet)."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars, strict=True)}
