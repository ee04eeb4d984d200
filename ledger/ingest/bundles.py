"""Reading bundle inputs for ``apply``: a checking pass, then a guarded applying pass.

``apply`` reads its inputs twice, so that a structural fault anywhere stops it before anything is
written without holding the inputs in memory. The first pass decodes every document strictly and
checks every bundle (:func:`check_bundles`), region by region (about REGION_BYTES of whole lines),
on worker processes for a big input; it records the SHA-256 of each region it read. The second pass (:func:`reread_bundles`) reads the same
regions, and only after a region's digest equals the one recorded does it decode the region's
documents, with msgspec's plain decoder: the bytes are those the strict decoder accepted, and for
every document the strict decoder accepts the plain one yields the same value
(tests/e2e/cli/test_cli_apply_reading.py proves it), at a third of the cost. A line in canonical form takes the
fast path in both passes instead (ledger/records/fast.py, spec/adr/0020): one typed decode, which stands for
the strict reading in pass 1 and gives the prepared bundle and its copies' verification in pass 2. A region that held a fault in
the first pass is read strictly again, its faulty documents skipped. An input that changed between
the passes is refused where it changed (``input-changed``): what was written before came from
checked bytes. Both passes run on the run's fan-out for a big input (ledger/fanout.py): the second
compares, decodes and prepares each region there (:func:`pithledger.store.prepare`), so the writer's
process only cuts, orders and commits (spec/storage.md §3.2). On local worker processes and a regular
file, the workers read their regions from the file themselves, handed (path, offset, length): the writer
finds each cut by reading near it (:func:`_spans`: the cut :func:`_regions` makes of the same bytes), a
worker returns its region's line count and its documents numbered within it, and the writer, which takes
the results in order, numbers them in the file. Pass 2 hands the workers pass 1's ranges; a worker cuts
at its offset by the same rule and compares the digest before decoding, so a region is accepted exactly
when a reading of the whole file would accept it. A Dask cluster (which may not see the file), the
writer's own thread (nothing to save) and a pipe are handed the bytes, as before. Memory: a few regions
in flight (or one document of at most 64 MiB) and a digest per region; a worker reads one region (and
the rest of its window, or a long line up to the size limit).
"""

from __future__ import annotations

import hashlib
import io
import os
import secrets
import stat
from collections.abc import Callable, Generator, Iterator
from typing import IO, Any, NamedTuple

import msgspec

from pithledger.errors import DocumentTooLarge, InputChanged, PithledgerError, TrailingData
from pithledger.fanout import Fanout, current
from pithledger.ingest.inputs import Input, cannot_read, lines_framed, located, read_bytes
from pithledger.records.bundle import Bundle, checked_bundle, read_bundle
from pithledger.records.canonical import MAX_DOCUMENT_BYTES, strict_decode
from pithledger.records.display import DisplayMetadata
from pithledger.records.fast import read_line
from pithledger.store import Prepared, Rejection, prepare, prepare_line

#: Lines are read in regions of about this many bytes (a longer line makes its region longer).
REGION_BYTES = 4 * 1024 * 1024
#: Inputs of two regions or more are checked on the run's workers, at most _AHEAD regions (or one per
#: worker, if more, up to _MAX_AHEAD: 64 MiB) ahead.
_AHEAD = 4
_MAX_AHEAD = 16
#: The writer looks for a region's cut in reads of this many bytes (backwards from the end of its window).
_STEP = 64 * 1024
#: ``_Region.length`` of the mark left where pass 1 found the input changed (the other mark: a line too long).
_CHANGED = -1

_plain = msgspec.json.Decoder()


class _Region(msgspec.Struct, array_like=True):
    sha256: bytes
    clean: bool  # every document in it decoded and was a structurally sound bundle
    offset: int = 0  # where it starts in the input, its length, the number of its first line (0: one document);
    length: int = 0  # recorded when the workers read the file themselves (pass 2 hands them these ranges)
    lineno: int = 0


def _stop(region: _Region) -> bool:
    """Whether ``region`` is the mark of where pass 1 stopped reading a file (a line over the size limit,
    or the input changed): nothing of it or after it is read again."""
    return not region.clean and not region.sha256


class _File:
    """What pass 1 read of one input: whether it is one document, each region, and whether the workers
    read the regions from the file themselves (``by_path``; then ``lines_end``, the number the line
    after the last region has)."""

    __slots__ = ("by_path", "lines_end", "regions", "single")

    def __init__(self, single: bool, by_path: bool) -> None:
        self.single = single
        self.by_path = by_path
        self.regions: list[_Region] = []
        self.lines_end = 1


class Plan:
    """What the checking pass read of each input: ``None`` for one it could not read (skipped with
    --keep-going), else whether it is one document and the digest of each region."""

    def __init__(self) -> None:
        self.files: list[_File | None] = []


class Checked(NamedTuple):
    """What pass 1 found of a sound bundle: what batches are planned on."""

    events: int
    size: int  # bytes of the document in the input (what the second reading's Bundle.size will be)


def check_bundles(
    files: list[Input], plan: Plan, file_done: Callable[[], None] = lambda: None
) -> Iterator[tuple[str, Checked | PithledgerError]]:
    """Pass 1: (where, what was found) for every document of every file, or (where, error) for a
    file, line or bundle that cannot be read, decoded or is structurally wrong; fills ``plan``. The
    regions of a big input are checked on worker processes (all cores), in order."""
    fan, owned, parallel = _fan_for(files)
    checker = _Checker(fan, parallel=parallel)
    try:
        for n, item in enumerate(files):
            if n:
                file_done()
            yield from _check_file(item, plan, checker)
    finally:
        if owned:
            fan.close()


def _fan_for(files: list[Input]) -> tuple[Fanout, bool, bool]:
    """The run's fan-out (or this pass's own, which it closes: ``owned``), and whether the inputs are big
    enough to fan out (two regions or more; fewer are read here)."""
    fan = current()
    try:
        total = sum(os.stat(item.path).st_size for item in files)
    except OSError:
        total = 0
    return fan or Fanout.processes(), fan is None, total >= 2 * REGION_BYTES


class _Checker(NamedTuple):
    """Where regions are checked: on the run's fan-out (ledger/fanout.py) when the inputs hold several
    regions, else here; a region whose worker was lost is checked here, in its place."""

    fan: Fanout
    parallel: bool

    def map(self, regions: Iterator[tuple[bytes, int, str]]) -> Iterator[_Found]:
        return self.fan.map(_check_part, regions, parallel=self.parallel, ahead=_ahead(self.fan))

    def map_spans(self, spans: Iterator[tuple[str, int, int, str]]) -> Iterator[_Spanned]:
        return self.fan.map(_check_span, spans, parallel=self.parallel, ahead=_ahead(self.fan))

    def by_path(self, path: str) -> bool:
        """Whether the workers read this input's regions from the file themselves, so that the writer's
        process does not read (or pipe) its bytes: they are local processes, which see this machine's
        files (a Dask worker may not), and it is a regular file (a pipe cannot be read at an offset)."""
        if self.fan.kind != "processes" or not self.parallel:
            return False
        return _regular(path)


def _regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


_Found = tuple[bytes, list[tuple[str, "Checked | PithledgerError"]]]
#: (offset, length, found): what a worker found of the region it read, None if it read fewer bytes (the
#: input changed); found: (digest, number of lines, (index of the line in the region, what it is)).
_Spanned = tuple[int, int, tuple[bytes, int, list[tuple[int, Checked | PithledgerError]]] | None]


def _check_file(item: Input, plan: Plan, checker: _Checker) -> Iterator[tuple[str, Checked | PithledgerError]]:
    try:
        opened = _open(item)
        by_path = not isinstance(opened, tuple) and checker.by_path(item.path)
        source = None if by_path or isinstance(opened, tuple) else _source(item, opened)
    except PithledgerError as exc:
        plan.files.append(None)
        yield item.label, exc
        return
    seen = _File(isinstance(opened, tuple), by_path)
    plan.files.append(seen)
    if isinstance(opened, tuple):
        data, value = opened
        result = _checked(_bundle(value, item.label), len(data))
        seen.regions.append(
            _Region(hashlib.sha256(data).digest(), not isinstance(result, PithledgerError), 0, len(data))
        )
        yield item.label, result
        return
    if source is None:
        yield from _check_spans(item, seen, checker)
        return
    stopped: list[PithledgerError] = []

    def parts() -> Iterator[tuple[bytes, int, str]]:
        try:
            for lineno, region in _regions(source, item.label):
                yield region, lineno, item.label
        except PithledgerError as exc:  # a line over the size limit: the rest of the file is not read
            stopped.append(exc)

    with source:
        for digest, found in checker.map(parts()):
            seen.regions.append(_Region(digest, all(not isinstance(r, PithledgerError) for _, r in found)))
            yield from found
    if stopped:
        seen.regions.append(_Region(b"", False))
        yield item.label, stopped[0]


def _source(item: Input, data: bytes | None) -> IO[bytes]:
    """The bytes of JSON lines for the writer to cut: those already read, else the file."""
    if data is not None:
        return io.BytesIO(data)
    try:
        return open(item.path, "rb")  # noqa: SIM115 - the caller closes it
    except OSError as exc:
        raise cannot_read(exc, item.label) from None


def _check_spans(item: Input, seen: _File, checker: _Checker) -> Iterator[tuple[str, Checked | PithledgerError]]:
    """Pass 1 of JSON lines whose regions the workers read from the file: the writer finds each cut by
    reading near it (:func:`_spans`), a worker reads the region, checks it and numbers its lines from 0,
    and the writer, which takes the results in order, gives them their numbers in the file. A worker's
    messages name the line by ``nonce`` (random: no input can hold it), replaced here by ``label:LINE``."""
    label, nonce = item.label, secrets.token_hex(16)
    stopped: list[tuple[str, int]] = []  # ("long" or "changed", offset) where the cutting stopped

    def parts() -> Iterator[tuple[str, int, int, str]]:
        try:
            for offset, length in _spans(item.path):
                yield item.path, offset, length, nonce
        except _TooLong as exc:
            stopped.append(("long", exc.offset))
        except _Changed as exc:
            stopped.append(("changed", exc.offset))

    lineno = 1
    results = checker.map_spans(parts())
    try:
        for offset, length, found in results:
            if found is None:  # the worker read fewer bytes than the writer saw
                stopped[:] = [("changed", offset)]
                break
            digest, lines, docs = found
            seen.regions.append(
                _Region(digest, all(not isinstance(r, PithledgerError) for _, r in docs), offset, length, lineno)
            )
            for n, result in docs:
                where = f"{label}:{lineno + n}"
                yield where, result if not isinstance(result, PithledgerError) else _placed(result, nonce, where)
            lineno += lines
    finally:
        if isinstance(results, Generator):  # stopped early: the regions in flight are dropped now
            results.close()
    seen.lines_end = lineno
    if not stopped:
        return
    why, offset = stopped[0]
    if why == "long":
        seen.regions.append(_Region(b"", False, offset, 0, lineno))
        yield label, DocumentTooLarge(f"{label}:{lineno}: a line is larger than {MAX_DOCUMENT_BYTES:,} bytes")
        return
    seen.regions.append(_Region(b"", False, offset, _CHANGED, lineno))
    yield (
        label,
        InputChanged(
            f"{label} changed while it was being checked (in region {len(seen.regions)}, from line {lineno})",
            hint="something wrote to the input while it was being checked, before anything was written: "
            "let the writer finish, then run the same command again",
        ),
    )


def _placed(exc: PithledgerError, nonce: str, where: str) -> PithledgerError:
    """A worker's error about the line it named ``nonce``, as :func:`_strict` would have made it for
    ``where``: the decoder's message names its input, and :func:`located` puts ``where`` first."""
    exc.message = exc.message.replace(nonce, where)
    exc.args = tuple(a.replace(nonce, where) if isinstance(a, str) else a for a in exc.args)
    if nonce in exc.hint:
        exc.hint = exc.hint.replace(nonce, where)
    return located(exc, where)


def _ahead(fan: Fanout) -> int:
    """Regions in flight: one per worker, at least _AHEAD, at most _MAX_AHEAD (each is REGION_BYTES of
    input, so a big cluster does not make the writer's process hold hundreds of MiB)."""
    return min(max(_AHEAD, fan.workers), _MAX_AHEAD)


def _check_part(part: tuple[bytes, int, str]) -> _Found:
    """:func:`_check_region` of (region, number of its first line, label): what runs on a worker."""
    return _check_region(*part)


def _check_region(region: bytes, lineno: int, label: str) -> _Found:
    """One region's digest and what each of its documents is (pure: runs on a worker, or here)."""
    return hashlib.sha256(region).digest(), [
        (where, _check_line(line, where, where)) for where, line in _lines(region, lineno, label)
    ]


def _check_span(part: tuple[str, int, int, str]) -> _Spanned:
    """What runs on a worker when it reads the input itself: the region at (path, offset, length) read
    from the file, its digest, its number of lines and what each of its documents is, by its index in the
    region, errors naming it ``nonce`` (not yet ``label:LINE``, which the writer alone can number); None
    if the file holds fewer bytes there now."""
    path, offset, length, nonce = part
    region = _read_at(path, offset, length)
    if region is None:
        return offset, length, None
    docs = [(n, _check_line(line, nonce)) for n, line in _numbered(region)]
    return offset, length, (hashlib.sha256(region).digest(), _line_count(region), docs)


def _read_at(path: str, offset: int, length: int) -> bytes | None:
    """Exactly ``length`` bytes of ``path`` from ``offset``, or None (fewer there, or unreadable now)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return _pread(fd, length, offset)
    except _Changed:
        return None
    finally:
        os.close(fd)


def _check_line(line: bytes, what: str, where: str = "") -> Checked | PithledgerError:
    """Pass 1 of one line: read on the fast path when it takes it (records/fast.py: its one typed decode
    stands for the strict reading, spec/adr/0020), else strictly; its error names it ``what``, placed at
    ``where`` if given (:func:`_strict`), else as raised (:func:`_raw`)."""
    fast = read_line(line)
    if fast is not None:
        return Checked(len(fast.events), len(line))
    return _checked(_strict(line, where) if where else _raw(line, what), len(line))


def _checked(result: Bundle | PithledgerError, size: int) -> Checked | PithledgerError:
    return result if isinstance(result, PithledgerError) else Checked(len(result.events), size)


def reread_bundles(
    files: list[Input], plan: Plan, precheck: Callable[[], bool] = lambda: False
) -> Iterator[tuple[str, Prepared | None]]:
    """Pass 2: (where, bundle) for every document pass 1 found sound, in the same order, prepared for
    the writer (:func:`pithledger.store.prepare`: canonical bytes, ids, copy digests), and (where, None)
    for one it did not. Raises :class:`InputChanged` before yielding anything of a region whose bytes
    differ from what pass 1 read. The regions are compared, decoded and prepared on the run's fan-out
    when the input is big (as in pass 1); on local worker processes the workers read them from the file
    themselves, if pass 1's did, else the writer's process reads the file and hands the bytes over.
    ``precheck``: asked as each region is handed to a worker, whether the worker also verifies its
    events (:func:`pithledger.store.prepare`'s ``check``), so that the batch need not hand them to a
    worker again: the caller answers no once most copies turn out to be held already (verifying those
    is wasted). In place (``--workers 0``) too, where the batch would verify in the writer's thread as well:
    verified as it is read, a copy is not decoded again nor handed over (spec/adr/0020). Never where a
    small input is read in the writer's thread beside worker processes: there the batch verifies on
    threads while the reading goes on."""
    fan, owned, parallel = _fan_for(files)
    check: Callable[[], bool] = precheck if parallel or fan.kind == "in-place" else (lambda: False)
    try:
        for item, seen in zip(files, plan.files, strict=True):
            if seen is None:
                continue
            if seen.by_path and fan.kind == "processes":
                yield from _reread_spans(item, seen, fan, parallel, check)
            else:
                yield from _reread_file(item, seen, fan, parallel, check)
    finally:
        if owned:
            fan.close()


def _reopen(item: Input) -> IO[bytes]:
    try:
        return open(item.path, "rb")  # noqa: SIM115 - the caller closes it
    except OSError as exc:
        raise InputChanged(f"{item.label} cannot be read again ({exc.strerror})") from None


def _changed(item: Input, index: int, lineno: int) -> InputChanged:
    return InputChanged(
        f"{item.label} changed while it was being applied (in region {index + 1}, from line {lineno or '?'})"
    )


def _reread_file(
    item: Input, seen: _File, fan: Fanout, parallel: bool, check: Callable[[], bool]
) -> Iterator[tuple[str, Prepared | None]]:
    single, regions = seen.single, seen.regions
    changed: list[InputChanged] = []
    with _reopen(item) as stream:
        got = _regions(stream, item.label, whole=single)

        def parts() -> Iterator[tuple[int, bytes, int, str, _Region, bool, bool]]:
            for index, expected in enumerate(regions):
                try:
                    lineno, region = next(got)
                except (StopIteration, PithledgerError):
                    lineno, region = 0, None
                if _stop(expected):
                    return  # pass 1 stopped reading this file here (a line over the size limit)
                if region is None:  # what was read before is yielded, then the change
                    changed.append(_changed(item, index, lineno))
                    return
                yield index, region, lineno, item.label, expected, single, check()

        for index, lineno, found in fan.map(_reread_part, parts(), parallel=parallel, ahead=_ahead(fan)):
            if found is None:
                raise _changed(item, index, lineno)
            yield from _prepared_decoder.decode(found)
        if changed:
            raise changed[0]
        if next(got, None) is not None:
            raise InputChanged(f"{item.label} grew while it was being applied")


def _reread_spans(
    item: Input, seen: _File, fan: Fanout, parallel: bool, check: Callable[[], bool]
) -> Iterator[tuple[str, Prepared | None]]:
    """Pass 2 of an input whose regions the workers read themselves, at the ranges pass 1 recorded. A
    worker cuts the region at its offset by the rule of :func:`_regions` (reading its window, a few
    bytes past its end), so a region is accepted exactly when the writer's reading of the file from the
    start would have cut and accepted it; what follows the last region is read here, as it would be."""
    stop: list[_Region] = []

    def parts() -> Iterator[tuple[str, int, _Region, str, bool, bool]]:
        for index, expected in enumerate(seen.regions):
            if _stop(expected):
                stop.append(expected)
                return
            yield item.path, index, expected, item.label, seen.single, check()

    with _reopen(item) as stream:
        for index, lineno, found in fan.map(_reread_span, parts(), parallel=parallel, ahead=_ahead(fan)):
            if found is None:
                raise _changed(item, index, lineno)
            yield from _prepared_decoder.decode(found)
        if seen.single or (stop and stop[0].length == _CHANGED):
            return
        if stop:
            offset, lineno = stop[0].offset, stop[0].lineno
        else:
            last = seen.regions[-1] if seen.regions else _Region(b"", True)
            offset, lineno = last.offset + last.length, seen.lines_end
        stream.seek(offset)
        got = _regions(stream, item.label, lineno=lineno)
        if stop:  # where pass 1 met a line over the size limit: as the writer's own reading goes on there
            try:
                next(got)
            except (StopIteration, PithledgerError):
                return
        if next(got, None) is not None:
            raise InputChanged(f"{item.label} grew while it was being applied")


def _reread_part(part: tuple[int, bytes, int, str, _Region, bool, bool]) -> tuple[int, int, bytes | None]:
    """:func:`_reread_region` of a part, with the region's index and first line: what runs on a worker."""
    index, region, lineno, label, expected, single, check = part
    return index, lineno, _reread_region(region, lineno, label, expected, single, check)


def _reread_span(part: tuple[str, int, _Region, str, bool, bool]) -> tuple[int, int, bytes | None]:
    """:func:`_reread_region` of the region a worker reads itself at pass 1's offset, cut there by the
    same rule (None with line 0: no region there now)."""
    path, index, expected, label, single, check = part
    region = _region_at(path, expected.offset, single)
    if region is None:
        return index, 0, None
    if len(region) != expected.length:  # not the bytes pass 1 read (nor their digest, then)
        return index, expected.lineno, None
    return index, expected.lineno, _reread_region(region, expected.lineno, label, expected, single, check)


def _region_at(path: str, offset: int, single: bool) -> bytes | None:
    """The region :func:`_regions` cuts at ``offset`` of the file (the whole file if ``single``), or None."""
    try:
        with open(path, "rb") as stream:
            stream.seek(offset)
            return next(_regions(stream, "", whole=single), (0, None))[1]
    except (OSError, PithledgerError):  # unreadable now, or a line there over the size limit
        return None


def _reread_region(
    region: bytes, lineno: int, label: str, expected: _Region, single: bool, check: bool = False
) -> bytes | None:
    """None if a region's bytes are not those pass 1 read (then nothing of it is decoded), else (where,
    prepared bundle or None) of each of its documents, msgpack-encoded: the writer decodes one bytes
    object in one call instead of unpickling many small objects (runs on a worker process). ``check``:
    each copy verified as well (:func:`pithledger.store.prepare`)."""
    if hashlib.sha256(region).digest() != expected.sha256:
        return None
    if single:
        return _prepared_encoder.encode(
            [(label, prepare(_fast(region, label), check=check) if expected.clean else None)]
        )
    out: list[tuple[str, Prepared | None]] = []
    for where, line in _lines(region, lineno, label):
        if expected.clean:
            fast = read_line(line)  # the fast path (spec/adr/0020), else the plain reading of checked bytes
            out.append(
                (
                    where,
                    prepare_line(fast, len(line), check=check) if fast else prepare(_fast(line, where), check=check),
                )
            )
            continue
        result = _strict(line, where)
        if isinstance(result, PithledgerError):
            out.append((where, None))
        else:
            result.size = len(line)  # as the clean regions' (and pass 1's plan)
            out.append((where, prepare(result, check=check)))
    return _prepared_encoder.encode(out)


_prepared_encoder = msgspec.msgpack.Encoder()
_prepared_decoder = msgspec.msgpack.Decoder(list[tuple[str, Prepared | None]])


def _open(item: Input) -> tuple[bytes, Any] | bytes | None:
    """A file of at most MAX_DOCUMENT_BYTES is tried as one document first (pretty-printed or not):
    (its bytes, its value). One that holds more than its first document is JSON lines, as is any larger
    file: its bytes if they were read whole to find that out, else None (to be read region by region)."""
    try:
        with open(item.path, "rb") as fh:
            fh.seek(0, io.SEEK_END)
            if fh.tell() > MAX_DOCUMENT_BYTES:
                return None
            fh.seek(0)
            if _lines_first(fh):
                return None
    except OSError as exc:
        raise cannot_read(exc, item.label) from None
    data = read_bytes(item.path, label=item.label)
    try:
        return data, strict_decode(data, what=item.label)
    except TrailingData:
        return data
    except PithledgerError as exc:
        if lines_framed(data):  # JSON lines whose first line holds the fault
            return data
        raise located(exc, item.label) from None


def _lines_first(fh: IO[bytes]) -> bool:
    """Whether the file's first line (to its first \\n or \\r) is alone a strictly valid JSON document
    and non-blank bytes follow it: then reading the whole file would find the same (the whole is not one
    document, so its decoding fails, with TrailingData or, for bytes after the first line, an error for
    which :func:`lines_framed` holds), so it is JSON lines, found out from its first line and the next
    non-blank byte instead of all its bytes. False: not known so, read it whole."""
    head, searched = bytearray(), 0
    while not (ends := [i for i in (head.find(b"\n", searched), head.find(b"\r", searched)) if i >= 0]):
        more = fh.read(_STEP)
        if not more:
            return False
        searched = len(head)
        head += more
    end = min(ends)
    head = head[: end + _STEP]  # what follows the first line is looked at a step at a time
    first = bytes(head[:end])
    try:
        strict_decode(first)
        msgspec.json.decode(first)  # as lines_framed reads it
    except (PithledgerError, msgspec.DecodeError, ValueError):
        return False
    rest = bytes(head[end + 1 :])
    while not rest.strip():
        rest = fh.read(_STEP)
        if not rest:
            return False
    return True


def _regions(stream: IO[bytes], label: str, *, whole: bool = False, lineno: int = 1) -> Iterator[tuple[int, bytes]]:
    """(number of its first line, bytes) of each region of ``stream``: whole lines, cut after the last
    newline within REGION_BYTES of the region's start (after the first one beyond, for a longer line).
    A function of the bytes alone, so both passes cut the same bytes the same way. ``whole``: the
    stream is one document, one region. ``lineno``: the number of the stream's first line."""
    if whole:
        data = stream.read(MAX_DOCUMENT_BYTES + 1)
        if data:
            yield 0, data
        return
    buf, eof = b"", False
    while True:
        while not eof and len(buf) < REGION_BYTES:  # a region's length, however the stream hands it out
            more = stream.read(REGION_BYTES - len(buf))
            eof, buf = not more, buf + more
        if not buf:
            return
        cut = buf.rfind(b"\n", 0, REGION_BYTES)
        if cut < 0:  # no newline in a region's length: one long line, read on to its end
            cut = buf.find(b"\n")
            while cut < 0 and not eof:
                if len(buf) > MAX_DOCUMENT_BYTES + 1:
                    raise DocumentTooLarge(f"{label}:{lineno}: a line is larger than {MAX_DOCUMENT_BYTES:,} bytes")
                more = stream.read(REGION_BYTES)
                eof, start, buf = not more, len(buf), buf + more
                cut = buf.find(b"\n", start)
            if cut < 0:  # the last line, without a newline
                cut = len(buf) - 1
        region, buf = buf[: cut + 1], buf[cut + 1 :]
        yield lineno, region
        lineno += _line_count(region)


class _TooLong(Exception):
    """A line over the size limit starts the region at ``offset`` (:func:`_regions`' DocumentTooLarge)."""

    def __init__(self, offset: int) -> None:
        super().__init__(offset)
        self.offset = offset


class _Changed(Exception):
    """The file holds fewer bytes than it did (or cannot be read now): it changed while it was read."""

    def __init__(self, offset: int = 0) -> None:
        super().__init__(offset)
        self.offset = offset


def _spans(path: str) -> Iterator[tuple[int, int]]:
    """(offset, length) of each region of the file at ``path``: the cuts :func:`_regions` makes of its
    bytes, found by reading only near each cut (:func:`_cut`), so the writer does not read the regions."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        raise _Changed from None
    try:
        size, start = os.fstat(fd).st_size, 0
        while start < size:
            try:
                end = _cut(fd, start, size)
            except _Changed:
                raise _Changed(start) from None
            yield start, end - start
            start = end
    finally:
        os.close(fd)


def _cut(fd: int, start: int, size: int) -> int:
    """Where the region at ``start`` ends, by :func:`_regions`' rule: after the last newline of its
    window (REGION_BYTES, or what is left); with none there, after the first one beyond, and a line whose
    bytes without a newline exceed MAX_DOCUMENT_BYTES + 1 when _regions looks (after each REGION_BYTES it
    reads, before learning the file ended) is too long (:class:`_TooLong`)."""
    left = size - start
    if left < REGION_BYTES:  # _regions read all that is left and saw the end
        at = _rfind_newline(fd, start, size)
        return at + 1 if at >= 0 else size
    at = _rfind_newline(fd, start, start + REGION_BYTES)
    if at >= 0:
        return at + 1
    seen = REGION_BYTES
    while True:
        if seen > MAX_DOCUMENT_BYTES + 1:
            raise _TooLong(start)
        if seen == left:  # _regions reads once more, finds nothing: the last line, without a newline
            return size
        further = min(seen + REGION_BYTES, left)
        at = _find_newline(fd, start + seen, start + further)
        if at >= 0:
            return at + 1
        seen = further


def _rfind_newline(fd: int, lo: int, hi: int) -> int:
    """The offset of the last \\n in [lo, hi) of the file, or -1 (read backwards, _STEP at a time)."""
    while hi > lo:
        at = max(lo, hi - _STEP)
        found = _pread(fd, hi - at, at).rfind(b"\n")
        if found >= 0:
            return at + found
        hi = at
    return -1


def _find_newline(fd: int, lo: int, hi: int) -> int:
    """The offset of the first \\n in [lo, hi) of the file, or -1 (read forwards, _STEP at a time)."""
    while lo < hi:
        n = min(_STEP, hi - lo)
        found = _pread(fd, n, lo).find(b"\n")
        if found >= 0:
            return lo + found
        lo += n
    return -1


def _pread(fd: int, length: int, offset: int) -> bytes:
    """Exactly ``length`` bytes at ``offset``; :class:`_Changed` if the file holds fewer there now."""
    parts, got = [], 0
    while got < length:
        try:
            more = os.pread(fd, length - got, offset + got)
        except OSError:
            raise _Changed(offset) from None
        if not more:
            raise _Changed(offset)
        parts.append(more)
        got += len(more)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _line_count(region: bytes) -> int:
    """len(region.splitlines()) without making the lines (a region without \r: its \n, and a last
    line without one)."""
    if b"\r" in region:
        return len(region.splitlines())
    return region.count(b"\n") + (not region.endswith(b"\n") and bool(region))


def _numbered(region: bytes) -> Iterator[tuple[int, bytes]]:
    """(index from 0, line) of each non-blank line; lines end at \n, \r\n or a lone \r (bytes.splitlines,
    as every other reader of JSON lines here). Regions are cut after a \n, which never splits a \r\n."""
    for n, line in enumerate(region.splitlines()):
        if line.strip():
            yield n, line


def _lines(region: bytes, lineno: int, label: str) -> Iterator[tuple[str, bytes]]:
    """(where, line) of each non-blank line (:func:`_numbered`), the region's first line being ``lineno``."""
    for n, line in _numbered(region):
        yield f"{label}:{lineno + n}", line


def _strict(line: bytes, where: str) -> Bundle | PithledgerError:
    result = _raw(line, where)
    return located(result, where) if isinstance(result, PithledgerError) else result


def _raw(line: bytes, what: str) -> Bundle | PithledgerError:
    """The bundle of a line, or its error as raised (its decoding's message naming the line ``what``)."""
    try:
        return read_bundle(strict_decode(line, what=what))
    except PithledgerError as exc:
        return exc


def _bundle(value: Any, where: str) -> Bundle | PithledgerError:
    try:
        return read_bundle(value)
    except PithledgerError as exc:
        return located(exc, where)


def _fast(data: bytes, where: str) -> Bundle:
    """A document of a region that pass 1 read and found sound, from the same bytes."""
    try:
        value = _plain.decode(data)
    except msgspec.DecodeError:  # pragma: no cover - never, for bytes the strict decoder accepted
        value = strict_decode(data, what=where)
    return checked_bundle(value, len(data))


def committed_display(
    bundles: list[Prepared], rejected: list[Rejection]
) -> list[tuple[dict[str, Any], DisplayMetadata]]:
    """(canonical record, paper block) of each record document of a committed batch whose record
    event was not rejected (new or already held): what ``apply`` keeps as display metadata. A document
    whose record event is invalid or unverified supplies nothing (spec/serve.md §6)."""
    refused = {r.copy_sha256 for r in rejected}
    return [
        (b.canonical_record, b.display)
        for b in bundles
        if b.display is not None
        and b.canonical_record is not None
        and b.events
        and b.events[0].copy.hex() not in refused
    ]
