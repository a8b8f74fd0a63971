"""activities/tool_text.py: how a tool's answer reads."""

from __future__ import annotations

from archmax_temporal.activities.tool_text import binary_mime, human_size, truncate


def test_truncate() -> None:
    assert truncate("abc", 3) == ("abc", False)
    assert truncate("abcdef", 2) == ("ab…[truncated: 4 more chars]", True)


def test_sizes_read_as_people_read_them() -> None:
    assert human_size(512) == "512 bytes"
    assert human_size(1536) == "1.5 KB"
    assert human_size(3 * 1024 * 1024) == "3.0 MB"
    assert human_size(5 * 1024**4) == "5120.0 GB"


def test_read_file_refuses_media_and_bytes_but_reads_svg_and_text() -> None:
    assert binary_mime("a.png", b"text really") == "image/png"
    assert binary_mime("deck.pdf", b"%PDF") == "application/pdf"
    assert binary_mime("blob", b"\x00\x01") == "application/octet-stream"
    assert binary_mime("logo.svg", b"<svg/>") is None
    assert binary_mime("notes.md", "héllo".encode()) is None
