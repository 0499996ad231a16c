"""OpenAI-compatible chat completions: the last user message is the text to translate.

The target language comes from the model name's suffix ("hunyuan-mt:de") or the extra field `target_language`
(`extra_body` in the OpenAI clients); `source_language` is optional (auto-detected by default). The extra fields
`glossary`, `context`, `quality`, `style` and `background` are those of /translate.
"""

from __future__ import annotations

import time
import uuid

from starlette.requests import Request
from starlette.responses import JSONResponse

from ..engine.sampling_params import Sampling
from ..errors import BadRequest
from ..languages import LANGUAGES, Language, resolve
from . import parsing, preamble, sse
from .bridge import events_until_done, run_to_end, submit
from .preamble import turn
from .service import Service
from .usage import check as check_quota, count as count_characters

MODEL_NAME = "hunyuan-mt"
MIN_TEMPERATURE = 0.01
ROLES = ("system", "developer", "user", "assistant", "tool")


async def models(request: Request) -> JSONResponse:
    service: Service = request.app.state.service
    created = int(service.started_at_wall)
    # Which model runs and under which license (known once it is loaded): extra fields that OpenAI clients keep in
    # model_extra.
    family = service.translator.family if service.translator else None
    names = [MODEL_NAME] + [f"{MODEL_NAME}:{lang.code}" for lang in LANGUAGES]
    return JSONResponse(
        {
            "object": "list",
            "data": [
                {
                    "id": n,
                    "object": "model",
                    "created": created,
                    "owned_by": "hymt",
                    "root": family and family.name,
                    "license": family and family.license,
                }
                for n in names
            ],
        }
    )


def _parse(data: dict, settings) -> tuple[str, str, Language | None, Language, Sampling, bool]:
    model = data.get("model", MODEL_NAME)
    if not isinstance(model, str):
        raise BadRequest("model must be a string", error_type="invalid_type")
    name, _, suffix = model.partition(":")
    if name != MODEL_NAME or (":" in model and not suffix):
        raise BadRequest(
            f"unknown model {model!r}: use {MODEL_NAME} or {MODEL_NAME}:<target language> (see /v1/models)",
            error_type="model_not_found",
        )
    text = _user_text(data.get("messages"), settings)
    target_code = data["target_language"] if "target_language" in data else suffix
    if not target_code:
        raise BadRequest(
            "no target language: use the model name 'hunyuan-mt:<code>' (e.g. hunyuan-mt:de) "
            "or the field target_language",
            error_type="missing_target_language",
        )
    if not isinstance(target_code, str):
        raise BadRequest("target_language must be a language code string", error_type="invalid_type")
    target = resolve(target_code, "target language")
    source = parsing.language(data, "source_language", allow_auto=True, default="auto")
    temperature = data.get("temperature", 1)
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 <= temperature <= 2:
        raise BadRequest("temperature must be a number from 0 to 2", error_type="invalid_value")
    # Below MIN_TEMPERATURE sampling is argmax in all but name, and dividing logits by a subnormal number
    # overflows them (a whole batch's step would fail).
    greedy = settings.greedy or temperature < MIN_TEMPERATURE
    sampling = (
        Sampling(greedy=greedy) if "temperature" not in data or greedy else Sampling(temperature=float(temperature))
    )
    return model, text, source, target, sampling, parsing.flag(data, "stream")


def _user_text(messages, settings) -> str:
    """The text of the last user message that has any: a string, or the text parts of a list joined."""
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list", error_type="missing_field")
    found = None
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES or "content" not in message:
            raise BadRequest(
                f"messages[{i}] must be an object with a role ({', '.join(ROLES)}) and a content",
                error_type="invalid_value",
            )
        content = message["content"]
        if isinstance(content, list):
            if len(content) > settings.max_texts:
                raise BadRequest(
                    f"messages[{i}] has {len(content)} parts; the limit is {settings.max_texts}",
                    error_type="too_many_texts",
                )
            if not all(
                isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in content
            ):
                raise BadRequest(
                    f'messages[{i}].content parts must be {{"type": "text", "text": ...}}', error_type="invalid_value"
                )
            parts = [p["text"] for p in content]
        elif isinstance(content, str):
            parts = [content]
        else:
            raise BadRequest(
                f"messages[{i}].content must be a string or a list of text parts", error_type="invalid_type"
            )
        for part in parts:
            parsing.check_length(part, settings)
        if message["role"] == "user" and "".join(parts).strip():
            found = "".join(parts)
    if found is None:
        raise BadRequest("messages hold no user message with text to translate", error_type="missing_field")
    return found


async def chat_completions(request: Request):
    service, data = await preamble.begin(request, forms=False)
    translator = service.ready_translator()  # ready: begin() has just made sure
    model, text, source, target, sampling, stream = _parse(data, service.settings)
    options, quality = parsing.options(data, service.settings), parsing.quality(data)
    (src,), _ = await preamble.sources(service, quality, [text], source)
    await check_quota(request)
    count_characters(request, [text])
    include_usage = _include_usage(data, stream)
    completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
    created = int(time.time())

    def chunk(delta: dict | None, finish: str | None = None, **extra) -> str:
        # With stream_options.include_usage every chunk has "usage" (null but in the last), as OpenAI sends it.
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
        body = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": choices,
            **({"usage": None} if include_usage else {}),
            **extra,
        }
        return sse.data(body)

    def usage(job) -> dict:
        # The prompts the model read, not the text alone: each segment's as last sent (instruction, context,
        # terms; a glossary retry's, as completion_tokens counts the retry's output); quality best: the fusion's.
        tokens_in = sum(len(r.prompt_ids) for r in job.requests)
        return {
            "prompt_tokens": tokens_in,
            "completion_tokens": job.tokens_out,
            "total_tokens": tokens_in + job.tokens_out,
        }

    def ending(job) -> list[str]:
        end = [chunk({}, "stop", glossary=job.glossary_report())]
        if include_usage:
            end.append(chunk(None, usage=usage(job)))
        return end + ["data: [DONE]\n\n"]

    if not stream or quality == "best":
        # Quality "best" answers when the fusion is done: a stream of it is one chunk.
        job = await run_to_end(service, [(text, src)], target, sampling, request, options, quality, turn(request))
        (translated,) = job.texts()
        if stream:
            return sse.response(request, _chunks([chunk({"role": "assistant", "content": translated})] + ending(job)))
        return JSONResponse(
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": translated}, "finish_reason": "stop"}
                ],
                "usage": usage(job),
                "glossary": job.glossary_report(),
            }
        )

    job, events = await submit(service, [(text, src)], target, sampling, True, options, turn(request))

    async def body():
        yield chunk({"role": "assistant", "content": ""})
        sent = ""
        async for event in events_until_done(job, events, request):
            if event.kind == "error":
                assert event.error is not None  # an error event carries its error
                raise event.error
            # Send what the text so far adds to what was sent. A finished segment's cleaned text can differ from
            # its raw stream (a runaway repetition cut): then nothing more is sent until they agree again.
            (done,) = job.texts() if event.kind == "done" else job.settled_texts(translator.decode)
            if len(done) > len(sent) and done.startswith(sent):
                yield chunk({"content": done[len(sent) :]})
                sent = done
        for line in ending(job):
            yield line

    return sse.response(request, body())


def _include_usage(data: dict, stream: bool) -> bool:
    """stream_options.include_usage: a last chunk with the usage (an answer that is not a stream has it anyway)."""
    options = data.get("stream_options")
    if options is None:
        return False
    if not isinstance(options, dict):
        raise BadRequest("stream_options must be an object", error_type="invalid_type")
    include = options.get("include_usage", False)
    if not isinstance(include, bool):
        raise BadRequest("stream_options.include_usage must be true or false", error_type="invalid_type")
    return include and stream


async def _chunks(lines: list[str]):
    for line in lines:
        yield line
