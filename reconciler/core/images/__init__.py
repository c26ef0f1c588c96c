"""Images and tags: a node's tag from its labels, the operator's os-tag rule per release, the support
matrix, OCI references, the matrix's history, build plans."""
