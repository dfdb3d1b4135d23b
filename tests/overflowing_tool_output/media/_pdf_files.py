"""Real PDF files for the tests, written by a minimal PDF writer of our own (PDF 1.4: catalog, page tree, pages
with a Helvetica text stream, a cross-reference table), plus hostile variants."""

from __future__ import annotations

import zlib
from collections.abc import Sequence

__all__ = ('decompression_bomb_pdf', 'giant_page_pdf', 'glyph_pdf', 'looping_tree_pdf', 'pdf_with_pages')


def _escape(text: str) -> str:
    return text.replace('\\', '\\\\').replace('(', '\\(').replace(')', '\\)')


def _content(lines: Sequence[str]) -> bytes:
    ops = ['BT', '/F1 11 Tf', '14 TL', '50 780 Td']
    for line in lines:
        ops.append(f'({_escape(line)}) Tj T*')
    ops.append('ET')
    return '\n'.join(ops).encode('latin-1')


def _assemble(objects: list[bytes], *, root: int = 1) -> bytes:
    """Objects numbered 1..n in order, a classic xref table and trailer."""
    out = bytearray(b'%PDF-1.4\n%\xe2\xe3\xcf\xd3\n')
    offsets: list[int] = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b'%d 0 obj\n' % number + body + b'\nendobj\n'
    xref = len(out)
    out += b'xref\n0 %d\n0000000000 65535 f \n' % (len(objects) + 1)
    for offset in offsets:
        out += b'%010d 00000 n \n' % offset
    out += b'trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n' % (len(objects) + 1, root, xref)
    return bytes(out)


def _stream(data: bytes, *, compress: bool = False) -> bytes:
    if compress:
        data = zlib.compress(data, 9)
        return b'<< /Length %d /Filter /FlateDecode >>\nstream\n' % len(data) + data + b'\nendstream'
    return b'<< /Length %d >>\nstream\n' % len(data) + data + b'\nendstream'


def pdf_with_pages(pages: Sequence[Sequence[str]], *, media_box: tuple[float, float] = (612, 792)) -> bytes:
    """A PDF whose page i shows the lines `pages[i]` (Helvetica 11 pt, top-left)."""
    count = len(pages)
    # 1 catalog, 2 page tree, 3 font, then a page object and its content stream per page.
    kids = ' '.join(f'{4 + 2 * i} 0 R' for i in range(count))
    objects: list[bytes] = [
        b'<< /Type /Catalog /Pages 2 0 R >>',
        f'<< /Type /Pages /Kids [{kids}] /Count {count} >>'.encode(),
        b'<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>',
    ]
    width, height = media_box
    for i, lines in enumerate(pages):
        objects.append(
            f'<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {width:g} {height:g}] '
            f'/Resources << /Font << /F1 3 0 R >> >> /Contents {5 + 2 * i} 0 R >>'.encode()
        )
        objects.append(_stream(_content(lines), compress=True))
    return _assemble(objects)


def glyph_pdf(unicode_hex: str, glyphs: int) -> bytes:
    """One page showing `glyphs` times the one glyph of a font whose ToUnicode map gives it the UTF-16 code units
    `unicode_hex` (`D83DDE00`: an emoji outside the BMP; `D800`: a lone surrogate, as a broken font may map it)."""
    cmap = (
        '/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /Glyphs def '
        '1 begincodespacerange <0000> <FFFF> endcodespacerange '
        f'1 beginbfchar <0001> <{unicode_hex}> endbfchar endcmap CMapName currentdict /CMap defineresource pop end end'
    ).encode()
    objects = [
        b'<< /Type /Catalog /Pages 2 0 R >>',
        b'<< /Type /Pages /Kids [6 0 R] /Count 1 >>',
        (
            b'<< /Type /Font /Subtype /Type0 /BaseFont /Glyphs /Encoding /Identity-H /DescendantFonts [4 0 R] '
            b'/ToUnicode 5 0 R >>'
        ),
        (
            b'<< /Type /Font /Subtype /CIDFontType2 /BaseFont /Glyphs '
            b'/CIDSystemInfo << /Registry (Adobe) /Ordering (Identity) /Supplement 0 >> /DW 1 >>'
        ),
        _stream(cmap),
        (
            b'<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> '
            b'/Contents 7 0 R >>'
        ),
        _stream(b'BT /F1 1 Tf 0 700 Td <' + b'0001' * glyphs + b'> Tj ET', compress=True),
    ]
    return _assemble(objects)


def looping_tree_pdf() -> bytes:
    """A page tree whose node lists itself as its own kid, and declares a billion pages."""
    objects = [
        b'<< /Type /Catalog /Pages 2 0 R >>',
        b'<< /Type /Pages /Kids [2 0 R 3 0 R] /Count 1000000000 >>',
        b'<< /Type /Pages /Parent 2 0 R /Kids [2 0 R 3 0 R] /Count 1000000000 >>',
        _stream(b'% padding\n' * 200),  # an unused object: the file is over a small band
    ]
    return _assemble(objects)


def giant_page_pdf() -> bytes:
    """One page of 14,400 x 14,400 inches (the largest PDF allows), with a line of text."""
    return pdf_with_pages([['a page the size of a city']], media_box=(1_036_800, 1_036_800))


def decompression_bomb_pdf(inflated_mb: int = 200) -> bytes:
    """One page whose content stream is a few hundred KB compressed and `inflated_mb` MB inflated."""
    body = b'BT /F1 11 Tf 50 700 Td (bomb) Tj ET\n' + b' ' * (inflated_mb * 1024 * 1024)
    objects = [
        b'<< /Type /Catalog /Pages 2 0 R >>',
        b'<< /Type /Pages /Kids [4 0 R] /Count 1 >>',
        b'<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
        b'<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 5 0 R >>',
        _stream(body, compress=True),
    ]
    return _assemble(objects)
