"""How results look: text, JSON, Markdown and GitHub Actions output, on plain data from the core.

Commands decide what to read and which of these to print; nothing here reads files or the cluster.
Nothing here imports an adapter: the GitHub Actions text (annotations, step-summary Markdown) is the
core's (core/base/github_text.py), and GitHub's own channel (the workspace's paths, printing the workflow
commands, the step summary file) is adapters/ci/github.py.
"""
