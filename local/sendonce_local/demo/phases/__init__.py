"""The demo's phases. ``demo.run`` plays the exactly-once traffic first: ``traffic`` (the workload with crashes,
through the outbox too), ``residual`` and ``bursts`` (past SES's rate, then through DynamoDB and SQS trouble), which
the report's count of every key is made of. Then each phase of ``PHASES`` in order (``demo.phase``): one module and
one entry each, which says what the phase checks, its report and the emails it counts itself."""

from __future__ import annotations

from ..phase import Phase
from . import attachments, flood, mis_keyed, outcome_events, ses_stops, sql_outbox

PHASES = (
    Phase("flood", flood.flood_phase, flood.is_phase_email),
    Phase("ses_stops", ses_stops.ses_stops_phase, ses_stops.is_phase_email),
    Phase("mis_keyed", mis_keyed.mis_keyed_phase, mis_keyed.is_phase_email),
    Phase("sql_outbox", sql_outbox.sql_outbox_phase, sql_outbox.is_phase_email),
    Phase("attachments", attachments.attachments_phase, attachments.is_phase_email),
    # Last: it waits for the outcome publisher to read every phase's writes, then stops it.
    Phase("outcome_events", outcome_events.outcome_events_phase),
)
