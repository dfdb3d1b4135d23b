"""The streamed spill of a large text: encode, write and scan it piece by piece, three threads, bounded memory."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator

from .._rendering._important_lines import ImportantLinesScan

__all__ = ('PIECE_CHARS', 'PiecesStopped', 'Relay')

PIECE_CHARS = 1 << 20
"""A streamed spill encodes and writes the text in pieces of about this many characters, each ending at a line end."""

_PIECES_AHEAD = 4
"""At most this many pieces wait for the preview scan: the write never runs more than ~16 MB ahead of it."""


class Relay:
    """Encodes a text piece by piece in one thread, for a store writing the pieces in another; bounded memory.

    The encoding thread also runs the preview scan of each piece once it has handed it over, so the GIL-bound
    work (encoding; the store's newline counting) overlaps the work that releases the GIL (writing; RE2 and
    Hyperscan), and at most `_PIECES_AHEAD` pieces wait for the store.
    """

    def __init__(self) -> None:
        self._loop_thread = threading.get_ident()  # built on the event loop, whose thread must never wait for pieces
        self._pieces: deque[bytes] = deque()
        self._ready = threading.Condition()
        self._done = False
        self._complete = False
        self._abandoned = False

    def encode_and_scan(self, text: str, scan: ImportantLinesScan) -> None:
        """Hand the UTF-8 pieces of `text` (lone surrogates kept) to the store, scanning each (a worker thread).

        The scan runs in a thread of its own (`_Scanner`), so encoding, writing and scanning all overlap; a scan
        that fails does not stop the payload from being written whole, and its error is raised at the end.
        """
        base = 0
        scanner = _Scanner(scan)
        try:
            try:
                for piece in _encoded_pieces(text):
                    if not self._put(piece):
                        return  # the write stopped (failed, or its deadline passed): nothing more to do
                    scanner.add(piece, base)
                    base += len(piece)
                self._complete = True
            finally:
                with self._ready:
                    self._done = True
                    self._ready.notify_all()
        finally:
            failure = scanner.finish(drain=self._complete)
        if failure is not None:
            raise failure

    def _put(self, piece: bytes) -> bool:
        with self._ready:
            while len(self._pieces) >= _PIECES_AHEAD and not self._abandoned:
                self._ready.wait()
            if self._abandoned:
                return False
            self._pieces.append(piece)
            self._ready.notify_all()
            return True

    def pieces(self) -> Iterator[bytes]:
        """The pieces, in order, as the store takes them (in its own thread)."""
        if threading.get_ident() == self._loop_thread:
            # The encoder cannot start while the event loop waits here: refuse instead of hanging the run.
            raise PiecesStopped(
                'write_stream iterated the pieces on the event loop; iterate them in a worker thread '
                '(anyio.to_thread.run_sync), as the next piece may not be encoded yet'
            )
        while True:
            with self._ready:
                while not self._pieces and not self._done and not self._abandoned:
                    self._ready.wait()
                if self._abandoned or (not self._pieces and not self._complete):
                    # Never let a store publish part of the payload as if it were all of it.
                    raise PiecesStopped('the payload stopped before its end; nothing may be published')
                if not self._pieces:
                    return
                piece = self._pieces.popleft()
                self._ready.notify_all()
            yield piece

    def abandon(self) -> None:
        """The store is done with the pieces (it finished or failed): release the encoder; never blocks."""
        with self._ready:
            self._abandoned = True
            self._pieces.clear()
            self._ready.notify_all()


class _Scanner:
    """The preview scan of a streamed spill, in a thread of its own, at most `_PIECES_AHEAD` pieces behind."""

    def __init__(self, scan: ImportantLinesScan) -> None:
        self._scan = scan
        self._queue: deque[tuple[bytes, int]] = deque()
        self._ready = threading.Condition()
        self._closed = False
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name='pyai-harness-preview-scan', daemon=True)
        self._thread.start()

    def add(self, piece: bytes, base: int) -> None:
        """Queue `piece` (starting at byte `base`) for the scan; waits while `_PIECES_AHEAD` are queued."""
        with self._ready:
            while len(self._queue) >= _PIECES_AHEAD and self._failure is None:
                self._ready.wait()
            if self._failure is None:
                self._queue.append((piece, base))
                self._ready.notify_all()

    def finish(self, *, drain: bool) -> BaseException | None:
        """Scan what is queued (`drain`) or drop it, wait for the thread; the scan's error, if it failed."""
        with self._ready:
            self._closed = True
            if not drain:
                self._queue.clear()
            self._ready.notify_all()
        self._thread.join()
        return self._failure

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._queue and not self._closed:
                    self._ready.wait()
                if not self._queue:
                    return
                piece, base = self._queue.popleft()
                self._ready.notify_all()
            try:
                self._scan.feed(piece, base)  # hands the GIL over as it goes (`_preview`)
            except BaseException as exc:  # noqa: BLE001 - raised in the encoding thread once the payload is written
                with self._ready:
                    self._failure = exc
                    self._queue.clear()
                    self._ready.notify_all()
                return


class PiecesStopped(RuntimeError):
    """Raised into a store's iteration of the pieces when they stopped before the end of the payload."""


def _encoded_pieces(text: str) -> Iterator[bytes]:
    position = 0
    size = len(text)
    while position < size:
        cut = position + PIECE_CHARS
        if cut >= size:
            end = size
        else:
            newline = text.find('\n', cut - 1)
            end = size if newline == -1 else newline + 1
        yield text[position:end].encode('utf-8', 'surrogatepass')
        position = end
