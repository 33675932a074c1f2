"""The `sendonce` operator command: inspect keys, resolve UNKNOWN records, read and redrive the DLQ.

Needs boto3 only (``pip install 'sendonce[ops]'``); it never imports aws-cdk-lib.
"""
