"""The in-cluster process's own edges: its HTTP server and metrics, and its child `gpudrv apply`."""
