"""What the copy protocol learns from an SQS call: done, refused (surely not carried out) or lost (no answer, so
it may have been carried out), for one call or for each entry of a batch call. A batch call goes in chunks SQS
takes whole (``sqs_limits.batches``): the protocol's calls for a batch of parked jobs cost one request per ten.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from botocore.exceptions import BotoCoreError, ClientError

from sendonce_contract.sqs_limits import batches

from .aws_errors import error_code, never_sent

# What SQS refuses a message over its queue's maximum message size with (its attributes counted): a send, or a
# batch's entry, InvalidParameterValue ("Message must be shorter than N bytes."); a batch over 1 MiB in all,
# BatchRequestTooLong.
TOO_LONG_CODES = frozenset({"InvalidParameterValue", "BatchRequestTooLong",
                            "AWS.SimpleQueueService.BatchRequestTooLong"})


class Answer(enum.Enum):
    DONE = "done"
    LOST = "lost"  # no answer: it may have been carried out
    REFUSED = "refused"  # surely not carried out


class Refusal(NamedTuple):
    """What SQS said when it refused a request (or a batch's entry)."""

    code: str
    message: str

    @property
    def too_long(self) -> bool:
        return self.code in TOO_LONG_CODES

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


def call(operation: Callable[..., Any], said: list[Refusal] | None = None, **params: Any) -> Answer:
    """The call's answer; ``said``, when given, gets what SQS said if it refused."""
    try:
        operation(**params)
    except (ClientError, BotoCoreError) as error:
        answer = _answer_to(error)
        if said is not None and answer is Answer.REFUSED:
            said.append(_refusal(error))
        return answer
    return Answer.DONE


def call_batched(operation: Callable[..., Any], queue_url: str, entries: Mapping[str, dict[str, Any]],
                 said: dict[str, Refusal] | None = None) -> dict[str, Answer]:
    """Each entry's answer, by its id (unique within ``entries``). A failed entry SQS blames on the request
    (``SenderFault``) was refused; one it blames on itself may have been carried out, as may every entry of a chunk
    whose answer was lost, or that the answer leaves out. ``said``, when given, gets what SQS said of each entry
    it refused, by id."""
    answers: dict[str, Answer] = {}
    heard: dict[str, Refusal] = {}
    for chunk in batches(entries.items()):
        try:
            response = operation(QueueUrl=queue_url, Entries=[{"Id": entry_id, **entry} for entry_id, entry in chunk])
        except (ClientError, BotoCoreError) as error:
            answers.update({entry_id: _answer_to(error) for entry_id, _ in chunk})
            heard.update({entry_id: _refusal(error) for entry_id, _ in chunk})
            continue
        answers.update({item["Id"]: Answer.DONE for item in response.get("Successful") or []})
        answers.update({item["Id"]: Answer.REFUSED if item.get("SenderFault") else Answer.LOST
                        for item in response.get("Failed") or []})
        heard.update({item["Id"]: Refusal(str(item.get("Code", "")), str(item.get("Message", "")))
                      for item in response.get("Failed") or []})
        for entry_id, _ in chunk:
            answers.setdefault(entry_id, Answer.LOST)
    if said is not None:
        said.update({entry_id: heard[entry_id] for entry_id, answer in answers.items()
                     if answer is Answer.REFUSED and entry_id in heard})
    return answers


def _answer_to(error: BaseException) -> Answer:
    return Answer.REFUSED if never_sent(error) else Answer.LOST


def _refusal(error: BaseException) -> Refusal:
    if isinstance(error, ClientError):
        return Refusal(error_code(error), str(error.response.get("Error", {}).get("Message", "")))
    return Refusal(type(error).__name__, str(error))
