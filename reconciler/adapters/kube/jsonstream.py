"""A Kubernetes list response, item by item, while it arrives: never the whole body at once.

A list is one JSON object, `{"kind": ..., "apiVersion": ..., "metadata": {...}, "items": [...]}`. The
API server streams it; `ListStream` decodes the bytes as they come and yields each element of `items`
as soon as it is complete (the standard library's C scanner parses each one), so a caller that keeps
a few fields of each item holds one chunk and one item at a time, not 10,000 nodes' worth of JSON.
The other top-level members (`metadata` with `continue`, `kind`) are in `members` once it is read.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterable, Iterator
from typing import Any

CHUNK = 1 << 18  # read at least this much text before parsing again: an item is never parsed twice
MAX_PENDING = 64 << 20  # one value this large and still incomplete: the stream is not a list we read
_BLANK = " \t\n\r"


class StreamError(ValueError):
    """The body is not a JSON object, is cut short, or has an item larger than MAX_PENDING."""


def number_problem(error: ValueError) -> str:
    """What a ValueError of json's number parsing means, in words."""
    if "integer string conversion" in str(error):
        return "a number of more than 4,300 digits"
    return str(error)


class ListStream:
    def __init__(self, chunks: Iterable[bytes], items: str = "items") -> None:
        self.members: dict[str, Any] = {}
        self._chunks = iter(chunks)
        self._items = items
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._scan = json.JSONDecoder().raw_decode
        self._text = ""
        self._pos = 0
        self._done = False

    def __iter__(self) -> Iterator[Any]:
        self._expect("{")
        if self._peek() == "}":
            self._pos += 1
        else:
            while True:
                key = self._value()
                if not isinstance(key, str):
                    raise StreamError("an object key is not a string")
                self._expect(":")
                if key == self._items and self._peek() == "[":
                    yield from self._array()
                else:
                    self.members[key] = self._value()
                if self._expect(",}") == "}":
                    break
        if self._peek():
            raise StreamError("more data after the list")

    def _array(self) -> Iterator[Any]:
        self._pos += 1  # the '['
        if self._peek() == "]":
            self._pos += 1
            return
        while True:
            yield self._value()
            if self._expect(",]") == "]":
                return

    def _value(self) -> Any:
        self._peek()
        while True:
            try:
                value, end = self._scan(self._text, self._pos)
            except json.JSONDecodeError as exc:
                if self._more():
                    continue  # cut short by the chunk's end: parse again with more text
                raise StreamError(exc.msg) from None
            except ValueError as exc:  # a number int() refuses: over 4,300 digits
                raise StreamError(number_problem(exc)) from None
            # A number at the very end of the text may go on in the next chunk.
            if end == len(self._text) and isinstance(value, int | float) and self._more():
                continue
            self._pos = end
            return value

    def _peek(self) -> str:
        """The next character that is not blank, not consumed; '' at the end of the stream."""
        while True:
            text, pos = self._text, self._pos
            while pos < len(text) and text[pos] in _BLANK:
                pos += 1
            self._pos = pos
            if pos < len(text):
                return text[pos]
            if not self._more():
                return ""

    def _expect(self, allowed: str) -> str:
        found = self._peek()
        if not found or found not in allowed:
            what = repr(found) if found else "the end of the body"
            raise StreamError(f"expected one of {allowed!r}, found {what}")
        self._pos += 1
        return found

    def _more(self) -> bool:
        """Append at least CHUNK characters (or what is left) to the unread text; False at the end."""
        if self._done:
            return False
        pending = len(self._text) - self._pos
        if pending > MAX_PENDING:
            raise StreamError(f"a value longer than {MAX_PENDING >> 20} MiB")
        parts = [self._text[self._pos :]]
        added = 0
        try:
            for chunk in self._chunks:
                text = self._decoder.decode(chunk)
                parts.append(text)
                added += len(text)
                if added >= CHUNK:
                    break
            else:
                parts.append(self._decoder.decode(b"", final=True))
                self._done = True
        except UnicodeDecodeError as exc:
            raise StreamError(f"not UTF-8: {exc.reason}") from None
        self._text, self._pos = "".join(parts), 0
        return added > 0 or not self._done
