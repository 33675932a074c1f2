"""The exception raised at synth time when props break a guarantee."""


class SendOnceConfigurationError(ValueError):
    """A prop breaks one of the pipeline's guarantees; the message names the prop, the rule and the fix."""
