"""Counted nouns and verbs in the text gpudrv prints: `1 GPU node`, `2 GPU nodes`."""

from __future__ import annotations


def plural(number: int, noun: str) -> str:
    return noun if number == 1 else f"{noun}s"


def count(number: int, noun: str) -> str:
    """`1 GPU node`, `2 GPU nodes`."""
    return f"{number} {plural(number, noun)}"


def verb(number: int, one: str, many: str) -> str:
    return one if number == 1 else many
