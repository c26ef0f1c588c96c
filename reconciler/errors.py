"""The one error type the CLI turns into a single line on stderr and exit code 2."""


class GpudrvError(Exception):
    """Bad input, bad configuration or an unreachable cluster: the user must act."""
