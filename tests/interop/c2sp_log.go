// A plain C2SP tlog-tiles log written by other code than pithledger's: Go's golang.org/x/mod/sumdb/tlog
// (hashes, tiles) and sumdb/note (the signed checkpoint). Used by tests/e2e/tlog/test_tlog_plain.py.
//
//	go run c2sp_log.go DIR ORIGIN OLD NEW
//
// appends the entries OLD..NEW-1 ("entry <i>\n") to the log in DIR (which holds the tiles of the
// tree of size OLD), writes the tiles new since OLD at their C2SP paths (tile/<L>/<N>[.p/<W>]: Go's
// paths carry a height element, tile/8/..., which C2SP dropped) and DIR/checkpoint, signed by a
// key derived from ORIGIN alone (the same on every run); prints the verifier key.
package main

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type seeded struct{ b []byte }

func (r *seeded) Read(p []byte) (int, error) {
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func main() {
	dir, origin := os.Args[1], os.Args[2]
	old, err := strconv.ParseInt(os.Args[3], 10, 64)
	must(err)
	n, err := strconv.ParseInt(os.Args[4], 10, 64)
	must(err)
	seed := sha256.Sum256([]byte(origin))
	skey, vkey, err := note.GenerateKey(&seeded{seed[:]}, origin)
	must(err)

	var stored []tlog.Hash
	reader := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = stored[x]
		}
		return out, nil
	})
	for i := int64(0); i < n; i++ {
		hashes, err := tlog.StoredHashes(i, []byte(fmt.Sprintf("entry %d\n", i)), reader)
		must(err)
		stored = append(stored, hashes...)
	}
	for _, t := range tlog.NewTiles(8, old, n) {
		data, err := tlog.ReadTileData(t, reader)
		must(err)
		path := filepath.Join(dir, "tile", strings.TrimPrefix(t.Path(), "tile/8/"))
		must(os.MkdirAll(filepath.Dir(path), 0o755))
		must(os.WriteFile(path, data, 0o644))
	}
	root, err := tlog.TreeHash(n, reader)
	must(err)
	signer, err := note.NewSigner(skey)
	must(err)
	body := fmt.Sprintf("%s\n%d\n%s\n", origin, n, base64.StdEncoding.EncodeToString(root[:]))
	signed, err := note.Sign(&note.Note{Text: body}, signer)
	must(err)
	must(os.WriteFile(filepath.Join(dir, "checkpoint"), signed, 0o644))
	fmt.Println(vkey)
}
