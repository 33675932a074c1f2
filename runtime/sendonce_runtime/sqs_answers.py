"""What the copy protocol learns from an SQS call: done, refused (surely not carried out) or lost (no answer, so
it may have been carried out), for one call or for each entry of a batch call. A batch call goes in chunks SQS
takes whole (``sqs_limits.batches``): the protocol's calls for a batch of parked jobs cost one request per ten.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sendonce_contract.sqs_limits import batches

from .aws_errors import never_sent


class Answer(enum.Enum):
    DONE = "done"
    LOST = "lost"  # no answer: it may have been carried out
    REFUSED = "refused"  # surely not carried out


def call(operation: Callable[..., Any], **params: Any) -> Answer:
    try:
        operation(**params)
    except (ClientError, BotoCoreError) as error:
        return _answer_to(error)
    return Answer.DONE


def call_batched(operation: Callable[..., Any], queue_url: str, entries: Mapping[str, dict[str, Any]]) -> dict[
        str, Answer]:
    """Each entry's answer, by its id (unique within ``entries``). A failed entry SQS blames on the request
    (``SenderFault``) was refused; one it blames on itself may have been carried out, as may every entry of a chunk
    whose answer was lost, or that the answer leaves out."""
    answers: dict[str, Answer] = {}
    for chunk in batches(entries.items()):
        try:
            response = operation(QueueUrl=queue_url, Entries=[{"Id": entry_id, **entry} for entry_id, entry in chunk])
        except (ClientError, BotoCoreError) as error:
            answers.update({entry_id: _answer_to(error) for entry_id, _ in chunk})
            continue
        answers.update({item["Id"]: Answer.DONE for item in response.get("Successful") or []})
        answers.update({item["Id"]: Answer.REFUSED if item.get("SenderFault") else Answer.LOST
                        for item in response.get("Failed") or []})
        for entry_id, _ in chunk:
            answers.setdefault(entry_id, Answer.LOST)
    return answers


def _answer_to(error: BaseException) -> Answer:
    return Answer.REFUSED if never_sent(error) else Answer.LOST
