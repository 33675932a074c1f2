"""`sendonce-local` (or `python -m sendonce_constructs.local`): the demo, the emulator, and the runner."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from pathlib import Path

QUICK_KEYS = 40


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
    if args.command == "demo":
        return _demo(args)
    if args.command == "serve":
        return _serve()
    return _run(args)


def _demo(args: argparse.Namespace) -> int:
    from .demo import DemoOptions, run_demo

    keys = args.keys or (QUICK_KEYS if args.quick else DemoOptions.keys)
    options = DemoOptions(out_dir=args.out, stack=args.stack, keys=keys, fault_probability=args.faults,
                          seed=args.seed)
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
        print("sendonce-local run talks only to an emulator: set AWS_ENDPOINT_URL (see `sendonce-local serve`)",
              file=sys.stderr)
        return 2
    from .event_source_runner import EventSourceRunner, FaultPlan
    from .stack_reader import read_consumers, read_stream_functions
    from .stream_runner import StreamEventSourceRunner

    consumers = read_consumers(args.stack, args.cdk_out)
    if not consumers:
        print(f"stack {args.stack} has no SQS-triggered function", file=sys.stderr)
        return 2
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
    return 0
