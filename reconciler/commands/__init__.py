"""One module per verb; each `run` takes plain values, prints, and returns the exit code."""

OK, FINDINGS, ERROR = 0, 1, 2
