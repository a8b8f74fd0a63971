"""The session store on object storage (S3, GCS, Azure Blob, or in memory), and
:func:`open_store`, which opens a store from its location (a folder or a URL).

:class:`ObjectSessionStore` keeps the same layout as the folder store, as keys: a session's file
``scratchpad/notes.md`` is ``<prefix>/<folder_name(session id)>/scratchpad/notes.md``, a shared
object ``_specs/<hash>.json`` is ``<prefix>/_specs/<hash>.json``, an upload
``<prefix>/_uploads/<sha256>``. Folders are implied by the keys below them (as in
:class:`~archmax_temporal.activities.memory_store.MemorySessionStore`): a folder exists while a file
is in it.

It answers every operation of :class:`~archmax_temporal.activities.session_store.SessionStore` as
the folder store does, with the same error classes and messages: a missing file, a folder read as a
file, a write under a file, a name over 255 bytes. Writes are single atomic puts (readers see the
old object or the new, never half), so nothing is swept. Conditional writes are the store's own:
``put`` if absent (``If-None-Match: *``) and ``put`` if still at the version read (``If-Match:
<etag>``); the loser gets :class:`StoreConflictError` and nothing is written.

Errors are translated at one boundary (:func:`_translated`): a missing object is
:class:`FileNotFoundInWorkspaceError`; every other failure of the store or the network
(unreachable, refused credentials, a missing bucket, a timeout) is :class:`StoreIOError`,
retried by Temporal, its message naming the session-relative path and the failure (an HTTP
status, the store's error code), never a URL, a bucket's key or a credential.

What the folder store refuses that an object store cannot tell (a symlink) does not arise; what
an object store refuses that a folder takes, a name with a control character (U+0000-U+001F,
U+007F), is refused as a name "not valid for this store", and a key over
:data:`MAX_KEY_BYTES` as :class:`NameTooLongError`, before any request.

Two writers racing on one name (``a`` and ``a/b``) can both succeed on an object store: the
checks that refuse a write under a file are reads before the put, not a lock. The runtime
writes each session from one workflow at a time, so they never race there.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Final
from urllib.parse import SplitResult, unquote, urlsplit

import obstore
from obstore.exceptions import AlreadyExistsError, BaseError, PreconditionError
from obstore.store import MemoryStore, from_url

from archmax_temporal.activities.folder_store import FilesystemSessionStore
from archmax_temporal.activities.session_paths import normalize_path, shared_key
from archmax_temporal.activities.session_store import (
    UPLOADS,
    Entry,
    SessionStore,
    decode_text,
    encode_text,
)
from archmax_temporal.activities.store_errors import (
    FileNotFoundInWorkspaceError,
    NameTooLongError,
    PathEscapeError,
    StoreCapabilityError,
    StoreConflictError,
    StoreIOError,
    WorkspaceError,
    os_error,
    shown,
)
from archmax_temporal.workflows.errors import ConfigurationError
from archmax_temporal.workflows.identity import folder_name
from archmax_temporal.workflows.zones import ARTIFACTS, CHECKPOINTS

if TYPE_CHECKING:
    from obstore.store import ClientConfig, ObjectStore, RetryConfig

MAX_NAME_BYTES: Final = 255
"""The longest name (one path segment) a session path may hold, in UTF-8 bytes: what most file
systems take, so a session moves between the folder store and an object store unchanged."""

MAX_KEY_BYTES: Final = 1024
"""The longest key S3 (and GCS) take, in UTF-8 bytes, the store's prefix and the session's
folder included."""

REQUEST_TIMEOUT: Final = timedelta(seconds=20)
"""The longest one request to the store may take, its body included."""

CONNECT_TIMEOUT: Final = timedelta(seconds=5)
"""The longest the client waits to connect to the store."""

RETRIES: Final[RetryConfig] = {
    "max_retries": 2,
    "retry_timeout": timedelta(seconds=10),
    "backoff": {
        "init_backoff": timedelta(milliseconds=100),
        "max_backoff": timedelta(seconds=2),
        "base": 2,
    },
}
"""The client's own retries of a request (connection errors, 5xx): a few, quickly. Temporal
owns retries: a store that stays down fails the activity (:class:`StoreIOError`), which
Temporal retries with its own backoff, never the client for minutes inside one attempt."""

OBJECT_SCHEMES: Final = frozenset({"s3", "s3a", "gs", "az", "azure", "abfs", "abfss", "memory"})
"""URL schemes :func:`open_store` opens as an :class:`ObjectSessionStore`
(``archmax_temporal.client.config``'s ``STORE_SCHEMES`` names the same, for ``ARCHMAX_STORE``; a
test holds them equal)."""

_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_URL: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S*")
_STATUS: Final = re.compile(r"status code: (\d{3})(?: ([A-Za-z][A-Za-z -]*[A-Za-z]))?")
_CODE: Final = re.compile(r"<Code>([A-Za-z0-9.]+)</Code>")
_NO_CONTAINER: Final = ("NoSuchBucket", "ContainerNotFound", "The specified bucket does not exist")
_SECRET_VARIABLES: Final = (
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_ACCESS_KEY",
    "AZURE_STORAGE_SAS_KEY",
    "AZURE_STORAGE_TOKEN",
    "AZURE_CLIENT_SECRET",
    "GOOGLE_SERVICE_ACCOUNT_KEY",
)


def _reason(exc: Exception) -> str:
    """What went wrong, for a message: the error's kind and the HTTP status and error code
    when the store answered, else the last clause of its text; URLs (which name the bucket and
    could carry a signed query) and any credential the environment holds are left out."""
    text = str(exc).split("Debug source:")[0]
    status = _STATUS.search(text)
    if status is not None:
        code = _CODE.search(text)
        detail = f"HTTP {status.group(1)}"
        detail += f" {status.group(2)}" if status.group(2) else ""
        detail += f", {code.group(1)}" if code else ""
    else:
        lines = text.strip().splitlines()
        detail = lines[0].rsplit(" - ", 1)[-1].strip() if lines else ""
    detail = _URL.sub("<url>", detail)
    for variable in _SECRET_VARIABLES:
        secret = os.environ.get(variable, "")
        if len(secret) >= 4:
            detail = detail.replace(secret, "***")
    detail = shown(detail, 200)
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


def _no_container(exc: Exception) -> bool:
    """Whether ``exc`` says the bucket (container) is missing: S3 and Azure answer 404 for it,
    which the client reports as a missing object."""
    return any(marker in str(exc) for marker in _NO_CONTAINER)


def _store_failure(exc: Exception, rel: str) -> StoreIOError:
    """``exc``, a failure of the store itself while working on ``rel``, as a retryable
    :class:`StoreIOError` in the session's terms."""
    reason = "the bucket or container does not exist" if _no_container(exc) else _reason(exc)
    return StoreIOError(f"the session store failed on '{shown(rel)}' ({reason})", rel)


def _not_found(rel: str) -> WorkspaceError:
    """The folder store's refusal of a missing ``rel``, word for word."""
    return os_error(FileNotFoundError(errno.ENOENT, "No such file or directory"), rel)


@contextmanager
def _translated(rel: str) -> Iterator[None]:
    """The one boundary where the object store's errors become the session store's: a missing
    object is :class:`FileNotFoundInWorkspaceError`, a lost conditional write
    :class:`StoreConflictError`, a path the store's parser refuses a refusal naming it, and
    anything else the store or the network raises a :class:`StoreIOError`."""
    try:
        yield
    except WorkspaceError:
        raise
    except FileNotFoundError as exc:
        if _no_container(exc):
            raise _store_failure(exc, rel) from None
        raise _not_found(rel) from None
    except (AlreadyExistsError, PreconditionError):
        raise StoreConflictError(
            f"'{shown(rel)}' was written by another writer; nothing written", rel
        ) from None
    except ValueError:  # obstore's path parser: checked before, so a name it still refuses
        raise os_error(OSError(errno.EINVAL, "Invalid argument"), rel) from None
    except (BaseError, OSError) as exc:
        raise _store_failure(exc, rel) from None


def _check_name(rel: str, key_bytes: int) -> None:
    """Refuse, before any request, a path no store of this project takes: a name over
    :data:`MAX_NAME_BYTES` (as the folder store does), a control character, a key over
    :data:`MAX_KEY_BYTES` (``key_bytes``: the whole key's length)."""
    for segment in rel.split("/") if rel else ():
        if len(segment.encode()) > MAX_NAME_BYTES:
            raise os_error(OSError(errno.ENAMETOOLONG, "File name too long"), rel)
        if _CONTROL.search(segment):
            raise os_error(OSError(errno.EINVAL, "Invalid argument"), rel)
    if key_bytes > MAX_KEY_BYTES:
        raise NameTooLongError(
            f"'{shown(rel)}': this path is longer than the store allows ({key_bytes} bytes "
            f"with the store's prefix and the session's folder; at most {MAX_KEY_BYTES})",
            rel,
        )


_RUNTIME_AREAS: Final = frozenset({CHECKPOINTS, ARTIFACTS})
"""The session areas only the runtime writes, each document at a fixed place: a conditional
write there skips the folder checks (a list and a head per folder above it)."""


class ObjectSessionStore:
    """Sessions as keys of an object store (an ``obstore`` store): ``<prefix>/<folder>/<path>``.

    ``prefix`` is prepended to every key (a store opened from ``s3://bucket/prefix`` keeps
    that prefix itself; this one is for a store that has none, such as ``memory://``).
    ``description`` names the store in messages and ``repr`` (see :func:`describe_store`).
    """

    supports_bytes: bool = True

    def __init__(self, store: ObjectStore, *, prefix: str = "", description: str = "") -> None:
        self._store = store
        self._prefix = prefix.strip("/")
        self._description = description or type(store).__name__
        own = getattr(store, "prefix", None)  # an S3, GCS or Azure store's own prefix
        self._own_prefix_bytes = len(str(own).encode()) + 1 if own else 0

    @property
    def description(self) -> str:
        """The store's location for a message (no credentials, no query)."""
        return self._description

    def __repr__(self) -> str:
        return f"ObjectSessionStore({self._description!r})"

    # -- keys ------------------------------------------------------------------------------

    def _full(self, key: str) -> str:
        return f"{self._prefix}/{key}" if self._prefix else key

    def _locate(self, session_id: str, path: str) -> tuple[str, str, str]:
        """``(folder key, file key, rel)`` of ``path`` in ``session_id``'s folder; the file key
        is the folder's own for the session folder itself (``rel == ""``)."""
        rel = normalize_path(path)
        folder = self._full(folder_name(session_id))
        key = f"{folder}/{rel}" if rel else folder
        _check_name(rel, self._own_prefix_bytes + len(key.encode()))
        return folder, key, rel

    def _shared(self, key: str) -> tuple[str, str]:
        rel = shared_key(key)
        full = self._full(rel)
        _check_name(rel, self._own_prefix_bytes + len(full.encode()))
        return full, rel

    # -- requests ----------------------------------------------------------------------------

    def _get(self, key: str, rel: str) -> tuple[bytes, str | None] | None:
        """The object's bytes and ETag, or None when there is none."""
        with _translated(rel):
            try:
                result = obstore.get(self._store, key)
                return bytes(result.bytes()), result.meta["e_tag"]
            except FileNotFoundError as exc:
                if _no_container(exc):
                    raise
                return None

    def _is_object(self, key: str, rel: str) -> bool:
        with _translated(rel):
            try:
                obstore.head(self._store, key)
            except FileNotFoundError as exc:
                if _no_container(exc):
                    raise
                return False
            return True

    def _is_folder(self, key: str, rel: str) -> bool:
        """Whether any object lies below ``key`` (one list request, one page)."""
        with _translated(rel):
            for batch in obstore.list(self._store, key, chunk_size=1):
                if any(meta["path"].startswith(f"{key}/") for meta in batch):
                    return True
            return False

    def _parent_file(self, folder: str, rel: str) -> bool:
        """Whether a folder above ``rel`` inside the session is a file."""
        parts = rel.split("/")
        return any(
            self._is_object(f"{folder}/{'/'.join(parts[:end])}", rel)
            for end in range(1, len(parts))
        )

    def _missing(self, folder: str, key: str, rel: str) -> WorkspaceError:
        """Why there is no file at ``rel``, as the folder store says it: a folder there, a
        file above it, or nothing at all."""
        if self._is_folder(key, rel):
            return WorkspaceError(f"'{rel or '.'}' is a folder, not a file", rel)
        if rel and self._parent_file(folder, rel):
            return os_error(NotADirectoryError(errno.ENOTDIR, "Not a directory"), rel)
        return _not_found(rel)

    def _check_writable(self, folder: str, key: str, rel: str) -> None:
        """Refuse a write the folder store refuses: the session folder, a folder, a path
        under a file."""
        if not rel:
            raise WorkspaceError("cannot write the session folder itself", rel)
        if self._is_folder(key, rel):
            raise WorkspaceError(f"'{rel}' is a folder, not a file", rel)
        if self._parent_file(folder, rel):
            raise WorkspaceError(f"cannot write '{rel}': a parent is a file", rel)

    def _put(self, key: str, rel: str, data: bytes) -> str | None:
        with _translated(rel):
            return obstore.put(self._store, key, bytes(data), use_multipart=False)["e_tag"]

    # -- the protocol ------------------------------------------------------------------------

    def _read(self, session_id: str, path: str) -> tuple[bytes, str | None]:
        """The file's bytes and ETag (None from a store that gives none)."""
        folder, key, rel = self._locate(session_id, path)
        found = self._get(key, rel) if rel else None
        if found is None:
            raise self._missing(folder, key, rel)
        return found

    def read_bytes(self, session_id: str, path: str) -> bytes:
        return self._read(session_id, path)[0]

    def read_text(self, session_id: str, path: str) -> str:
        return decode_text(self.read_bytes(session_id, path), normalize_path(path))

    def write_bytes(self, session_id: str, path: str, data: bytes) -> None:
        folder, key, rel = self._locate(session_id, path)
        self._check_writable(folder, key, rel)
        self._put(key, rel, data)

    def write_text(self, session_id: str, path: str, text: str) -> None:
        self.write_bytes(session_id, path, encode_text(text, path))

    def delete(self, session_id: str, path: str) -> None:
        """Remove one file (a folder is refused), or :class:`FileNotFoundInWorkspaceError`."""
        folder, key, rel = self._locate(session_id, path)
        if not rel or not self._is_object(key, rel):
            raise self._missing(folder, key, rel)
        with _translated(rel):
            obstore.delete(self._store, key)

    def exists(self, session_id: str, path: str) -> bool:
        try:
            rel = normalize_path(path)
        except PathEscapeError:
            return False
        if _CONTROL.search(rel):  # a name no object store holds
            return False
        _folder, key, rel = self._locate(session_id, rel)
        if rel and self._is_object(key, rel):
            return True
        return self._is_folder(key, rel)

    def list_dir(self, session_id: str, path: str) -> list[Entry]:
        _folder, key, rel = self._locate(session_id, path)
        with _translated(rel):
            listing = obstore.list_with_delimiter(self._store, key)
        entries: dict[str, Entry] = {}
        for meta in listing["objects"]:
            name = meta["path"][len(key) + 1 :]
            if meta["path"].startswith(f"{key}/") and name and "/" not in name:
                entries[name] = Entry(name, False, int(meta["size"]))
        for prefix in listing["common_prefixes"]:
            name = prefix.rstrip("/")[len(key) + 1 :]
            if prefix.startswith(f"{key}/") and name and "/" not in name:
                entries[name] = Entry(name, True, 0)
        if not entries:
            if not rel:
                return []
            if self._is_object(key, rel):
                raise WorkspaceError(f"'{rel}' is a file, not a folder", rel)
            raise FileNotFoundInWorkspaceError(f"'{rel}' does not exist", rel)
        return [entries[name] for name in sorted(entries)]

    def walk(self, session_id: str, path: str) -> list[str]:
        _folder, key, rel = self._locate(session_id, path)
        found: list[str] = []
        with _translated(rel):
            for batch in obstore.list(self._store, key, chunk_size=1000):
                found += [
                    meta["path"][len(key) + 1 :]
                    for meta in batch
                    if meta["path"].startswith(f"{key}/")
                ]
        return sorted(name for name in found if name)

    def read_versioned(self, session_id: str, path: str) -> tuple[bytes, str]:
        data, version = self._read(session_id, path)
        if version is None:
            rel = normalize_path(path)
            raise StoreCapabilityError(
                f"this session store gives no versions ('{shown(rel)}'): no conditional writes",
                rel,
            )
        return data, version

    def version_of(self, session_id: str, path: str) -> str | None:
        """The object's ETag without reading it (one ``HEAD``); None when there is no file."""
        _folder, key, rel = self._locate(session_id, path)
        if not rel:
            return None
        with _translated(rel):
            try:
                return obstore.head(self._store, key)["e_tag"]
            except FileNotFoundError as exc:
                if _no_container(exc):
                    raise
                return None

    def write_if(self, session_id: str, path: str, data: bytes, *, version: str | None) -> str:
        folder, key, rel = self._locate(session_id, path)
        if rel.split("/", 1)[0] not in _RUNTIME_AREAS:  # the runtime's own areas hold no
            self._check_writable(folder, key, rel)  # folder where it writes a file: no checks
        try:
            with _translated(rel):
                result = obstore.put(
                    self._store,
                    key,
                    bytes(data),
                    mode="create" if version is None else {"e_tag": version},
                    use_multipart=False,
                )
        except StoreConflictError:
            what = (
                "already exists" if version is None else "changed since it was read (a newer write)"
            )
            raise StoreConflictError(f"'{rel}' {what}; nothing written", rel) from None
        if result["e_tag"] is None:
            raise StoreCapabilityError(
                f"this session store gives no versions ('{shown(rel)}'): no conditional writes",
                rel,
            )
        return result["e_tag"]

    def read_shared(self, key: str) -> bytes:
        full, rel = self._shared(key)
        found = self._get(full, rel)
        if found is None:
            if self._is_folder(full, rel):
                raise WorkspaceError(f"'{rel}' is a folder, not a file", rel)
            raise _not_found(rel)
        return found[0]

    def write_shared_once(self, key: str, data: bytes) -> bool:
        full, rel = self._shared(key)
        try:
            with _translated(rel):
                obstore.put(self._store, full, bytes(data), mode="create", use_multipart=False)
        except StoreConflictError:
            return False
        return True

    def sweep_temporaries(self, session_id: str, before: float) -> int:
        """Nothing to sweep: a put is atomic and leaves no temporary behind."""
        return 0

    def write_upload(self, data: bytes) -> str:
        """Store ``data`` under ``_uploads/<sha256>`` (once); the digest is the reference."""
        digest = hashlib.sha256(data).hexdigest()
        self.write_shared_once(f"{UPLOADS}/{digest}", data)
        return digest

    def read_upload(self, digest: str) -> bytes:
        """The uploaded bytes, or :class:`FileNotFoundInWorkspaceError` (a host and a worker
        that do not share the store)."""
        full, rel = self._shared(f"{UPLOADS}/{digest}")
        found = self._get(full, rel)
        if found is None:
            raise FileNotFoundInWorkspaceError(
                f"upload {digest[:12]}… is not in the session store: the host and the workers "
                "must share the store (ARCHMAX_STORE)",
                "",
            )
        return found[0]


# --- opening a store by its location --------------------------------------------------------


def _split(location: str) -> SplitResult | None:
    try:
        return urlsplit(location)
    except ValueError:
        return None


def describe_store(location: str | Path) -> str:
    """``location`` for a message: a folder as given; a URL as ``scheme://host/path``, without
    a user, a password, a query or a fragment."""
    text = str(location)
    if "://" not in text:
        return text
    parts = _split(text)
    if parts is None:
        scheme, _, rest = text.partition("://")
        host = re.split(r"[/?#]", rest, maxsplit=1)[0].rpartition("@")[2]
        return f"{scheme}://{host}"
    userinfo, at, host = parts.netloc.rpartition("@")
    if at and ":" not in userinfo and parts.scheme.lower() in _CONTAINER_AT_ACCOUNT:
        host = f"{userinfo}@{host}"  # abfs://<container>@<account>…: no credential
    return f"{parts.scheme}://{host}{parts.path}"


_CONTAINER_AT_ACCOUNT: Final = frozenset({"abfs", "abfss"})
"""Schemes whose URL names ``<container>@<account>`` where others put a user."""


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _client_options(scheme: str, env: Mapping[str, str]) -> ClientConfig:
    """The HTTP client's options: the timeouts, and plain HTTP where the environment asks for
    it: an S3-compatible server such as MinIO at ``AWS_ENDPOINT_URL=http://…``, or
    ``<AWS|GOOGLE|AZURE>_ALLOW_HTTP=true``."""
    options: ClientConfig = {"timeout": REQUEST_TIMEOUT, "connect_timeout": CONNECT_TIMEOUT}
    if scheme in ("s3", "s3a"):
        endpoint = env.get("AWS_ENDPOINT_URL") or env.get("AWS_ENDPOINT") or ""
        insecure = endpoint.lower().startswith("http://") or _truthy(env.get("AWS_ALLOW_HTTP"))
    elif scheme == "gs":
        insecure = _truthy(env.get("GOOGLE_ALLOW_HTTP"))
    else:
        insecure = _truthy(env.get("AZURE_ALLOW_HTTP"))
    if insecure:
        options["allow_http"] = True
    return options


def open_store(location: str | Path) -> SessionStore:
    """The session store at ``location``: a folder (a path, or ``file:///…``) as a
    :class:`FilesystemSessionStore`; ``s3://bucket/prefix``, ``gs://…``, ``az://…`` /
    ``abfs://…`` or ``memory://`` as an :class:`ObjectSessionStore`. Credentials, region and
    endpoint come from the provider's environment variables (``AWS_ACCESS_KEY_ID``,
    ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``, ``AWS_ENDPOINT_URL``, ``GOOGLE_…``,
    ``AZURE_…``), never from the URL; ``AWS_ENDPOINT_URL=http://…`` (or ``AWS_ALLOW_HTTP``)
    allows plain HTTP. An unknown scheme or a malformed URL is a
    :class:`ConfigurationError` naming it (without credentials). No request is made."""
    if isinstance(location, Path):
        return FilesystemSessionStore(location)
    shown = describe_store(location)
    if "://" not in location:
        if not location.strip():
            raise ConfigurationError("the session store location is empty")
        return FilesystemSessionStore(Path(location))
    parts = _split(location)
    if parts is None:
        raise ConfigurationError(f"session store {shown!r} is not a valid URL")
    scheme = parts.scheme.lower()
    if scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path:
            raise ConfigurationError(
                f"session store {shown!r}: a file URL names an absolute folder "
                "(file:///srv/sessions)"
            )
        return FilesystemSessionStore(Path(unquote(parts.path)))
    if scheme not in OBJECT_SCHEMES:
        known = ", ".join(sorted(OBJECT_SCHEMES | {"file"}))
        raise ConfigurationError(
            f"session store {shown!r}: unknown scheme {scheme!r} (a folder, or one of {known})"
        )
    if parts.query or parts.fragment or "?" in location or "#" in location:
        raise ConfigurationError(
            f"session store {shown!r}: a store URL takes no query or fragment; options and "
            "credentials come from the environment"
        )
    if parts.password is not None:
        raise ConfigurationError(
            f"session store {shown!r}: credentials do not belong in the URL; set them in the "
            "environment (AWS_ACCESS_KEY_ID, ..., AZURE_STORAGE_ACCOUNT_KEY, ...)"
        )
    if scheme == "memory":
        prefix = f"{parts.netloc}/{parts.path}".strip("/")
        return ObjectSessionStore(MemoryStore(), prefix=prefix, description=shown)
    if not parts.netloc:
        raise ConfigurationError(
            f"session store {shown!r}: the URL names no bucket or container "
            f"({scheme}://<bucket>/<prefix>)"
        )
    try:
        store = from_url(
            location,
            client_options=_client_options(scheme, os.environ),
            retry_config=RETRIES,
        )
    except (BaseError, ValueError, OSError) as exc:
        raise ConfigurationError(f"session store {shown!r}: {_reason(exc)}") from None
    return ObjectSessionStore(store, description=shown)
