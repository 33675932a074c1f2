"""Load scenarios against a consumer played as Lambda's event source, counted outside it (from the emulator's SES,
the DLQ and the ledger): a burst past SES's rate (``load``), one in recipients (``recipient_burst``), one through a
stretch of DynamoDB and SQS trouble (``fault_burst``); ``burst_drain`` is the run each of them measures."""
