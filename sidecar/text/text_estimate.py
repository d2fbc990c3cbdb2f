"""Text tokens without a tokenizer: an estimate meant never to be below vLLM's count.

Per sequence (``SequenceRef``), from counts the body reader keeps in one pass:

* ``text_chars / chars_per_token`` (``SIDECAR_TEXT_CHARS_PER_TOKEN``, 3 by default): English
  and code run at 3.4 to 4.7 characters per Qwen token;
* plus 1.5 tokens per ASCII digit: Qwen's pre-tokenizer splits numbers into single digits, and
  a digit also keeps the space or sign before it from merging;
* plus a third of a token per ASCII capital or punctuation mark: short ALLCAPS names, operators
  and quotes are where code runs densest (2.8 characters a token at worst on the standard
  library's sources);
* plus ``NON_ASCII_TOKENS_PER_EXTRA_BYTE`` per UTF-8 byte beyond the first of each character:
  the scripts that tokenize worst (Armenian, Sinhala, Telugu, Greek) need 0.6 to 0.74 of a
  token per such byte on top of the per-character share, while Chinese needs 0.1, so CJK
  text is overestimated about 2.5 times;
* plus, for a chat, the template's framing (:class:`TemplateOverhead`): a fixed part (a default
  system prompt, the generation prompt), a part per message (role header, end of turn), and
  the tool preamble when the request sends tools.

The framing comes from the model directory's template when there is one
(``template_overhead.learned_overhead`` renders it once with probe messages), else from
``FAMILY_OVERHEADS``, which a test measures against the families' real templates and
tokenizer. ``bench/text_estimate.py`` checks the whole estimate against the real Qwen2
tokenizer on a mixed corpus: never below, 1.6x above at the median.

Known limits: text that is random letters (base64 or hex pasted as text, keys) runs at 1.1 to
1.8 characters per token and is underestimated; so are random rare CJK ideographs, dense
one-letter arithmetic, and characters that NFC normalisation expands. Mount the model
directory for exact counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sidecar.body.refs import SequenceRef

NON_ASCII_TOKENS_PER_EXTRA_BYTE = 0.75
TOKENS_PER_DIGIT = 1.5  # the digit, and half the separator it keeps from merging
TOKENS_PER_MARK = 1 / 3  # an ASCII capital or punctuation mark


@dataclass(frozen=True, slots=True)
class TemplateOverhead:
    """Tokens a chat template adds around the text of a conversation."""

    fixed_tokens: int  # a default system prompt, the generation prompt
    per_message_tokens: int  # a role header and an end-of-turn marker
    tools_tokens: int = 0  # the tool-use preamble, when the request sends tools


# Measured with the real Qwen2 tokenizer and each family's template
# (tests/unit/text/test_text_estimate.py keeps them equal to a fresh measurement).
FAMILY_OVERHEADS = {
    "qwen2_vl": TemplateOverhead(fixed_tokens=14, per_message_tokens=5),
    "qwen2_5_vl": TemplateOverhead(fixed_tokens=14, per_message_tokens=5),
    "qwen3_vl": TemplateOverhead(fixed_tokens=3, per_message_tokens=5, tools_tokens=62),
}
# Other families: generous framing (Llama 3's header is 5 tokens a turn, Gemma's 5, Mistral's 4).
GENERIC_OVERHEAD = TemplateOverhead(fixed_tokens=16, per_message_tokens=8, tools_tokens=0)


def overhead_for(prompt_family: str | None) -> TemplateOverhead:
    """The built-in framing of a prompt family (an architecture's ``prompt_family``)."""
    return (
        GENERIC_OVERHEAD
        if prompt_family is None
        else FAMILY_OVERHEADS.get(prompt_family, GENERIC_OVERHEAD)
    )


def text_estimate(sequence: SequenceRef, chars_per_token: float) -> int:
    """Tokens of a sequence's text alone, never fewer than Qwen's tokenizer gives."""
    extra_bytes = max(0, sequence.text_bytes - sequence.text_chars)
    return math.ceil(
        sequence.text_chars / chars_per_token
        + sequence.text_digits * TOKENS_PER_DIGIT
        + sequence.text_marks * TOKENS_PER_MARK
        + extra_bytes * NON_ASCII_TOKENS_PER_EXTRA_BYTE
    )


def estimate_sequence_tokens(
    sequence: SequenceRef,
    chars_per_token: float,
    overhead: TemplateOverhead,
    *,
    tools: bool = False,
) -> int:
    """A sequence's text tokens and, for a chat (it has messages), its template's framing."""
    tokens = text_estimate(sequence, chars_per_token)
    if sequence.messages == 0:
        return tokens
    framing = overhead.fixed_tokens + overhead.per_message_tokens * sequence.messages
    return tokens + framing + (overhead.tools_tokens if tools else 0)
