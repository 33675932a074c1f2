"""Wraps a method of moto's once per process, however many emulators start: where the emulator is made faithful."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

_lock = threading.Lock()
_wrapped: set[tuple[type, str, str]] = set()

Wrapper = Callable[[Callable[..., Any]], Callable[..., Any]]


def wrap_once(owner: type, name: str, wrapper: Wrapper, purpose: str) -> None:
    """Replace ``owner.name`` by ``wrapper(original)``, unless this process did already for this ``purpose``
    (several purposes may wrap one method: the last wrapped runs first)."""
    with _lock:
        if (owner, name, purpose) in _wrapped:
            return
        setattr(owner, name, wrapper(getattr(owner, name)))
        _wrapped.add((owner, name, purpose))
