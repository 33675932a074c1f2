"""The demo's numbered steps, as its output labels them: "[3/10]"."""

STEPS = 11  # the emulator, the deploy, its parts, SES's events, then each numbered phase, and the report


def step(number: int) -> str:
    """A step's label, "[3/10]"."""
    return f"[{number}/{STEPS}]"
