"""Adapters: files, manifests, the Kubernetes API (kube.py, the one gateway), git and GitHub Actions.

They turn the outside world into core data, and write back what the commands decide.
"""
