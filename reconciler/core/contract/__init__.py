"""The GPU Operator's contract: its driver resources (ClusterPolicy, NVIDIADriver), the image each node
gets, the chart's values rendered, field owners, and the one desired state (desired.py)."""
