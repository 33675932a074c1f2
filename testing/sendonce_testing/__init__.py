"""Test support shared by the tests and the benchmark: the builders of jobs, SQS records and Lambda contexts.

It is in no wheel, and nothing of the product imports it.
"""
