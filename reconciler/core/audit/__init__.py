"""What is missing: the audit, many clusters' names, the next kernel (preflight), a matrix change's
impact, matrix fill's plan."""
