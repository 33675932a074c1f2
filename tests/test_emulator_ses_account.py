"""The emulator's SES plays SES's own stops, through a plain boto3 sesv2 client over HTTP: the account's sending
paused, a configuration set paused, a tenant disabled (by its customer-managed or its SES-managed status), and the
daily quota; moto's own reset
forgets them, also in an emulator running as its own process."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from serve_process import served

from sendonce_local.emulator.ses_account import ACCOUNT_CONTROL_PATH
from sendonce_local.emulator.ses_limits import SES_RATE
from sendonce_local.emulator.ses_tenants import REPUTATION_CONTROL_PATH

PAUSED = "The message can't be sent because the account's ability to send email is currently paused."
ONE_TRY = Config(retries={"total_max_attempts": 1})


def sesv2(**where: Any) -> Any:
    client = boto3.client("sesv2", config=ONE_TRY, **where)
    client.create_email_identity(EmailIdentity="example.com")
    return client


@pytest.fixture
def ses(aws):
    return sesv2()


def send(ses, recipients: int = 1, tenant: str | None = None) -> str:
    """'accepted', or SES's error code and HTTP status."""
    extra = {"TenantName": tenant} if tenant else {}
    try:
        ses.send_email(FromEmailAddress="receipts@example.com",
                       Destination={"ToAddresses": [f"ada{n}@example.org" for n in range(recipients)]},
                       Content={"Simple": {"Subject": {"Data": "s"}, "Body": {"Text": {"Data": "t"}}}}, **extra)
    except ClientError as error:
        return f"{error.response['Error']['Code']} {error.response['ResponseMetadata']['HTTPStatusCode']}"
    return "accepted"


def refusal(call: Any) -> tuple[str, int, str]:
    with pytest.raises(ClientError) as raised:
        call()
    response = raised.value.response
    return response["Error"]["Code"], response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Message"]


def control(endpoint: str, path: str, body: Any) -> tuple[int, str]:
    """POST to one of the emulator's controls: its status and its body's text."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(f"{endpoint}{path}", data=data, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def moto_reset(endpoint: str) -> None:
    with urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"), timeout=10):
        pass


def quota(ses) -> dict[str, float]:
    return dict(ses.get_account()["SendQuota"])


def test_get_account_answers_the_quota_the_rate_and_the_recipients_sent_in_the_last_day(aws, ses):
    account = ses.get_account()
    assert (account["SendingEnabled"], account["ProductionAccessEnabled"], account["EnforcementStatus"]) == (
        True, True, "HEALTHY")
    assert account["SendQuota"] == {"Max24HourSend": -1.0, "MaxSendRate": 14.0, "SentLast24Hours": 0.0}
    assert [send(ses), send(ses, recipients=3)] == ["accepted", "accepted"]
    assert quota(ses)["SentLast24Hours"] == 4.0  # SES's quotas count recipients
    SES_RATE.limit(5)
    try:
        assert quota(ses)["MaxSendRate"] == 5.0  # the rate the emulator applies, when it applies one
    finally:
        SES_RATE.limit(None)


def test_a_paused_account_refuses_every_send_and_accepts_none_until_sending_is_enabled_again(aws, ses):
    SES_RATE.limit(100)
    try:
        ses.put_account_sending_attributes(SendingEnabled=False)
        assert ses.get_account()["SendingEnabled"] is False
        assert refusal(lambda: send_or_raise(ses)) == ("SendingPausedException", 400, PAUSED)
        assert SES_RATE.accepted == 0  # refused before SES's sending rate counts it
    finally:
        SES_RATE.limit(None)
    assert aws.ses_sends() == [] and aws.sent_emails() == []
    assert quota(ses)["SentLast24Hours"] == 0.0
    ses.put_account_sending_attributes(SendingEnabled=True)
    assert send(ses) == "accepted"
    assert len(aws.ses_sends()) == 1


def test_a_paused_configuration_set_refuses_its_sends_only_until_it_sends_again(aws, ses):
    """SES's default for a set is sending; paused with PutConfigurationSetSendingOptions, SendEmail through it is
    refused as paused and GetConfigurationSet says so, while sends through another set go."""
    for name in ("receipts-events", "other-events"):
        ses.create_configuration_set(ConfigurationSetName=name)
    assert ses.get_configuration_set(ConfigurationSetName="receipts-events")["SendingOptions"] == {
        "SendingEnabled": True}
    ses.put_configuration_set_sending_options(ConfigurationSetName="receipts-events", SendingEnabled=False)
    assert ses.get_configuration_set(ConfigurationSetName="receipts-events")["SendingOptions"] == {
        "SendingEnabled": False}
    code, status, message = refusal(lambda: send_or_raise(ses, ConfigurationSetName="receipts-events"))
    assert (code, status) == ("SendingPausedException", 400) and "receipts-events" in message  # SESv2's one code
    send_or_raise(ses, ConfigurationSetName="other-events")
    send_or_raise(ses)  # no set: the account sends
    assert len(aws.ses_sends()) == 2
    ses.put_configuration_set_sending_options(ConfigurationSetName="receipts-events", SendingEnabled=True)
    send_or_raise(ses, ConfigurationSetName="receipts-events")
    assert len(aws.ses_sends()) == 3


def send_or_raise(ses, **extra: Any) -> None:
    ses.send_email(FromEmailAddress="receipts@example.com", Destination={"ToAddresses": ["ada@example.org"]},
                   Content={"Simple": {"Subject": {"Data": "s"}, "Body": {"Text": {"Data": "t"}}}}, **extra)


def test_the_daily_quota_refuses_with_limit_exceeded_once_reached(aws, ses):
    assert control(aws.endpoint, ACCOUNT_CONTROL_PATH, {"max24HourSend": 2}) == (200, '{"max24HourSend": 2.0}')
    assert [send(ses), send(ses)] == ["accepted", "accepted"]
    assert refusal(lambda: send_or_raise(ses)) == ("LimitExceededException", 400, "Daily message quota exceeded.")
    assert quota(ses) == {"Max24HourSend": 2.0, "MaxSendRate": 14.0, "SentLast24Hours": 2.0}
    assert len(aws.ses_sends()) == 2 and len(aws.sent_emails()) == 2  # the refused send is neither logged nor sent
    control(aws.endpoint, ACCOUNT_CONTROL_PATH, {"max24HourSend": 4})
    assert [send(ses, recipients=3), send(ses)] == ["LimitExceededException 400", "accepted"]  # 2 + 3 > 4


@pytest.mark.parametrize("body", [b"not json", b"[1]", {}, {"max24HourSend": 0}, {"max24HourSend": -5},
                                  {"max24HourSend": "10"}, {"max24HourSend": True}, {"max24HourSend": None}])
def test_a_bad_quota_control_body_is_refused_in_one_line(aws, ses, body):
    status, text = control(aws.endpoint, ACCOUNT_CONTROL_PATH, body)
    assert status == 400
    assert len(text.splitlines()) == 1 and set(json.loads(text)) == {"error"}
    assert quota(ses)["Max24HourSend"] == -1.0


def test_tenants_are_created_read_listed_and_deleted_as_ses_answers(aws, ses):
    created = ses.create_tenant(TenantName="acme", Tags=[{"Key": "plan", "Value": "gold"}])
    ses.create_tenant(TenantName="globex")
    assert re.fullmatch(r"arn:aws:ses:us-east-1:123456789012:tenant/acme/" + re.escape(created["TenantId"]),
                        created["TenantArn"])
    assert (created["SendingStatus"], created["Tags"]) == ("ENABLED", [{"Key": "plan", "Value": "gold"}])
    tenant = ses.get_tenant(TenantName="acme")["Tenant"]
    assert {k: tenant[k] for k in ("TenantName", "TenantId", "TenantArn", "CreatedTimestamp", "Tags")} == {
        k: created[k] for k in ("TenantName", "TenantId", "TenantArn", "CreatedTimestamp", "Tags")}
    listed = ses.list_tenants()["Tenants"]
    assert sorted(t["TenantName"] for t in listed) == ["acme", "globex"]
    assert all(set(t) == {"TenantName", "TenantId", "TenantArn", "CreatedTimestamp", "SendingStatus"} for t in listed)
    assert refusal(lambda: ses.get_tenant(TenantName="initech"))[:2] == ("NotFoundException", 404)
    assert refusal(lambda: ses.create_tenant(TenantName="acme"))[:2] == ("AlreadyExistsException", 400)
    ses.delete_tenant(TenantName="globex")
    assert [t["TenantName"] for t in ses.list_tenants()["Tenants"]] == ["acme"]
    assert refusal(lambda: ses.delete_tenant(TenantName="globex"))[:2] == ("NotFoundException", 404)


def test_a_tenants_reputation_entity_is_found_by_its_arn(aws, ses):
    arn = ses.create_tenant(TenantName="acme")["TenantArn"]
    entity = ses.get_reputation_entity(ReputationEntityType="RESOURCE", ReputationEntityReference=arn)
    entity = entity["ReputationEntity"]
    assert (entity["ReputationEntityReference"], entity["ReputationEntityType"]) == (arn, "RESOURCE")
    assert entity["ReputationManagementPolicy"] == "arn:aws:ses:us-east-1:aws:reputation-policy/standard"
    assert entity["CustomerManagedStatus"]["Status"] == entity["AwsSesManagedStatus"]["Status"] == "ENABLED"
    assert entity["SendingStatusAggregate"] == "ENABLED"
    listed = ses.list_reputation_entities()["ReputationEntities"]
    assert [e["ReputationEntityReference"] for e in listed] == [arn]
    assert refusal(lambda: ses.get_reputation_entity(ReputationEntityType="RESOURCE",
                                                     ReputationEntityReference=arn + "x"))[:2] == (
        "NotFoundException", 404)


def customer_status(ses, tenant: str, status: str) -> None:
    ses.update_reputation_entity_customer_managed_status(
        ReputationEntityType="RESOURCE", SendingStatus=status,
        ReputationEntityReference=ses.get_tenant(TenantName=tenant)["Tenant"]["TenantArn"])


def test_a_tenant_its_customer_disables_is_refused_while_other_sends_pass(aws, ses):
    ses.create_tenant(TenantName="acme")
    ses.create_tenant(TenantName="globex")
    customer_status(ses, "acme", "DISABLED")
    assert ses.get_tenant(TenantName="acme")["Tenant"]["SendingStatus"] == "DISABLED"
    assert ses.list_tenants(Filter={"SENDING_STATUS": "DISABLED"})["Tenants"][0]["TenantName"] == "acme"
    assert [send(ses, tenant="acme"), send(ses, tenant="globex"), send(ses), send(ses, tenant="unknown")] == [
        "SendingPausedException 400", "accepted", "accepted", "accepted"]
    # A tenant the emulator does not know is accepted, as before: stacks deployed to it make none.
    assert [s["tenantName"] for s in aws.ses_sends()] == ["globex", None, "unknown"]
    customer_status(ses, "acme", "REINSTATED")
    assert ses.get_tenant(TenantName="acme")["Tenant"]["SendingStatus"] == "REINSTATED"
    assert send(ses, tenant="acme") == "accepted"


def test_ses_managed_disabled_overrides_a_customer_reinstatement(aws, ses):
    arn = ses.create_tenant(TenantName="acme")["TenantArn"]
    customer_status(ses, "acme", "REINSTATED")
    assert control(aws.endpoint, REPUTATION_CONTROL_PATH,
                   {"tenantName": "acme", "status": "DISABLED", "cause": "complaint rate 0.6%"}) == (
        200, '{"tenantName": "acme", "sendingStatus": "DISABLED"}')
    entity = ses.get_reputation_entity(ReputationEntityType="RESOURCE", ReputationEntityReference=arn)
    entity = entity["ReputationEntity"]
    assert entity["CustomerManagedStatus"]["Status"] == "REINSTATED"
    assert (entity["AwsSesManagedStatus"]["Status"], entity["AwsSesManagedStatus"]["Cause"]) == (
        "DISABLED", "complaint rate 0.6%")
    assert entity["SendingStatusAggregate"] == ses.get_tenant(TenantName="acme")["Tenant"]["SendingStatus"] == (
        "DISABLED")
    assert send(ses, tenant="acme") == "SendingPausedException 400"
    control(aws.endpoint, REPUTATION_CONTROL_PATH, {"tenantName": "acme", "status": "ENABLED"})
    assert ses.get_tenant(TenantName="acme")["Tenant"]["SendingStatus"] == "REINSTATED"
    assert send(ses, tenant="acme") == "accepted"


@pytest.mark.parametrize(("body", "status"), [
    ({"tenantName": "initech", "status": "DISABLED"}, 404),
    ({"tenantName": "acme", "status": "REINSTATED"}, 400),
    ({"status": "DISABLED"}, 400),
    ({"tenantName": "acme", "status": "DISABLED", "cause": 7}, 400),
    (b"{", 400),
])
def test_a_bad_reputation_control_body_is_refused_in_one_line(aws, ses, body, status):
    ses.create_tenant(TenantName="acme")
    answer_status, text = control(aws.endpoint, REPUTATION_CONTROL_PATH, body)
    assert answer_status == status
    assert len(text.splitlines()) == 1 and set(json.loads(text)) == {"error"}
    assert ses.get_tenant(TenantName="acme")["Tenant"]["SendingStatus"] == "ENABLED"


def test_motos_own_reset_forgets_the_pause_the_quota_the_count_and_the_tenants(aws, ses):
    assert send(ses) == "accepted"
    ses.create_tenant(TenantName="acme")
    control(aws.endpoint, ACCOUNT_CONTROL_PATH, {"max24HourSend": 1})
    ses.put_account_sending_attributes(SendingEnabled=False)
    moto_reset(aws.endpoint)
    ses = sesv2()  # the reset forgot the identity too
    assert ses.get_account()["SendingEnabled"] is True
    assert quota(ses) == {"Max24HourSend": -1.0, "MaxSendRate": 14.0, "SentLast24Hours": 0.0}
    assert ses.list_tenants()["Tenants"] == []
    assert send(ses) == "accepted"


@pytest.fixture
def emulator_process(tmp_path: Path) -> Iterator[dict[str, str]]:
    """`sendonce-local serve` in its own process, as a user starts it: the exports it prints."""
    with served(tmp_path / "stderr.txt") as (_, exports):
        yield exports


def test_an_emulator_in_its_own_process_pauses_resumes_and_resets_over_http(emulator_process):
    endpoint = emulator_process["AWS_ENDPOINT_URL"]
    where = {"endpoint_url": endpoint, "region_name": emulator_process["AWS_REGION"],
             "aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
    ses = sesv2(**where)
    ses.put_account_sending_attributes(SendingEnabled=False)
    assert send(ses) == "SendingPausedException 400"
    ses.put_account_sending_attributes(SendingEnabled=True)
    assert send(ses) == "accepted"
    assert quota(ses)["SentLast24Hours"] == 1.0
    ses.put_account_sending_attributes(SendingEnabled=False)
    moto_reset(endpoint)
    ses = sesv2(**where)
    assert (ses.get_account()["SendingEnabled"], quota(ses)["SentLast24Hours"]) == (True, 0.0)
    assert send(ses) == "accepted"
