"""The in-cluster loop: its decisions over its ports, the fleet watch, leader election, POST /sync,
what it may do."""
