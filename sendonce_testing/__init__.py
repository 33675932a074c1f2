"""Test support shared by the tests and the benchmark: the forwarding proxy and the slow services built on it, the
fault bursts, and the builders of jobs, SQS records and Lambda contexts.

It is in no wheel: it imports the product's packages, and nothing of the product imports it.
"""
