"""The demo's traffic: receipts and password resets, with every kind of duplicate, poison and refusal."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

SENDER = "Shop <receipts@example.com>"
UNVERIFIED_SENDER = "Billing <billing@unverified-shop.example>"


@dataclass
class Workload:
    first_wave: list[str] = field(default_factory=list)
    reenqueued: list[str] = field(default_factory=list)
    subject_to_key: dict[str, str] = field(default_factory=dict)  # the keys SES should send, once each
    refused_keys: set[str] = field(default_factory=set)
    kinds: Counter[str] = field(default_factory=Counter)

    @property
    def jobs(self) -> int:
        return len(self.first_wave) + len(self.reenqueued)

    def describe_first_wave(self) -> str:
        """What the first wave holds, summing to its length; the re-enqueues come later and are said apart."""
        parts = {"job": "first copies", "same_job_twice": "enqueued twice at once", "malformed": "malformed",
                 "ses_refused": "that SES refuses"}
        said = [f"{self.kinds[kind]} {words}" for kind, words in parts.items() if self.kinds[kind]]
        later = f" ({len(self.reenqueued)} re-enqueued later)" if self.reenqueued else ""
        return ", ".join(said) + later

    def add_outbox_order(self, key: str, subject: str) -> None:
        self.subject_to_key[subject] = key
        self.kinds["outbox_orders"] += 1

    def emails_per_key(self, subjects: Iterable[str]) -> Counter[str]:
        """How many of the emails SES accepted (named by their subjects) went to each of this workload's keys."""
        per_key = Counter({key: 0 for key in self.subject_to_key.values()})
        per_key.update(self.subject_to_key[subject] for subject in subjects if subject in self.subject_to_key)
        return per_key

    @property
    def expected_dead_letters(self) -> int:
        return self.kinds["malformed"] + self.kinds["ses_refused"]


def keys_by_emails(per_key: Mapping[str, int]) -> dict[int, int]:
    """How many keys got each number of emails, fewest emails first: {1: 50} when each of 50 keys got one."""
    return dict(sorted(Counter(per_key.values()).items()))


def keys_sent_twice(per_key: Mapping[str, int]) -> list[str]:
    """The keys that got more than one email, sorted."""
    return sorted(key for key, emails in per_key.items() if emails > 1)


def _job(key: str, subject: str, recipient: str, sender: str = SENDER) -> str:
    return json.dumps({"dedupeKey": key, "from": sender, "to": [recipient], "subject": subject,
                       "text": f"{subject}\n\nThis email was sent once.", "tags": {"kind": key.split(":")[0]}})


MALFORMED = (
    '{"dedupeKey": "receipt:broken", "from": ',
    json.dumps({"from": SENDER, "to": "ada@example.org", "subject": "No key", "text": "x"}),
    json.dumps({"dedupeKey": "receipt:typo:u1", "from": SENDER, "to": "ada@example.org", "subjet": "Typo",
                "text": "x"}),
    json.dumps({"dedupeKey": "receipt:bad-address:u1", "from": SENDER, "to": "not-an-address", "subject": "x",
                "text": "x"}),
    json.dumps({"dedupeKey": "receipt:no-content:u1", "from": SENDER, "to": "ada@example.org"}),
)


# SES's mailbox simulator: the demo's events include its documented bounce and complaint for these.
SIMULATED_RECIPIENTS = ("bounce@simulator.amazonses.com", "complaint@simulator.amazonses.com",
                        "success@simulator.amazonses.com")


def build_workload(keys: int, seed: int, first: int = 0, poison: bool = True) -> Workload:
    """``keys`` distinct emails (numbered from ``first``); 15% enqueued twice at once, 10% re-enqueued later,
    one in 20 to SES's mailbox simulator, plus poison and refusals unless ``poison`` is False."""
    rng = random.Random(seed)
    work = Workload()
    for n in range(first, first + keys):
        user = f"u{rng.randint(1, 999)}"
        if n % 3 == 0:
            key, subject = f"password-reset:{n:05d}{rng.randint(100, 999)}:{user}", f"Reset your password #{n}"
        else:
            key, subject = f"receipt:{10_000 + n}:{user}", f"Your receipt for order {10_000 + n}"
        recipient = SIMULATED_RECIPIENTS[n // 20 % 3] if n % 20 == 7 else f"{user}@example.org"
        body = _job(key, subject, recipient)
        work.subject_to_key[subject] = key
        work.first_wave.append(body)
        work.kinds["job"] += 1
        if rng.random() < 0.15:
            work.first_wave.append(body)
            work.kinds["same_job_twice"] += 1
        if rng.random() < 0.10:
            work.reenqueued.append(body)
            work.kinds["reenqueued"] += 1
    if not poison:
        rng.shuffle(work.first_wave)
        return work
    for body in MALFORMED[: max(3, keys // 20)]:
        work.first_wave.append(body)
        work.kinds["malformed"] += 1
    for n in range(max(2, keys // 40)):
        key = f"receipt:refused-{n}:u{n}"
        work.first_wave.append(_job(key, f"Refused receipt {n}", "ada@example.org", UNVERIFIED_SENDER))
        work.refused_keys.add(key)
        work.kinds["ses_refused"] += 1
    rng.shuffle(work.first_wave)
    return work


def enqueue(sqs: object, queue_url: str, bodies: list[str]) -> None:
    for start in range(0, len(bodies), 10):
        chunk = bodies[start : start + 10]
        response = sqs.send_message_batch(  # type: ignore[attr-defined]
            QueueUrl=queue_url, Entries=[{"Id": str(i), "MessageBody": b} for i, b in enumerate(chunk)]
        )
        if response.get("Failed"):
            raise RuntimeError(f"the emulator refused jobs: {response['Failed']}")
