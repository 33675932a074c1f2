"""`sendonce-local` (or `python -m sendonce_constructs.local`): the demo, the emulator, and the runner."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError, NoCredentialsError

from .cdk_cli import CdkCliError, cdk_executable
from .stack_reader import StackNotFound

if TYPE_CHECKING:
    from .ses_publisher import SesEventPublisher

QUICK_KEYS = 40
# What the demo deploys and runs, found in a checkout of this repository.
DEMO_PROJECT_FILES = ("cdk.json", "examples/app.py")


class LocalCliError(RuntimeError):
    """An expected failure, said in one line with its fix."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sendonce-local", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="deploy the example app to an embedded emulator and send it traffic")
    demo.add_argument("--quick", action="store_true", help=f"a smaller workload ({QUICK_KEYS} keys), for CI")
    demo.add_argument("--keys", type=int, default=None, help="distinct emails to send (default 250)")
    demo.add_argument("--faults", type=float, default=0.1, help="share of invocations killed (default 0.1)")
    demo.add_argument("--seed", type=int, default=42)
    demo.add_argument("--out", type=Path, default=Path(".demo-out"), help="report folder (default .demo-out)")
    demo.add_argument("--stack", default="SendOnceExample")
    commands.add_parser("serve", help="run an emulator and print the environment that points a shell at it")
    run = commands.add_parser("run", help="play the SQS event source for a stack deployed to an emulator")
    run.add_argument("--stack", required=True)
    run.add_argument("--cdk-out", type=Path, default=Path("cdk.out"))
    run.add_argument("--until-drained", action="store_true", help="exit once the queues are empty")
    run.add_argument("--faults", type=float, default=0.0, help="share of invocations killed (default none)")
    args = parser.parse_args(argv)
    try:
        if args.command == "demo":
            return _demo(args)
        if args.command == "serve":
            return _serve()
        return _run(args)
    except (LocalCliError, CdkCliError, StackNotFound) as error:
        return _error(str(error))
    except NoCredentialsError:
        return _error("no AWS credentials found: point this shell at an emulator with the exports "
                      "`sendonce-local serve` prints")
    except EndpointConnectionError:
        return _error(f"cannot reach the emulator at {os.environ.get('AWS_ENDPOINT_URL')}: is `sendonce-local "
                      "serve` still running? Start it and export what it prints")
    except ClientError as error:
        details = error.response.get("Error", {})
        return _error(f"{error.operation_name} failed: {details.get('Code')}: {details.get('Message', '')}")
    except BotoCoreError as error:
        return _error(str(error))


def _error(message: str) -> int:
    print(f"sendonce-local: {' '.join(message.split())}", file=sys.stderr)
    return 2


def check_demo_can_run(project_dir: Path) -> None:
    """Everything the demo needs from outside the wheel, checked before an emulator starts."""
    missing = [name for name in DEMO_PROJECT_FILES if not (project_dir / name).is_file()]
    if missing:
        raise LocalCliError(
            f"the demo deploys this repository's example app, and {', '.join(missing)} is not in {project_dir}: "
            "run it from a checkout of sendonce (`make demo` installs everything it needs)"
        )
    if importlib.util.find_spec("sendonce_producer") is None:
        raise LocalCliError("the demo writes orders with sendonce-producer, which is not installed: run "
                            "`pip install ./producer` in the checkout, or `make demo`")
    cdk_executable()


def _demo(args: argparse.Namespace) -> int:
    from .demo import DemoOptions, run_demo

    keys = args.keys or (QUICK_KEYS if args.quick else DemoOptions.keys)
    options = DemoOptions(out_dir=args.out, stack=args.stack, keys=keys, fault_probability=args.faults,
                          seed=args.seed)
    check_demo_can_run(options.project_dir.resolve())
    report = run_demo(options, say=lambda line: print(line, flush=True))
    return 0 if report.ok else 1


def _serve() -> int:
    from .emulator import local_aws

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with local_aws() as aws:
        for name, value in aws.environment.items():
            print(f"export {name}={value}")
        print("# the emulator runs until Ctrl-C", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    return 0


def _run(args: argparse.Namespace) -> int:
    if not os.environ.get("AWS_ENDPOINT_URL"):
        raise LocalCliError("run talks only to an emulator: set AWS_ENDPOINT_URL (see `sendonce-local serve`)")
    from .emulator_gaps import make_skipped_configuration_sets
    from .event_source_runner import EventSourceRunner, FaultPlan
    from .stack_reader import read_consumers, read_stream_functions
    from .stream_runner import StreamEventSourceRunner

    if not (args.cdk_out / f"{args.stack}.template.json").is_file():
        raise LocalCliError(f"{args.cdk_out / (args.stack + '.template.json')} is missing: synthesize or deploy the "
                            "stack first")
    configuration_sets = make_skipped_configuration_sets(args.stack, args.cdk_out)
    consumers = read_consumers(args.stack, args.cdk_out)
    if not consumers:
        raise LocalCliError(f"stack {args.stack} has no SQS-triggered function")
    publisher = _ses_event_publisher(configuration_sets)
    relays = [StreamEventSourceRunner(r.function, r.source, dict(os.environ), sys.stdout).start()
              for r in read_stream_functions(args.stack, args.cdk_out)]
    runners = [EventSourceRunner(c.function, c.source, dict(os.environ), sys.stdout,
                                 FaultPlan(args.faults, seed=1) if args.faults else None).start() for c in consumers]
    try:
        for relay in relays:
            print(f"relaying {relay.source.stream_arn} with {relay.function.name}", flush=True)
        for runner in runners:
            print(f"polling {runner.source.queue_url} for {runner.function.name}", flush=True)
            runner.run_until_drained(float("inf") if not args.until_drained else 3600,
                                     lambda t, d: print(f"  {t:6.1f}s {d}", flush=True),
                                     upstream_idle=lambda: all(r.idle() for r in relays))
    except KeyboardInterrupt:
        pass
    finally:
        for runner in runners:
            runner.stop()
        for relay in relays:
            relay.stop()
        if publisher is not None:
            publisher.stop()
    return 0


def _ses_event_publisher(configuration_sets: list[str]) -> SesEventPublisher | None:
    """The emulator's SES publishes no events: play SES's publisher for the stack's configuration sets, onto the
    emulator's default bus, where the stack's own rules route them (say so)."""
    if not configuration_sets:
        return None
    import boto3

    from .ses_publisher import SesEventPublisher, put_on_default_bus

    account = boto3.client("sts").get_caller_identity()["Account"]
    region = boto3.session.Session().region_name or "us-east-1"
    print(f"playing SES's event publishing for configuration sets {', '.join(configuration_sets)} (the emulator's "
          "SES has none): events go to the emulator's default event bus", flush=True)
    return SesEventPublisher(configuration_sets, put_on_default_bus(boto3.client("events")), account, region).start()
