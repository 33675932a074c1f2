"""Every prop that would break a guarantee fails synth, with a message naming the prop, the rule and the fix."""

from __future__ import annotations

import re

import aws_cdk as cdk
import pytest
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Annotations, Match
from construct_support import build, make_stack

from sendonce_constructs import SendOnceConfigurationError, SendOnceEmailQueue
from sendonce_constructs.email_queue import LOW_MAX_RECEIVE_COUNT_WARNING

S = cdk.Duration.seconds

CASES = {
    "visibility_timeout below 6x": (
        {"visibility_timeout": S(60)},
        "visibility_timeout (60 s) must be at least 6 x function_timeout (30 s) + max_batching_window (0 s) "
        "= 180 s, or a message still being sent becomes visible to a second consumer; raise visibility_timeout, "
        "or lower function_timeout or max_batching_window",
    ),
    "visibility_timeout counts the batching window": (
        {"visibility_timeout": S(180), "max_batching_window": S(5)},
        "visibility_timeout (180 s) must be at least 6 x function_timeout (30 s) + max_batching_window (5 s) = 185 s",
    ),
    "visibility_timeout above 12 hours": (
        {"function_timeout": S(900), "visibility_timeout": cdk.Duration.hours(13)},
        "visibility_timeout (46800 s) exceeds SQS's maximum of 43200 s",
    ),
    "function_timeout above Lambda's limit": (
        {"function_timeout": S(901)},
        "function_timeout (901 s) must be between 1 s and 900 s, Lambda's limit",
    ),
    "batch_size zero": ({"batch_size": 0}, "batch_size (0) must be between 1 and 10000 for a standard queue"),
    "batch_size above 10 on FIFO": (
        {"batch_size": 11, "fifo": True},
        "batch_size (11) must be between 1 and 10 for a FIFO queue",
    ),
    "batch_size above 10 needs a window": (
        {"batch_size": 100},
        "batch_size (100) above 10 needs a max_batching_window of at least 1 s",
    ),
    "batching window on FIFO": (
        {"fifo": True, "max_batching_window": S(5)},
        "max_batching_window (5 s) is not supported with fifo=True",
    ),
    "batching window above 300 s": (
        {"max_batching_window": S(301), "visibility_timeout": cdk.Duration.hours(1)},
        "max_batching_window (301 s) must be between 0 s and 300 s",
    ),
    "max_concurrency below 2": ({"max_concurrency": 1}, "max_concurrency (1) must be between 2 and 1000"),
    "max_concurrency above 1000": ({"max_concurrency": 1001}, "max_concurrency (1001) must be between 2 and 1000"),
    "max_receive_count below 1": (
        {"max_receive_count": 0},
        "max_receive_count (0) must be at least 1: it is how many deliveries a message gets before it moves to the "
        "dead-letter queue; use 5 or more",
    ),
    "retention below SQS's minimum": ({"retention_period": S(30)}, "retention_period (30 s) must be between 60 s"),
    "dedupe_ttl shorter than retention": (
        {"dedupe_ttl": cdk.Duration.days(2), "retention_period": cdk.Duration.days(4)},
        "dedupe_ttl (172800 s) must be at least the queue's retention_period (345600 s): a key forgotten while its "
        "message can still be delivered is sent twice; raise dedupe_ttl or lower retention_period",
    ),
    "dedupe_ttl too short for the outbox": (
        {"outbox": True, "dedupe_ttl": cdk.Duration.days(7)},
        "dedupe_ttl (604800 s) must be at least stream retention (86400 s) + retention_period (345600 s) + the DLQ's "
        "14 days = 1641600 s with outbox=True",
    ),
    "memory_size too small": ({"memory_size": 64}, "memory_size (64 MB) must be between 128 and 10240 MB"),
    "parallelism above batch_size": (
        {"parallelism": 8, "batch_size": 4},
        "parallelism (8) must not exceed batch_size (4)",
    ),
    "max_send_rate zero": ({"max_send_rate": 0}, "max_send_rate (0) must be above 0 recipients per second"),
    "parallelism zero": ({"parallelism": 0}, "parallelism (0) must be a whole number of at least 1"),
    "sender with a display name": (
        {"sender": "Shop <receipts@example.com>"},
        "sender ('Shop <receipts@example.com>') must be an SES identity",
    ),
    "from address outside the domain": (
        {"sender": "example.com", "from_addresses": ["receipts@other.example"]},
        "from_addresses entry 'receipts@other.example' is not in the sender domain 'example.com'",
    ),
    "from address other than the address identity": (
        {"sender": "receipts@example.com", "from_addresses": ["billing@example.com"]},
        "from_addresses entry 'billing@example.com' is not the sender identity 'receipts@example.com'",
    ),
    "from addresses empty": ({"from_addresses": []}, "from_addresses must not be empty when given"),
    "from address with a display name": (
        {"from_addresses": ["Shop <receipts@example.com>"]},
        "from_addresses entry 'Shop <receipts@example.com>' must be a bare address",
    ),
    "unencrypted queues": (
        {"encryption": sqs.QueueEncryption.UNENCRYPTED},
        "encryption (UNENCRYPTED) is not allowed",
    ),
}


@pytest.mark.parametrize(("props", "message"), list(CASES.values()), ids=list(CASES))
def test_prop_breaking_a_guarantee_fails_synth_with_the_fix(props, message):
    with pytest.raises(SendOnceConfigurationError, match=re.escape(message)):
        build(**props)


def test_existing_table_with_table_overrides_is_an_error():
    stack = make_stack()
    table = dynamodb.Table.from_table_name(stack, "Mine", "mine")
    with pytest.raises(SendOnceConfigurationError, match=re.escape(
        "existing_table and removal_policy, deletion_protection were both given"
    )):
        build(stack, existing_table=table, removal_policy=cdk.RemovalPolicy.DESTROY, deletion_protection=True)


@pytest.mark.parametrize(("keys", "message"), [
    ({"partition_key": dynamodb.Attribute(name="id", type=dynamodb.AttributeType.STRING)},
     "existing_table has partition key 'id' (STRING): the dedupe ledger reads and writes items keyed by "
     "'dedupeKey' (STRING) alone"),
    ({"partition_key": dynamodb.Attribute(name="dedupeKey", type=dynamodb.AttributeType.NUMBER)},
     "existing_table has partition key 'dedupeKey' (NUMBER)"),
    ({"partition_key": dynamodb.Attribute(name="dedupeKey", type=dynamodb.AttributeType.STRING),
      "sort_key": dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.STRING)},
     "existing_table has partition key 'dedupeKey' (STRING) and sort key 'sk'"),
], ids=["wrong name", "wrong type", "sort key"])
def test_an_existing_table_with_other_keys_fails_synth_with_the_fix(keys, message):
    stack = make_stack()
    table = dynamodb.Table(stack, "Mine", **keys)
    with pytest.raises(SendOnceConfigurationError) as error:
        build(stack, existing_table=table)
    assert message in str(error.value)
    assert "partition_key=dynamodb.Attribute(name='dedupeKey', type=dynamodb.AttributeType.STRING)" in str(error.value)


def test_an_existing_table_with_the_right_keys_is_accepted():
    stack = make_stack()
    table = dynamodb.Table(stack, "Mine", partition_key=dynamodb.Attribute(
        name="dedupeKey", type=dynamodb.AttributeType.STRING))
    pipeline, _ = build(stack, existing_table=table)
    assert pipeline.table is table


def test_encryption_key_with_sqs_managed_encryption_is_an_error():
    stack = make_stack()
    expected = "encryption_key was given with encryption (SQS_MANAGED)"
    with pytest.raises(SendOnceConfigurationError, match=re.escape(expected)):
        build(stack, encryption_key=kms.Key(stack, "Key"), encryption=sqs.QueueEncryption.SQS_MANAGED)


def test_max_receive_count_below_five_warns_with_an_acknowledgeable_id():
    stack = make_stack()
    build(stack, max_receive_count=3)
    ack = re.escape(f"[ack: Annotation::{LOW_MAX_RECEIVE_COUNT_WARNING}]")
    Annotations.from_stack(stack).has_warning(
        "/Test/Receipts", Match.string_like_regexp(r"max_receive_count \(3\) is below 5.*" + ack)
    )


def test_the_low_max_receive_count_warning_can_be_acknowledged():
    stack = make_stack()
    pipeline = SendOnceEmailQueue(stack, "Receipts", sender="example.com", max_receive_count=3)
    cdk.Validations.of(pipeline).acknowledge(
        cdk.Acknowledgment(id=f"Annotation::{LOW_MAX_RECEIVE_COUNT_WARNING}", reason="jobs are cheap to lose here")
    )
    assert Annotations.from_stack(stack).find_warning("*", Match.any_value()) == []


def test_five_or_more_deliveries_do_not_warn():
    stack = make_stack()
    build(stack)
    assert Annotations.from_stack(stack).find_warning("*", Match.any_value()) == []


def test_unresolved_tokens_skip_the_rules_they_cannot_check():
    stack = make_stack()
    timeout = cdk.CfnParameter(stack, "Visibility", type="Number").value_as_number
    # A visibility timeout known only at deploy time cannot be checked here, so it is not refused.
    build(stack, visibility_timeout=cdk.Duration.seconds(timeout), max_concurrency=cdk.Token.as_number(timeout))


@pytest.mark.parametrize(("props", "message"), [
    ({"send_rate": 14}, "send_rate (14/s) needs max_concurrency: each consumer instance paces itself at send_rate "
                        "/ max_concurrency"),
    ({"send_rate": 14, "max_concurrency": 5, "max_send_rate": 2.0},
     "send_rate (14/s) and max_send_rate were both given"),
    ({"send_rate": 0, "max_concurrency": 5}, "send_rate (0) must be above 0 recipients per second"),
    ({"send_rate": 5000, "max_concurrency": 2}, "is 2500 emails/s per instance, more than one instance sends"),
], ids=["no max_concurrency", "with max_send_rate", "zero", "too fast per instance"])
def test_a_send_rate_that_cannot_hold_fails_synth_with_the_fix(props, message):
    with pytest.raises(SendOnceConfigurationError, match=re.escape(message)):
        build(**props)


def test_send_rate_paces_each_instance_at_its_share():
    from construct_support import only

    _, template = build(send_rate=14, max_concurrency=5)
    env = only(template, "AWS::Lambda::Function")["Properties"]["Environment"]["Variables"]
    assert env["SENDONCE_MAX_SEND_RATE"] == "2.8"
