"""The pure core: plain data in, plain data out. No I/O, no Kubernetes, git or YAML libraries."""
