"""The label, spelled as NFD spells a running kernel, and the local source's feature file.

kubernetes-sigs/node-feature-discovery v0.17.4: kernel-version.full is /proc/sys/kernel/osrelease
with every character outside [-A-Za-z0-9_.] replaced by '_' and '-_.' trimmed from both ends
(source/kernel/version.go 36-44, 59-65); features.d files are `key=value` lines, '#' lines are
comments and `# +...` directives (source/local/local.go 150-243), at most 65536 bytes (61, 294-319).
"""

from __future__ import annotations

import re

from reconciler.core.images import tags

LABEL = tags.NEXT_KERNEL

MAX_FILE = 65536
_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")  # a Kubernetes label value


def spell(release: str) -> str:
    """version.go 36-44: what kernel-version.full says of this release."""
    return re.sub(r"[^-A-Za-z0-9_.]", "_", release).strip("-_.")


def label_value(release: str) -> str | None:
    """The label's value, or None when no valid label value spells it (NFD would drop the label) or it
    is no kernel by gpudrv's one rule (tags.KERNEL_PATTERN: what audit would call INVALID)."""
    value = spell(release)
    valid = value and len(value) <= 63 and _VALUE.fullmatch(value) and tags.valid_kernel(value)
    return value if valid else None


def feature_file(value: str | None) -> str:
    """The file: a comment always (the probe decided), the label only when the next kernel differs."""
    lines = ["# gpudrv probe: the kernel this node boots next (absent: the one it runs)"]
    if value is not None:
        lines.append(f"{LABEL}={value}")
    text = "\n".join(lines) + "\n"
    assert len(text.encode()) < MAX_FILE
    return text
