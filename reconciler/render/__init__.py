"""How results look: text, JSON, Markdown and GitHub Actions output, on plain data from the core.

Commands decide what to read and which of these to print; nothing here reads files or the cluster.
GitHub's own channel (workflow commands, the step summary file) is adapters/ci/github.py.
"""
