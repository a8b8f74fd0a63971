"""activities/store_errors.py: a store's errors, in the session's own paths."""

from __future__ import annotations

from pathlib import Path

from archmax_temporal.activities.store_errors import (
    FileNotFoundInWorkspaceError,
    StoreCapabilityError,
    StoreIOError,
    hide_host_paths,
    os_error,
    unexpected,
)

SID = "chat-42"


def test_error_travels_typed() -> None:
    err = StoreCapabilityError("nope", "scratchpad/a.pdf")
    app = err.to_application_error()
    assert app.type == "StoreCapabilityError"
    assert app.non_retryable


def test_an_os_error_becomes_a_refusal_or_a_retryable_fault_without_its_host_path(
    tmp_path: Path,
) -> None:
    host = str(tmp_path / SID / "scratchpad" / "a.txt")
    missing = os_error(FileNotFoundError(2, "No such file or directory", host), "scratchpad/a.txt")
    assert type(missing) is FileNotFoundInWorkspaceError
    assert str(missing) == "'scratchpad/a.txt' does not exist"
    full = os_error(OSError(28, "No space left on device", host), "scratchpad/a.txt")
    assert type(full) is StoreIOError and full.retryable
    assert "ENOSPC" in str(full) and str(tmp_path) not in str(full)


def test_host_paths_are_hidden_from_messages_the_runtime_does_not_own(tmp_path: Path) -> None:
    message = f"boom in {tmp_path}/store/x.json and /etc/secret/key.pem; see https://a.b/c/d"
    hidden = hide_host_paths(message, [tmp_path])
    assert str(tmp_path) not in hidden and "/etc/secret" not in hidden
    assert f"<{tmp_path.name}>" in hidden and "…/key.pem" in hidden
    assert "https://a.b/c/d" in hidden
    wired = unexpected(ValueError(message), [tmp_path])
    assert wired.type == "ValueError" and str(tmp_path) not in wired.message
    assert not wired.non_retryable
