"""Files a host hands to a session: text as it is, bytes base64-encoded, a large one by the
digest of its upload."""

from __future__ import annotations

import base64
import hashlib

from archmax_temporal.activities.memory_store import MemorySessionStore
from archmax_temporal.activities.session_store import read_upload
from archmax_temporal.client.files import encoded, file_upload
from archmax_temporal.workflows.limits import INLINE_FILE_BYTES


def test_text_travels_as_it_is_and_bytes_base64_encoded() -> None:
    assert encoded("héllo") == ("héllo", "utf-8")
    raw = bytes(range(256))
    text, encoding = encoded(raw)
    assert encoding == "base64"
    assert base64.b64decode(text) == raw


def test_a_small_file_is_inline_with_its_size_in_bytes() -> None:
    upload = file_upload("note.md", "héllo", MemorySessionStore())
    assert (upload.content, upload.encoding, upload.ref) == ("héllo", "utf-8", None)
    assert upload.size == len("héllo".encode())
    binary = file_upload("blob.bin", b"\x00\xff")
    assert (binary.content, binary.encoding, binary.size) == ("AP8=", "base64", 2)


def test_a_large_file_is_uploaded_and_carried_by_its_digest() -> None:
    store = MemorySessionStore()
    data = b"x" * (INLINE_FILE_BYTES + 1)
    upload = file_upload("big.bin", data, store)
    assert upload.ref == hashlib.sha256(data).hexdigest()
    assert upload.content == "" and upload.size == len(data)
    assert read_upload(store, upload.ref) == data


def test_a_large_file_with_no_store_stays_inline() -> None:
    data = "y" * (INLINE_FILE_BYTES + 1)
    upload = file_upload("big.txt", data)
    assert (upload.ref, upload.content) == (None, data)
