"""`gpudrv matrix VERB`: the support matrix's verbs, one module each."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler import usage
from reconciler.usage import Usage

if TYPE_CHECKING:
    from reconciler.verbs import SubParsers

USAGE = Usage(
    "validate, extend, verify and trace the support matrix",
    "The support matrix is a CSV of the driver images that were built: driver_branch,kernel,os_tag.",
    (
        ("gpudrv matrix validate", "matrix/support-matrix.csv is well-formed"),
        ("gpudrv matrix add 550 6.8.0-52-generic ubuntu24.04", "append a row"),
    ),
)


def register(commands: SubParsers) -> None:
    from reconciler.verbs.matrix import add, fill, history, impact, validate, verify

    group = commands.add_parser("matrix", **usage.of(USAGE))
    verbs = group.add_subparsers(dest="verb", metavar="VERB")
    for verb in (validate, add, verify, fill, history, impact):
        verb.register(verbs)
