"""Every outcome is declared once, in full, in the outcome table; what the metrics, the DLQ, the redelivery and
`sendonce-local run`'s summary know of an outcome is read from its row, so a new outcome cannot be half declared."""

from __future__ import annotations

import inspect
import random

import pytest

from sendonce_contract.schema import Metric, ReasonCode
from sendonce_runtime.metrics import ALL_COUNTS
from sendonce_runtime.outcome import DEAD_LETTER_REASONS, MEANINGS, Meaning, Outcome, Tally, Wait
from sendonce_runtime.redelivery import SQS_MAX_DELAY_S, Redelivery

METRIC_NAMES = {value for name, value in vars(Metric).items() if name.isupper()}
WAITS = {value for name, value in vars(Wait).items() if name.isupper()}
FIELD_TYPES = {"acknowledged": bool, "metrics": tuple, "dead_letter": (ReasonCode, type(None)),
               "postponed": (str, type(None)), "grows": bool, "spends_send_slot": bool, "summary": str}


def test_every_outcome_has_one_row_and_every_row_an_outcome():
    assert set(MEANINGS) == set(Outcome)


def test_a_row_leaves_no_field_out():
    parameters = list(inspect.signature(Meaning).parameters.values())
    assert {p.name for p in parameters} == set(Meaning.__slots__) == set(FIELD_TYPES)  # a new field is checked too
    # No default, so a row that leaves a field out fails where it is written.
    assert all(p.kind is p.KEYWORD_ONLY and p.default is p.empty for p in parameters)
    wrong = {outcome: field for outcome, meaning in MEANINGS.items() for field, kind in FIELD_TYPES.items()
             if not isinstance(getattr(meaning, field), kind)}
    assert wrong == {}
    assert {m.postponed for m in MEANINGS.values()} - {None} <= WAITS
    assert {m.summary for m in MEANINGS.values()} <= set(Tally.ORDER)


@pytest.mark.parametrize("outcome", list(Outcome), ids=lambda o: o.value)
def test_a_row_is_coherent(outcome):
    meaning = outcome.meaning
    assert meaning.metrics and set(meaning.metrics) <= METRIC_NAMES  # each record counts in its outcome's metric
    if meaning.dead_letter is not None:
        assert meaning.acknowledged  # the DLQ holds it now: SQS must not deliver it again
    if meaning.postponed is not None:
        assert not meaning.acknowledged  # on a FIFO queue, or without a copy, the message itself comes back
    if meaning.grows:
        assert meaning.postponed is not None
    if meaning.summary is Tally.DEAD_LETTERED:
        assert meaning.dead_letter is not None
    if meaning.summary is Tally.HANDED_BACK:
        assert not meaning.acknowledged
    if meaning.summary is Tally.SCHEDULED:
        assert meaning.postponed is Wait.SEND_AT


# What operators and producers rely on, written out here rather than derived from the table: the DLQ's reason code
# of each dead-lettering outcome (the operating page's runbook and `dlq redrive --reason` name these), and the
# outcomes whose message SQS delivers again (every other record is acknowledged, and deleted).
EXPECTED_DEAD_LETTER_REASONS = {
    "INVALID_MESSAGE": "invalid-message", "REFUSED": "ses-refused", "RECEIVES_EXHAUSTED": "max-receives",
    "RECIPIENT_NOT_ALLOWED": "recipient-not-allowed", "ATTACHMENT_ENCODING": "attachment-encoding",
    "ATTACHMENT_TYPE_REFUSED": "attachment-type-refused", "ATTACHMENT_TOO_LARGE": "attachment-too-large",
    "ATTACHMENT_MISSING": "attachment-missing", "ATTACHMENT_BUCKET_REFUSED": "attachment-bucket-refused",
    "HEADER_REFUSED": "header-refused", "SES_STOPPED_TOO_LONG": "ses-paused",
    "SUSPECTED_DOUBLE": "suspected-double", "RECIPIENT_CAPPED": "recipient-cap",
}
EXPECTED_REDELIVERED = {
    "AMBIGUOUS", "ATTACHMENT_READ_FAILED", "ATTACHMENT_UNAVAILABLE", "AWAITING_EVIDENCE", "CONTENDED",
    "CONTRACT_TOO_NEW", "DEADLINE", "DEAD_LETTER_FAILED", "GROUP_BLOCKED", "INTERNAL_ERROR", "IN_FLIGHT_ELSEWHERE",
    "LEDGER_FAILED", "LEDGER_THROTTLED", "LEDGER_UNAVAILABLE", "PACED", "QUOTA_EXHAUSTED", "SCHEDULED", "THROTTLED",
    "SES_STOPPED",
}


def test_the_dead_letter_reasons_and_the_redelivered_outcomes_are_the_ones_operators_rely_on():
    assert {o.name: str(code.value) for o, code in DEAD_LETTER_REASONS.items()} == EXPECTED_DEAD_LETTER_REASONS
    assert {o.name for o in Outcome if o.redeliver} == EXPECTED_REDELIVERED


def test_what_is_derived_from_the_table_agrees_with_it():
    assert {name for m in MEANINGS.values() for name in m.metrics} <= set(ALL_COUNTS)
    assert len(set(DEAD_LETTER_REASONS.values())) == len(DEAD_LETTER_REASONS)  # a reason code names one outcome


@pytest.mark.parametrize("outcome", [o for o in Outcome if o.meaning.postponed], ids=lambda o: o.value)
def test_every_postponed_outcome_has_a_wait_a_delayed_copy_can_carry(outcome):
    redelivery = Redelivery(None, None, False, None, None, rng=random.Random(7))  # type: ignore[arg-type]
    delays = {redelivery.postponement_s(outcome, postponements) for postponements in range(12) for _ in range(20)}
    assert min(delays) >= 1 and max(delays) <= SQS_MAX_DELAY_S
