"""`hymt quantize`: an INT4 GPTQ checkpoint made from the bf16 one with gptqmodel, calibrated on the prompts the
service actually sends, in the languages it serves. The result loads through the same loader (transformers reads
its `quantization_config`), so the planner sizes it as a 4-bit tier."""

from __future__ import annotations

import contextlib
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path

from ..checkpoint import load_config, resolve_checkpoint
from ..errors import ConfigError, HymtError
from ..family import MOE_MODEL_TYPE
from ..languages import BY_CODE, is_chinese
from ..prompts import render, user_message

log = logging.getLogger("hymt.quantize")

# Everyday sentences in the model's languages, the five minority languages and dialects included.
CALIBRATION_SENTENCES = {
    "en": "The meeting has been moved to Thursday afternoon because the director is travelling.",
    "zh": "我们将在下周一发布新版本，届时所有用户都可以免费升级。",
    "zh-Hant": "這家餐廳的菜很好吃，我們下次再來吧。",
    "yue": "你食咗飯未呀？我哋今日去邊度行街？",
    "fr": "Les résultats de l'étude montrent une nette amélioration de la qualité de l'air.",
    "de": "Der Zug nach München fährt heute wegen Bauarbeiten mit Verspätung ab.",
    "es": "El nuevo museo abrirá sus puertas al público el próximo mes.",
    "pt": "Precisamos de mais tempo para terminar o relatório antes de sexta-feira.",
    "ru": "Проект будет завершён к концу года, если финансирование сохранится.",
    "ja": "明日の会議は午後三時から始まりますので、資料を確認してください。",
    "ko": "내일 아침에 공항으로 가는 버스를 타야 합니다.",
    "ar": "سيتم افتتاح المكتبة الجديدة في وسط المدينة الأسبوع المقبل.",
    "tr": "Bu yıl festivale otuzdan fazla ülkeden sanatçı katılacak.",
    "vi": "Chúng tôi sẽ gửi hóa đơn cho bạn qua email vào ngày mai.",
    "th": "กรุณาส่งเอกสารทั้งหมดก่อนวันศุกร์นี้",
    "id": "Mohon pastikan semua dokumen sudah ditandatangani sebelum dikirim.",
    "hi": "कृपया अपना सामान हर समय अपने पास रखें।",
    "bo": "བཀྲ་ཤིས་བདེ་ལེགས། ཁྱེད་རང་སྐུ་གཟུགས་བདེ་པོ་ཡིན་པས།",
    "ug": "ياخشىمۇسىز؟ مەن ئۈرۈمچىدىكى بىر مەكتەپتە ئوقۇيمەن.",
    "kk": "سالەمەتسىز بە؟ مەن ۇرىمجىدە تۇرامىن.",
    "mn": "ᠰᠠᠢᠨ ᠪᠠᠢᠨ᠎ᠠ ᠤᠤ᠂ ᠲᠠ ᠬᠠᠭᠠᠰ ᠶᠠᠪᠤᠵᠤ ᠪᠠᠢᠨ᠎ᠠ ᠪᠤᠢ᠃",
}
# Each sentence is asked for in two directions: into Chinese or English, and into a neighbouring language.
_TARGETS = ["zh", "en", "fr", "ja", "bo", "ug", "de", "ko", "kk", "mn", "yue"]


def calibration_texts(tokenizer) -> list[str]:
    """The prompts the service sends, rendered through the checkpoint's chat template."""
    texts = []
    for i, (code, sentence) in enumerate(CALIBRATION_SENTENCES.items()):
        source = BY_CODE[code]
        pivot = "en" if is_chinese(source) else "zh"
        other = _TARGETS[i % len(_TARGETS)]
        for target in dict.fromkeys((pivot, other if other != code else "en")):
            texts.append(render(tokenizer, user_message(source, BY_CODE[target], sentence)))
    return texts


def quantize(
    model: str, out: str | Path, bits: int = 4, group_size: int = 128, extra_calibration: list[str] | None = None
) -> Path:
    checkpoint = resolve_checkpoint(model)
    config = load_config(checkpoint)
    if config.model_type == MOE_MODEL_TYPE:  # gptqmodel's handling of it is untried; the int4 profiles serve it
        raise ConfigError(
            f"{checkpoint} is a Mixture of Experts (Hy-MT2-30B-A3B): hymt quantize makes GPTQ checkpoints of the "
            "dense models; the int4 profiles quantize this one as it loads"
        )
    try:
        with contextlib.redirect_stdout(sys.stderr):  # its import prints a banner; stdout is for the result's path
            from gptqmodel import GPTQModel, QuantizeConfig
    except ImportError as exc:
        raise HymtError(
            f"hymt quantize needs gptqmodel (pip install 'hymt[quantize]'): {exc}", error_type="missing_dependency"
        ) from None
    import torch
    from transformers import AutoTokenizer

    if bits not in (4, 8):
        raise ConfigError(f"--bits must be 4 or 8, not {bits}")
    if getattr(config, "quantization_config", None) is not None:
        raise ConfigError(f"{checkpoint} is already quantized; quantize the bf16 checkpoint")
    out = Path(out).absolute()
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out} is not empty")
    texts = calibration_texts(AutoTokenizer.from_pretrained(checkpoint)) + list(extra_calibration or [])
    started = time.perf_counter()
    # gptqmodel writes its per-module loss log under ./logs; run it in a scratch folder and keep that log with the
    # checkpoint, instead of leaving a folder wherever the command was started.
    with (
        tempfile.TemporaryDirectory() as scratch,
        contextlib.chdir(scratch),
        contextlib.redirect_stdout(sys.stderr),
    ):  # gptqmodel's progress tables; stdout is for the result's path
        # gptqmodel packs the int4 weights on the CPU by default; on the GPU that does the quantizing it is faster.
        config = QuantizeConfig(
            bits=bits, group_size=group_size, pack_impl="gpu" if torch.cuda.is_available() else "cpu"
        )
        quantized = GPTQModel.load(str(checkpoint.absolute()), config)
        quantized.quantize(texts, batch_size=1)
        quantized.save(str(out))
        losses = sorted(Path(scratch, "logs").glob("*.log"))
        if losses:
            shutil.copyfile(losses[-1], out / "quantize-losses.log")
    log.info(
        "quantized %s to %d-bit GPTQ in %.0f s on %d calibration prompts",
        checkpoint,
        bits,
        time.perf_counter() - started,
        len(texts),
    )
    return out
