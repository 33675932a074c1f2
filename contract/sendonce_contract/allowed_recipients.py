"""A stage's allowed recipients: the addresses and domains a non-production pipeline may send to.

The construct checks each entry at synth with :func:`parse_entries` and hands the parsed list to the consumer
(:func:`to_env`, :func:`from_env`); the consumer refuses a job with any other recipient before it claims or sends
anything. An entry is an address (``qa@example.com``: that mailbox) or a domain (``example.com``: every address
at exactly that domain, not its subdomains). :data:`MAILBOX_SIMULATOR` is SES's mailbox simulator, whose
addresses (``success@``, ``bounce@``, ``complaint@``, ...) reach no one. Comparison ignores case: mail systems
treat ``Ada@`` and ``ada@`` as one mailbox, so an allowance for one must not depend on how a job spells it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from .address import InvalidAddress, Mailbox, parse_mailbox

MAILBOX_SIMULATOR = "simulator.amazonses.com"
ENV_SEPARATOR = " "  # neither addresses nor domains hold a space


class AllowedRecipients(NamedTuple):
    addresses: frozenset[str]  # lower-cased, domains in punycode
    domains: frozenset[str]

    def allows(self, mailbox: Mailbox) -> bool:
        return mailbox.domain.lower() in self.domains or mailbox.address.lower() in self.addresses

    def refused(self, fields: Iterable[tuple[str, Sequence[Mailbox]]]) -> list[str]:
        """The positions (``to[0]``, ``bcc[2]``) of recipients not allowed; never the addresses themselves, which
        a log line must not carry."""
        return [f"{name}[{index}]" for name, mailboxes in fields for index, mailbox in enumerate(mailboxes)
                if not self.allows(mailbox)]

    def to_env(self) -> str:
        return ENV_SEPARATOR.join(sorted(self.addresses) + sorted(self.domains))


class InvalidEntry(ValueError):
    """An entry that is neither a bare address nor a domain; the message says why."""


def parse_entries(entries: Sequence[str]) -> AllowedRecipients:
    addresses: set[str] = set()
    domains: set[str] = set()
    for entry in entries:
        text = entry.strip()
        if "@" in text:
            try:
                mailbox = parse_mailbox(text)
            except InvalidAddress as error:
                raise InvalidEntry(f"{entry!r} is not an address: it {error}") from None
            if mailbox.display_name is not None or "<" in text:
                raise InvalidEntry(f"{entry!r} has a display name: give the bare address")
            addresses.add(mailbox.address.lower())
        else:
            try:
                domain = parse_mailbox(f"postmaster@{text}").domain
            except InvalidAddress as error:
                raise InvalidEntry(f"{entry!r} is not a domain: it {str(error).removeprefix('has ')}") from None
            domains.add(domain.lower())
    return AllowedRecipients(frozenset(addresses), frozenset(domains))


def split_env(value: str) -> list[str]:
    """The entries of the variable's value, as :meth:`AllowedRecipients.to_env` joined them."""
    return [entry for entry in value.split(ENV_SEPARATOR) if entry]
