"""The official Hunyuan-MT prompts and their rendering through the checkpoint's own chat template."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .languages import Language, is_chinese

ZH_TEMPLATE = "把下面的文本翻译成{target}，不要额外解释。\n\n{text}"
XX_TEMPLATE = "Translate the following segment into {target}, without additional explanation.\n\n{text}"
# Formatted translation for Hunyuan-MT-7B, which has no official prompt for it: the official instruction plus the
# rule for the numbered markers (documents/inline.py) that stand for inline markup. Models with an official
# formatted-translation prompt (HY-MT1.5) get theirs here, in formatted_message, and nowhere else.
FORMATTED_ZH_TEMPLATE = ("把下面的文本翻译成{target}，不要额外解释。原文中的<s1></s1>、<s2/>等标签表示格式信息，"
                         "译文中必须保留每一个标签，并放在对应译文的位置。\n\n{text}")
FORMATTED_XX_TEMPLATE = ("Translate the following segment into {target}, without additional explanation. "
                         "Tags such as <s1></s1> and <s2/> in the segment mark formatting: keep every tag in the "
                         "translation, around or at the words that correspond to the tagged words.\n\n{text}")
_MARKER = re.compile(r"<\s*/?\s*s\d+\s*/?\s*>")

# The rendering the model was trained on: <|startoftext|>{user}<|extra_0|>; the answer ends with <|eos|>.
STOP_TOKEN = "<|eos|>"
PAD_TOKEN = "<|pad|>"

# Jinja chat template equal to the official one for system, user and assistant turns; written into test models.
CHAT_TEMPLATE = (
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


@dataclass(frozen=True)
class Sampling:
    """Decoding settings; the defaults are the ones the model card recommends."""

    greedy: bool = False
    top_k: int = 20
    top_p: float = 0.6
    temperature: float = 0.7
    repetition_penalty: float = 1.05

    def generate_kwargs(self) -> dict:
        if self.greedy:
            return {"do_sample": False, "repetition_penalty": self.repetition_penalty}
        return {"do_sample": True, "top_k": self.top_k, "top_p": self.top_p, "temperature": self.temperature,
                "repetition_penalty": self.repetition_penalty}


def user_message(source: Language | None, target: Language, text: str) -> str:
    """The official instruction: the Chinese template when Chinese is on either side, else the English one.

    With an unknown source (auto-detection failed) the English template is used unless the target is Chinese.
    """
    chinese_side = is_chinese(target) or (source is not None and is_chinese(source))
    if chinese_side:
        return ZH_TEMPLATE.format(target=target.chinese, text=text)
    return XX_TEMPLATE.format(target=target.english, text=text)


def formatted_message(source: Language | None, target: Language, text: str) -> str:
    """The instruction for a segment that may carry markup markers: the formatted-translation instruction when it
    has markers, the plain official one when it has none."""
    if not _MARKER.search(text):
        return user_message(source, target, text)
    if is_chinese(target) or (source is not None and is_chinese(source)):
        return FORMATTED_ZH_TEMPLATE.format(target=target.chinese, text=text)
    return FORMATTED_XX_TEMPLATE.format(target=target.english, text=text)


def render(tokenizer, message: str) -> str:
    """The full prompt text, through the checkpoint's chat template (no generation prompt: the template ends the
    user turn with <|extra_0|>, after which the model answers)."""
    return tokenizer.apply_chat_template([{"role": "user", "content": message}], tokenize=False)
