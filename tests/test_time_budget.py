"""No ledger or DLQ call outlives the deadline guard, at every function timeout the construct allows."""

from __future__ import annotations

import io
import json
import threading
import time

import boto3
from consumer_harness import event, failed_ids, job, sqs_record
from hypothesis import given
from hypothesis import strategies as st

from sendonce_contract.deploy_config import Env, TimeBudget
from sendonce_local.emulator.proxy import ForwardingProxy, ProxiedRequest, Reply
from sendonce_runtime.aws_clients import ledger_config, ses_config
from sendonce_runtime.clock import SystemClock
from sendonce_runtime.handler import Consumer
from sendonce_runtime.outcome_log import OutcomeLog
from sendonce_runtime.settings import LEDGER_CALLS_PER_RECORD, Settings


def settings_for(function_timeout_s: float, **base: str) -> Settings:
    """The settings the construct gives a consumer with this function timeout."""
    config = Settings(table_name="dedupe", dead_letter_queue_url="http://localhost/q",
                      time_budget=TimeBudget.for_function_timeout(function_timeout_s))
    return Settings.from_env({**config.to_env(), **base})


@given(st.integers(min_value=1, max_value=900))
def test_every_call_a_record_makes_fits_the_record_budget_and_the_invocation(function_timeout_s):
    settings = settings_for(function_timeout_s)
    ledger, ses = ledger_config(settings), ses_config(settings)
    ledger_call_s = ledger.connect_timeout + ledger.read_timeout
    worst_record_s = ses.connect_timeout + ses.read_timeout + LEDGER_CALLS_PER_RECORD * ledger_call_s
    assert ledger.retries["total_max_attempts"] == 1 and ses.retries["total_max_attempts"] == 1
    assert worst_record_s <= settings.budget.record_budget_ms / 1000 + 1e-9
    assert settings.budget.record_budget_ms / 1000 < function_timeout_s


class RealTimeContext:
    """A Lambda context on the wall clock: the timeouts under test are real socket timeouts."""

    def __init__(self, budget_ms: int) -> None:
        self.deadline = time.monotonic() + budget_ms / 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.monotonic()) * 1000))


def test_a_hanging_ledger_at_the_smallest_timeout_fails_the_record_before_the_deadline(pipeline):
    released = threading.Event()

    def hang_dynamodb(request: ProxiedRequest, forward) -> Reply | None:
        if request.service == "dynamodb":
            released.wait(10)  # the test releases it; the client must have given up long before
            return None
        return forward()

    proxy = ForwardingProxy(pipeline.aws.endpoint, hang_dynamodb).start()
    settings = settings_for(1, **{Env.TABLE_NAME: pipeline.table_name, Env.DLQ_URL: pipeline.dead_letter_queue_url})
    log = io.StringIO()
    consumer = Consumer.from_clients(
        settings,
        boto3.client("dynamodb", config=ledger_config(settings), endpoint_url=proxy.endpoint),
        boto3.client("sesv2", config=ses_config(settings)),
        boto3.client("sqs", config=ledger_config(settings)),
        SystemClock(),
        OutcomeLog(log),
    )
    record = sqs_record(job("receipt:budget:u1"))
    context = RealTimeContext(budget_ms=1000)
    try:
        response = consumer.handle(event(record), context)
        left_ms = context.get_remaining_time_in_millis()
    finally:
        released.set()
        proxy.stop()

    assert left_ms > 0, "the record outlived the invocation"
    assert failed_ids(response) == {record["messageId"]}
    assert json.loads(log.getvalue())["outcome"] == "ledger_unavailable"
    assert pipeline.emails_for("receipt:budget:u1") == 0
