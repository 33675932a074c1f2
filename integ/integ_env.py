"""What the integration test's runner hands its app through the environment: repository tooling, so these names
live beside the runner and not in the Lambda bundle's deploy configuration."""

INTEG_PREFIX = "SENDONCE_INTEG_"
INTEG_SENDER = INTEG_PREFIX + "SENDER"  # a verified SES identity of the account the test deploys to
INTEG_RUN = INTEG_PREFIX + "RUN"  # salts the test's keys, so that a rerun proves anew
