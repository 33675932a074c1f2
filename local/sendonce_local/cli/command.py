"""`sendonce-local` (or `python -m sendonce_local`): the demo, the emulator, and the runner."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
)

from sendonce_ops.usage import OneLineParser

from ..demo.cdk_cli import CdkCliError, cdk_executable
from ..lambda_service.deployed_stack import StackNotFound
from .run import RunRefused

QUICK_KEYS = 40
QUICK_FAULT_BURST_KEYS = 0  # the quick run skips the fault bursts: make test and the full demo run them
QUICK_FLOOD_S, QUICK_FLOOD_ARRIVALS = 0.4, 4  # the quick run's flood: 80 bulk jobs at the demo's rate
QUICK_PHASE_FAULTS = 0.0  # the quick run's residual, outbox and attachments phases: their forced kills only
QUICK_STOPS_PAUSE_S = 0.0  # the quick run skips SES's stops (a minute's probe each): make test and the full demo run it
# What the demo deploys and runs, found in a checkout of this repository.
DEMO_PROJECT_FILES = ("cdk.json", "examples/app.py")


class LocalCliError(RuntimeError):
    """An expected failure, said in one line with its fix."""


def share(text: str) -> float:
    """A share of invocations, 0 to 1 (argparse turns the ValueError into one usage line, exit code 2)."""
    value = float(text)
    if not 0 <= value <= 1:
        raise ValueError(text)
    return value


share.__name__ = "share from 0 to 1"  # argparse names the type in its message: "invalid share from 0 to 1 value"


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="sendonce-local", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="deploy the example app to an embedded emulator and send it traffic")
    demo.add_argument("--quick", action="store_true", help=f"a smaller workload ({QUICK_KEYS} keys), for CI")
    demo.add_argument("--keys", type=int, default=None, help="distinct emails to send (default 250)")
    demo.add_argument("--faults", type=share, default=0.1, help="share of invocations killed (default %(default)s)")
    demo.add_argument("--seed", type=int, default=42, help="seed of the traffic and the faults (default %(default)s)")
    demo.add_argument("--out", type=Path, default=Path(".demo-out"), help="report folder (default %(default)s)")
    demo.add_argument("--stack", default="SendOnceExample",
                      help="the example app's stack to deploy (default %(default)s)")
    serve = commands.add_parser("serve", help="run an emulator and print the environment that points a shell at it")
    serve.add_argument("--verbose", action="store_true", help="print the traceback of each request it failed")
    run = commands.add_parser("run", help="play the SQS event source for a stack deployed to an emulator")
    run.add_argument("--stack", required=True, help="the deployed stack whose sendonce pipelines to run")
    run.add_argument("--cdk-out", type=Path, default=Path("cdk.out"),
                     help="the cloud assembly `cdk deploy` wrote: the stack's template and its functions' code "
                          "(default %(default)s)")
    run.add_argument("--until-drained", action="store_true",
                     help="exit once every queue is empty (default: keep polling until Ctrl-C)")
    run.add_argument("--json", action="store_true", help="each record as the function's own JSON line")
    run.add_argument("--skip-identities", action="store_true",
                     help="do not verify the stack's SES sender identities in the emulator")
    run.add_argument("--faults", type=share, default=0.0, help="share of invocations killed (default none)")
    args = parser.parse_args(argv)
    try:
        if args.command == "demo":
            return _demo(args)
        if args.command == "serve":
            from .serve import serve as serve_emulator

            return serve_emulator(args.verbose)
        return _run(args)
    except (LocalCliError, CdkCliError, StackNotFound, RunRefused) as error:
        return _error(str(error))
    except NoRegionError:
        return _error("no AWS region: point this shell at an emulator with the exports `sendonce-local serve` "
                      "prints (they set AWS_DEFAULT_REGION)")
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
    from ..demo.options import DemoOptions

    keys = args.keys or (QUICK_KEYS if args.quick else DemoOptions.keys)
    options = DemoOptions(out_dir=args.out, stack=args.stack, keys=keys, fault_probability=args.faults,
                          seed=args.seed, fault_burst_keys=QUICK_FAULT_BURST_KEYS if args.quick else
                          DemoOptions.fault_burst_keys,
                          flood_s=QUICK_FLOOD_S if args.quick else DemoOptions.flood_s,
                          flood_arrivals=QUICK_FLOOD_ARRIVALS if args.quick else DemoOptions.flood_arrivals,
                          phase_fault_probability=QUICK_PHASE_FAULTS if args.quick else
                          DemoOptions.phase_fault_probability,
                          stops_pause_s=QUICK_STOPS_PAUSE_S if args.quick else DemoOptions.stops_pause_s)
    check_demo_can_run(options.project_dir.resolve())
    from ..demo.run import run_demo  # after the check: its phases import sendonce-producer

    report = run_demo(options, say=lambda line: print(line, flush=True))
    return 0 if report.ok else 1


def _run(args: argparse.Namespace) -> int:
    from .run import RunOptions, run

    run(RunOptions(args.stack, args.cdk_out, args.until_drained, args.faults, args.json, args.skip_identities))
    return 0
