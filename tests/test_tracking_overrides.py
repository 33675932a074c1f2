"""A job's own open and click tracking (contract version 5): SES receives it as the send's ConfigurationOverrides;
a consumer whose AWS SDK predates them refuses the job with the reason before its claim; bad values are refused by
the producer and by the consumer."""

from __future__ import annotations

import copy
import io
import json

import boto3
import botocore.session
import pytest
from botocore.config import Config
from consumer_harness import EMULATOR_READ_TIMEOUT_S, FakeClock, FakeContext, event, job, sqs_record

from sendonce_contract.message import VERSION_FIELD, InvalidMessage, Tracking, parse_job
from sendonce_contract.schema import TRACKING_FIELD
from sendonce_producer import EmailJob, InvalidJob
from sendonce_runtime.aws_clients import ledger_config, ses_config
from sendonce_runtime.handler import Consumer
from sendonce_runtime.outcome_log import OutcomeLog


def handle(consumer: Consumer, body: dict) -> dict:
    log = io.StringIO()
    consumer.log = OutcomeLog(log)
    consumer.handle(event(sqs_record(body)), FakeContext(FakeClock()))
    return json.loads(log.getvalue().splitlines()[-1])


def reset_link(key: str, **tracking: bool) -> dict:
    return {**job(key), "html": '<a href="https://shop.example/reset/77">Reset</a>', TRACKING_FIELD: tracking,
            VERSION_FIELD: 5}


def test_ses_receives_a_jobs_own_tracking_as_its_configuration_overrides(pipeline, aws):
    assert handle(pipeline.consumer(), reset_link("reset:t1:u1", clicks=False))["outcome"] == "sent"
    assert handle(pipeline.consumer(), reset_link("reset:t2:u1", opens=True, clicks=False))["outcome"] == "sent"
    assert handle(pipeline.consumer(), job("receipt:t3:u1"))["outcome"] == "sent"
    assert [send["tracking"] for send in aws.ses_sends()] == [
        {"ClickTrackingEnabled": "DISABLED"},
        {"ClickTrackingEnabled": "DISABLED", "OpenTrackingEnabled": "ENABLED"},
        {},  # no job tracking: the configuration set's own
    ]


def sdk_before_tracking_overrides(tmp_path) -> botocore.session.Session:
    """A botocore whose SESv2 model is today's without SendEmail's ConfigurationOverrides: the SDK of a Lambda
    runtime released before SES added them (August 2026)."""
    session = botocore.session.Session()
    loader = session.get_component("data_loader")
    version = loader.determine_latest_version("sesv2", "service-2")
    model = copy.deepcopy(loader.load_service_model("sesv2", "service-2", version))
    del model["shapes"]["SendEmailRequest"]["members"]["ConfigurationOverrides"]
    older = tmp_path / "sesv2" / version
    older.mkdir(parents=True)
    (older / "service-2.json").write_text(json.dumps(model))
    fresh = botocore.session.Session()
    fresh.get_component("data_loader").search_paths.insert(0, str(tmp_path))
    return fresh


def test_a_consumer_whose_sdk_predates_tracking_overrides_refuses_the_job_with_the_reason_before_its_claim(
        pipeline, aws, tmp_path):
    settings = pipeline.settings()
    emulator = Config(read_timeout=EMULATOR_READ_TIMEOUT_S)
    older = boto3.Session(botocore_session=sdk_before_tracking_overrides(tmp_path))
    consumer = Consumer.from_clients(
        settings, boto3.client("dynamodb", config=ledger_config(settings).merge(emulator)),
        older.client("sesv2", config=ses_config(settings), endpoint_url=pipeline.ses_endpoint),
        boto3.client("sqs", config=emulator), FakeClock(), OutcomeLog(io.StringIO()))

    line = handle(consumer, reset_link("reset:t4:u1", clicks=False))
    assert line["outcome"] == "invalid_message"
    assert "needs SendEmail's ConfigurationOverrides" in line["reason"] and "redrive it once" in line["reason"]
    [dead] = pipeline.dead_letters()
    assert dead["MessageAttributes"]["sendonce.reasonCode"]["StringValue"] == "invalid-message"
    assert pipeline.ledger_item("reset:t4:u1") is None  # refused before its claim: a redrive later sends it
    # The same consumer sends a job without tracking as before.
    assert handle(consumer, job("receipt:t5:u1"))["outcome"] == "sent"
    assert [send["subject"] for send in aws.ses_sends()] == ["Receipt receipt:t5:u1"]


def test_the_producer_writes_tracking_with_the_contract_version_that_brought_it():
    document = EmailJob(dedupe_key="reset:t6:u1", sender="shop@example.com", to=["ada@example.org"],
                        subject="Reset", html="<a href='https://shop.example/r'>Reset</a>",
                        click_tracking=False).to_document()
    assert document[TRACKING_FIELD] == {"clicks": False} and document[VERSION_FIELD] == 5
    plain = EmailJob(dedupe_key="receipt:t7:u1", sender="shop@example.com", to=["ada@example.org"],
                     subject="Receipt", text="Thanks").to_document()
    assert TRACKING_FIELD not in plain and VERSION_FIELD not in plain
    parsed = parse_job(json.dumps(document), "m1")
    assert parsed.tracking == Tracking(opens=None, clicks=False)


@pytest.mark.parametrize("tracking", [
    {}, {"clicks": "off"}, {"links": False}, ["clicks"], {"opens": None},
], ids=["empty", "a string", "an unknown setting", "a list", "a null"])
def test_tracking_that_is_not_opens_or_clicks_true_or_false_is_refused_with_the_reason(tracking):
    body = json.dumps({**job("reset:t8:u1"), TRACKING_FIELD: tracking, VERSION_FIELD: 5})
    with pytest.raises(InvalidMessage, match="tracking must be an object with opens, clicks or both, each true or "
                                             "false"):
        parse_job(body, "m1")


def test_the_producer_refuses_a_tracking_setting_that_is_not_a_bool():
    with pytest.raises(InvalidJob, match="tracking must be an object with opens, clicks or both"):
        EmailJob(dedupe_key="reset:t9:u1", sender="shop@example.com", to=["ada@example.org"], subject="Reset",
                 text="Reset", click_tracking="no")  # type: ignore[arg-type]
