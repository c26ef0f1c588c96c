"""Just enough PNG to read a screenshot's pixels: 8-bit RGB or RGBA, not interlaced (what Chromium writes)."""

from __future__ import annotations

import struct
import zlib

SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS = {2: 3, 6: 4}  # color type: RGB, RGBA


def pixels(data: bytes) -> tuple[int, int, list[tuple[int, int, int]]]:
    """Width, height and the RGB of every pixel, row by row."""
    assert data.startswith(SIGNATURE), "not a PNG"
    position, header, compressed = len(SIGNATURE), b"", b""
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        position += 12 + length
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            compressed += body
    width, height, depth, color, _compression, _filter, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and color in CHANNELS and interlace == 0, f"unsupported PNG: {depth=} {color=}"
    size = CHANNELS[color]
    raw = zlib.decompress(compressed)
    stride = width * size
    rows: list[bytearray] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - size] if i >= size else 0
            up = previous[i]
            corner = previous[i - size] if i >= size else 0
            line[i] = (line[i] + _predict(kind, left, up, corner)) & 0xFF
        rows.append(line)
        previous = line
    result = [(row[x * size], row[x * size + 1], row[x * size + 2]) for row in rows for x in range(width)]
    return width, height, result


def _predict(kind: int, left: int, up: int, corner: int) -> int:
    if kind == 0:
        return 0
    if kind == 1:
        return left
    if kind == 2:
        return up
    if kind == 3:
        return (left + up) // 2
    estimate = left + up - corner
    distances = (abs(estimate - left), abs(estimate - up), abs(estimate - corner))
    return (left, up, corner)[distances.index(min(distances))]
