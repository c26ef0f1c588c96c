"""Lab mode's upgrade: the executor's settings and ports, one node's run, the fleet in rounds."""
