"""The official prompts of each model of the family, and their rendering through the checkpoint's own chat template
(chat.py holds the two chat formats)."""

from __future__ import annotations

import re

from .family import HUNYUAN_MT_7B, Family
from .glossary import Term
from .languages import Language, is_chinese

ZH_TEMPLATE = "把下面的文本翻译成{target}，不要额外解释。\n\n{text}"
XX_TEMPLATE = "Translate the following segment into {target}, without additional explanation.\n\n{text}"
# Formatted translation for Hunyuan-MT-7B and Hy-MT2, which have no official prompt for it: Hunyuan-MT-7B's official
# instruction (Hy-MT2's README runs its GGUF with that English one) plus the rule for the numbered markers
# (documents/inline.py) that stand for inline markup. Models with an official formatted-translation prompt
# (HY-MT1.5) get theirs here, in formatted_message, and nowhere else.
FORMATTED_ZH_TEMPLATE = (
    "把下面的文本翻译成{target}，不要额外解释。原文中的<s1></s1>、<s2/>等标签表示格式信息，"
    "译文中必须保留每一个标签，并放在对应译文的位置。\n\n{text}"
)
FORMATTED_XX_TEMPLATE = (
    "Translate the following segment into {target}, without additional explanation. "
    "Tags such as <s1></s1> and <s2/> in the segment mark formatting: keep every tag in the "
    "translation, around or at the words that correspond to the tagged words.\n\n{text}"
)
# A marker: <sN>, </sN> or <sN/>, spaces tolerated (groups: closing slash, number, self-closing slash).
MARKER = re.compile(r"<\s*(/?)\s*s(\d+)\s*(/?)\s*>")
# The retry of a segment whose markers did not come back (documents/translate.py): the instruction lists its tags
# and insists on each one. Asked for by STRICT_MARK before the segment's text: the engine builds every prompt from
# the text alone, and marker number 0 never stands for markup (documents number theirs from 1, and a text that
# holds anything like a marker is sent without markers), so it can only mean this.
STRICT_MARK = "<s0/>"
_LINE_BREAK = re.compile(r"(\r\n|\n|\r)")
STRICT_FORMATTED_ZH_TEMPLATE = (
    "把下面的文本翻译成{target}，不要额外解释。原文中的标签{tags}表示格式信息。译文必须包含其中每一个"
    "标签，每个恰好一次，保持原样和嵌套关系，放在对应译文的位置；不得增加、删除、改动或翻译任何标签。"
    "\n\n{text}"
)
STRICT_FORMATTED_XX_TEMPLATE = (
    "Translate the following segment into {target}, without additional explanation. The segment contains these "
    "tags, which mark formatting: {tags}. Your translation must contain every one of them exactly once, unchanged "
    "and nested as they are, around or at the words that correspond to the tagged words. Do not add, drop, "
    "renumber or translate any tag.\n\n{text}"
)
# HY-MT1.5's official formatted prompt asks to keep the tags "as far as possible": the retry asks for every one.
HY_MT15_STRICT_FORMATTED = (
    "需要在译文中相应的位置尽量保留该标签",
    "译文中必须保留每一个标签（{tags}），每个恰好一次，放在相应的位置",
)

# HY-MT1.5-7B's own prompts (its README, 2025-12-30): another Chinese instruction, the same English one, and
# official prompts for terminology and context (written in Chinese whatever the pair; the target's Chinese name).
HY_MT15_ZH_TEMPLATE = "将以下文本翻译为{target}，注意只需要输出翻译后的结果，不要额外解释：\n\n{text}"
HY_MT15_TERMINOLOGY_TEMPLATE = (
    "参考下面的翻译：\n{terms}\n\n将以下文本翻译为{target}，注意只需要输出翻译后的结果，不要额外解释：\n{text}"
)
HY_MT15_TERM_LINE = "{source} 翻译成 {target}"
HY_MT15_CONTEXT_TEMPLATE = (
    "{context}\n参考上面的信息，把下面的文本翻译成{target}，注意不需要翻译上文，也不要额外解释：\n{text}\n"
)
HY_MT15_FORMATTED_TEMPLATE = (
    "将以下<source></source>之间的文本翻译为{target}，注意只需要输出翻译后的结果，不要额外解释，原文中的<sn></sn>标签表示"
    "标签内文本包含格式信息，需要在译文中相应的位置尽量保留该标签。输出格式为：<target>str</target>\n\n"
    "<source>{text}</source>"
)

# Hy-MT2's prompts (Tencent-Hunyuan/Hy-MT2 README, "Instruction Examples"): a Chinese and an English version of each,
# the target's full name in the prompt's language. The README sets them in a table: its <br> is a line break here,
# and its markdown (code spans around the placeholders, bold) is not part of the text. Its Chinese default prompt is
# HY-MT1.5's, character for character.
HY_MT2_XX_TEMPLATE = (
    "Translate the following text into {target}. Note that you should only output the translated "
    "result without any additional explanation:\n\n{text}"
)
HY_MT2_ZH_TERMINOLOGY_TEMPLATE = (
    "参考下面的翻译：\n{terms}\n将以下文本翻译为{target}，注意只需要输出翻译后的结果，不要额外解释：\n\n{text}"
)
HY_MT2_XX_TERMINOLOGY_TEMPLATE = (
    "Reference the following translations:\n{terms}\n\nTranslate the following text into {target}. Note that you "
    "must ONLY output the translated result without any additional explanation:\n\n{text}"
)
HY_MT2_XX_TERM_LINE = "{source} translates to {target}"
HY_MT2_XX_STRICT_HEADER = (
    "Reference the following translations:",
    "The translation must use exactly these translations of the terms:",
)
HY_MT2_ZH_STYLE_TEMPLATE = "请将以下文本翻译为{target}。\n注意翻译的风格要严格符合【{style}】\n\n{text}"
HY_MT2_XX_STYLE_TEMPLATE = (
    "Please translate the following text into {target}. Note that the translation style "
    "must strictly conform to [{style}]:\n\n{text}"
)
HY_MT2_ZH_BACKGROUND_TEMPLATE = (
    "【背景信息】\n{background}\n\n请结合背景信息将以下文本翻译为{target}。\n\n【待翻译文本】\n{text}"
)
HY_MT2_XX_BACKGROUND_TEMPLATE = (
    "[Background Information]\n{background}\n\nPlease translate the following text into {target}, taking the "
    "provided background information into consideration.\n\n[Source Text]\n{text}"
)

# Hunyuan-MT-7B has no official terminology prompt: the same shape as HY-MT1.5's (the reference translations above
# the model's own instruction), in the language of the instruction it was trained on.
ZH_TERMINOLOGY_TEMPLATE = "参考下面的翻译：\n{terms}\n\n" + ZH_TEMPLATE
XX_TERMINOLOGY_TEMPLATE = "Refer to the following translations:\n{terms}\n\n" + XX_TEMPLATE
XX_TERM_LINE = "{source} is translated as {target}"
# The retry after a missed term: the same prompt with a header that insists.
ZH_STRICT_HEADER = ("参考下面的翻译：", "译文必须严格使用下面的术语译法：")
XX_STRICT_HEADER = (
    "Refer to the following translations:",
    "The translation must use exactly these translations of the terms:",
)

# Hunyuan-MT-Chimera-7B's official prompt: six candidates in, one refined translation out.
NUM_FUSION_CANDIDATES = 6
FUSION_TEMPLATE = (
    "Analyze the following multiple {target} translations of the {source} segment surrounded in triple backticks "
    "and generate a single refined {target} translation. Only output the refined translation, do not explain.\n\n"
    "The {source} segment:\n```{text}```\n\n"
    "The multiple {target} translations:\n{candidates}"
)


def _chinese_side(source: Language | None, target: Language) -> bool:
    """Chinese on either side; with an unknown source (detection failed), only a Chinese target counts."""
    return is_chinese(target) or (source is not None and is_chinese(source))


def user_message(source: Language | None, target: Language, text: str, family: Family = HUNYUAN_MT_7B) -> str:
    """The family's official instruction: the Chinese template when Chinese is on either side, else the English
    one. Chimera translates with Hunyuan-MT-7B's prompts (its candidates come from that model)."""
    if _chinese_side(source, target):
        template = HY_MT15_ZH_TEMPLATE if family.line in ("hy-mt1.5", "hy-mt2") else ZH_TEMPLATE
        return template.format(target=target.chinese, text=text)
    template = HY_MT2_XX_TEMPLATE if family.line == "hy-mt2" else XX_TEMPLATE
    return template.format(target=target.english, text=text)


def has_markers(text: str) -> bool:
    return bool(MARKER.search(text))


def strict(text: str) -> str:
    """A marked text as sent again after its markers were lost: each line that has markers asks for the stricter
    prompt (the engine makes a line, or a sentence of a long line, a segment of its own)."""
    parts = _LINE_BREAK.split(text)  # the engine's own line breaks (segment.py), so that each mark starts a segment
    for i in range(0, len(parts), 2):
        if has_markers(parts[i]):
            indent = len(parts[i]) - len(parts[i].lstrip())
            parts[i] = parts[i][:indent] + STRICT_MARK + parts[i][indent:]
    return "".join(parts)


def formatted_message(source: Language | None, target: Language, text: str, family: Family = HUNYUAN_MT_7B) -> str:
    """The instruction for a segment that may carry markup markers: the family's official formatted-translation
    prompt (HY-MT1.5), else the tested equivalent, when it has markers; the plain official one when it has none.
    A segment that starts with STRICT_MARK gets the stricter version, which lists its tags."""
    insist = text.startswith(STRICT_MARK)
    text = text.removeprefix(STRICT_MARK)
    if not has_markers(text):
        return user_message(source, target, text, family)
    tags = " ".join(m.group(0) for m in MARKER.finditer(text))
    if family.formatted:
        message = hy_mt15_formatted_message(target, text)
        old, new = HY_MT15_STRICT_FORMATTED
        return message.replace(old, new.format(tags=tags), 1) if insist else message
    if _chinese_side(source, target):
        template = STRICT_FORMATTED_ZH_TEMPLATE if insist else FORMATTED_ZH_TEMPLATE
        return template.format(target=target.chinese, text=text, tags=tags)
    template = STRICT_FORMATTED_XX_TEMPLATE if insist else FORMATTED_XX_TEMPLATE
    return template.format(target=target.english, text=text, tags=tags)


def terminology_message(
    source: Language | None,
    target: Language,
    text: str,
    terms: list[Term],
    family: Family = HUNYUAN_MT_7B,
    strict: bool = False,
) -> str:
    """The segment with the glossary entries that occur in it: the family's official terminology prompt (HY-MT1.5's
    in Chinese; Hy-MT2's in the instruction's language), or the equivalent in Hunyuan-MT-7B's instruction. `strict`
    is the retry after a term was missed."""
    chinese = _chinese_side(source, target)
    if family.line == "hy-mt2":
        template, line, header = (
            (HY_MT2_ZH_TERMINOLOGY_TEMPLATE, HY_MT15_TERM_LINE, ZH_STRICT_HEADER)
            if chinese
            else (HY_MT2_XX_TERMINOLOGY_TEMPLATE, HY_MT2_XX_TERM_LINE, HY_MT2_XX_STRICT_HEADER)
        )
        name = target.chinese if chinese else target.english
    elif family.terminology or chinese:
        template = HY_MT15_TERMINOLOGY_TEMPLATE if family.terminology else ZH_TERMINOLOGY_TEMPLATE
        line, header, name = HY_MT15_TERM_LINE, ZH_STRICT_HEADER, target.chinese
    else:
        template, line, header, name = XX_TERMINOLOGY_TEMPLATE, XX_TERM_LINE, XX_STRICT_HEADER, target.english
    lines = "\n".join(line.format(source=t.source, target=t.target) for t in terms)
    message = template.format(terms=lines, target=name, text=text)
    return message.replace(header[0], header[1], 1) if strict else message


def style_message(source: Language | None, target: Language, text: str, style: str) -> str:
    """Hy-MT2's official style prompt ("formal", "marketing", ...)."""
    if _chinese_side(source, target):
        return HY_MT2_ZH_STYLE_TEMPLATE.format(target=target.chinese, style=style, text=text)
    return HY_MT2_XX_STYLE_TEMPLATE.format(target=target.english, style=style, text=text)


def background_message(source: Language | None, target: Language, text: str, background: str, family: Family) -> str:
    """Background information for the translation: Hy-MT2's official background prompt, or HY-MT1.5's contextual
    translation prompt (information above the text, not to be translated)."""
    if family.line == "hy-mt1.5":
        return context_message(target, text, background)
    if _chinese_side(source, target):
        return HY_MT2_ZH_BACKGROUND_TEMPLATE.format(target=target.chinese, background=background, text=text)
    return HY_MT2_XX_BACKGROUND_TEMPLATE.format(target=target.english, background=background, text=text)


def context_message(target: Language, text: str, context: str) -> str:
    """HY-MT1.5's official contextual translation: the preceding text as information, not to be translated."""
    return HY_MT15_CONTEXT_TEMPLATE.format(context=context, target=target.chinese, text=text)


def hy_mt15_formatted_message(target: Language, text_with_format: str) -> str:
    """HY-MT1.5's official formatted translation (<sn></sn> tags kept, the answer inside <target></target>)."""
    return HY_MT15_FORMATTED_TEMPLATE.format(target=target.chinese, text=text_with_format)


def fusion_message(source: Language, target: Language, text: str, candidates: list[str]) -> str:
    """Chimera's official prompt over exactly six candidate translations (English language names)."""
    if len(candidates) != NUM_FUSION_CANDIDATES:
        raise ValueError(f"Chimera fuses exactly {NUM_FUSION_CANDIDATES} candidates, not {len(candidates)}")
    listed = "\n".join(f"{n}. ```{c}```" for n, c in enumerate(candidates, start=1))
    return FUSION_TEMPLATE.format(source=source.english, target=target.english, text=text, candidates=listed)


def segment_message(
    family: Family,
    source: Language | None,
    target: Language,
    text: str,
    terms: list[Term],
    context: str = "",
    strict: bool = False,
    formatted: bool = False,
    style: str | None = None,
    background: str | None = None,
) -> str:
    """The prompt for one segment. No official prompt combines two instructions, so a segment gets one, in this
    order: the formatted-translation prompt for a segment with markup markers; its glossary entries when any occur
    in it; the request's style; the request's background; the preceding text when the family has a context prompt;
    else the plain instruction. The caller checks that the family has the style and background prompts."""
    if formatted:
        return formatted_message(source, target, text, family)
    if terms:
        return terminology_message(source, target, text, terms, family, strict)
    if style:
        return style_message(source, target, text, style)
    if background:
        return background_message(source, target, text, background, family)
    if context and family.context:
        return context_message(target, text, context)
    return user_message(source, target, text, family)


def render(tokenizer, message: str, family: Family = HUNYUAN_MT_7B) -> str:
    """The full prompt text, through the checkpoint's chat template in the family's chat format."""
    return family.chat.render(tokenizer, message)
