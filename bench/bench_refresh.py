"""A refresh of an unchanged pithledger source costs what changed, through the real CLI (issue #33; not run in CI).

    .venv/bin/python bench/bench_refresh.py [N] [--connections C] [--keep]

Default N = 2 000. Builds N synthetic records as bench/bench_pull.py does (real ``mint``, one
``record_created`` and one ``citation_signature`` each), applies them into ledger A and ``publish``es A
to a directory, served by Python's ``http.server`` on loopback (HTTP/1.1 keep-alive, no ETags: the
plainest static host). Then, each a subprocess under /usr/bin/time -v (bench/_measure.py), into ledger B:

1. the first pull: ``pull URL --ids IDS --rate 0`` (every record fetched and applied);
2. the refresh: ``pull URL --rate 0`` (every record held; the source unchanged): the source's digests
   are read (spec/pull.md §4.1), roots equal, nothing fetched;
3. the same refresh with ``--no-digests``: one GET per record, unchanged by body hash (the old cost);
4. one record changed at the source (a new citation, re-published), then the refresh again: one bundle.

Prints wall time, requests the server saw and the ratio refresh / first pull (target ≤ 0.1).
"""

from __future__ import annotations

import argparse
import http.server
import json
import shutil
import subprocess
import sys
import tempfile
import threading
from functools import partial
from pathlib import Path
from typing import Any

from bench_pull import CITER, PITHLEDGER, SIGNER_IDS, build, run  # noqa: E402  (bench/ is on sys.path)

from pithledger.records.bundle import write_bundle
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import make_event


def serve(directory: Path) -> tuple[http.server.ThreadingHTTPServer, list[str]]:
    seen: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a: Any) -> None:
            pass

        def do_GET(self) -> None:
            seen.append(self.path)
            super().do_GET()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(directory)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("n", nargs="?", type=int, default=2_000)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-refresh-"))
    try:
        _, numbers, _, events = build(a.n, tmp)
        (tmp / "ids.txt").write_text("\n".join(numbers) + "\n")
        subprocess.run(
            [PITHLEDGER, "-q", "--ledger", str(tmp / "A"), "apply", str(tmp / "bundles.jsonl")],
            check=True,
            capture_output=True,
        )
        subprocess.run(
            [PITHLEDGER, "-q", "--ledger", str(tmp / "A"), "publish", str(tmp / "pub")], check=True, capture_output=True
        )
        print(f"built and published {a.n:,} records, {events:,} events ({tmp})", flush=True)
        server, seen = serve(tmp / "pub")
        url = f"http://127.0.0.1:{server.server_address[1]}"
        common = ["--rate", "0", "--connections", str(a.connections), "--json"]
        steps = [
            ("first pull", ["--ids", str(tmp / "ids.txt")]),
            ("refresh (digests)", []),
            ("refresh (--no-digests)", ["--no-digests"]),
        ]
        walls: dict[str, float] = {}
        for label, extra in steps + [("refresh after 1 record changed", [])]:
            if label.startswith("refresh after"):
                ev = make_event(
                    "citation_signature",
                    numbers[1],
                    {"cited_pith_number": numbers[0], "relation": "cites"},
                    CITER,
                    created_at="2026-07-01T00:00:00Z",
                    signer_id=SIGNER_IDS[CITER.name],
                )
                (tmp / "new.json").write_bytes(canonical_bytes(write_bundle(numbers[1], [ev])))
                subprocess.run(
                    [PITHLEDGER, "-q", "--ledger", str(tmp / "A"), "apply", str(tmp / "new.json")],
                    check=True,
                    capture_output=True,
                )
                subprocess.run(
                    [PITHLEDGER, "-q", "--ledger", str(tmp / "A"), "publish", str(tmp / "pub")],
                    check=True,
                    capture_output=True,
                )
            before = len(seen)
            m, doc = run(["--ledger", str(tmp / "B"), "pull", url, *extra, *common], tmp)
            doc = doc or {}
            walls[label] = m.wall
            print(
                f"{label}: {m.wall:.2f} s, {len(seen) - before:,} requests seen by the server; {doc.get('records_fetched')} fetched, "
                f"{doc.get('new')} new events, {doc.get('unchanged')} unchanged ({doc.get('unchanged_by_digest')} by digest, "
                f"digest: {doc.get('digest')}, {doc.get('digests_read')} digests read), peak RSS {m.rss_mb or 0:.0f} MiB",
                flush=True,
            )
        first = walls["first pull"]
        for label in ("refresh (digests)", "refresh (--no-digests)", "refresh after 1 record changed"):
            print(f"ratio {label} / first pull: {walls[label] / first:.3f}", flush=True)
        da, _ = run(["--ledger", str(tmp / "A"), "digest", "--json"], tmp)
        db, _ = run(["--ledger", str(tmp / "B"), "digest", "--json"], tmp)
        same = json.loads(da.out)["events_root"] == json.loads(db.out)["events_root"]
        print("B's events root equals A's:", same, flush=True)
        server.shutdown()
        if not same or walls["refresh (digests)"] / first > 0.1:
            sys.exit(1)
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
