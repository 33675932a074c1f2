"""Fuzzed bodies never raise out of the handler; every invalid one ends in the DLQ with a reason."""

from __future__ import annotations

import io
import json

from consumer_harness import FakeClock, FakeContext, event, sqs_record
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sendonce_contract.message import FIELDS
from sendonce_runtime.outcome_log import OutcomeLog

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=10,
)
near_valid = st.fixed_dictionaries(
    {},
    optional={name: json_values | st.just("ada@example.org") for name in sorted(FIELDS)}
    | {"surprise": json_values},
).map(json.dumps)
bodies = st.text(min_size=1, max_size=200) | json_values.map(json.dumps) | near_valid


def test_fuzzed_bodies_are_dead_lettered_with_a_reason_and_never_raise(pipeline):
    log = io.StringIO()
    consumer = pipeline.consumer()
    consumer.log = OutcomeLog(log)
    dead_lettered: set[str] = set()

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(body=bodies)
    def check(body):
        record = sqs_record(body)
        response = consumer.handle(event(record), FakeContext(FakeClock()))
        outcome = json.loads(log.getvalue().splitlines()[-1])
        if outcome["outcome"] == "contract_too_new":
            # A newer producer's job waits for this consumer's upgrade (the README's ContractTooNew): not
            # dead-lettered, however malformed the rest of it is.
            assert response == {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
            assert outcome["reason"]
            return
        assert response == {"batchItemFailures": []}
        assert outcome["outcome"] in ("invalid_message", "sent", "refused")
        if outcome["outcome"] != "sent":
            assert outcome["reason"]
            dead_lettered.add(record["messageId"])

    check()
    dead = pipeline.dead_letters()
    assert {m["MessageAttributes"]["sendonce.sourceMessageId"]["StringValue"] for m in dead} == dead_lettered
    assert all(m["MessageAttributes"]["sendonce.reason"]["StringValue"] for m in dead)
