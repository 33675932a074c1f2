"""Where the bundled consumer's code lives, in a wheel and in a source checkout."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import aws_lambda as lambda_

HANDLER = "sendonce_runtime.handler.handler"

_PACKAGE_DIR = Path(__file__).resolve().parent
# In a built wheel the runtime is copied under the package; in a checkout it sits beside it.
_CANDIDATES = (_PACKAGE_DIR / "_runtime", _PACKAGE_DIR.parent / "runtime")
_EXCLUDE = ["__pycache__", "*.pyc", "py.typed"]


def runtime_asset_dir() -> Path:
    """The folder whose ``sendonce_runtime/`` package becomes the Lambda code asset."""
    for candidate in _CANDIDATES:
        if (candidate / "sendonce_runtime" / "handler.py").is_file():
            return candidate
    searched = ", ".join(str(c) for c in _CANDIDATES)
    raise FileNotFoundError(f"the sendonce consumer code is missing (looked in {searched}); reinstall sendonce")


def runtime_code() -> lambda_.Code:
    return lambda_.Code.from_asset(str(runtime_asset_dir()), exclude=_EXCLUDE)
