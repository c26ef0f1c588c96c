"""Adapters: files, manifests, the cluster. They turn the outside world into core data."""
