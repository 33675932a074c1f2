"""What `sendonce-local serve` prints about requests it failed: one line each, the traceback only with --verbose.

The emulator answers a request it cannot serve with an error the client handles (often by design: a CLI that
asks whether a change set exists); the traceback moto's server logs for it helps only whoever debugs moto.
"""

from __future__ import annotations

import logging
import sys
import time


class OneLine(logging.Formatter):
    """``HH:MM:SS emulator: <what failed>: <ExceptionType: message>``, on one line."""

    def __init__(self, verbose: bool) -> None:
        super().__init__()
        self._verbose = verbose

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage().strip().splitlines()
        line = f"{time.strftime('%H:%M:%S')} emulator: {message[0] if message else record.name}"
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            line += f" {type(error).__name__}: {' '.join(str(error).split())[:300]}"
            if self._verbose:
                line += "\n" + self.formatException(record.exc_info)
        elif len(message) > 1:
            # moto's server (werkzeug) logs a failed request as "Error on request:" with the traceback as text:
            # its last line is the error.
            line += f" {' '.join(message[-1].split())[:300]}"
            if self._verbose:
                line += "\n" + "\n".join(message[1:])
        return line


def log_failed_requests(verbose: bool) -> None:
    """Route the emulator's error logs to stderr through :class:`OneLine`."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLine(verbose))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.ERROR)
    if verbose:
        logging.getLogger("sendonce_local").setLevel(logging.DEBUG)  # a failed deploy's own traceback
