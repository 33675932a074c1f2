"""Header helpers for an :class:`~sendonce_producer.EmailJob`'s ``headers``: merge what they return."""

from __future__ import annotations

from sendonce_contract.headers import ENTITY_REF_ID, LIST_UNSUBSCRIBE, LIST_UNSUBSCRIBE_POST, ONE_CLICK


def entity_ref_id(reference: str) -> dict[str, str]:
    """``X-Entity-Ref-ID``: a value unique to this email (a reset token's id) keeps Gmail from threading every
    email of one kind into one conversation."""
    return {ENTITY_REF_ID: reference}


def one_click_unsubscribe(https_url: str, mailto: str | None = None) -> dict[str, str]:
    """RFC 8058 one-click unsubscribe: ``List-Unsubscribe`` with the https URL (and a mailto: address if given),
    and ``List-Unsubscribe-Post: List-Unsubscribe=One-Click``; the mailbox provider POSTs to the URL."""
    if not https_url.lower().startswith("https://"):
        raise ValueError(f"one-click unsubscribe needs an https URL (RFC 8058), got {https_url!r}")
    targets = [f"<{https_url}>"] + ([f"<mailto:{mailto}>"] if mailto else [])
    return {LIST_UNSUBSCRIBE: ", ".join(targets), LIST_UNSUBSCRIBE_POST: ONE_CLICK}
