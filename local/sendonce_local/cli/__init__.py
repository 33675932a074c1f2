"""The `sendonce-local` command (also `python -m sendonce_local`): ``command`` parses and dispatches, ``serve``
starts the emulator, ``run`` plays a deployed stack's event sources and ``run_output`` prints what its functions say."""

from .command import main

__all__ = ["main"]
