"""The files the demo attaches, made in code so the repository holds no binaries: an invoice PDF (a real, well-formed
PDF of the size asked for) and a small PNG logo."""

from __future__ import annotations

import random
import struct
import zlib


def invoice_pdf(number: str, size: int, seed: int) -> bytes:
    """A one-page PDF saying ``Invoice <number>``, padded to ``size`` bytes with an embedded file stream of random
    bytes (as a scanned original would be: incompressible), with a correct cross-reference table."""
    text = f"BT /F1 24 Tf 72 720 Td (Invoice {number}) Tj ET".encode("ascii")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(text), text),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    frame = _pdf([*objects, b"<< /Type /EmbeddedFile /Length 0 >>\nstream\n\nendstream"])
    padding = max(0, size - len(frame))  # within a few bytes of size: the stream's length has more digits
    filler = random.Random(seed).randbytes(padding)
    return _pdf([*objects, b"<< /Type /EmbeddedFile /Length %d >>\nstream\n%s\nendstream" % (padding, filler)])


def _pdf(objects: list[bytes]) -> bytes:
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def logo_png(side: int = 32, rgb: tuple[int, int, int] = (39, 174, 96)) -> bytes:
    """A square PNG of one colour."""
    row = b"\x00" + bytes(rgb) * side
    raw = zlib.compress(row * side)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")
