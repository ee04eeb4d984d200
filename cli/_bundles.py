"""Reading bundle inputs for ``apply``: a checking pass, then a guarded applying pass.

``apply`` reads its inputs twice, so that a structural fault anywhere stops it before anything is
written without holding the inputs in memory. The first pass decodes every document strictly and
checks every bundle (:func:`check_bundles`), region by region (about REGION_BYTES of whole lines),
on worker processes for a big input; it records the SHA-256 of each region it read. The second pass (:func:`reread_bundles`) reads the same
regions, and only after a region's digest equals the one recorded does it decode the region's
documents, with msgspec's plain decoder: the bytes are those the strict decoder accepted, and for
every document the strict decoder accepts the plain one yields the same value
(tests/test_cli_apply_reading.py proves it), at a third of the cost. A region that held a fault in
the first pass is read strictly again, its faulty documents skipped. An input that changed between
the passes is refused where it changed (``input-changed``): what was written before came from
checked bytes. Both passes run on the run's fan-out for a big input (ledger/fanout.py): the second
compares, decodes and prepares each region there (:func:`pithledger.store.prepare`), so the writer's
process only reads the files and commits (spec/storage.md §3.2). Memory: a few regions in flight (or
one document of at most 64 MiB) and a digest per region.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Callable, Iterator
from typing import IO, Any, NamedTuple

import msgspec

from pithledger.bundle import Bundle, checked_bundle, read_bundle
from pithledger.canonical import MAX_DOCUMENT_BYTES, strict_decode
from pithledger.display import DisplayMetadata
from pithledger.errors import DocumentTooLarge, InputChanged, PithledgerError, TrailingData
from pithledger.fanout import Fanout, current
from pithledger.store import Prepared, Rejection, prepare

from ._output import Input, cannot_read, lines_framed, located, read_bytes

#: Lines are read in regions of about this many bytes (a longer line makes its region longer).
REGION_BYTES = 4 * 1024 * 1024
#: Inputs of two regions or more are checked on the run's workers, at most _AHEAD regions (or one per
#: worker, if more, up to _MAX_AHEAD: 64 MiB) ahead.
_AHEAD = 4
_MAX_AHEAD = 16

_plain = msgspec.json.Decoder()


class _Region(msgspec.Struct, array_like=True):
    sha256: bytes
    clean: bool  # every document in it decoded and was a structurally sound bundle


class Plan:
    """What the checking pass read of each input: ``None`` for one it could not read (skipped with
    --keep-going), else whether it is one document and the digest of each region."""

    def __init__(self) -> None:
        self.files: list[tuple[bool, list[_Region]] | None] = []


class Checked(NamedTuple):
    """What pass 1 found of a sound bundle: what batches are planned on."""

    events: int
    size: int  # bytes of the document in the input (what the second reading's Bundle.size will be)


def check_bundles(files: list[Input], plan: Plan, file_done: Callable[[], None] = lambda: None
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


_Found = tuple[bytes, list[tuple[str, "Checked | PithledgerError"]]]


def _check_file(item: Input, plan: Plan, checker: _Checker) -> Iterator[tuple[str, Checked | PithledgerError]]:
    regions: list[_Region] = []
    try:
        single, source = _open(item)
    except PithledgerError as exc:
        plan.files.append(None)
        yield item.label, exc
        return
    plan.files.append((single is not None, regions))
    if single is not None:
        data, value = single
        result = _checked(_bundle(value, item.label), len(data))
        regions.append(_Region(hashlib.sha256(data).digest(), not isinstance(result, PithledgerError)))
        yield item.label, result
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
            regions.append(_Region(digest, all(not isinstance(r, PithledgerError) for _, r in found)))
            yield from found
    if stopped:
        regions.append(_Region(b"", False))
        yield item.label, stopped[0]


def _ahead(fan: Fanout) -> int:
    """Regions in flight: one per worker, at least _AHEAD, at most _MAX_AHEAD (each is REGION_BYTES of
    input, so a big cluster does not make the writer's process hold hundreds of MiB)."""
    return min(max(_AHEAD, fan.workers), _MAX_AHEAD)


def _check_part(part: tuple[bytes, int, str]) -> _Found:
    """:func:`_check_region` of (region, number of its first line, label): what runs on a worker."""
    return _check_region(*part)


def _check_region(region: bytes, lineno: int, label: str) -> _Found:
    """One region's digest and what each of its documents is (pure: runs on a worker, or here)."""
    return hashlib.sha256(region).digest(), [(where, _checked(_strict(line, where), len(line))) for where, line in _lines(region, lineno, label)]


def _checked(result: Bundle | PithledgerError, size: int) -> Checked | PithledgerError:
    return result if isinstance(result, PithledgerError) else Checked(len(result.events), size)


def reread_bundles(files: list[Input], plan: Plan) -> Iterator[tuple[str, Prepared | None]]:
    """Pass 2: (where, bundle) for every document pass 1 found sound, in the same order, prepared for
    the writer (:func:`pithledger.store.prepare`: canonical bytes, ids, copy digests), and (where, None)
    for one it did not. Raises :class:`InputChanged` before yielding anything of a region whose bytes
    differ from what pass 1 read. The regions are compared, decoded and prepared on the run's fan-out
    when the input is big (as in pass 1), so the writer's process only reads the files and hands the
    bytes over."""
    fan, owned, parallel = _fan_for(files)
    try:
        for item, seen in zip(files, plan.files, strict=True):
            if seen is not None:
                yield from _reread_file(item, seen, fan, parallel)
    finally:
        if owned:
            fan.close()


def _reread_file(item: Input, seen: tuple[bool, list[_Region]], fan: Fanout, parallel: bool
                 ) -> Iterator[tuple[str, Prepared | None]]:
    single, regions = seen
    try:
        stream = open(item.path, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise InputChanged(f"{item.label} cannot be read again ({exc.strerror})") from None
    changed: list[InputChanged] = []
    with stream:
        got = _regions(stream, item.label, whole=single)

        def parts() -> Iterator[tuple[int, bytes, int, str, _Region, bool]]:
            for index, expected in enumerate(regions):
                try:
                    lineno, region = next(got)
                except (StopIteration, PithledgerError):
                    lineno, region = 0, None
                if not expected.clean and not expected.sha256:
                    return  # pass 1 stopped reading this file here (a line over the size limit)
                if region is None:  # what was read before is yielded, then the change
                    changed.append(InputChanged(f"{item.label} changed while it was being applied (in region {index + 1}, "
                                                f"from line {lineno or '?'})"))
                    return
                yield index, region, lineno, item.label, expected, single

        for index, lineno, found in fan.map(_reread_part, parts(), parallel=parallel, ahead=_ahead(fan)):
            if found is None:
                raise InputChanged(f"{item.label} changed while it was being applied (in region {index + 1}, "
                                   f"from line {lineno or '?'})")
            yield from _prepared_decoder.decode(found)
        if changed:
            raise changed[0]
        if next(got, None) is not None:
            raise InputChanged(f"{item.label} grew while it was being applied")


def _reread_part(part: tuple[int, bytes, int, str, _Region, bool]) -> tuple[int, int, bytes | None]:
    """:func:`_reread_region` of a part, with the region's index and first line: what runs on a worker."""
    index, region, lineno, label, expected, single = part
    return index, lineno, _reread_region(region, lineno, label, expected, single)


def _reread_region(region: bytes, lineno: int, label: str, expected: _Region, single: bool) -> bytes | None:
    """None if a region's bytes are not those pass 1 read (then nothing of it is decoded), else (where,
    prepared bundle or None) of each of its documents, msgpack-encoded: the writer decodes one bytes
    object in one call instead of unpickling many small objects (runs on a worker process)."""
    if hashlib.sha256(region).digest() != expected.sha256:
        return None
    if single:
        return _prepared_encoder.encode([(label, prepare(_fast(region, label)) if expected.clean else None)])
    out: list[tuple[str, Prepared | None]] = []
    for where, line in _lines(region, lineno, label):
        if expected.clean:
            out.append((where, prepare(_fast(line, where))))
            continue
        result = _strict(line, where)
        if isinstance(result, PithledgerError):
            out.append((where, None))
        else:
            result.size = len(line)  # as the clean regions' (and pass 1's plan)
            out.append((where, prepare(result)))
    return _prepared_encoder.encode(out)


_prepared_encoder = msgspec.msgpack.Encoder()
_prepared_decoder = msgspec.msgpack.Decoder(list[tuple[str, Prepared | None]])


def _open(item: Input) -> tuple[tuple[bytes, Any] | None, IO[bytes]]:
    """A file of at most MAX_DOCUMENT_BYTES is tried as one document first (pretty-printed or not);
    one that holds more than its first document is read as JSON lines, as is any larger file."""
    try:
        with open(item.path, "rb") as fh:
            fh.seek(0, io.SEEK_END)
            big = fh.tell() > MAX_DOCUMENT_BYTES
    except OSError as exc:
        raise cannot_read(exc, item.label) from None
    if big:
        try:
            return None, open(item.path, "rb")  # noqa: SIM115 - the caller closes it
        except OSError as exc:
            raise cannot_read(exc, item.label) from None
    data = read_bytes(item.path, label=item.label)
    try:
        return (data, strict_decode(data, what=item.label)), io.BytesIO()
    except TrailingData:
        return None, io.BytesIO(data)
    except PithledgerError as exc:
        if lines_framed(data):  # JSON lines whose first line holds the fault
            return None, io.BytesIO(data)
        raise located(exc, item.label) from None


def _regions(stream: IO[bytes], label: str, *, whole: bool = False) -> Iterator[tuple[int, bytes]]:
    """(number of its first line, bytes) of each region of ``stream``: whole lines, cut after the last
    newline within REGION_BYTES of the region's start (after the first one beyond, for a longer line).
    A function of the bytes alone, so both passes cut the same bytes the same way. ``whole``: the
    stream is one document, one region."""
    if whole:
        data = stream.read(MAX_DOCUMENT_BYTES + 1)
        if data:
            yield 0, data
        return
    lineno, buf, eof = 1, b"", False
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
        region, buf = buf[:cut + 1], buf[cut + 1:]
        yield lineno, region
        lineno += _line_count(region)


def _line_count(region: bytes) -> int:
    """len(region.splitlines()) without making the lines (a region without \r: its \n, and a last
    line without one)."""
    if b"\r" in region:
        return len(region.splitlines())
    return region.count(b"\n") + (not region.endswith(b"\n") and bool(region))




def _lines(region: bytes, lineno: int, label: str) -> Iterator[tuple[str, bytes]]:
    """(where, line) of each non-blank line; lines end at \n, \r\n or a lone \r (bytes.splitlines, as
    every other reader of JSON lines here). Regions are cut after a \n, which never splits a \r\n."""
    for n, line in enumerate(region.splitlines(), lineno):
        if line.strip():
            yield f"{label}:{n}", line


def _strict(line: bytes, where: str) -> Bundle | PithledgerError:
    try:
        value = strict_decode(line, what=where)
    except PithledgerError as exc:
        return located(exc, where)
    return _bundle(value, where)


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


def committed_display(bundles: list[Prepared], rejected: list[Rejection]) -> list[tuple[dict[str, Any], DisplayMetadata]]:
    """(canonical record, paper block) of each record document of a committed batch whose record
    event was not rejected (new or already held): what ``apply`` keeps as display metadata. A document
    whose record event is invalid or unverified supplies nothing (spec/serve.md §6)."""
    refused = {r.copy_sha256 for r in rejected}
    return [(b.canonical_record, b.display) for b in bundles
            if b.display is not None and b.canonical_record is not None and b.events
            and b.events[0].copy.hex() not in refused]
