"""activities/transcript_log.py: the store's log of each conversation.

The log is segments any worker writes; these tests hold each worker's cache to the chain a
call names when other workers append (a session moving between workers), when a retry
repeats a call, when a reset branches it, and when a segment is damaged.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError

from archmax_temporal.activities.disk_files import DISK
from archmax_temporal.activities.folder_store import FilesystemSessionStore
from archmax_temporal.activities.memory_store import MemorySessionStore
from archmax_temporal.activities.transcript_log import (
    COMPACT_EVERY,
    LEGACY_LOG_FILE,
    SEGMENTS_DIR,
    TranscriptLogs,
    chain,
    log_lines,
)
from archmax_temporal.workflows import transcript
from archmax_temporal.workflows.hooks import transcript_view
from archmax_temporal.workflows.identity import folder_name
from archmax_temporal.workflows.models import (
    Message,
    SessionState,
    ToolCall,
    ToolSchema,
    TranscriptLog,
)
from archmax_temporal.workflows.transcript import HELD_TEXT_CHARS, LOG_DIVERGED

SID = "transcript-log-1"


def said(*texts: str) -> list[Message]:
    return [Message(role="user", content=t) for t in texts]


def store(root: Path) -> FilesystemSessionStore:
    return FilesystemSessionStore(root)


def segments(root: Path) -> list[Path]:
    return sorted((root / folder_name(SID) / SEGMENTS_DIR).iterdir())


def at(conv: list[Message], end: str) -> TranscriptLog:
    return TranscriptLog(base=len(conv), base_hash=end)


class TestTranscriptLogs:
    def test_workers_taking_turns_each_see_the_others_appends(self, tmp_path: Path) -> None:
        """A session's calls land on worker A, then B, then A again: each reads the chain
        the call names from the segments, never its own cache for the whole of it."""
        a, b = TranscriptLogs(store(tmp_path)), TranscriptLogs(store(tmp_path))
        conv, end = a.extend(SID, TranscriptLog(), said("one", "two"))
        conv, end = b.extend(SID, at(conv, end), said("three"))
        conv, end = a.extend(SID, at(conv, end), said("four"))
        assert [m.content for m in conv] == ["one", "two", "three", "four"]
        assert [m.content for m in b.read(SID, at(conv, end))] == ["one", "two", "three", "four"]
        assert len(segments(tmp_path)) == 3  # one per call that brought messages
        assert a.chain(SID, at(conv, end))[1] == b.chain(SID, at(conv, end))[1]

    def test_a_retry_writes_nothing_twice(self, tmp_path: Path) -> None:
        logs = TranscriptLogs(store(tmp_path))
        first = logs.extend(SID, TranscriptLog(), said("one", "two"))
        again = TranscriptLogs(store(tmp_path)).extend(SID, TranscriptLog(), said("one", "two"))
        assert again[1] == first[1] and len(segments(tmp_path)) == 1

    def test_a_reset_branch_and_the_old_one_each_read_back_as_named(self, tmp_path: Path) -> None:
        a, b = TranscriptLogs(store(tmp_path)), TranscriptLogs(store(tmp_path))
        conv, old_end = a.extend(SID, TranscriptLog(), said("one"))
        conv, old_end = a.extend(SID, at(conv, old_end), said("two", "three"))
        at_one = a.chain(SID, TranscriptLog(base=3, base_hash=old_end))[1][0]
        conv, end = b.extend(SID, TranscriptLog(base=1, base_hash=at_one), said("other"))
        assert [m.content for m in conv] == ["one", "other"]
        fresh = TranscriptLogs(store(tmp_path))
        assert [m.content for m in fresh.read(SID, at(conv, end))] == ["one", "other"]
        old = TranscriptLog(base=3, base_hash=old_end)
        assert [m.content for m in fresh.read(SID, old)] == ["one", "two", "three"]

    def test_a_failover_reads_only_the_segments_back(self, tmp_path: Path) -> None:
        """A worker new to a session walks the chain back once; its next call reads
        nothing."""
        a = TranscriptLogs(store(tmp_path))
        conv, end = a.extend(SID, TranscriptLog(), said("one"))
        for n in range(5):
            conv, end = a.extend(SID, at(conv, end), said(f"more {n}"))
        b = TranscriptLogs(store(tmp_path))
        conv, end = b.extend(SID, at(conv, end), said("seven"))
        assert len(conv) == 7 and b.reads == 6
        b.extend(SID, at(conv, end), said("eight"))
        assert b.reads == 6

    def test_a_fresh_worker_walks_a_long_session_in_few_reads(self, tmp_path: Path) -> None:
        """Every 16th segment is followed by one spanning the 16 before it (every 256th by
        one spanning 256): a worker new to a 300-call session reads at most a few dozen."""
        a = TranscriptLogs(store(tmp_path))
        conv, end = a.extend(SID, TranscriptLog(), said("m"))
        for n in range(299):
            conv, end = a.extend(SID, at(conv, end), said(f"m{n}"))
        b = TranscriptLogs(store(tmp_path))
        assert [m.content for m in b.read(SID, at(conv, end))] == [m.content for m in conv]
        assert b.reads <= 2 * COMPACT_EVERY
        assert len(segments(tmp_path)) == 300 + 300 // COMPACT_EVERY + 1

    def test_a_prompt_is_read_from_the_store_once(self, tmp_path: Path) -> None:
        """A prompt another worker kept is read from the store once; one the store lost is
        the final ``PromptMissing`` (the workflow then sends the text), not a broken log."""
        a, b = TranscriptLogs(store(tmp_path)), TranscriptLogs(store(tmp_path))
        digest = transcript.digest_of("be brief")
        assert a.prompt(SID, digest, "be brief") == "be brief"
        assert b.prompt(SID, digest, None) == "be brief"
        (tmp_path / folder_name(SID) / f"checkpoints/prompts/{digest}").unlink()
        assert a.prompt(SID, digest, None) == "be brief"  # this process wrote it
        assert b.prompt(SID, digest, None) == "be brief"  # this one read it before
        with pytest.raises(ApplicationError, match="sent again with the text") as lost:
            TranscriptLogs(store(tmp_path)).prompt(SID, digest, None)
        assert (lost.value.type, lost.value.non_retryable) == (transcript.PROMPT_MISSING, True)

    def test_a_prompt_cut_short_is_missing_not_read(self, tmp_path: Path) -> None:
        """A prompt file whose bytes do not hash to its name (a crash cut the unsynced
        write short) is never handed to the model: it is the final ``PromptMissing``."""
        text = "You answer customers about their orders. Be brief."
        digest = transcript.digest_of(text)
        TranscriptLogs(store(tmp_path)).prompt(SID, digest, text)
        path = tmp_path / folder_name(SID) / f"checkpoints/prompts/{digest}"
        path.write_bytes(text.encode()[:10])
        with pytest.raises(ApplicationError, match="does not match its digest") as torn:
            TranscriptLogs(store(tmp_path)).prompt(SID, digest, None)
        assert (torn.value.type, torn.value.non_retryable) == (transcript.PROMPT_MISSING, True)

    def test_tool_schemas_are_parsed_once_per_digest_and_kept_in_each_session(
        self, tmp_path: Path
    ) -> None:
        """The schemas a call names by digest: written to each session's store the first
        time (a worker that never saw them reads them there), parsed once in this process."""
        schemas = [
            ToolSchema(name="lookup", description="Find an order.", parameters={"type": "object"}),
            ToolSchema(name="note", description="Keep a note.", parameters={"type": "object"}),
        ]
        digest = transcript.digest_of(transcript.schemas_text(schemas))
        a, b = TranscriptLogs(store(tmp_path)), TranscriptLogs(store(tmp_path))
        first = a.tools(SID, digest, schemas)
        again = a.tools(SID, digest, [])
        other = a.tools("transcript-log-2", digest, schemas)
        assert first == again == other == schemas
        assert all(x is y for x, y in zip(again, other, strict=True))  # one parse
        assert b.tools("transcript-log-2", digest, []) == schemas  # from that session's store
        assert (
            tmp_path / folder_name("transcript-log-2") / "checkpoints/prompts" / digest
        ).exists()

    def test_a_log_that_lost_what_the_session_recorded_is_a_final_error(
        self, tmp_path: Path
    ) -> None:
        logs = TranscriptLogs(store(tmp_path))
        logs.extend(SID, TranscriptLog(), said("one"))
        with pytest.raises(ApplicationError) as caught:
            logs.extend(SID, TranscriptLog(base=3, base_hash="f" * 64), said("four"))
        assert caught.value.type == LOG_DIVERGED and caught.value.non_retryable
        assert SID in caught.value.message
        assert f"archmax repair {SID}" in caught.value.message  # what to do about it

    def test_a_segment_whose_lines_do_not_chain_is_not_the_log(self, tmp_path: Path) -> None:
        """A message edited in place (its JSON still valid, its digest the old one's) is not
        taken for the log: the call that names it is refused with the repair command."""
        logs = TranscriptLogs(store(tmp_path))
        conv, end = logs.extend(SID, TranscriptLog(), said("one", "two", "three"))
        (path,) = segments(tmp_path)
        path.write_bytes(path.read_bytes().replace(b'"content": "two"', b'"content": "2"'))
        fresh = TranscriptLogs(store(tmp_path))
        with pytest.raises(ApplicationError, match=f"archmax repair {SID}") as caught:
            fresh.extend(SID, at(conv, end), said("four"))
        assert caught.value.type == LOG_DIVERGED

    def test_a_log_file_from_before_segments_is_read_once(self, tmp_path: Path) -> None:
        """A folder store written before segments keeps its log in one file: a chain the
        segments do not reach is read from it (a torn last line is not part of it), then
        kept as a segment."""
        conv, end = TranscriptLogs(MemorySessionStore()).extend(
            SID, TranscriptLog(), said("one", "two")
        )
        legacy = tmp_path / folder_name(SID) / LEGACY_LOG_FILE
        legacy.parent.mkdir(parents=True)
        chained, previous = [], ""
        for message in conv:
            previous = chain(previous, message)
            chained.append((message, previous))
        legacy.write_text(log_lines(0, chained) + '{"n": 2, "h": "torn', encoding="utf-8")
        logs = TranscriptLogs(store(tmp_path))
        conv, end = logs.extend(SID, at(conv, end), said("three"))
        assert [m.content for m in conv] == ["one", "two", "three"]
        assert len(segments(tmp_path)) == 2  # the file's chain as a segment, and the call's
        legacy.unlink()
        again = TranscriptLogs(store(tmp_path)).read(SID, at(conv, end))
        assert [m.content for m in again] == ["one", "two", "three"]


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


def test_a_kept_tool_result_and_a_prompt_are_written_without_an_fsync(tmp_path: Path) -> None:
    """A tool result and a prompt both have their text in the history (a lost one is only
    sent again whole): neither costs the disk an fsync, and both read back from the folder."""
    logs = TranscriptLogs(store(tmp_path))
    text = "a long tool result\n" * 40
    before = DISK.snapshot()
    assert logs.keep_result("s1", text)
    kept = DISK.snapshot()
    assert (kept["writes"] - before["writes"], kept["fsyncs"] - before["fsyncs"]) == (1, 0)
    prompt = "You answer customers."
    logs.prompt("s1", transcript.digest_of(prompt), prompt)
    after = DISK.snapshot()
    assert (after["writes"] - kept["writes"], after["fsyncs"] - kept["fsyncs"]) == (1, 0)
    fresh = TranscriptLogs(store(tmp_path))
    assert fresh.result("s1", transcript.digest_of(text)) == text
    assert fresh.prompt("s1", transcript.digest_of(prompt), None) == prompt
