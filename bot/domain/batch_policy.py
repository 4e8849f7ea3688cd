"""A batch under policy: each action is judged as if it had been submitted alone.

Batching must never lower the bar (an agent could otherwise wrap a denied call in `items` and
have a person wave it through with the rest, or have a whole batch allowed by the default tier of
the name `batch`). So every item is evaluated on its own call, and:

- an item policy denies is written already rejected (`via` policy, the reason as its comment):
  it is never offered and never runs; one policy allows (a rule, a grant, a low or medium tier)
  is written already approved; the rest ask;
- the batch asks with the strictest evaluation among the items that ask (their highest tier, with
  that tier's approvers and timing); when none asks, the batch is decided at submit with no card;
- a batch is decided by one person at once, so an asking item whose tier needs more than that (a
  quorum, typed confirmation, the critical tier) or other approvers than the rest cannot be in
  it: `BatchRefused` names the item and says to submit it on its own.

Pure: bot.approvals.gate evaluates the calls and writes the result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from bot.domain.model import Item, Outcome, Via
from bot.domain.policy import TIER_ORDER, Effect, Evaluation
from bot.domain.values import Risk

__all__ = ["BatchRefused", "judge_items"]


class BatchRefused(ValueError):
    """An item policy asks about with more than one person's single decision can give."""


def judge_items(items: Sequence[Item], evaluations: Sequence[Evaluation]) -> tuple[tuple[Item, ...], Evaluation]:
    """(the items with policy's own decisions filled in, the evaluation the batch gets)."""
    judged: list[Item] = []
    asking: list[tuple[int, Evaluation]] = []
    for index, (item, evaluation) in enumerate(zip(items, evaluations, strict=True)):
        if evaluation.outcome is Effect.ASK:
            _check_batchable(index, item, evaluation)
            asking.append((index, evaluation))
            judged.append(item)
            continue
        outcome = Outcome.REJECTED if evaluation.outcome is Effect.DENY else Outcome.APPROVED
        judged.append(item.evolve(outcome=outcome, via=Via.GRANT if evaluation.grant_id else Via.POLICY,
                                  comment=evaluation.reason, decided_by=None))
    highest = max(evaluations, key=lambda e: TIER_ORDER[e.tier]).tier
    if not asking:
        allowed = any(i.outcome is Outcome.APPROVED for i in judged)
        return tuple(judged), Evaluation(
            Effect.ALLOW if allowed else Effect.DENY, highest,
            f"every action was decided by policy: {_counts(judged)}")
    first_index, first = asking[0]
    for index, evaluation in asking[1:]:
        if set(evaluation.approvers) != set(first.approvers):
            raise BatchRefused(
                f"actions {first_index + 1} ({items[first_index].action.name}) and {index + 1} "
                f"({items[index].action.name}) are asked of different approvers under policy "
                f"({_people(first.approvers)} / {_people(evaluation.approvers)}): submit them in separate requests")
    strictest = max((e for _, e in asking), key=lambda e: TIER_ORDER[e.tier])
    decided = len(judged) - len(asking)
    reason = strictest.reason + (f" ({len(asking)} of {len(judged)} actions ask; {_counts(judged)})" if decided else "")
    return tuple(judged), replace(strictest, reason=reason, fyi=False)


def _check_batchable(index: int, item: Item, evaluation: Evaluation) -> None:
    needs = []
    if evaluation.tier is Risk.CRITICAL:
        needs.append("the critical tier")
    if evaluation.quorum > 1:
        needs.append(f"{evaluation.quorum} approvers")
    if evaluation.confirm:
        needs.append("typed confirmation")
    if needs:
        raise BatchRefused(
            f"action {index + 1} ({item.action.name}) needs {' and '.join(needs)} under policy "
            f"({evaluation.reason}), which one decision on a batch cannot give: submit it as its own request")


def _counts(items: Sequence[Item]) -> str:
    approved = sum(i.outcome is Outcome.APPROVED for i in items)
    rejected = sum(i.outcome is Outcome.REJECTED for i in items)
    return f"{approved} allowed, {rejected} denied"


def _people(approvers: Sequence[str]) -> str:
    return ", ".join(approvers) or "anyone"
