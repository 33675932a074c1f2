"""Throttling and the quota never push a job toward the DLQ; a job the DLQ does receive always says why."""

from __future__ import annotations

import io
import itertools
import json

import boto3
import pytest
from consumer_harness import FakeClock, FakeContext, event, failed_ids, job, sqs_record
from ses_fault_proxy import Fault

from sendonce_contract.schema import DeadLetter
from sendonce_runtime.outcome_log import OutcomeLog


@pytest.fixture
def jobs(aws, pipeline) -> str:
    url = boto3.client("sqs").create_queue(QueueName="jobs")["QueueUrl"]
    return url


def delayed_copies(consumer, queue_url: str) -> list[dict]:
    """What the consumer sent back to its job queue, as it asked SQS (each copy, alone or a batch's entry), and
    checked against SQS's own count."""
    return [{"QueueUrl": params["QueueUrl"], **entry} for params in consumer.sent if params["QueueUrl"] == queue_url
            for entry in params.get("Entries", [params])]


def watch_sends(consumer):
    consumer.sent = []
    for operation in ("SendMessage", "SendMessageBatch"):  # a copy is a batch entry; SendMessage for a FIFO requeue
        consumer.redelivery._client.meta.events.register(
            f"before-parameter-build.sqs.{operation}", lambda params, **_: consumer.sent.append(dict(params)))
    return consumer


def delayed_in_sqs(queue_url: str) -> int:
    attributes = boto3.client("sqs").get_queue_attributes(
        QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessagesDelayed"])["Attributes"]
    return int(attributes["ApproximateNumberOfMessagesDelayed"])


def consumer_for(pipeline, jobs, clock=None, **overrides):
    log = io.StringIO()
    consumer = pipeline.consumer(clock, queue_url=jobs, max_receive_count=5, **overrides)
    consumer.log = OutcomeLog(log, pipeline="Shop/Receipts")
    return watch_sends(consumer), log


def test_a_throttled_job_comes_back_as_a_delayed_copy_and_the_original_is_acknowledged(pipeline, ses_faults, jobs):
    ses_faults.script(Fault.THROTTLE)
    consumer, log = consumer_for(pipeline, jobs)
    record = sqs_record(job("receipt:t1:u1"), receive_count=1)
    response = consumer.handle(event(record), FakeContext(FakeClock()))

    assert response == {"batchItemFailures": []}  # acknowledged: it spends none of the receive budget
    assert pipeline.ledger_item("receipt:t1:u1") is None  # the claim was released
    [copy] = delayed_copies(consumer, jobs)
    assert delayed_in_sqs(jobs) == 1
    assert copy["MessageBody"] == record["body"]
    assert 1 <= copy["DelaySeconds"] <= 2
    assert copy["MessageAttributes"]["sendonce.postponements"]["StringValue"] == "1"
    line = json.loads(log.getvalue())
    assert line["outcome"] == "throttled" and line["postponedSeconds"] == copy["DelaySeconds"]
    assert line["SesThrottles"] == 1

    # The copy is delivered later, with its count of postponements, and sends once.
    later = sqs_record(copy["MessageBody"])
    later["messageAttributes"] = {"sendonce.postponements": {"stringValue": "1", "dataType": "Number"}}
    assert consumer.handle(event(later), FakeContext(FakeClock())) == {"batchItemFailures": []}
    assert pipeline.emails_for("receipt:t1:u1") == 1


def test_each_postponement_waits_longer_with_jitter_up_to_fifteen_minutes(pipeline, jobs):
    from sendonce_runtime.outcome import Outcome

    redelivery = consumer_for(pipeline, jobs)[0].redelivery
    for postponements, ceiling in ((0, 2), (1, 4), (3, 16), (20, 900)):
        delays = {redelivery.postponement_s(Outcome.THROTTLED, postponements) for _ in range(200)}
        assert max(delays) <= ceiling and min(delays) >= max(1, ceiling // 2)
        assert len(delays) > 1 or ceiling <= 2  # jittered
    # Parked while SES stops sending (the daily quota among its stops): SQS's longest delay, one copy each time.
    assert {redelivery.postponement_s(outcome, n) for outcome in (Outcome.QUOTA_EXHAUSTED, Outcome.SES_STOPPED)
            for n in range(5)} == {900}


def test_an_exhausted_daily_quota_parks_the_job_for_fifteen_minutes_visibly(pipeline, ses_faults, jobs):
    ses_faults.script(Fault.QUOTA)
    consumer, log = consumer_for(pipeline, jobs)
    response = consumer.handle(event(sqs_record(job("receipt:q1:u1"))), FakeContext(FakeClock()))
    assert response == {"batchItemFailures": []}
    [copy] = delayed_copies(consumer, jobs)
    assert copy["DelaySeconds"] == 900 and delayed_in_sqs(jobs) == 1
    line = json.loads(log.getvalue())
    assert line["outcome"] == "quota_exhausted" and line["QuotaExhausted"] == 1 and line["SesStopped"] == 1
    assert pipeline.dead_letters() == []


def test_on_a_fifo_queue_a_throttled_job_keeps_its_place_and_comes_back_sooner(fifo_pipeline, fifo_ses_faults):
    fifo_ses_faults.script(Fault.THROTTLE)
    sqs = boto3.client("sqs")
    jobs = sqs.create_queue(QueueName="jobs.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    sqs.send_message(QueueUrl=jobs, MessageBody=json.dumps(job("receipt:f1:u1")), MessageGroupId="ada",
                     MessageDeduplicationId="1")
    [message] = sqs.receive_message(QueueUrl=jobs, VisibilityTimeout=180)["Messages"]
    record = sqs_record(message["Body"], group="ada")
    record["receiptHandle"] = message["ReceiptHandle"]
    consumer = watch_sends(fifo_pipeline.consumer(queue_url=jobs, max_receive_count=5, fifo=True))
    response = consumer.handle(event(record), FakeContext(FakeClock()))
    assert failed_ids(response) == {record["messageId"]}  # no copy: it would lose its place in the group
    assert delayed_copies(consumer, jobs) == []
    # It becomes visible again after the short delay, not after 180 s: moto answers a receive within seconds.
    again = sqs.receive_message(QueueUrl=jobs, WaitTimeSeconds=5)["Messages"]
    assert [m["Body"] for m in again] == [message["Body"]]


@pytest.mark.parametrize("receive_count", [4, 5])
def test_a_job_failing_on_its_last_allowed_receive_is_dead_lettered_with_its_reason(pipeline, jobs, receive_count):
    clock = FakeClock()
    consumer, log = consumer_for(pipeline, jobs, clock)
    record = sqs_record(job("receipt:late:u1"), receive_count=receive_count)
    # Too little time left to send: the record fails and would come back, but this is its last allowed receive.
    response = consumer.handle(event(record), FakeContext(clock, budget_ms=100))
    if receive_count < 5:
        assert failed_ids(response) == {record["messageId"]} and pipeline.dead_letters() == []
        return
    assert response == {"batchItemFailures": []}
    [dead] = pipeline.dead_letters()
    attributes = dead["MessageAttributes"]
    assert attributes["sendonce.reasonCode"]["StringValue"] == "max-receives"
    assert "received 5 times" in attributes["sendonce.reason"]["StringValue"]
    assert "deadline: too little time left" in attributes["sendonce.reason"]["StringValue"]
    assert json.loads(log.getvalue())["outcome"] == "receives_exhausted"


def test_a_copy_in_flight_elsewhere_comes_back_in_seconds_without_spending_a_receive(pipeline, jobs):
    clock = FakeClock()
    consumer, log = consumer_for(pipeline, jobs, clock)
    consumer.processor._ledger.claim("receipt:busy:u1", "alive", clock.now_ms() + 600_000, "h")
    record = sqs_record(job("receipt:busy:u1"), receive_count=1)
    assert consumer.handle(event(record), FakeContext(clock)) == {"batchItemFailures": []}
    [copy] = delayed_copies(consumer, jobs)
    assert 2 <= copy["DelaySeconds"] <= 5
    assert copy["MessageAttributes"]["sendonce.postponements"]["StringValue"] == "0"  # not a refusal: no growth
    assert json.loads(log.getvalue())["outcome"] == "in_flight_elsewhere"


def test_a_paced_job_waits_its_turn_without_being_claimed(pipeline, jobs):
    consumer, log = consumer_for(pipeline, jobs, parallelism=1, max_send_rate=0.001)
    first, second = sqs_record(job("slow:1")), sqs_record(job("slow:2"))
    # Two seconds to spare beyond what a send needs.
    budget_ms = consumer.processor._settings.budget.record_budget_ms + 2_000
    assert consumer.handle(event(first, second), FakeContext(FakeClock(), budget_ms=budget_ms)) == {
        "batchItemFailures": []}
    [copy] = delayed_copies(consumer, jobs)
    # Its turn at 0.001 recipients a second is 1000 s away: it waits SQS's longest delay, then is paced anew.
    assert copy["MessageBody"] == second["body"] and copy["DelaySeconds"] == 900
    assert pipeline.ledger_item("slow:2") is None
    assert [json.loads(line)["outcome"] for line in log.getvalue().splitlines()] == ["sent", "paced"]


def test_paced_jobs_come_back_spread_at_the_rate_not_all_at_once(pipeline, jobs):
    """Jobs that found no send slot come back one rate-interval apart, after those paced before them: a wave of
    them all back at once would cost each a receive and a copy again."""
    consumer, _ = consumer_for(pipeline, jobs, parallelism=1, max_send_rate=0.1)
    [pace] = consumer.after_batch
    pace._sleep = lambda _seconds: None  # the invocation's hold for the next token, not waited here
    # The bucket's time stands still while the batch runs: on a loaded host a second or more can pass between the
    # first send and the turns told after it, and the test is of the turns' spacing, not of the host's speed.
    filled_at = pace.pace._filled_at
    pace.pace._monotonic = lambda: filled_at
    records = [sqs_record(job(f"spread:{n}")) for n in range(4)]
    # Two seconds to spare beyond what a send needs: the burst's token, then none until 10 s later.
    budget_ms = consumer.processor._settings.budget.record_budget_ms + 2_000
    assert consumer.handle(event(*records), FakeContext(FakeClock(), budget_ms=budget_ms)) == {
        "batchItemFailures": []}
    delays = [c["DelaySeconds"] for c in delayed_copies(consumer, jobs)]
    # The first turn is 10 s on, when the bucket has its next token; then one turn every 10 s, each told in whole
    # seconds rounded up.
    assert 10 <= delays[0] <= 11
    assert len(delays) == 3 and all(9 <= later - earlier <= 11 for earlier, later in itertools.pairwise(delays))
    assert pipeline.emails_per_key() == {"spread:0": 1}


def test_when_the_copy_cannot_be_sent_the_original_is_redelivered_instead(pipeline, ses_faults, jobs):
    ses_faults.script(Fault.THROTTLE)
    consumer, _ = consumer_for(pipeline, jobs + "-missing")
    record = sqs_record(job("receipt:t2:u1"))
    assert failed_ids(consumer.handle(event(record), FakeContext(FakeClock()))) == {record["messageId"]}


class FifoJobQueue:
    """A FIFO job queue with the pipeline's DLQ after five receives, one job in group ``ada``, and the pipeline's
    consumer for it. The test plays SQS's time: each visibility the consumer asks for is recorded in ``waits`` and
    the message made visible at once."""

    def __init__(self, fifo_pipeline, key: str, clock=None, visibility_timeout_s: int = 180, **settings) -> None:
        from sendonce_local.lambda_service.sqs_source import EventSourceSpec

        self.sqs = boto3.client("sqs")
        dlq_arn = self.sqs.get_queue_attributes(QueueUrl=fifo_pipeline.dead_letter_queue_url,
                                                AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self.url = self.sqs.create_queue(QueueName="jobs.fifo", Attributes={
            "FifoQueue": "true", "VisibilityTimeout": str(visibility_timeout_s),
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "5"})})["QueueUrl"]
        arn = self.sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self.source = EventSourceSpec(self.url, arn)
        self.sqs.send_message(QueueUrl=self.url, MessageBody=json.dumps(job(key)), MessageGroupId="ada",
                              MessageDeduplicationId="1")
        self.clock = clock or FakeClock()
        self.consumer = watch_sends(fifo_pipeline.consumer(clock=clock, queue_url=self.url, max_receive_count=5,
                                                           fifo=True, **settings))
        self.waits: list[int] = []

        def played(params, **_):  # SQS's wait, recorded and played at once (alone, or a batch's entries)
            for entry in params.get("Entries", [params]):
                self.waits.append(entry["VisibilityTimeout"])
                entry["VisibilityTimeout"] = 0

        for operation in ("ChangeMessageVisibility", "ChangeMessageVisibilityBatch"):
            self.consumer.redelivery._client.meta.events.register(f"provide-client-params.sqs.{operation}", played)

    def deliver(self) -> str:
        """The job's next receive handed to the consumer as Lambda's event source would; its outcome."""
        from sendonce_local.lambda_service.sqs_source import lambda_record

        messages = self.sqs.receive_message(QueueUrl=self.url, WaitTimeSeconds=5, MessageSystemAttributeNames=["All"],
                                            MessageAttributeNames=["All"]).get("Messages", [])
        assert len(messages) == 1, "the job left its queue"
        record = lambda_record(messages[0], self.source, "us-east-1")
        log = self.consumer.log._stream
        before = len(log.getvalue().splitlines())
        response = self.consumer.handle(event(record), FakeContext(self.clock))
        if not failed_ids(response):
            self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=record["receiptHandle"])
        [line] = [json.loads(text) for text in log.getvalue().splitlines()[before:] if '"outcome"' in text]
        return str(line["outcome"])


def test_on_a_fifo_queue_a_long_throttle_backs_off_and_never_dead_letters_the_job(fifo_pipeline, fifo_ses_faults):
    """SES throttles a FIFO job through more receives than its queue allows: each wait grows (2 s toward 15
    minutes, by its receives, as a standard queue's copies do), and once a wait by its visibility would leave it
    fewer receives than it keeps for failures, the job moves to the back of its message group instead (a fresh
    message), never into the DLQ; it is sent once when SES takes it."""
    throttles = 9
    queue = FifoJobQueue(fifo_pipeline, "receipt:fifo-long:u1")
    fifo_ses_faults.script(*[Fault.THROTTLE] * throttles)
    outcomes = [queue.deliver() for _ in range(throttles + 1)]
    assert outcomes == ["throttled"] * throttles + ["sent"]
    assert fifo_pipeline.emails_for("receipt:fifo-long:u1") == 1
    assert fifo_pipeline.dead_letters() == []
    # Each message waits by its visibility on its first receives (5 allowed, 3 kept for failures: 2), then its
    # third receive's wait moves it to the back of its group; its waits go on growing from there.
    waits = queue.waits
    assert len(waits) == 6 and all(later >= earlier / 2 for earlier, later in itertools.pairwise(waits))
    assert max(waits) >= 60
    requeued = delayed_copies(queue.consumer, queue.url)
    assert len(requeued) == 3
    assert all(copy["MessageGroupId"] == "ada" and "DelaySeconds" not in copy for copy in requeued)


def test_on_a_fifo_queue_a_send_that_may_have_gone_on_a_receive_kept_for_failures_waits_at_the_back_of_its_group(
        fifo_pipeline, fifo_ses_faults):
    """Throttles spent a FIFO job's first two receives, then SES answers its send with a 5xx on the third: the send
    may have gone, which is a wait for SES's word (its grace period), not a poison message; waiting by its
    visibility would leave it fewer receives than it keeps for a killed worker, so the job moves to the back of
    its group, and goes out once."""
    clock = FakeClock()
    queue = FifoJobQueue(fifo_pipeline, "receipt:fifo-ambiguous:u1", clock=clock,
                         **fifo_pipeline.evidence_settings(grace_ms=60_000))
    fifo_ses_faults.script(*[Fault.THROTTLE] * 2, Fault.SERVER_ERROR)
    assert [queue.deliver() for _ in range(3)] == ["throttled"] * 2 + ["ambiguous"]
    assert fifo_pipeline.dead_letters() == []
    [requeued] = delayed_copies(queue.consumer, queue.url)
    assert requeued["MessageGroupId"] == "ada"
    clock.advance(10 * 60_000)  # past the lease and the grace period, with no word from SES: sent again
    assert queue.deliver() == "sent"
    assert fifo_pipeline.emails_for("receipt:fifo-ambiguous:u1") == 1
    assert fifo_pipeline.dead_letters() == []


def test_on_a_fifo_queue_a_worker_killed_on_its_last_receives_after_waits_never_dead_letters_the_job(
        fifo_pipeline, fifo_ses_faults):
    """SES throttles a FIFO job on its first three receives, then four workers in a row are killed at their
    deadline: the third wait moved the job to a fresh message at its group's back (it keeps three receives for
    failures), so the kills spend the fresh message's receives, not the waited one's last two, and SQS moves
    nothing to the DLQ; the fifth worker sends it."""
    queue = FifoJobQueue(fifo_pipeline, "receipt:fifo-killed:u1", visibility_timeout_s=1)
    fifo_ses_faults.script(*[Fault.THROTTLE] * 3)
    assert [queue.deliver() for _ in range(3)] == ["throttled"] * 3
    for _ in range(4):  # a worker killed at its deadline: nothing acknowledged, back after its visibility
        [message] = queue.sqs.receive_message(QueueUrl=queue.url, WaitTimeSeconds=5)["Messages"]
        queue.sqs.change_message_visibility(QueueUrl=queue.url, ReceiptHandle=message["ReceiptHandle"],
                                            VisibilityTimeout=0)
    assert queue.deliver() == "sent"
    assert fifo_pipeline.emails_for("receipt:fifo-killed:u1") == 1
    assert fifo_pipeline.dead_letters() == []


def test_on_a_fifo_queue_takeovers_ses_throttled_do_not_count_toward_the_bound_on_sends_that_may_have_gone(
        fifo_pipeline, fifo_ses_faults):
    """SES answers a FIFO job's send with a 5xx, throttles the takeovers after each grace period four times, then
    answers 5xx three times more: five of its sends were refused for certain, so four may have gone, fewer than
    its queue's receives, and the job waits for SES's word (at the back of its group) instead of going to the DLQ
    (``max-receives``), and goes out once when SES takes it. (Found by the lifecycle test, seed 766921591.)"""
    clock = FakeClock()
    queue = FifoJobQueue(fifo_pipeline, "receipt:fifo-throttled-takeovers:u1", clock=clock, visibility_timeout_s=1,
                         **fifo_pipeline.evidence_settings(grace_ms=60_000))
    fifo_ses_faults.script(Fault.SERVER_ERROR, *[Fault.THROTTLE] * 4, *[Fault.SERVER_ERROR] * 3)
    outcomes = []
    for _ in range(9):
        outcomes.append(queue.deliver())
        clock.advance(10 * 60_000)  # past the lease and the grace period, with no word from SES: a takeover
    assert outcomes == ["ambiguous"] + ["throttled"] * 4 + ["ambiguous"] * 3 + ["sent"]
    assert fifo_pipeline.dead_letters() == []
    assert {copy["MessageGroupId"] for copy in delayed_copies(queue.consumer, queue.url)} == {"ada"}
    assert fifo_pipeline.emails_for("receipt:fifo-throttled-takeovers:u1") == 1


def test_on_a_fifo_queue_sends_that_may_have_gone_as_often_as_it_allows_receives_dead_letter_the_job(
        fifo_pipeline, fifo_ses_faults):
    """The bound of that wait: a job whose every send may have gone (SES answering 5xx, again after each grace
    period) is dead-lettered (``max-receives``) once they number its queue's receives, across the messages it
    moved to, never looped for ever."""
    clock = FakeClock()
    # A send that may have gone waits out the queue's visibility timeout: a second, here, with the clock moved on.
    queue = FifoJobQueue(fifo_pipeline, "receipt:fifo-lost-answers:u1", clock=clock, visibility_timeout_s=1,
                         **fifo_pipeline.evidence_settings(grace_ms=60_000))
    fifo_ses_faults.script(*[Fault.SERVER_ERROR] * 5)
    outcomes = []
    for _ in range(5):
        outcomes.append(queue.deliver())
        clock.advance(10 * 60_000)  # past the lease and the grace period: the next delivery sends again
    assert outcomes == ["ambiguous"] * 4 + ["receives_exhausted"]
    [dead] = fifo_pipeline.dead_letters()
    assert dead["MessageAttributes"][DeadLetter.REASON_CODE]["StringValue"] == "max-receives"
    assert "5 sends that may have gone" in dead["MessageAttributes"][DeadLetter.REASON]["StringValue"]
    assert len(delayed_copies(queue.consumer, queue.url)) == 1  # its third receive's wait, at its group's back


def test_a_fifo_lane_through_a_two_hour_stop_dead_letters_nothing_and_sends_the_job_once(fifo_pipeline,
                                                                                           fifo_ses_faults):
    """SES pauses the account for two hours: the parked FIFO job waits by its visibility (SQS's longest delay a wait)
    while that keeps it the receives it keeps for failures, then at its group's back as a fresh message, on and on,
    never moved to the DLQ by its receives; when SES sends again it goes once."""
    clock = FakeClock()
    queue = FifoJobQueue(fifo_pipeline, "receipt:fifo-long-stop:u1", clock=clock)
    fifo_ses_faults.script(*[Fault.SENDING_PAUSED] * 9)  # each 15-minute wait's delivery asks SES again
    outcomes = []
    for _ in range(9):
        outcomes.append(queue.deliver())
        clock.advance(15 * 60_000)  # its wait, played at once by the queue
    assert outcomes == ["ses_stopped"] * 9 and fifo_pipeline.dead_letters() == []
    assert queue.deliver() == "sent"  # two hours and a quarter on, SES sends again
    assert fifo_pipeline.emails_for("receipt:fifo-long-stop:u1") == 1 and fifo_pipeline.dead_letters() == []
    assert {copy["MessageGroupId"] for copy in delayed_copies(queue.consumer, queue.url)} == {"ada"}
