"""The sendonce Lambda consumer: sends each queued email once. Pure Python on boto3 alone."""
