"""Run sendonce locally with no AWS account: an embedded AWS emulator (moto) and tools around it.

Needs the ``local`` extra: ``pip install 'sendonce[local]'``.
"""
