"""The in-cluster loop's ports (core/incluster/reconcile_ports.py) on real things: reconcile_ports."""
