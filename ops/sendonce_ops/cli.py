"""`sendonce`: look after a deployed pipeline. Uses the normal AWS credential chain and honours AWS_ENDPOINT_URL."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
)

from sendonce_contract.cancellation import CANCEL_LASTS, refused, tombstone_request, written
from sendonce_contract.priority import Priority
from sendonce_contract.schema import ReasonCode, Status

from .dead_letters import DeadLetters
from .key_lookup import ledger_key
from .latency import LatencyProbe, describe
from .ledger_view import LedgerView, StateChanged
from .locate import LocateError, Pipeline, locate
from .tenants import lane_stops, tenant_statuses
from .usage import OneLineParser


def _pipeline_options(parser: argparse.ArgumentParser, defaults: bool = True) -> argparse.ArgumentParser:
    """Which pipeline, and ``--json``: the top level's, with their defaults, and every command's too, without
    (``argparse.SUPPRESS``), so ``sendonce status KEY --stack Shop --json`` reads as ``sendonce --stack Shop --json
    status KEY`` and a command's absent option never overwrites one given before it."""
    given: dict[str, Any] = {} if defaults else {"default": argparse.SUPPRESS}
    where = parser.add_argument_group("which pipeline (a stack, or explicit names)")
    where.add_argument("--stack", help="a deployed stack with a SendOnceEmailQueue", **given)
    where.add_argument("--pipeline", help="the construct's id, when the stack has several", **given)
    where.add_argument("--table", help="the dedupe table name", **given)
    where.add_argument("--queue", help="the job queue URL", **given)
    where.add_argument("--dlq", help="the dead-letter queue URL", **given)
    where.add_argument("--dedupe-ttl", type=int, metavar="SECONDS", help="the pipeline's dedupe_ttl (read from "
                       "--stack), for `dlq redrive`", **given)
    where.add_argument("--key-secret", metavar="ARN", help="with key_privacy: the secret that digests keys (read "
                       "from --stack)", **given)
    parser.add_argument("--json", action="store_true", help="machine-readable output", **given)
    return parser


KEY_HELP = "the job's dedupe key, as the producer gave it (sendonce digests it when the pipeline has key_privacy)"


def _parser() -> argparse.ArgumentParser:
    parser = _pipeline_options(OneLineParser(prog="sendonce", description=__doc__))
    commands = parser.add_subparsers(dest="command", required=True)
    status = _pipeline_options(commands.add_parser("status", help="one key's record"), defaults=False)
    status.add_argument("key", help=KEY_HELP)
    _pipeline_options(commands.add_parser("info", help="the pipeline's queues, tables, attachments bucket and key "
                                          "secret: what a producer needs"), defaults=False)
    _pipeline_options(commands.add_parser("unknown", help="what SES's events did not settle: UNKNOWN records and "
                                          "IN_FLIGHT records whose lease expired, newest first"), defaults=False)
    _pipeline_options(commands.add_parser("doubles", help="keys SES's events show were sent twice, with both SES "
                                          "message ids"), defaults=False)
    cancel = _pipeline_options(commands.add_parser("cancel", help="take back a key's email before any worker claims "
                                                   "it"), defaults=False)
    cancel.add_argument("key", help=KEY_HELP)
    # Deprecated: a cancel outlives every copy of its job whatever the pipeline's dedupe_ttl; still taken, and said so.
    cancel.add_argument("--dedupe-ttl-days", type=float, default=None, help=argparse.SUPPRESS)
    resolve = _pipeline_options(commands.add_parser("resolve", help="decide an UNKNOWN (or dead IN_FLIGHT) record"),
                                defaults=False)
    decision = resolve.add_mutually_exclusive_group(required=True)
    decision.add_argument("--sent", action="store_true", help="you confirmed it was delivered: record it SENT")
    decision.add_argument("--resend", action="store_true", help="SES never sent it: release it, then enqueue the job "
                          "again (it was acknowledged when marked UNKNOWN), and that delivery sends it")
    resolve.add_argument("key", help=KEY_HELP)
    dlq_command = commands.add_parser("dlq", help="the dead-letter queue")
    dlq_command.add_argument("--lane", choices=[p.value for p in Priority], default=Priority.BULK.value,
                             help="with urgent_lane: whose DLQ, the job queue's (bulk, the default) or the urgent "
                             "lane's; a redriven job goes back to the queue of its own priority")
    dlq = dlq_command.add_subparsers(dest="dlq_command", metavar="{list,redrive}", required=True)
    _pipeline_options(dlq.add_parser("list", help="messages grouped by reason, with counts and a sample"),
                      defaults=False)
    redrive = _pipeline_options(dlq.add_parser("redrive", help="send messages back to the job queue"), defaults=False)
    redrive.add_argument("--reason", help="only messages with this reason code (see `dlq list`)")
    redrive.add_argument("--key", help="only the dead letters of this dedupe key (`sendonce status KEY` lists them)")
    redrive.add_argument("--limit", type=int, help="at most this many")
    redrive.add_argument("--force", action="store_true", help="also redrive jobs dead-lettered longer ago than "
                         "dedupe_ttl, whose key may be forgotten (each may be sent again)")
    _pipeline_options(commands.add_parser(
        "tenants", help="each SES tenant's sending status as SES reports it (aggregate, customer-managed, "
        "SES-managed with its cause), its reputation policy and suppression list, and the stops the pipeline's "
        "lanes learned (with a table)"), defaults=False)
    latency = _pipeline_options(commands.add_parser(
        "latency", help="measure SES's event latency in this account: send probe emails to SES's mailbox simulator "
        "through the pipeline, report p50/p99 from send to event"), defaults=False)
    latency.add_argument("--from", dest="sender", required=True,
                         help="the probes' From address, one the pipeline may send from")
    latency.add_argument("--count", type=_positive, default=20, help="probe emails to send (default 20)")
    latency.add_argument("--timeout", type=_positive, default=600, help="seconds to wait for events (default 600)")
    return parser


def _positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive whole number")
    return int(value)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _main(args)
    except BrokenPipeError:  # the reader went away (`| head`): what it read is all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0


def _main(args: argparse.Namespace) -> int:
    try:
        pipeline = locate(boto3.client("cloudformation"), args.stack, args.pipeline, args.table, args.queue, args.dlq)
        pipeline = replace(pipeline, dedupe_ttl_s=args.dedupe_ttl or pipeline.dedupe_ttl_s,
                           key_secret=args.key_secret or pipeline.key_secret)
        if getattr(args, "key", None) is not None:  # with key_privacy the record's key is the digest; people read
            # what they typed
            args.key, args.shown_key = ledger_key(pipeline, args.key), args.key
            if args.key != args.shown_key:
                args.shown_key += f" ({args.key})"
        return _run(args, pipeline)
    except (LocateError, StateChanged, ValueError) as error:
        _error(str(error))
        return 2
    except NoRegionError:
        _error("no AWS region: set AWS_DEFAULT_REGION (the SDK reads that one), or use a profile that has one")
        return 2
    except NoCredentialsError:
        # An emulator's endpoint (AWS_ENDPOINT_URL) still needs credentials, of any value: say both.
        _error("no AWS credentials found: configure a profile, or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
               "(any values for a local emulator at AWS_ENDPOINT_URL)")
        return 2
    except EndpointConnectionError as error:
        _error(f"cannot reach {error.kwargs.get('endpoint_url', 'AWS')}: check the network, the region, or "
               "AWS_ENDPOINT_URL (a local emulator must be running)")
        return 2
    except ClientError as error:
        details = error.response.get("Error", {})
        operation = getattr(error, "operation_name", "a call")
        if details.get("Code") in ("AccessDenied", "AccessDeniedException", "UnauthorizedOperation"):
            _error(f"permission denied for {operation}: {details.get('Message', '')}")
        else:
            _error(f"{operation} failed: {details.get('Code')}: {details.get('Message', '')}")
        return 2
    except BotoCoreError as error:
        _error(str(error))
        return 2


def _run(args: argparse.Namespace, pipeline: Pipeline) -> int:
    if args.command == "info":
        if not (args.stack or args.table or args.queue or args.dlq):  # a table of dashes says nothing
            raise LocateError("info needs a pipeline: --stack NAME (a deployed stack with a SendOnceEmailQueue), "
                              "or --table, --queue and --dlq")
        return _info(args, pipeline)
    if args.command == "status":
        return _status(args, LedgerView(boto3.client("dynamodb"), pipeline.need("table")), pipeline)
    if args.command == "unknown":
        return _unknown(args, LedgerView(boto3.client("dynamodb"), pipeline.need("table")))
    if args.command == "doubles":
        return _doubles(args, LedgerView(boto3.client("dynamodb"), pipeline.need("table")))
    if args.command == "cancel":
        return _cancel(args, pipeline.need("table"))
    if args.command == "tenants":
        return _tenants(args, pipeline)
    if args.command == "latency":
        probe = LatencyProbe(boto3.client("sqs"), boto3.client("dynamodb"), pipeline.need("queue"),
                             pipeline.need("table"))
        report = probe.measure(args.sender, args.count, args.timeout)
        _say(args, report.as_dict(), describe(report, pipeline.evidence_grace_s))
        return 0 if not report.missing else 1
    if args.command == "resolve":
        view = LedgerView(boto3.client("dynamodb"), pipeline.need("table"))
        before = view.resolve(args.key, sent=args.sent)
        done = "recorded SENT" if args.sent else "released: the next delivery of this job sends it"
        hint = "" if args.sent else " (a job acknowledged as UNKNOWN is no longer queued: re-enqueue it)"
        _say(args, {"key": args.key, "was": before.status, "now": Status.SENT.value if args.sent else "absent"},
             f"{args.shown_key}: was {before.status}; {done}{hint}")
        return 0
    lane = Priority(args.lane)
    dead = DeadLetters(boto3.client("sqs"), pipeline.need("urgent-dlq" if lane is Priority.URGENT else "dlq"),
                       pipeline.queue_url, pipeline.urgent_queue_url, lane)
    if args.dlq_command == "list":
        groups = dead.by_reason(on_page=_progress("read"))
        rows = [[g.code, str(g.count), ", ".join(g.sample_keys) or "-", g.sample_reason[:70]] for g in groups]
        _say(args, [vars(g) for g in groups], _table(["reason", "count", "sample keys", "sample"], rows)
             if rows else "the dead-letter queue is empty")
        return 0
    if args.reason == ReasonCode.INVALID_MESSAGE.value and not args.force:
        raise ValueError(f"{args.reason} jobs break the job contract and would come straight back to the DLQ: fix "
                         "each (its reason is in `dlq list` and `sendonce status KEY`) and enqueue it anew, or pass "
                         "--force if a newer consumer now accepts them")
    if args.reason is not None:
        present = [g.code for g in dead.by_reason()]
        if args.reason not in present:
            raise ValueError(f"no dead letter has reason {args.reason!r}; reasons in the DLQ: "
                             f"{', '.join(present) or 'none (it is empty)'}")
    result = dead.redrive(args.reason, args.limit, on_progress=_progress("moved"), dedupe_ttl_s=pipeline.dedupe_ttl_s,
                          force=args.force, key=args.key)
    if args.key is not None and not result.moved and not result.forgotten:  # the redrive read the whole DLQ
        raise ValueError(f"no dead letter has key {args.shown_key}")
    text = (f"started SQS message-move task {result.native_task}" if result.native_task else
            f"moved {result.moved} messages back to the job queue; {result.skipped} left in the DLQ")
    if result.forgotten:
        rows = [[f.message_id, f.dedupe_key or "-", f.reason_code, f"{f.age_days:g}"] for f in result.forgotten]
        text += (f"\nskipped {len(result.forgotten)} dead-lettered longer ago than dedupe_ttl "
                 f"({pipeline.dedupe_ttl_s} s): their key may be forgotten, so each could be sent again; check them, "
                 "then --force\n" + _table(["message id", "key", "reason", "days in DLQ"], rows))
    _say(args, asdict(result), text + (f"\n{result.note}" if result.note else ""))
    return 0


def _tenants(args: argparse.Namespace, pipeline: Pipeline) -> int:
    statuses = tenant_statuses(boto3.client("sesv2"))
    stops = lane_stops(boto3.client("dynamodb"), pipeline.table) if pipeline.table else []
    rows = [[t.tenant, t.aggregate, t.customer_managed, t.ses_managed, t.ses_cause or "-", t.reputation_policy,
             t.suppression_scope.lower() + (f" ({', '.join(r.lower() for r in t.suppressed_reasons)})"
                                            if t.suppressed_reasons else "")] for t in statuses]
    text = (_table(["SES tenant", "sending", "customer-managed", "SES-managed", "SES's cause", "reputation policy",
                    "suppression list"], rows) if rows
            else "no SES tenants in this account and region")
    if stops:
        stop_rows = [[s.lane, s.scope, s.kind, _when(s.stopped_at_ms),
                      "stopped" if s.resumed_at_ms is None else f"resumed {_when(s.resumed_at_ms)}", s.reason[:60]]
                     for s in stops]
        text += "\n\nstops this pipeline learned:\n" + _table(
            ["lane", "scope", "kind", "since", "now", "SES's refusal"], stop_rows)
    _say(args, {"tenants": [asdict(t) for t in statuses], "stops": [asdict(s) for s in stops]}, text)
    return 0


def _info(args: argparse.Namespace, pipeline: Pipeline) -> int:
    """Each name a producer or an operator passes on (``sendonce_producer.Pipeline`` takes them), ``-`` where the
    pipeline has none."""
    rows = [["pipeline", pipeline.name or "-"], ["job queue", pipeline.queue_url or "-"],
            ["dedupe table", pipeline.table or "-"], ["dead-letter queue", pipeline.dead_letter_queue_url or "-"],
            ["outbox table", pipeline.outbox_table or "-"],
            ["urgent queue", pipeline.urgent_queue_url or "-"],
            ["urgent dead-letter queue", pipeline.urgent_dead_letter_queue_url or "-"],
            ["attachments bucket", pipeline.attachments_bucket or "-"],
            ["key secret", pipeline.key_secret or "-"],
            ["dedupe ttl", "-" if pipeline.dedupe_ttl_s is None else f"{pipeline.dedupe_ttl_s} s"],
            ["evidence grace period", "-" if pipeline.evidence_grace_s is None else f"{pipeline.evidence_grace_s} s"]]
    _say(args, {"pipeline": pipeline.name, "queueUrl": pipeline.queue_url, "table": pipeline.table,
                "deadLetterQueueUrl": pipeline.dead_letter_queue_url, "outboxTable": pipeline.outbox_table,
                "urgentQueueUrl": pipeline.urgent_queue_url,
                "urgentDeadLetterQueueUrl": pipeline.urgent_dead_letter_queue_url,
                "attachmentsBucket": pipeline.attachments_bucket, "keySecretArn": pipeline.key_secret,
                "dedupeTtlSeconds": pipeline.dedupe_ttl_s, "evidenceGraceSeconds": pipeline.evidence_grace_s},
         _table(["", ""], rows, header=False))
    return 0


def _status(args: argparse.Namespace, view: LedgerView, pipeline: Pipeline) -> int:
    record = view.get(args.key)
    now = time.time_ns() // 1_000_000
    if record is None or record.expired(now):
        state = ("never seen (no worker has claimed it: not enqueued, still queued, or waiting for its sendAt; or "
                 "its record was deleted after dedupe_ttl)"
                 if record is None else "expired (counts as never seen; the next delivery sends it)")
        held = [found for dlq in (pipeline.dead_letter_queue_url, pipeline.urgent_dead_letter_queue_url) if dlq
                for found in DeadLetters(boto3.client("sqs"), dlq).holding(args.key)]
        if held:
            state = (f"no record; in the dead-letter queue ({len(held)} message{'s' if len(held) > 1 else ''}): "
                     + "; ".join(f"{code}: {reason}" if reason else code for code, reason in held))
        _say(args, {"key": args.key, "status": None, "note": state,
                    "deadLetters": [{"reasonCode": c, "reason": r} for c, r in held]}, f"{args.shown_key}: {state}")
        return 0
    rows = [
        ["status", record.status], ["attempts", str(record.attempts)],
        ["SES message id", record.ses_message_id or "-"], ["claimed at", _when(record.claimed_at_ms)],
        ["sent at", _when(record.sent_at_ms)], ["unknown since", _when(record.unknown_at_ms)],
        ["lease expires", _when(record.lease_expires_at_ms)],
        ["forgotten at", _when(record.expires_at_s * 1000 if record.expires_at_s else None)],
        ["SES confirmed", (f"{_when(record.evidence_at_ms)} (accepted {_when(record.ses_accepted_at_ms)})"
                           if record.evidence_at_ms else "no event from SES yet")],
        ["SES message ids", ", ".join(record.every_ses_message_id) + ("  <- SENT TWICE" if record.double_send else "")
         if record.every_ses_message_id else "-"],
        *[[what, f"{_when(when)}" + (f" ({detail})" if detail else "")] for what, when, detail in record.outcomes],
    ]
    _say(args, record.as_dict(), f"{args.shown_key}\n" + _table(["", ""], rows, header=False))
    return 0


def _cancel(args: argparse.Namespace, table: str) -> int:
    if args.dedupe_ttl_days is not None:
        print(f"sendonce: --dedupe-ttl-days is no longer needed and is ignored: {CANCEL_LASTS}", file=sys.stderr)
    outcome = None
    while outcome is None:
        request = tombstone_request(table, args.key, time.time_ns() // 1_000_000)
        try:
            boto3.client("dynamodb").put_item(**request)
            outcome = written(request)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            existing: dict[str, Any] | None = error.response.get("Item")  # type: ignore[assignment]
            outcome = refused(existing) if existing else None  # deleted in between (a released claim): again
    _say(args, {"key": args.key, "cancelled": outcome.cancelled, "status": outcome.record.status},
         f"{args.shown_key}: {outcome.explanation}")
    return 0 if outcome.cancelled else 1


def _unknown(args: argparse.Namespace, view: LedgerView) -> int:
    records = view.needing_a_decision(on_page=_progress("scanned"))
    rows = [[r.key, r.status + ("" if r.status == "UNKNOWN" else " (lease expired)"), str(r.attempts),
             _when(r.last_change_ms)] for r in records]
    _say(args, [r.as_dict() for r in records],
         _table(["key", "status", "attempts", "since"], rows) if rows else "no record needs a decision")
    return 0


def _doubles(args: argparse.Namespace, view: LedgerView) -> int:
    records = view.double_sends(on_page=_progress("scanned"))
    rows = [[r.key, ", ".join(r.every_ses_message_id), _when(r.evidence_at_ms)] for r in records]
    _say(args, [r.as_dict() for r in records],
         _table(["key", "SES message ids", "first confirmed"], rows) if rows else "no key was sent twice")
    return 0


def _when(ms: int | None) -> str:
    return "-" if not ms else datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _table(headers: list[str], rows: list[list[str]], header: bool = True) -> str:
    widths = [max(len(str(c)) for c in column) for column in zip(headers, *rows, strict=False)]
    lines = [headers] if header else []
    lines += rows
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=False)).rstrip() for line in lines)


def _say(args: argparse.Namespace, data: Any, text: str) -> None:
    print(json.dumps(data, indent=2, default=str) if args.json else text)


def _progress(verb: str) -> Any:
    def report(count: int) -> None:
        if sys.stderr.isatty():
            print(f"\r{verb} {count}...", end="", file=sys.stderr, flush=True)

    return report


def _error(message: str) -> None:
    print(f"sendonce: {' '.join(message.split())}", file=sys.stderr)
