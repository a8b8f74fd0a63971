"""activities/transcript_log.py: the store's log of each conversation.

Each worker process caches the logs it read; these tests hold that cache to the file when
other workers append to the same log (a session moving between workers), when a retry
repeats a call, when a reset rewinds it, and when a crash tore its last line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError

from archmax_temporal.activities.transcript_log import LOG_DIVERGED, LOG_FILE, TranscriptLogs
from archmax_temporal.workflows import transcript
from archmax_temporal.workflows.hooks import transcript_view
from archmax_temporal.workflows.identity import folder_name
from archmax_temporal.workflows.models import Message, SessionState, ToolCall, TranscriptLog
from archmax_temporal.workflows.transcript import HELD_TEXT_CHARS

SID = "transcript-log-1"


def said(*texts: str) -> list[Message]:
    return [Message(role="user", content=t) for t in texts]


def lines(root: Path) -> list[str]:
    return (root / folder_name(SID) / LOG_FILE).read_text(encoding="utf-8").splitlines()


class TestTranscriptLogs:
    def test_workers_taking_turns_each_see_the_others_appends(self, tmp_path: Path) -> None:
        """A session's calls land on worker A, then B, then A again: A's cached log is
        brought up to the file, never taken for the whole of it."""
        a, b = TranscriptLogs(tmp_path), TranscriptLogs(tmp_path)
        conv, end = a.extend(SID, TranscriptLog(), said("one", "two"))
        conv, end = b.extend(SID, TranscriptLog(base=len(conv), base_hash=end), said("three"))
        conv, end = a.extend(SID, TranscriptLog(base=len(conv), base_hash=end), said("four"))
        assert [m.content for m in conv] == ["one", "two", "three", "four"]
        assert [m.content for m in b.read(SID, 10)] == ["one", "two", "three", "four"]
        assert len(lines(tmp_path)) == 4
        assert a.digest_at(SID, 4) == b.digest_at(SID, 4) == end

    def test_a_retry_writes_nothing_twice(self, tmp_path: Path) -> None:
        logs = TranscriptLogs(tmp_path)
        first = logs.extend(SID, TranscriptLog(), said("one", "two"))
        again = TranscriptLogs(tmp_path).extend(SID, TranscriptLog(), said("one", "two"))
        assert again[1] == first[1] and len(lines(tmp_path)) == 2

    def test_a_rewound_log_is_cut_where_the_session_stands(self, tmp_path: Path) -> None:
        a, b = TranscriptLogs(tmp_path), TranscriptLogs(tmp_path)
        conv, _ = a.extend(SID, TranscriptLog(), said("one", "two", "three"))
        at_one = a.digest_at(SID, 1) or ""
        conv, end = b.extend(SID, TranscriptLog(base=1, base_hash=at_one), said("other"))
        assert [m.content for m in conv] == ["one", "other"]
        assert [m.content for m in a.read(SID, 10)] == ["one", "other"]  # a's cache followed
        assert a.digest_at(SID, 2) == end and a.digest_at(SID, 3) is None

    def test_a_torn_last_line_is_not_part_of_the_log(self, tmp_path: Path) -> None:
        TranscriptLogs(tmp_path).extend(SID, TranscriptLog(), said("one", "two"))
        path = tmp_path / folder_name(SID) / LOG_FILE
        whole = path.read_bytes()
        path.write_bytes(whole[:-9])  # the second line cut short by a crash
        logs = TranscriptLogs(tmp_path)
        assert [m.content for m in logs.read(SID, 10)] == ["one"]
        assert len(lines(tmp_path)) == 1  # the torn line is gone: the next append is clean
        logs.extend(SID, TranscriptLog(base=1, base_hash=logs.digest_at(SID, 1) or ""), said("two"))
        assert [m.content for m in TranscriptLogs(tmp_path).read(SID, 10)] == ["one", "two"]

    def test_a_log_that_lost_what_the_session_recorded_is_a_final_error(
        self, tmp_path: Path
    ) -> None:
        logs = TranscriptLogs(tmp_path)
        logs.extend(SID, TranscriptLog(), said("one"))
        with pytest.raises(ApplicationError) as caught:
            logs.extend(SID, TranscriptLog(base=3, base_hash="f" * 64), said("four"))
        assert caught.value.type == LOG_DIVERGED and caught.value.non_retryable
        assert SID in caught.value.message
        assert f"archmax repair {SID}" in caught.value.message  # what to do about it

    def test_a_line_whose_digest_does_not_chain_ends_the_log(self, tmp_path: Path) -> None:
        """A message edited in place (its JSON still valid, its digest the old one's) is not
        taken for the log: the log ends before it, and the call that names more is refused
        with the repair command."""
        logs = TranscriptLogs(tmp_path)
        _, end = logs.extend(SID, TranscriptLog(), said("one", "two", "three"))
        path = tmp_path / folder_name(SID) / LOG_FILE
        edited = path.read_bytes().replace(b'"content": "two"', b'"content": "2"')
        path.write_bytes(edited)
        fresh = TranscriptLogs(tmp_path)
        assert [m.content for m in fresh.read(SID, 10)] == ["one"]
        with pytest.raises(ApplicationError, match=f"archmax repair {SID}") as caught:
            fresh.extend(SID, TranscriptLog(base=3, base_hash=end), said("four"))
        assert caught.value.type == LOG_DIVERGED


class TestTheWindow:
    """What the workflow keeps of the messages the log holds: shortened, never lost."""

    def state(self, messages: list[Message]) -> SessionState:
        s = SessionState(session_id="w", workflow="w")
        for message in messages:
            transcript.append(s, message)
        return s

    def test_logged_messages_are_shortened_as_hooks_see_them_and_the_rest_kept_whole(
        self,
    ) -> None:
        write = json.dumps({"path": "a.txt", "content": "z" * 30_000, "mode": 3})
        messages = [
            Message(role="user", content="u" * 10_000),
            Message(
                role="assistant",
                tool_calls=[ToolCall(id="c1", name="write_file", arguments=write)],
            ),
            Message(role="tool", tool_call_id="c1", content="t" * 5_000),
            Message(role="assistant", content="a" * 9_000),
        ]
        s = self.state(messages)
        transcript.logged(s, 3, "digest")  # the log holds the first three
        held, newer = s.transcript[:3], s.transcript[3:]
        assert newer == messages[3:]  # not logged yet: whole
        assert [len(m.content or "") for m in held] == [HELD_TEXT_CHARS, 0, HELD_TEXT_CHARS]
        arguments = json.loads(held[1].tool_calls[0].arguments)
        assert arguments == {"path": "a.txt", "content": "z" * HELD_TEXT_CHARS, "mode": 3}
        whole = transcript_view(messages[:3])
        shown = transcript_view(held)
        assert (shown[0], shown[2]) == (whole[0], whole[2])  # a hook is shown the same text
        assert shown[1]["toolCalls"] == [{"name": "write_file", "arguments": arguments}]
        assert s.last_reply == "a" * 9_000

    def test_short_messages_are_the_same_objects(self) -> None:
        messages = [Message(role="user", content="hi"), Message(role="assistant", content="yo")]
        s = self.state(messages)
        transcript.logged(s, 2, "digest")
        assert all(a is b for a, b in zip(s.transcript, messages, strict=True))
