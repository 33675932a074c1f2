"""How a record that is not done comes back: sooner than the visibility timeout when its wait is known, as a
delayed copy when waiting must not spend the receive budget meant for poison messages, and into the DLQ with its
reason, never silently, when that budget is spent.

- Waiting for SES's events: the message becomes visible again when the grace period ends.
- Throttled by SES: on a standard queue a copy of the job is sent with a short, jittered, growing delay and the
  original acknowledged, so throttling never pushes a job toward the DLQ (the copy starts with a fresh receive
  count; the ledger makes a duplicate copy harmless). On a FIFO queue, where a copy would lose its place in the
  group, the message becomes visible again after the same delay, growing with each receive, while that leaves
  it the receives it keeps for a worker killed or failing; then it moves to the back of its group as a copy.
- No send slot left in this invocation (the pipeline's own pacing): the same, due at its turn at the rate, without
  growing: the job was not refused, it only waits its turn.
- Another worker holds the key (a copy of the job in flight elsewhere): the same, after a few seconds (at most until
  that worker's lease ends), by when it has usually finished and this copy is a duplicate. On a FIFO queue the
  message becomes visible again when the lease ends.
- SES stopped sending (a paused account or tenant, the pipeline's setup refused, the daily quota): written to
  the waiting room (on by default) under its stop until the schedule watch hears from SES that it sends again;
  without a room, or when the room cannot take it, the same as SES's throttling, parked for SQS's longest delay, 15
  minutes, each time, while the lane asks SES again once a minute (:mod:`.ses_stops`). A job parked as long as the
  queue keeps a message is dead-lettered as ``ses-paused``. A batch's parked jobs go together, each call one
  request per ten jobs.
- A job whose ``sendAt`` is ahead: a delayed copy for the time left, at most SQS's 15 minutes a copy, as often as
  it takes; nothing is claimed meanwhile, so the key can still be cancelled.
- A job of a newer contract version than this consumer knows (a producer upgraded before its consumer): the same,
  delayed about five minutes, the time a deploy takes, so a rolling upgrade never dead-letters a job.
- DynamoDB throttled, slow or unreachable before the send: the same as SES's throttling (nothing was sent).
- SES accepted but the SENT record could not be written: the original is acknowledged and a copy carries the
  completion, which its delivery writes first, so another copy of the job never takes the key for a dead
  worker's and sends it again.
- A record that would fail on the last receive its queue allows is dead-lettered with the reason, instead of
  moved by SQS with none.

Copies never multiply (the bound is on the guarantees page): an answer lost on the way back never counts as a failure.
One job's copy and a batch's are made the same way (``_replace_by_copies``). A copy carries the receipt handle of
the message it replaces and deletes that message when it arrives, so an original whose acknowledgement was lost
(its invocation killed between the copy and the acknowledgement) leaves no second message behind. The original is
kept out of sight until the copy can have done so: its invisibility is extended first when the copy's delay could
outlast it. A copy whose answer was lost may exist, so the original is kept out of sight, not copied again, and
never dead-lettered for it.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from sendonce_contract.copy_room import COPY_ATTRIBUTES, COPY_ATTRIBUTES_MAX_BYTES
from sendonce_contract.schema import CopyAttribute
from sendonce_contract.sqs_limits import (
    SQS_MAX_BATCH_ENTRIES,
    SQS_MAX_DELAY_S,
    SQS_MAX_RETENTION_S,
    SQS_MAX_VISIBILITY_S,
    VISIBLE_AFTER_TIMEOUTS,
    batches,
)

from .clock import Clock, Deadline, SystemClock
from .dead_letter import DeadLetterQueue
from .dynamodb_values import MAX_BATCH_WRITES
from .outcome import DEAD_LETTER_REASONS, Decided, Outcome, RecordResult, Redeliver, UnrecordedSend, Wait
from .sqs_answers import Answer, Refusal, call, call_batched
from .sqs_record import SqsRecord, carried_claims

if TYPE_CHECKING:
    from .waiting_room import WaitingRoom

THROTTLE_BASE_DELAY_S = 2.0
CONTRACT_TOO_NEW_DELAY_S = 300.0  # about the time a deploy of the upgraded consumer takes
# Our attributes on a copy, replaced (never inherited) each time a copy is made: those a job leaves room for.
OURS = frozenset(COPY_ATTRIBUTES)
NUMBERS = frozenset(name for name, (kind, _) in COPY_ATTRIBUTES.items() if kind == "Number")
# A parked job goes to the DLQ with this much of the queue's retention left, not a wait that could outlive it:
# Lambda's event source may be that far behind a backlog when its last wait ends, and on a FIFO queue the waiting
# message is the one retention deletes. A quarter of a retention shorter than four hours.
PARKED_MARGIN_MAX_S = 3_600


def parked_margin_s(retention_s: int) -> int:
    return min(PARKED_MARGIN_MAX_S, retention_s // 4)

# An original stays out of sight this long past its copy's delay, for the copy to be received and delete it.
# Short, because an invocation killed after the hold and before the copy leaves the job waiting this long.
HOLD_S = 60
# A copy is received within this much of becoming visible (else the original is held explicitly).
HOLD_MARGIN_S = 30
# A completion carried by a copy is written again soon: before a dead worker's lease and grace period run out.
UNRECORDED_DELAY_CAP_S = 10
# SQS calls carrying a completion makes at most: extend the original's invisibility, send the copy.
CARRY_CALLS = 2
# On a FIFO queue every wait spends a receive, and a worker killed on the receives left would let SQS move the job
# to its DLQ: a job waits by its visibility only while this many receives stay after the wait, then moves to the
# back of its group (a fresh message) instead. So SQS moves a FIFO job only after its last three receives failed.
FIFO_RECEIVES_KEPT_FOR_FAILURES = 3


# The records of a batch that come back by their visibility, and their waits in seconds, set together.
Visibilities = list[tuple[SqsRecord, int]]


class _Copy(NamedTuple):
    """A copy to be made of ``record``: its delay, the postponements it carries and when its job was parked."""

    record: SqsRecord
    redeliver: Redeliver
    delay_s: int
    postponements: int
    parked_since: int | None


class Redelivery:
    def __init__(
        self,
        client: Any,
        queue_url: str | None,
        fifo: bool,
        dead_letters: DeadLetterQueue,
        max_receive_count: int | None,
        rng: random.Random | None = None,
        call_ms: int = 0,
        clock: Clock | None = None,
        retention_s: int | None = None,
        room: WaitingRoom | None = None,
    ) -> None:
        self._client = client
        # Where a job scheduled beyond SQS's longest delay, or parked by a stop, waits (None: as delayed copies).
        self._room = room
        self._queue_url = queue_url
        self._fifo = fifo
        self._dead_letters = dead_letters
        self._max_receive_count = max_receive_count
        self._random = rng or random.Random()
        self._call_ms = call_ms  # the longest one SQS call can take (its connect and read timeouts)
        self._clock = clock or SystemClock()
        self._retention_s = retention_s  # the job queue's: how long a parked job may stay parked

    def retire_superseded(self, records: Sequence[SqsRecord]) -> None:
        """Each copy of a batch deletes the message it replaces, in case that one's acknowledgement was lost: one
        request per ten copies. Never raises."""
        if self._fifo or self._queue_url is None:
            return
        entries = {str(n): {"ReceiptHandle": record.supersedes} for n, record in enumerate(records)
                   if record.supersedes}
        if entries:
            # Gone already (acknowledged), or received again since: either way nothing is left to do.
            call_batched(self._client.delete_message_batch, self._queue_url, entries)

    def parks_with_its_batch(self, redeliver: Redeliver) -> bool:
        """Whether this is a parked job's (SES stopped sending) whose copy ``park`` makes with its batch's."""
        return (redeliver.result.outcome.meaning.postponed == Wait.PARKED and not self._fifo
                and self._queue_url is not None)

    def settle(self, record: SqsRecord, decided: Decided, deadline: Deadline | None = None,
               later: Visibilities | None = None) -> RecordResult:
        """What became of the record once its way back is arranged. Never raises. A record that comes back by its
        visibility has it set at once, or, given ``later``, with the batch's others (``set_visibilities``)."""
        if isinstance(decided, UnrecordedSend):
            return self._carry_completion(record, decided, deadline)
        if isinstance(decided, RecordResult):
            return decided  # done: SQS deletes the message
        copy = self._plan_copy(record, decided)
        if isinstance(copy, RecordResult):
            return copy
        if copy is not None and self._admitted_to_room(copy, deadline):
            return copy.redeliver.result._replace(
                postponed_s=copy.redeliver.retry_after_s,
                reason=f"{copy.redeliver.result.reason or 'scheduled'}: in the waiting room until then")
        copied = self._replace_by_copies({0: copy}, deadline).get(0) if copy is not None else None
        if copied is not None:
            return copied
        return self._without_copy(record, decided, copy, deadline, later)

    def park(self, parked: Sequence[tuple[SqsRecord, Redeliver]], deadline: Deadline | None = None,
             later: Visibilities | None = None) -> list[RecordResult]:
        """A batch's parked jobs replaced by their delayed copies together (``_replace_by_copies``, as ``settle``
        replaces one), or written to the waiting room: a parked job costs a fraction of a request per 15 minutes.
        Results in the order given. Never raises."""
        results: dict[int, RecordResult] = {}
        copies: dict[int, _Copy] = {}
        for n, (record, redeliver) in enumerate(parked):
            copy = self._plan_copy(record, redeliver)
            if isinstance(copy, RecordResult):
                results[n] = copy
            elif copy is not None:
                copies[n] = copy
        if self._room is not None and copies:
            results.update(self._park_in_room(copies, deadline))
            copies = {n: copy for n, copy in copies.items() if n not in results}
        results.update(self._replace_by_copies(copies, deadline))
        for n, (record, redeliver) in enumerate(parked):
            if n not in results:
                results[n] = self._without_copy(record, redeliver, copies.get(n), deadline, later)
        return [results[n] for n in range(len(parked))]

    def _park_in_room(self, copies: dict[int, _Copy], deadline: Deadline | None) -> dict[int, RecordResult]:
        """The batch's parked jobs written to the waiting room, a stop's together, until the schedule watch hears
        from SES that it sends again: one write for the whole stop, not a copy every 15 minutes. Each waits there
        at most until the queue's retention would have ended its wait (then the watch sends it back, and, SES
        still stopped, it is dead-lettered as ``ses-paused``). The results of those the room holds."""
        assert self._room is not None
        by_stop: dict[int, list[int]] = {}
        for n, copy in copies.items():
            if copy.redeliver.stop is not None and copy.redeliver.result.dedupe_key is not None:
                by_stop.setdefault(id(copy.redeliver.stop), []).append(n)
        results: dict[int, RecordResult] = {}
        now_ms = self._clock.now_ms()
        for numbers in by_stop.values():
            # Only with time for the marker and the writes: a kill at the deadline would lose the acknowledgements.
            writes = 1 + -(-len(numbers) // MAX_BATCH_WRITES)
            if deadline is not None and deadline.remaining_ms() < (writes + 1) * self._call_ms:
                break
            jobs = [self._room_entry(copies[n], now_ms) for n in numbers]
            stop = copies[numbers[0]].redeliver.stop
            assert stop is not None
            for index in self._room.park(stop, jobs):
                n = numbers[index]
                result = copies[n].redeliver.result
                results[n] = result._replace(postponed_s=max(0, (jobs[index][2] - now_ms) // 1000), reason=(
                    f"{result.reason or result.outcome.value}: in the waiting room until SES sends again"))
        return results

    def _room_entry(self, copy: _Copy, now_ms: int) -> tuple[dict[str, Any], str, int]:
        """A parked job as the room holds it: the request that sends it back, its key, and the latest it may wait
        (epoch ms): as long as the queue keeps a message, from its first parking, less the margin."""
        request = self._room_request(copy, copy.redeliver.unsent_claim, copy.redeliver.unrecorded_send)
        since = copy.parked_since if copy.parked_since is not None else now_ms
        retention_s = self._retention_s if self._retention_s is not None else SQS_MAX_RETENTION_S
        bound_ms = since + (retention_s - parked_margin_s(retention_s)) * 1000
        assert copy.redeliver.result.dedupe_key is not None
        return request, copy.redeliver.result.dedupe_key, bound_ms

    def _room_request(self, copy: _Copy, unsent_claim: str | None,
                      unrecorded_send: tuple[str, str] | None) -> dict[str, Any]:
        """The request that sends a job back from the waiting room: a copy's, without its delay (the schedule
        watch's to set) and with nothing to delete (its message is acknowledged once the room holds it)."""
        request = self._copy_request(copy.record, 0, copy.postponements, unsent_claim, unrecorded_send,
                                     copy.parked_since)
        del request["DelaySeconds"]
        request["MessageAttributes"].pop(CopyAttribute.SUPERSEDES, None)
        return request

    def _admitted_to_room(self, copy: _Copy, deadline: Deadline | None) -> bool:
        """A scheduled job due further ahead than SQS can delay it, written to the waiting room (it comes back from
        there shortly before its sendAt): one write for its whole wait, not a copy every 15 minutes. Only with time
        for the write: a kill at the deadline would lose the batch's acknowledgements."""
        redeliver = copy.redeliver
        if (self._room is None or redeliver.result.outcome.meaning.postponed != Wait.SEND_AT
                or redeliver.retry_after_s is None or redeliver.retry_after_s <= self._room.after_s
                or redeliver.due_at_ms is None or redeliver.result.dedupe_key is None
                or (deadline is not None and deadline.remaining_ms() < self._call_ms)):
            return False
        request = self._room_request(copy, None, None)
        return self._room.admit(request, redeliver.due_at_ms, redeliver.result.dedupe_key)

    def _plan_copy(self, record: SqsRecord, redeliver: Redeliver) -> _Copy | RecordResult | None:
        """The copy a postponed job's wait calls for (None: not postponed); or, for a job parked as long as the
        queue keeps a message, its result in the DLQ."""
        result, meaning = redeliver.result, redeliver.result.outcome.meaning
        if meaning.postponed is None:
            return None
        postponements = self._postponements(record)
        delay_s = _within_own_wait(meaning.postponed, self.postponement_s(result.outcome, postponements),
                                   redeliver.retry_after_s)
        parked_since = self._parked_since(record, meaning.postponed)
        left_s = None if parked_since is None else self._retention_left_s(parked_since)
        if parked_since is not None and left_s is not None and self._retention_s is not None:
            margin_s = parked_margin_s(self._retention_s)
            if left_s <= margin_s:
                return self._dead_letter_parked(record, result, parked_since)
            delay_s = min(delay_s, left_s - margin_s)  # the last wait ends while it may
        return _Copy(record, redeliver, delay_s, postponements + meaning.grows, parked_since)

    def _postponements(self, record: SqsRecord) -> int:
        """How many times the job has waited: its copies count them; on a FIFO queue, where it waits by its
        visibility, so does each receive, so its wait grows there too."""
        return record.postponements + (record.receive_count - 1 if self._fifo else 0)

    def _without_copy(self, record: SqsRecord, redeliver: Redeliver, copy: _Copy | None,
                      deadline: Deadline | None, later: Visibilities | None = None) -> RecordResult:
        """No copy made: the message comes back by its visibility, sooner when its wait is known, or goes to the
        DLQ with its reason on the last receive its queue allows."""
        result = redeliver.result
        retry_after_s = redeliver.retry_after_s if redeliver.retry_after_s is not None else (
            copy.delay_s if copy is not None else None)
        last = self._max_receive_count is not None and record.receive_count >= self._max_receive_count
        possible = self._possible_sends(redeliver)
        if self._fifo and possible is not None and self._max_receive_count is not None and (
                possible >= self._max_receive_count):  # the bound on a FIFO job's sends that may have gone
            return self._give_up(record, result, f"{possible} sends that may have gone, as many as the queue's "
                                                 "max_receive_count")
        if last or self._keeps_receives_for_failures(record):
            # A send that may have gone waits for SES's word like any other wait (its bound checked above).
            waiting = copy or (_Copy(record, redeliver, 0, self._postponements(record), record.parked_since)
                               if possible is not None else None)
            if waiting is not None and self._fifo:  # a wait, not a failure: never the DLQ for it
                requeued = self._requeue_at_group_tail(waiting)
                if requeued is not None:
                    return requeued
            if last:
                return self._give_up(record, result)
        if retry_after_s is None:
            return result
        if later is not None:
            later.append((record, retry_after_s))
        # Only with time for the call: a kill at the deadline would lose the batch's acknowledgements.
        elif deadline is None or deadline.remaining_ms() >= self._call_ms:
            self._change_visibility(record, retry_after_s)
        return result

    def _keeps_receives_for_failures(self, record: SqsRecord) -> bool:
        """Whether a FIFO job's wait by its visibility would leave it fewer receives than
        ``FIFO_RECEIVES_KEPT_FOR_FAILURES`` for a worker killed or failing: then it waits at its group's back. Its
        first receive always waits by its visibility, so its waits keep a backoff on a queue with few receives."""
        if not self._fifo or self._max_receive_count is None:
            return False
        kept = min(FIFO_RECEIVES_KEPT_FOR_FAILURES, self._max_receive_count - 1)
        return self._max_receive_count - record.receive_count < kept

    def _possible_sends(self, redeliver: Redeliver) -> int | None:
        """A send SES may have accepted: how many of the key's sends may have gone (None: not such a send). On a
        FIFO queue, where every wait spends a receive, such a send waits for SES's events like any other wait,
        until these number the queue's max_receive_count (a standard queue's bound on them): then the DLQ, never
        an endless loop of sends whose answers are lost. Attempts SES refused for certain (throttled) sent nothing
        and do not count."""
        result = redeliver.result
        if result.outcome not in (Outcome.AMBIGUOUS, Outcome.AWAITING_EVIDENCE) or self._max_receive_count is None:
            return None
        return result.possible_sends if result.possible_sends is not None else (result.attempt or 1)

    def set_visibilities(self, later: Visibilities, deadline: Deadline | None = None) -> None:
        """The batch's records that come back by their visibility, each set to its wait: one request per ten, as
        many as fit before the deadline (the rest wait out their visibility timeout). Never raises."""
        entries = {str(n): {"ReceiptHandle": record.receipt_handle, "VisibilityTimeout": _visibility_s(seconds)}
                   for n, (record, seconds) in enumerate(later) if record.receipt_handle}
        if not entries or self._queue_url is None:
            return
        if deadline is not None and self._call_ms > 0:
            fitting = (deadline.remaining_ms() // self._call_ms) * SQS_MAX_BATCH_ENTRIES
            entries = dict(itertools.islice(entries.items(), fitting))
        call_batched(self._client.change_message_visibility_batch, self._queue_url, entries)

    def _parked_since(self, record: SqsRecord, wait: str) -> int | None:
        """When a parked job's message was queued (epoch ms), as its first parking found it: carried by every copy
        after it, whatever the copy waits for, so the job waits no longer in all than the queue keeps a message,
        which dedupe_ttl covers."""
        if wait != Wait.PARKED:
            return record.parked_since
        return record.parked_since or record.sent_at_ms or self._clock.now_ms()

    def _retention_left_s(self, parked_since: int) -> int | None:
        """How long the queue's retention still lets the job wait, from its first queueing (None: no bound)."""
        if self._retention_s is None:
            return None
        return (parked_since + self._retention_s * 1000 - self._clock.now_ms()) // 1000

    def _dead_letter_parked(self, record: SqsRecord, result: RecordResult, parked_since: int) -> RecordResult:
        hours = (self._clock.now_ms() - parked_since) / 3_600_000
        reason = (f"waited {hours:.1f} h, parked while SES stopped sending, as long as the job queue keeps a message "
                  f"({self._retention_s} s): {result.reason or result.outcome.value}; redrive once SES sends again")
        stopped = result._replace(outcome=Outcome.SES_STOPPED_TOO_LONG, reason=reason)
        code = DEAD_LETTER_REASONS[Outcome.SES_STOPPED_TOO_LONG]
        if self._dead_letters.send(record, code, reason, result.dedupe_key):
            return stopped
        return result  # not moved: it stays parked (a copy next time), never lost

    def _can_carry(self, deadline: Deadline | None) -> bool:
        # The calls must fit before the deadline, so no deadline kill lands between them.
        room = deadline is None or deadline.remaining_ms() >= CARRY_CALLS * self._call_ms
        return not self._fifo and self._queue_url is not None and room

    def _copies_that_fit(self, copies: dict[int, _Copy], requests: dict[int, dict[str, Any]],
                         deadline: Deadline | None) -> dict[int, _Copy]:
        """The copies that can be made before the deadline, in order, so no deadline kill lands between the
        protocol's calls: for each batch of them SQS takes whole, the hold of the originals that need one, the
        copies, and the hold of those whose answer was lost unheld. The rest come back by their visibility."""
        if deadline is None or self._call_ms <= 0:
            return dict(copies)
        calls_left = deadline.remaining_ms() // self._call_ms
        fitting: dict[int, _Copy] = {}
        for chunk in batches(requests.items()):
            holds = [self._needs_hold(copies[n].record, copies[n].delay_s, deadline) for n, _ in chunk]
            calls = 1 + any(holds) + (not all(holds))
            if calls > calls_left:
                break
            calls_left -= calls
            fitting.update((n, copies[n]) for n, _ in chunk)
        return fitting

    def _replace_by_copies(self, copies: dict[int, _Copy], deadline: Deadline | None) -> dict[int, RecordResult]:
        """Each original replaced by its delayed copy, one job or a batch's alike, each call one request per ten:
        the originals a copy could arrive after held out of sight first, the copies sent, and the originals of
        copies whose answer was lost held then (the copy may exist: it deletes the original, and no other is made).
        The results of those replaced or kept out of sight; an index left out made no copy (it comes back by its
        visibility): no time for the calls, its hold refused, or its copy refused; none on a FIFO queue, whose copy
        would lose its place in the group."""
        if self._fifo or self._queue_url is None:
            return {}
        requests = {n: self._copy_request(copy.record, copy.delay_s, copy.postponements, copy.redeliver.unsent_claim,
                                          copy.redeliver.unrecorded_send, copy.parked_since)
                    for n, copy in copies.items()}
        copies = self._copies_that_fit(copies, requests, deadline)
        needing_hold = {n: copy for n, copy in copies.items() if self._needs_hold(copy.record, copy.delay_s, deadline)}
        holds = self._change_visibilities(needing_hold)
        held = {n for n, answer in holds.items() if answer is not Answer.REFUSED}
        # An original whose hold was refused could come back before its copy deletes it: no copy.
        to_copy = {n: copy for n, copy in copies.items() if n in held or n not in needing_hold}
        entries = {str(n): requests[n] for n in to_copy}
        said: dict[str, Refusal] = {}
        answers = call_batched(self._client.send_message_batch, str(self._queue_url), entries,
                               said) if entries else {}
        results: dict[int, RecordResult] = {}
        unheld_lost: dict[int, _Copy] = {}
        for n, copy in to_copy.items():
            answer = answers[str(n)]
            if answer is Answer.DONE:
                results[n] = copy.redeliver.result._replace(postponed_s=copy.delay_s)
            elif answer is Answer.LOST:
                results[n] = _copy_answer_lost(copy.redeliver.result)
                if n not in held:
                    unheld_lost[n] = copy
            elif str(n) in said:
                _say_if_too_large(copy, [said[str(n)]])
        # The copies that may exist: their originals kept out of sight until they have deleted them, no other made.
        self._change_visibilities(unheld_lost)
        return results

    def _change_visibilities(self, copies: dict[int, _Copy]) -> dict[int, Answer]:
        """Each copy's original kept out of sight until its copy can have deleted it."""
        entries = {str(n): {"ReceiptHandle": copy.record.receipt_handle,
                            "VisibilityTimeout": _visibility_s(copy.delay_s + HOLD_S)}
                   for n, copy in copies.items() if copy.record.receipt_handle}
        if not entries or self._queue_url is None:
            return {}
        answers = call_batched(self._client.change_message_visibility_batch, self._queue_url, entries)
        return {int(n): answer for n, answer in answers.items()}

    @staticmethod
    def _needs_hold(original: SqsRecord, delay_s: int, deadline: Deadline | None) -> bool:
        """Whether a copy delayed ``delay_s`` could arrive after its original becomes visible again (and is received
        anew). The original's visibility timeout (at least 6 x the function timeout) began when it was received,
        before this invocation started: what the invocation has used of it is gone."""
        if not original.receipt_handle:
            return False
        if deadline is None:
            return True
        used_s = (deadline.initial_ms - deadline.remaining_ms()) / 1000
        return delay_s + used_s + HOLD_MARGIN_S > VISIBLE_AFTER_TIMEOUTS * deadline.initial_ms / 1000

    def _carry_completion(self, record: SqsRecord, send: UnrecordedSend, deadline: Deadline | None) -> RecordResult:
        """SES accepted, the SENT record is not written: a copy carries it until DynamoDB takes it. The original
        is acknowledged either way."""
        result = send.result
        if not self._can_carry(deadline) or result.ses_message_id is None:
            return result
        delay_s = min(UNRECORDED_DELAY_CAP_S, self.postponement_s(Outcome.LEDGER_UNAVAILABLE, record.postponements))
        carried = (send.owner, result.ses_message_id)
        if self._needs_hold(record, delay_s, deadline):
            # Held as any copied original is, should the acknowledgement be lost (the invocation killed after the
            # copy): the completion is carried either way, so a refused hold does not stop the copy.
            self._change_visibility(record, delay_s + HOLD_S)
        said: list[Refusal] = []
        if self._send_copy(record, delay_s, record.postponements + 1, None, carried, said=said) is Answer.REFUSED:
            too_large = next((refusal for refusal in said if refusal.too_long), None)
            if too_large is not None:  # SES's events, if they come, record it SENT
                return result._replace(reason=f"{result.reason}; {_too_large_to_carry(record, too_large)}")
            return result
        return result._replace(postponed_s=delay_s)

    def postponement_s(self, outcome: Outcome, postponements: int) -> int:
        """The delay of ``outcome``'s wait: full jitter over a doubling delay, so a burst's throttled jobs spread out
        instead of coming back at once; the fixed waits jittered too."""
        wait = outcome.meaning.postponed
        if wait == Wait.PARKED:
            return SQS_MAX_DELAY_S  # the fewest copies: one per job per 15 minutes
        if wait == Wait.DEPLOY:
            return int(CONTRACT_TOO_NEW_DELAY_S * (1 + 0.5 * self._random.random()))
        if wait == Wait.TURN:
            return 1 + int(2 * self._random.random() + 0.5)
        if wait == Wait.LEASE:
            return 2 + int(3 * self._random.random() + 0.5)
        ceiling = min(SQS_MAX_DELAY_S, THROTTLE_BASE_DELAY_S * 2 ** min(postponements, 10))
        return max(1, int(ceiling * (0.5 + 0.5 * self._random.random())))

    def _send_copy(self, record: SqsRecord, delay_s: int, postponements: int, unsent_claim: str | None,
                   unrecorded_send: tuple[str, str] | None, parked_since: int | None = None,
                   said: list[Refusal] | None = None) -> Answer:
        if self._queue_url is None:
            return Answer.REFUSED
        return call(self._client.send_message, said, QueueUrl=self._queue_url,
                    **self._copy_request(record, delay_s, postponements, unsent_claim, unrecorded_send, parked_since))

    @staticmethod
    def _copy_request(record: SqsRecord, delay_s: int, postponements: int, unsent_claim: str | None,
                      unrecorded_send: tuple[str, str] | None, parked_since: int | None) -> dict[str, Any]:
        """A copy's SendMessage request (or batch entry), without the queue: the job's body and attributes, ours
        replaced."""
        attributes = {name: {"DataType": kind, "StringValue": value}
                      for name, kind, value in record.message_attributes if name not in OURS}
        ours = {CopyAttribute.POSTPONEMENTS: str(postponements), CopyAttribute.SUPERSEDES: record.receipt_handle,
                # Tokens carried in and not taken over yet still name claims nobody sent under.
                CopyAttribute.UNSENT_CLAIM: unsent_claim or carried_claims(record.unsent_claims),
                # A completion carried in and not written yet (the job waited before its turn to write it).
                CopyAttribute.UNRECORDED_SEND: " ".join(unrecorded_send or record.unrecorded_send or ()),
                CopyAttribute.PARKED_SINCE: "" if parked_since is None else str(parked_since),
                CopyAttribute.RELEASED: record.released or "",
                CopyAttribute.FIRST_QUEUED_AT: "" if record.first_queued_at is None else str(record.first_queued_at)}
        attributes.update({name: {"DataType": "Number" if name in NUMBERS else "String",
                                  "StringValue": value} for name, value in ours.items() if value})
        request: dict[str, Any] = {"MessageBody": record.body, "DelaySeconds": min(delay_s, SQS_MAX_DELAY_S),
                                   "MessageAttributes": attributes}
        if record.message_group_id:  # a standard queue's tenant (SQS fair queues): the copy stays the tenant's
            request["MessageGroupId"] = record.message_group_id
        return request

    def _requeue_at_group_tail(self, copy: _Copy) -> RecordResult | None:
        """A FIFO job that waited through the receives its queue allows it to wait (all but the ones kept for
        failures, ``FIFO_RECEIVES_KEPT_FOR_FAILURES``), sent again at the back of its message group
        (FIFO takes no per-message delay; its deduplication id makes a second try of this copy a no-op): its group's
        later jobs go first, and it never reaches the DLQ for waiting. None if SQS surely did not take it."""
        request = self._copy_request(copy.record, 0, copy.postponements, copy.redeliver.unsent_claim,
                                     copy.redeliver.unrecorded_send, copy.parked_since)
        del request["DelaySeconds"]
        request["MessageDeduplicationId"] = f"{copy.record.message_id}-requeued"
        answer = call(self._client.send_message, QueueUrl=self._queue_url, **request)
        if answer is Answer.DONE:
            return copy.redeliver.result._replace(postponed_s=0)
        return None  # lost or refused: the DLQ with its reason, where a redrive finds it (a second copy is harmless)

    def _change_visibility(self, record: SqsRecord, seconds: int) -> Answer:
        # A failure here costs only time: the message comes back after its visibility timeout anyway.
        if self._queue_url is None or not record.receipt_handle:
            return Answer.REFUSED
        return call(self._client.change_message_visibility, QueueUrl=self._queue_url,
                    ReceiptHandle=record.receipt_handle, VisibilityTimeout=_visibility_s(seconds))

    def _give_up(self, record: SqsRecord, result: RecordResult, why: str | None = None) -> RecordResult:
        why = why or f"received {record.receive_count} times, the queue's max_receive_count"
        reason = f"{why}; the last attempt was {result.outcome.value}: {result.reason or 'no reason given'}"
        code = DEAD_LETTER_REASONS[Outcome.RECEIVES_EXHAUSTED]
        if self._dead_letters.send(record, code, reason, result.dedupe_key):
            return result._replace(outcome=Outcome.RECEIVES_EXHAUSTED, reason=reason)
        return result


def _visibility_s(seconds: int) -> int:
    """A visibility timeout SQS takes: 0 (at once) to 12 hours."""
    return max(0, min(seconds, SQS_MAX_VISIBILITY_S))


def _say_if_too_large(copy: _Copy, said: Sequence[Refusal]) -> None:
    """A copy SQS refused for its size: the job waits by its visibility instead (a receive spent each time, as on a
    FIFO queue), and its reason says why, in its log line and, on its last receive, in the DLQ."""
    too_large = next((refusal for refusal in said if refusal.too_long), None)
    if too_large is not None:
        result = copy.redeliver.result
        copy.redeliver.result = result._replace(
            reason=f"{result.reason or result.outcome.value}; too large to copy, so it waits by its visibility, "
                   f"spending a receive: {_too_large(copy.record, too_large)}")


def _too_large_to_carry(record: SqsRecord, refusal: Refusal) -> str:
    return f"its completion is too large to travel with a copy: {_too_large(record, refusal)}"


def _too_large(record: SqsRecord, refusal: Refusal) -> str:
    return (f"the job's message is {len(record.body.encode()):,} bytes, and SQS refused its copy ({refusal}); a job "
            f"must leave {COPY_ATTRIBUTES_MAX_BYTES:,} bytes of its queue's maximum message size for a copy's "
            "attributes, as sendonce's producer does")


def _copy_answer_lost(result: RecordResult) -> RecordResult:
    return result._replace(reason=f"{result.reason or result.outcome.value}; the delayed copy's answer was lost")


def _within_own_wait(wait: str, delay_s: int, own_s: int | None) -> int:
    """The delay of ``wait`` as bounded by the wait the record itself knows, if it knows one."""
    if own_s is None:
        return delay_s
    if wait == Wait.TURN:
        return min(SQS_MAX_DELAY_S, max(1, own_s))  # its turn at the rate, which pacing spreads (``send_rate``)
    if wait == Wait.LEASE:
        return min(delay_s, own_s)  # the other worker's lease may end sooner
    if wait == Wait.SEND_AT:
        return min(SQS_MAX_DELAY_S, own_s)  # each copy waits at most 15 minutes
    return delay_s
