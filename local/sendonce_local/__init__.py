"""Run sendonce locally with no AWS account: an embedded AWS emulator (moto) and tools around it.

Laid out as what each part plays, each layer importing only those below it: ``emulator`` (moto's server and its
patches), ``lambda_service`` (Lambda's execution environments and event sources for a deployed stack), ``demo``
(the example app driven through its phases, the load scenarios and the report) and ``cli`` (`sendonce-local`).

Needs the ``local`` extra: ``pip install 'sendonce[local]'``.
"""
