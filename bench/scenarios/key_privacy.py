"""11. Key privacy: what digesting each key costs per email, and the bytes each key takes."""

from __future__ import annotations

import json
import time
from typing import Any

from plan import Spread

from sendonce_testing.lambda_events import job

# Keys as producers build them: short ids, the playbook's (an address in it), a long one, the longest allowed.
PRIVACY_KEYS = {
    "receipt:8891:u42": "receipt:8891:u42",
    "order-1042:shipped:ada@example.org": "order-1042:shipped:ada@example.org",
    "a 200-character key": "invoice:" + "x" * 176 + ":ada@example.org",
    "a 1024-byte key": "k" * 1024,
}


def key_privacy_costs(emails: int, repeats: int) -> dict[str, Any]:
    """CPU per email of what key_privacy adds to the consumer (the key and the body's hash digested, on a parsed
    job), measured in this process's CPU time; and the bytes each key takes where it leaves the job body, clear
    and private."""
    from sendonce_contract.key_digest import KeyDigester
    from sendonce_contract.key_tags import key_tags
    from sendonce_contract.message import parse_job
    from sendonce_runtime.key_privacy import PrivateKeys

    class Secrets:
        calls = 0

        def get_secret_value(self, SecretId: str) -> dict[str, str]:
            Secrets.calls += 1
            return {"SecretString": "k" * 64}

    private = PrivateKeys(Secrets(), "arn:bench")
    jobs = [parse_job(json.dumps(job(f"order-{n}:shipped:ada@example.org")), f"m-{n}") for n in range(emails)]
    per_email_us = []
    for _ in range(repeats):
        started = time.process_time()
        for parsed in jobs:
            private.job(parsed)
        per_email_us.append((time.process_time() - started) / emails * 1e6)
    parse_us = []
    bodies = [json.dumps(job(f"order-{n}:shipped:ada@example.org")) for n in range(emails)]
    for _ in range(repeats):
        started = time.process_time()
        for n, body in enumerate(bodies):
            parse_job(body, f"m-{n}")
        parse_us.append((time.process_time() - started) / emails * 1e6)
    digest = KeyDigester(b"k" * 64)

    def tag_bytes(key: str) -> int:
        return sum(len(name) + len(value) for name, value in key_tags(key))

    sizes = {label: {"clear": (len(key.encode()), tag_bytes(key)),
                     "private": (len(digest(key)), tag_bytes(digest(key)))} for label, key in PRIVACY_KEYS.items()}
    return {"emails": emails, "cpu_us": Spread(per_email_us), "parse_us": Spread(parse_us), "sizes": sizes,
            "secret_reads": Secrets.calls}
