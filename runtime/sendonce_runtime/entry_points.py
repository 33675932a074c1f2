"""The bundled functions' handlers, as Lambda names them: the construct deploys them, the local tooling finds the
deployed functions by them (without loading aws-cdk-lib)."""

HANDLER = "sendonce_runtime.handler.handler"
RECORDER_HANDLER = "sendonce_runtime.event_recorder.handler"
RELAY_HANDLER = "sendonce_runtime.outbox_relay.handler"
OUTCOME_HANDLER = "sendonce_runtime.outcome_publisher.handler"
QUOTA_WATCH_HANDLER = "sendonce_runtime.quota_watch.handler"
SCHEDULE_WATCH_HANDLER = "sendonce_runtime.schedule_watch.handler"
