"""Lambda's part, played locally for a stack deployed to the emulator: execution environments as worker processes
(``instances``, ``worker``), the SQS and DynamoDB-stream event sources (``sqs_source``, ``stream_source``) with the
stream positions they keep (``checkpoints``), and the deployed stack read from the emulator and cdk.out
(``deployed_stack``, ``stack_gaps``), its runners started and reloaded on redeploy (``stack_runners``,
``stack_watch``)."""
