"""The three chat formats of the family: the 7B models' (Hunyuan-MT-7B, Chimera, HY-MT1.5-7B, Hy-MT2-7B), the
1.8B models' (HY-MT1.5-1.8B, Hy-MT2-1.8B) and Hy-MT2-30B-A3B's, each with its special tokens, its Jinja template
(written into test models and used where a checkpoint has none or one that renders otherwise) and the rendering of a
prompt through the checkpoint's own template.

Both layouts are the official ones of Tencent-Hunyuan/Hy-MT2's train/llama_factory_support/hy_dense_template.py
("designed to match the official jinja templates exactly"): the 7B's `<|startoftext|>{user}<|extra_0|>`, the answer
ending with `<|eos|>`; the 1.8B's `<｜hy_begin▁of▁sentence｜><｜hy_User｜>{user}<｜hy_Assistant｜>`, the answer ending
with `<｜hy_place▁holder▁no▁2｜>`, a system part `{system}<｜hy_place▁holder▁no▁3｜>` after the first token. The 1.8B
tokens are full-width bars (U+FF5C) and U+2581: ASCII look-alikes tokenize as text.

Hy-MT2-30B-A3B's layout is Tencent's hy_v3_template.py (train/llama_factory_support in the same repository): the
1.8B's tokens, a reasoning-mode part after the first token (`<｜reasoning_mode｜>reasoning_effort:no_think`, the
effort as text), the answer opened by `<｜hy_Assistant｜><think></think>` (an empty thought: translation runs without
reasoning) and ended by `<eos:6124c78e>`, a system part `{system}` before the reasoning mode. Its Jinja template takes
`reasoning_effort` (no_think by default); hymt passes no_think itself, whatever a checkpoint's default.
"""

from __future__ import annotations

from dataclasses import dataclass

# The 7B template: the user turn ends with <|extra_0|>, after which the model answers; no generation prompt.
SEVEN_B_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' -%}"
    "{{ '<|startoftext|>' + message['content'] + '<|extra_4|>' }}"
    "{%- elif message['role'] == 'user' -%}"
    "{%- if loop.index0 == 1 and messages[0]['role'] == 'system' -%}"
    "{{ message['content'] + '<|extra_0|>' }}"
    "{%- else -%}"
    "{{ '<|startoftext|>' + message['content'] + '<|extra_0|>' }}"
    "{%- endif -%}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{{ message['content'] + '<|eos|>' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
)

SMALL_BOS = "<｜hy_begin▁of▁sentence｜>"
SMALL_USER = "<｜hy_User｜>"
SMALL_ASSISTANT = "<｜hy_Assistant｜>"
SMALL_STOP = "<｜hy_place▁holder▁no▁2｜>"
SMALL_SYSTEM_END = "<｜hy_place▁holder▁no▁3｜>"
# The 1.8B template: the assistant header opens the answer (the generation prompt), as the official template writes
# it before an assistant turn.
SMALL_TEMPLATE = (
    "{{- '" + SMALL_BOS + "' -}}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' -%}"
    "{{ message['content'] + '" + SMALL_SYSTEM_END + "' }}"
    "{%- elif message['role'] == 'user' -%}"
    "{{ '" + SMALL_USER + "' + message['content'] }}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{{ '" + SMALL_ASSISTANT + "' + message['content'] + '" + SMALL_STOP + "' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '" + SMALL_ASSISTANT + "' }}{%- endif -%}"
)
# The 1.8B vocabulary: 120,818 entries, the special tokens from 120000 (bos 120000, pad 120002, stop 120020: the
# published checkpoints' values, in no official repository (docs/models.md), so the loader reads them from the
# checkpoint's tokenizer by name and from its config, never by number).
SMALL_VOCAB_SIZE = 120818

# Hy-MT2-30B-A3B's own tokens (ids from its published GGUF: 120025 the stop token, 120029/120030 the think pair,
# 120044 the reasoning mode), beside the 1.8B's beginning, user and assistant tokens.
MOE_STOP = "<eos:6124c78e>"
MOE_REASONING = "<｜reasoning_mode｜>"
MOE_THINK = "<think>"
MOE_THINK_END = "</think>"
MOE_ANSWER = SMALL_ASSISTANT + MOE_THINK + MOE_THINK_END
MOE_TEMPLATE = (
    "{{- '" + SMALL_BOS + "' -}}"
    "{%- if messages[0]['role'] == 'system' -%}{{ messages[0]['content'] }}{%- endif -%}"
    "{{- '" + MOE_REASONING + "reasoning_effort:' + (reasoning_effort | default('no_think')) -}}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'user' -%}"
    "{{ '" + SMALL_USER + "' + message['content'] }}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{{ '" + MOE_ANSWER + "' + message['content'] + '" + MOE_STOP + "' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '" + MOE_ANSWER + "' }}{%- endif -%}"
)
MOE_VOCAB_SIZE = 120832


@dataclass(frozen=True)
class ChatFormat:
    key: str  # "7b", "1.8b" or "30b-a3b"
    bos: str
    stop: str  # the token that ends an answer
    pad: str | None  # the padding token by name; None: the tokenizer's pad_token (its name is not published)
    answer_after: str  # what a rendered prompt ends with: the model answers after it
    template: str
    generation_prompt: bool  # whether the template needs add_generation_prompt to open the answer
    # Variables the template is rendered with (Hy-MT2-30B-A3B's reasoning effort), as (name, value) pairs.
    template_variables: tuple[tuple[str, str], ...] = ()

    def render(self, tokenizer, message: str) -> str:
        """The full prompt text for one user message, through the checkpoint's chat template."""
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": message}],
            tokenize=False,
            add_generation_prompt=self.generation_prompt,
            **dict(self.template_variables),
        )

    def renders_officially(self, tokenizer) -> bool:
        """Whether the tokenizer's template renders a user turn as the official layout does."""
        probe = "x"
        try:
            text = self.render(tokenizer, probe)
        except Exception:  # noqa: BLE001 - a template that fails to render is one that does not fit
            return False
        return text.startswith(self.bos) and text.endswith(probe + self.answer_after)


SEVEN_B_CHAT = ChatFormat(
    "7b",
    bos="<|startoftext|>",
    stop="<|eos|>",
    pad="<|pad|>",
    answer_after="<|extra_0|>",
    template=SEVEN_B_TEMPLATE,
    generation_prompt=False,
)
SMALL_CHAT = ChatFormat(
    "1.8b",
    bos=SMALL_BOS,
    stop=SMALL_STOP,
    pad=None,
    answer_after=SMALL_ASSISTANT,
    template=SMALL_TEMPLATE,
    generation_prompt=True,
)
MOE_CHAT = ChatFormat(
    "30b-a3b",
    bos=SMALL_BOS,
    stop=MOE_STOP,
    pad=None,
    answer_after=MOE_ANSWER,
    template=MOE_TEMPLATE,
    generation_prompt=True,
    template_variables=(("reasoning_effort", "no_think"),),
)
