"""activities/object_store.py: the session store on object storage, and opening a store by its
location. The behaviour every store shares is in tests/activities/test_session_store.py
(``TestParity`` runs on S3 too); here, what is the object store's own: its keys, its limits, its
errors."""

from __future__ import annotations

import hashlib
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import obstore
import pytest
from obstore.exceptions import GenericError
from obstore.store import MemoryStore, from_url

from archmax_temporal.activities.folder_store import FilesystemSessionStore
from archmax_temporal.activities.object_store import (
    MAX_KEY_BYTES,
    OBJECT_SCHEMES,
    ObjectSessionStore,
    describe_store,
    open_store,
)
from archmax_temporal.activities.session_store import (
    SessionStore,
    delete_file,
    read_upload,
    sweep_temporaries,
    write_upload,
)
from archmax_temporal.activities.store_errors import (
    FileNotFoundInWorkspaceError,
    NameTooLongError,
    StoreConflictError,
    StoreIOError,
    WorkspaceError,
)
from archmax_temporal.client.config import STORE_SCHEMES, RuntimeConfig
from archmax_temporal.workflows.errors import ConfigurationError
from archmax_temporal.workflows.identity import folder_name
from tests.support.s3server import SECRET_ACCESS_KEY

SID = f"chat-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def s3(s3_url: str) -> ObjectSessionStore:
    store = open_store(s3_url)
    assert isinstance(store, ObjectSessionStore)
    return store


def raw_keys(s3_url: str) -> list[str]:
    """Every key under the test's prefix, read with obstore itself (not through the store)."""
    store = from_url(s3_url, client_options={"allow_http": True})
    return sorted(meta["path"] for batch in obstore.list(store) for meta in batch)


class TestLayout:
    def test_keys_mirror_the_folder_store(self, s3: ObjectSessionStore, s3_url: str) -> None:
        """A session's file is ``<prefix>/<folder_name(id)>/<path>``; shared objects and
        uploads sit beside the session folders, as on disk."""
        opaque = f"<CAF {uuid.uuid4().hex[:6]}@mail>"
        s3.write_bytes(SID, "scratchpad/a.bin", b"\x00\x01")
        s3.write_text(opaque, "trigger.json", "{}")
        assert s3.write_shared_once("_specs/abc.json", b"{}")
        digest = write_upload(s3, b"uploaded")
        assert raw_keys(s3_url) == sorted(
            [
                f"{SID}/scratchpad/a.bin",
                f"{folder_name(opaque)}/trigger.json",
                "_specs/abc.json",
                f"_uploads/{digest}",
            ]
        )
        assert digest == hashlib.sha256(b"uploaded").hexdigest()

    def test_a_memory_url_keeps_its_prefix(self) -> None:
        memory = MemoryStore()
        store = ObjectSessionStore(memory, prefix="/tenant-a/")
        store.write_text(SID, "scratchpad/a.txt", "x")
        assert [m["path"] for b in obstore.list(memory) for m in b] == [
            f"tenant-a/{SID}/scratchpad/a.txt"
        ]


class TestObjectOperations:
    def test_delete_refuses_like_the_folder_store(self, s3: ObjectSessionStore) -> None:
        s3.write_text(SID, "scratchpad/tmp/a.txt", "x")
        with pytest.raises(WorkspaceError, match=r"'scratchpad/tmp' is a folder, not a file"):
            delete_file(s3, SID, "scratchpad/tmp")
        with pytest.raises(FileNotFoundInWorkspaceError, match="does not exist"):
            delete_file(s3, SID, "scratchpad/none.txt")
        with pytest.raises(WorkspaceError, match="a parent folder is a file"):
            delete_file(s3, SID, "scratchpad/tmp/a.txt/b")
        delete_file(s3, SID, "scratchpad/tmp/a.txt")
        assert not s3.exists(SID, "scratchpad/tmp/a.txt")
        assert not s3.exists(SID, "scratchpad/tmp")  # an implied folder goes with its files

    def test_uploads_are_content_addressed_and_written_once(self, s3: ObjectSessionStore) -> None:
        digest = write_upload(s3, b"%PDF\xff")
        assert write_upload(s3, b"%PDF\xff") == digest
        assert read_upload(s3, digest) == b"%PDF\xff"
        with pytest.raises(FileNotFoundInWorkspaceError, match="must share the store"):
            read_upload(s3, hashlib.sha256(b"never uploaded").hexdigest())

    def test_nothing_to_sweep(self, s3: ObjectSessionStore) -> None:
        s3.write_text(SID, "scratchpad/a.txt", "x")
        assert sweep_temporaries(s3, SID, before=time.time() + 3600) == 0
        assert s3.read_text(SID, "scratchpad/a.txt") == "x"

    def test_a_version_is_the_objects_etag(self, s3: ObjectSessionStore) -> None:
        """``write_if`` returns what ``read_versioned`` reads back; a version of another file
        or of no file at all never matches."""
        version = s3.write_if(SID, "artifacts/a.json", b"1", version=None)
        assert s3.read_versioned(SID, "artifacts/a.json") == (b"1", version)
        with pytest.raises(StoreConflictError, match="changed since it was read"):
            s3.write_if(SID, "artifacts/b.json", b"1", version=version)
        assert not s3.exists(SID, "artifacts/b.json")


class TestNames:
    def test_a_name_too_long_is_the_folder_stores_refusal(
        self, s3: ObjectSessionStore, tmp_path: Path
    ) -> None:
        """A 300-byte name: the same class and message as on disk, before any request."""
        disk = FilesystemSessionStore(tmp_path)
        name = "n" * 300

        def attempts(store: SessionStore) -> list[Callable[[], object]]:
            return [
                lambda: store.write_text(SID, f"scratchpad/{name}", "x"),
                lambda: store.read_bytes(SID, f"scratchpad/{name}"),
                lambda: store.list_dir(SID, f"scratchpad/{name}"),
                lambda: store.exists(SID, f"scratchpad/{name}/x"),
            ]

        for on_disk, on_s3 in zip(attempts(disk), attempts(s3), strict=True):
            with pytest.raises(NameTooLongError) as expected:
                on_disk()
            with pytest.raises(NameTooLongError) as caught:
                on_s3()
            assert str(caught.value) == str(expected.value)
            assert caught.value.path == expected.value.path
            assert caught.value.to_application_error().non_retryable
        assert s3.walk(SID, "") == []

    def test_a_key_past_the_stores_limit_is_refused(self, s3: ObjectSessionStore) -> None:
        deep = "/".join(["d" * 200] * 6)
        with pytest.raises(NameTooLongError, match=f"at most {MAX_KEY_BYTES}"):
            s3.write_text(SID, f"scratchpad/{deep}", "x")
        assert s3.walk(SID, "") == []

    def test_a_control_character_is_not_a_name_an_object_store_takes(
        self, s3: ObjectSessionStore
    ) -> None:
        with pytest.raises(WorkspaceError, match="not a valid file name for this store") as caught:
            s3.write_text(SID, "scratchpad/tab\there.txt", "x")
        assert caught.value.path == "scratchpad/tab\there.txt"
        assert caught.value.to_application_error().non_retryable
        assert not s3.exists(SID, "scratchpad/tab\there.txt")
        assert s3.walk(SID, "") == []

    def test_names_s3_keys_may_hold_round_trip(self, s3: ObjectSessionStore) -> None:
        """Spaces, ``#``, ``%``, brackets, quotes and non-ASCII letters are names like any."""
        names = ["a b.txt", "50%.md", "x#y[1]{2}.txt", "q\"uote's.txt", "héllo-日本.md", "..x"]
        for name in names:
            s3.write_text(SID, f"scratchpad/{name}", name)
        assert [e.name for e in s3.list_dir(SID, "scratchpad")] == sorted(names)
        for name in names:
            assert s3.read_text(SID, f"scratchpad/{name}") == name


class TestFailures:
    def test_a_store_that_does_not_answer_is_a_retryable_fault_naming_no_secret(
        self, s3_url: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An endpoint nobody listens on: a :class:`StoreIOError` (Temporal retries it) soon,
        in the session's terms, without the endpoint, the bucket or the credentials."""
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))
            port = closed.getsockname()[1]
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
        store = open_store(s3_url)
        started = time.monotonic()
        for attempt in (
            lambda: store.read_bytes(SID, "scratchpad/a.txt"),
            lambda: store.write_text(SID, "scratchpad/a.txt", "x"),
            lambda: store.exists(SID, "scratchpad/a.txt"),
            lambda: store.list_dir(SID, "scratchpad"),
        ):
            with pytest.raises(StoreIOError) as caught:
                attempt()
            message = str(caught.value)
            assert "'scratchpad" in message and "the session store failed" in message
            assert SECRET_ACCESS_KEY not in message
            assert str(port) not in message and "archmax-sessions" not in message
            assert not caught.value.to_application_error().non_retryable
        assert time.monotonic() - started < 60

    def test_a_refusal_by_the_store_names_its_status_and_code_only(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A 403 (credentials the bucket refuses): the status and the store's error code, not
        the request's URL, its signature, or the secret in the environment."""
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI-hidden")
        store = open_store("memory://")

        def refused(*_args: object, **_kwargs: object) -> None:
            raise GenericError(
                "Generic S3 error: Error performing PUT http://127.0.0.1:9/bucket/pre/chat/"
                "scratchpad/a.txt?X-Amz-Signature=abc123&secret=wJalrXUtnFEMI-hidden in 3ms - "
                'Server returned non-2xx status code: 403 Forbidden: <?xml version="1.0"?>'
                "<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
                "\n\nDebug source:\nGeneric { secret: wJalrXUtnFEMI-hidden }"
            )

        monkeypatch.setattr(obstore, "put", refused)
        with pytest.raises(StoreIOError) as caught:
            store.write_text(SID, "scratchpad/a.txt", "x")
        assert str(caught.value) == (
            "the session store failed on 'scratchpad/a.txt' "
            "(GenericError: HTTP 403 Forbidden, AccessDenied)"
        )
        assert caught.value.path == "scratchpad/a.txt"

    def test_a_missing_bucket_is_a_fault_not_a_missing_file(
        self, s3_url: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A bucket that is not there answers 404 like a missing object: the store says the
        bucket is missing (retryable, the operator's to fix), never "does not exist"."""
        store = open_store(f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/p")
        for attempt in (
            lambda: store.read_bytes(SID, "scratchpad/a.txt"),
            lambda: store.write_text(SID, "scratchpad/a.txt", "x"),
            lambda: store.exists(SID, "scratchpad/a.txt"),
            lambda: store.read_shared("_specs/x.json"),
            lambda: store.write_shared_once("_specs/x.json", b"{}"),
        ):
            with pytest.raises(StoreIOError, match="bucket or container does not exist"):
                attempt()


class TestOpenStore:
    def test_a_path_or_file_url_is_the_folder_store(self, tmp_path: Path) -> None:
        for location in (tmp_path / "s", str(tmp_path / "s"), f"file://{tmp_path / 's'}"):
            store = open_store(location)
            assert isinstance(store, FilesystemSessionStore)
            assert store.root == tmp_path / "s"
        open_store(f"file://{tmp_path / 's'}").write_text(SID, "trigger.json", "{}")
        assert (tmp_path / "s" / SID / "trigger.json").read_text() == "{}"

    def test_object_urls(self, s3_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
        """Opening makes no request; what the provider's builder refuses (an Azure URL with no
        account anywhere) is a :class:`ConfigurationError` naming the location."""
        assert isinstance(open_store(s3_url), ObjectSessionStore)
        memory = open_store("memory://")
        assert isinstance(memory, ObjectSessionStore)
        memory.write_text(SID, "a.txt", "x")
        assert memory.read_text(SID, "a.txt") == "x"
        monkeypatch.delenv("AZURE_STORAGE_ACCOUNT_NAME", raising=False)
        with pytest.raises(ConfigurationError, match=r"'az://container/prefix': .*[Aa]ccount"):
            open_store("az://container/prefix")
        monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", "devstoreaccount1")
        for url in ("gs://bucket/prefix", "az://container/prefix", "s3a://bucket"):
            assert isinstance(open_store(url), ObjectSessionStore)

    @pytest.mark.parametrize(
        ("location", "problem"),
        [
            ("ftp://host/x", "unknown scheme 'ftp'"),
            ("s3://", "names no bucket"),
            ("s3:///prefix", "names no bucket"),
            ("file://host/srv", "absolute folder"),
            ("s3://bucket/p?X-Amz-Signature=hidden", "no query"),
            ("s3://AKIAKEY:hidden@bucket/p", "credentials do not belong in the URL"),
            ("", "empty"),
        ],
    )
    def test_refused_locations(self, location: str, problem: str) -> None:
        with pytest.raises(ConfigurationError, match=problem) as caught:
            open_store(location)
        assert "hidden" not in str(caught.value)
        if location:
            assert repr(describe_store(location)) in str(caught.value)

    def test_archmax_store_opens_through_the_config(self, s3_url: str, tmp_path: Path) -> None:
        """``ARCHMAX_STORE=s3://…`` gives hosts and workers this store (one per location);
        a location it refuses names the variable."""
        config = RuntimeConfig.from_env({"ARCHMAX_STORE": s3_url}, root=tmp_path)
        store = config.session_store()
        assert isinstance(store, ObjectSessionStore) and config.session_store() is store
        store.write_text(SID, "trigger.json", "{}")
        assert open_store(s3_url).read_text(SID, "trigger.json") == "{}"
        folder = RuntimeConfig.from_env({"ARCHMAX_STORE": str(tmp_path / "s")}, root=tmp_path)
        assert isinstance(folder.session_store(), FilesystemSessionStore)
        bad = RuntimeConfig.from_env({"ARCHMAX_STORE": "ftp://host/x"}, root=tmp_path)
        with pytest.raises(ConfigurationError, match=r"^ARCHMAX_STORE: .*unknown scheme 'ftp'"):
            bad.session_store()

    def test_one_list_of_schemes(self) -> None:
        """The schemes ``ARCHMAX_STORE`` takes as a URL are the ones the store opens."""
        assert set(STORE_SCHEMES) == OBJECT_SCHEMES

    def test_describe_store_drops_credentials_and_query(self, tmp_path: Path) -> None:
        assert describe_store("s3://AKIA:hidden@bucket/pre?sig=hidden#f") == "s3://bucket/pre"
        assert describe_store("memory://") == "memory://"
        assert describe_store(tmp_path) == str(tmp_path)
        assert (
            describe_store("abfs://container@account.dfs.core.windows.net/p")
            == "abfs://container@account.dfs.core.windows.net/p"
        )
        assert "hidden" not in describe_store("s3://user:hidden@[bad/x")


T = TypeVar("T")


@pytest.fixture
def sid() -> str:
    return f"contract-{uuid.uuid4().hex[:8]}"


def race(workers: int, attempt: Callable[[int], T]) -> list[T | BaseException]:
    """Run ``attempt(i)`` for each worker at once (all released together by a barrier)."""
    start = threading.Barrier(workers)

    def run(i: int) -> T | BaseException:
        start.wait()
        try:
            return attempt(i)
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(run, range(workers)))


class TestConditionalWritesOnS3:
    def test_two_writers_with_the_same_version_exactly_one_wins(
        self, s3_url: str, sid: str
    ) -> None:
        """Two workers (two stores on the same URL) read the same version and write: one
        write lands, the other is refused with :class:`StoreConflictError` and wrote
        nothing; the winner's version is what a reader sees next."""
        stores = [open_store(s3_url), open_store(s3_url)]
        stores[0].write_if(sid, "artifacts/state.json", b"0", version=None)

        def writer(round_: int, version: str) -> Callable[[int], str]:
            def write(i: int) -> str:
                data = f"{round_}-{i}".encode()
                return stores[i].write_if(sid, "artifacts/state.json", data, version=version)

            return write

        for round_ in range(1, 6):
            _, version = stores[0].read_versioned(sid, "artifacts/state.json")
            assert stores[1].read_versioned(sid, "artifacts/state.json")[1] == version
            outcomes = race(2, writer(round_, version))
            won = [i for i, o in enumerate(outcomes) if isinstance(o, str)]
            lost = [o for o in outcomes if isinstance(o, StoreConflictError)]
            assert len(won) == 1 and len(lost) == 1, outcomes
            assert "changed since it was read" in str(lost[0])
            data, now = stores[1].read_versioned(sid, "artifacts/state.json")
            assert (data, now) == (f"{round_}-{won[0]}".encode(), outcomes[won[0]])

    def test_put_if_absent_is_written_once(self, s3_url: str, sid: str) -> None:
        """Six workers create the same object at once: one creates it, five are refused and
        the object holds the creator's bytes; a shared object likewise."""
        stores = [open_store(s3_url) for _ in range(6)]
        outcomes = race(
            6, lambda i: stores[i].write_if(sid, "artifacts/once.json", b"%d" % i, version=None)
        )
        won = [i for i, o in enumerate(outcomes) if isinstance(o, str)]
        assert len(won) == 1, outcomes
        assert all(isinstance(o, StoreConflictError) for o in outcomes if not isinstance(o, str))
        assert stores[0].read_bytes(sid, "artifacts/once.json") == b"%d" % won[0]

        created = race(6, lambda i: stores[i].write_shared_once("_specs/s.json", b"%d" % i))
        assert sorted(created, key=str) == [False] * 5 + [True]
        assert stores[0].read_shared("_specs/s.json") == b"%d" % created.index(True)
