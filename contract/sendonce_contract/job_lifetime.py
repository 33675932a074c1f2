"""How long after it is enqueued a job can still reach a worker, term by term: what must outlive every copy of a job
is sized from it (a cancel's tombstone; the attachments a job references), and the furthest ``sendAt`` a pipeline
takes is one of its terms.
"""

from __future__ import annotations

from typing import Final

from .sqs_limits import SQS_MAX_RETENTION_S

DAY_S: Final = 86_400
OUTBOX_STREAM_RETENTION_S: Final = DAY_S  # a DynamoDB stream keeps a record a day: an outbox row relays within it
DEAD_LETTER_RETENTION_S: Final = SQS_MAX_RETENTION_S  # every DLQ the construct makes keeps a message 14 days
# SES's 24-hour quota window, which a job may wait out as delayed copies before its first send.
QUOTA_WINDOW_MARGIN_S: Final = DAY_S
# The furthest ahead any pipeline takes a job's sendAt, whatever its dedupe_ttl: the tombstone's lifetime below is
# a bound for every pipeline only because this one is.
MAX_SEND_AT_AHEAD_S: Final = 30 * DAY_S
# A lane's age limit (max_job_age): from a minute (a one-time code) to as long as a dead letter is kept.
MIN_JOB_AGE_S: Final = 60
MAX_JOB_AGE_S: Final = SQS_MAX_RETENTION_S


def seconds_text(seconds: float) -> str:
    """Seconds as synth errors and labels show them."""
    # Whole seconds in full ("1641600 s", never "1.6416e+06 s"); fractions as they are.
    return f"{seconds:.0f} s" if float(seconds).is_integer() else f"{seconds:g} s"


def send_at_horizon_s(dedupe_ttl_s: float) -> float:
    """The furthest ahead a pipeline takes a sendAt: its dedupe_ttl (a scheduled job waits as delayed copies, which
    cost requests by the hour), at most :data:`MAX_SEND_AT_AHEAD_S`."""
    return min(dedupe_ttl_s, MAX_SEND_AT_AHEAD_S)


def job_lifetime_terms(retention_period_s: float, dedupe_ttl_s: float, fifo: bool,
                       outbox: bool) -> list[tuple[str, float]]:
    """How long after its enqueue (or its attachments' upload, which comes first) a job can still reach a worker's
    claim, term by term: a label and seconds."""
    retention = seconds_text(retention_period_s)
    terms = [("the outbox stream's 1 day", float(OUTBOX_STREAM_RETENTION_S))] if outbox else []
    terms.append((f"retention_period ({retention}) before its first receive", retention_period_s))
    if not fifo:  # sendAt is refused on FIFO queues
        horizon_s = send_at_horizon_s(dedupe_ttl_s)
        terms += [(f"sendAt up to dedupe_ttl ({seconds_text(horizon_s)}, at most 30 days) ahead of that receive",
                   horizon_s),
                  (f"retention_period ({retention}) for the copy due at sendAt", retention_period_s)]
    terms += [(f"the DLQ's {seconds_text(DEAD_LETTER_RETENTION_S)} (14 days)", float(DEAD_LETTER_RETENTION_S)),
              (f"retention_period ({retention}) after a redrive", retention_period_s),
              (f"a margin of {seconds_text(QUOTA_WINDOW_MARGIN_S)} (SES's 24-hour quota window, which a job may "
               "wait out as delayed copies)", float(QUOTA_WINDOW_MARGIN_S))]
    return terms


def job_lifetime_s(retention_period_s: float, dedupe_ttl_s: float, fifo: bool, outbox: bool) -> float:
    return sum(seconds for _, seconds in job_lifetime_terms(retention_period_s, dedupe_ttl_s, fifo, outbox))


# How long a cancel's tombstone stands: the longest any pipeline's job can still arrive after it is enqueued (the
# longest retention, the furthest sendAt, the outbox, a redrive), so it outlives every copy of the job it cancels
# whatever the pipeline's settings, and neither the producer nor an operator has a lifetime to pass (88 days).
CANCELLED_KEY_LIFETIME_S: Final = int(job_lifetime_s(SQS_MAX_RETENTION_S, MAX_SEND_AT_AHEAD_S, fifo=False,
                                                     outbox=True))

