"""GitHub Actions and the terminal: what reads gpudrv's output, and keeping every line safe there."""
