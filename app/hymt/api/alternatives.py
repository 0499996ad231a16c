"""LibreTranslate's `alternatives`: the texts translated under several decoding settings at once (the engine decodes
the jobs side by side in its batch), the distinct results ranked by how much the others agree with each (a
minimum-Bayes-risk choice under chrF), the best as the translation and the next ones as its alternatives."""

from __future__ import annotations

from collections import Counter

from starlette.requests import Request

from ..languages import Language
from ..translation.candidates import CANDIDATE_SAMPLINGS
from ..translation.jobs import Job, Options
from .bridge import Turn, candidates_done, queue_samplings
from .service import Service

# LibreTranslate's default --alternatives-limit.
ALTERNATIVES_LIMIT = 3
CHRF_ORDER = 6
CHRF_BETA = 2.0


async def translate_candidates(
    service: Service,
    items: list[tuple[str, Language | None]],
    target: Language,
    options: Options,
    request: Request,
    turn: Turn,
) -> list[Job]:
    """One finished job per decoding setting of quality best's candidates (greedy, the recommended sampling,
    cooler and hotter ones): more candidates than the limit asks for, since sampling can repeat itself."""
    queued = await queue_samplings(service, items, target, CANDIDATE_SAMPLINGS, options, turn)
    return await candidates_done(queued, request)


def rank(candidates: list[str]) -> list[int]:
    """The positions of the distinct candidates, best first: each scored by its mean chrF against all the
    others (a candidate sampled again counts again, as agreement), ties kept in the order given."""
    scores = []
    grams = [_ngrams(c) for c in candidates]
    for i in range(len(candidates)):
        others = [_chrf(grams[i], grams[j]) for j in range(len(candidates)) if j != i]
        scores.append(sum(others) / len(others) if others else 1.0)
    distinct: dict[str, int] = {}
    for i, text in enumerate(candidates):
        if text.strip() and text not in distinct:
            distinct[text] = i
    return sorted(distinct.values(), key=lambda i: (-scores[i], i))


def _ngrams(text: str) -> list[Counter]:
    chars = "".join(text.split())  # chrF ignores whitespace
    return [Counter(chars[k : k + n] for k in range(len(chars) - n + 1)) for n in range(1, CHRF_ORDER + 1)]


def _chrf(hypothesis: list[Counter], reference: list[Counter]) -> float:
    """chrF (Popović 2015): the character n-gram F-score, orders 1 to 6 averaged, recall weighted by beta."""
    total, orders = 0.0, 0
    for hyp, ref in zip(hypothesis, reference):
        if not hyp or not ref:
            continue
        match = sum((hyp & ref).values())
        precision, recall = match / sum(hyp.values()), match / sum(ref.values())
        if precision + recall:
            b2 = CHRF_BETA**2
            total += (1 + b2) * precision * recall / (b2 * precision + recall)
        orders += 1
    return total / orders if orders else 0.0
