"""The demo's phases, run in order by ``demo.run``: ``traffic`` (the workload with crashes, through the outbox too),
``residual``, ``bursts`` (past SES's rate, then through DynamoDB and SQS trouble) and ``outcome_events`` (what the
app heard). A phase is a function of the demo's options, the emulator, the deployed app (``demo.example_app``), the
consumer log and ``say``, returning what the report shows of it."""
