package shardstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"shoal/internal/api"
	"shoal/internal/errkind"
	"shoal/internal/jobdir"
	"shoal/internal/shard"
)

// storeSource serves another node's store as a PieceSource, as its agent's
// API does (GET …/shards/…, GET …/parity/…), without the network.
type storeSource struct {
	addr string
	s    *Store
}

func (n storeSource) Addr() string { return n.addr }

func (n storeSource) GetShard(ctx context.Context, ref shard.Ref) (io.ReadCloser, int64, error) {
	if n.s == nil {
		return nil, 0, fmt.Errorf("%w: no node at %s", errkind.NotAvailable, n.addr)
	}
	f, info, err := n.s.Open(ref)
	return f, info.Size, err
}

func (n storeSource) GetParity(ctx context.Context, ref shard.ParityRef) (io.ReadCloser, int64, error) {
	return n.s.OpenParity(ref)
}

func (n storeSource) PutParity(ctx context.Context, ref shard.ParityRef, r io.ReadSeeker) (shard.ParityInfo, error) {
	if n.s == nil {
		return shard.ParityInfo{}, fmt.Errorf("%w: no node at %s", errkind.NotAvailable, n.addr)
	}
	return n.s.PutParity(ref, r)
}

// paritySetup is five nodes' stores: ranks 0, 1, 2 wrote their shards of
// epoch 1 on n1, n2, n3 (of different sizes); n4 and n5 are to hold the rows.
type paritySetup struct {
	stores map[string]*Store
	shards [][]byte
	data   []api.Member
}

func newParitySetup(t *testing.T) *paritySetup {
	p := &paritySetup{stores: map[string]*Store{}}
	for i := 1; i <= 5; i++ {
		p.stores[fmt.Sprintf("n%d:7947", i)] = New(t.TempDir())
	}
	for r, size := range []int{3000, 5000, 2<<20 + 17} { // the last spans chunks
		b := makeShard(t, "heat", 1, r, 3, size)
		node := fmt.Sprintf("n%d:7947", r+1)
		place(t, p.stores[node], ref(1, r), b)
		p.shards = append(p.shards, b)
		p.data = append(p.data, api.Member{Rank: r, Bytes: int64(len(b)), Sum: ckptChecksum(b), From: node})
	}
	return p
}

func (p *paritySetup) source(addr string) PieceSource { return storeSource{addr, p.stores[addr]} }

func (p *paritySetup) encode(t *testing.T, node string, row int) shard.ParityInfo {
	t.Helper()
	res, err := p.stores[node].EncodeParity(context.Background(), "heat", 1, api.EncodeRequest{Group: 0, Row: row, M: 2, Data: p.data}, p.source)
	if err != nil {
		t.Fatalf("encode row %d on %s: %v", row, node, err)
	}
	if len(res.Pushed) != 0 {
		t.Errorf("encode row %d on %s pushed %+v, asked for no push", row, node, res.Pushed)
	}
	return res.ParityInfo
}

// TestParityPushedRow has n4 compute both rows and push row 1 to n5: n5 holds
// the very file n5 computing it would have written, and n4 keeps nothing of
// it. A push to a node that cannot take it is reported, and n4's row stands.
func TestParityPushedRow(t *testing.T) {
	p := newParitySetup(t)
	own := New(t.TempDir())
	want, err := own.EncodeParity(context.Background(), "heat", 1, api.EncodeRequest{Group: 0, Row: 1, M: 2, Data: p.data}, p.source)
	if err != nil {
		t.Fatal(err)
	}
	req := api.EncodeRequest{Group: 0, Row: 0, M: 2, Data: p.data, Push: []api.ParityPush{{Row: 1, To: "n5:7947"}}}
	if err := req.Validate(); err != nil {
		t.Fatal(err)
	}
	res, err := p.stores["n4:7947"].EncodeParity(context.Background(), "heat", 1, req, p.source)
	if err != nil {
		t.Fatalf("encode with a push: %v", err)
	}
	if res.Row != 0 || len(res.Pushed) != 1 || res.Pushed[0] != (api.Pushed{Row: 1, To: "n5:7947"}) {
		t.Fatalf("encode with a push answered %+v", res)
	}
	idx, err := p.stores["n5:7947"].Index("heat")
	if err != nil || len(idx.Parity) != 1 || idx.Parity[0].Row != 1 || idx.Parity[0].Checksum != want.Checksum {
		t.Fatalf("index of n5 after the push: %+v, %v; want row 1 with checksum %#x", idx.Parity, err, want.Checksum)
	}
	// Asked again for the row it now holds (a coordinator's view of n5 may
	// lag), n5 answers it without reading a shard: here none can be read.
	unreadable := slices.Clone(p.data)
	for i := range unreadable {
		unreadable[i].From = "n9:7947"
	}
	again, err := p.stores["n5:7947"].EncodeParity(context.Background(), "heat", 1, api.EncodeRequest{Group: 0, Row: 1, M: 2, Data: unreadable}, p.source)
	if err != nil || again.Checksum != want.Checksum {
		t.Errorf("row 1 asked again of n5, which holds it: %+v, %v", again, err)
	}
	// A row computed from other shards is no answer: n5 computes it anew.
	stale := slices.Clone(unreadable)
	stale[2].Sum++
	if _, err := p.stores["n5:7947"].EncodeParity(context.Background(), "heat", 1, api.EncodeRequest{Group: 0, Row: 1, M: 2, Data: stale}, p.source); err == nil {
		t.Errorf("row 1 asked of n5 for other shards was answered with the one it holds")
	}
	dir := p.stores["n4:7947"].jobDir("heat").EpochPath(1)
	names, _ := os.ReadDir(dir)
	var left []string
	for _, n := range names {
		if strings.HasPrefix(n.Name(), "p") && n.Name() != jobdir.ParityName(0, 0) {
			left = append(left, n.Name())
		}
	}
	if len(left) != 0 {
		t.Errorf("n4 kept %v after pushing row 1", left)
	}

	req.Push[0].To = "n9:7947" // no such node
	res, err = p.stores["n1:7947"].EncodeParity(context.Background(), "heat", 1, req, p.source)
	if err != nil {
		t.Fatalf("encode with a failing push: %v", err)
	}
	if len(res.Pushed) != 1 || !strings.Contains(res.Pushed[0].Error, "n9:7947") {
		t.Errorf("a failed push reported as %+v", res.Pushed)
	}
	if idx, err := p.stores["n1:7947"].Index("heat"); err != nil || len(idx.Parity) != 1 || idx.Parity[0].Row != 0 {
		t.Errorf("n1's own row after a failed push: %+v, %v", idx.Parity, err)
	}
}

// TestParityPutRejectsAnotherRow refuses a row stored under another row's
// name, and a damaged one: nothing is stored.
func TestParityPutRejectsAnotherRow(t *testing.T) {
	p := newParitySetup(t)
	p.encode(t, "n4:7947", 0)
	b, err := os.ReadFile(filepath.Join(p.stores["n4:7947"].jobDir("heat").EpochPath(1), jobdir.ParityName(0, 0)))
	if err != nil {
		t.Fatal(err)
	}
	to := p.stores["n5:7947"]
	if _, err := to.PutParity(shard.ParityRef{Job: "heat", Epoch: 1, Group: 0, Row: 1}, bytes.NewReader(b)); !errors.Is(err, errkind.BadRequest) {
		t.Errorf("row 0 put as row 1: %v, want a bad request", err)
	}
	if _, err := to.PutParity(shard.ParityRef{Job: "heat", Epoch: 1, Group: 0, Row: 0}, bytes.NewReader(flip(b, len(b)/3))); !errors.Is(err, errkind.BadRequest) {
		t.Errorf("damaged row put: %v, want a bad request", err)
	}
	if idx, err := to.Index("heat"); err != nil || len(idx.Parity) != 0 {
		t.Errorf("n5 stored %+v (%v) from rejected puts", idx.Parity, err)
	}
	if got, err := to.PutParity(shard.ParityRef{Job: "heat", Epoch: 1, Group: 0, Row: 0}, bytes.NewReader(b)); err != nil || got.Row != 0 {
		t.Errorf("row 0 put as row 0: %+v, %v", got, err)
	}
}

// TestParityEncodeIndexRebuild computes both rows of a group of three shards
// on two other nodes, checks the nodes' indexes list them, then loses two of
// the five pieces in every way that loses data and rebuilds the lost shards
// bit-identical on a fresh node.
func TestParityEncodeIndexRebuild(t *testing.T) {
	p := newParitySetup(t)
	for row, node := range []string{"n4:7947", "n5:7947"} {
		info := p.encode(t, node, row)
		if info.Row != row || info.K != 3 || info.M != 2 || !slices.Equal(info.Ranks, []int{0, 1, 2}) || info.Sums[1] != p.data[1].Sum {
			t.Errorf("row %d: %+v", row, info)
		}
		idx, err := p.stores[node].Index("heat")
		if err != nil || len(idx.Parity) != 1 || idx.Parity[0].Checksum != info.Checksum || len(idx.Shards) != 0 {
			t.Fatalf("index of %s: %+v, %v; want the row alone", node, idx, err)
		}
	}
	rows := []api.ParitySource{{Row: 0, From: "n4:7947"}, {Row: 1, From: "n5:7947"}}
	for _, lost := range [][]int{{0}, {2}, {0, 1}, {1, 2}, {0, 2}} {
		for _, r := range lost {
			req := api.RebuildRequest{Group: 0, M: 2, Parity: rows}
			for _, d := range p.data {
				if slices.Contains(lost, d.Rank) {
					d.From = ""
				}
				req.Data = append(req.Data, d)
			}
			if err := req.Validate(r); err != nil {
				t.Fatalf("lost %v: %v", lost, err)
			}
			to := New(t.TempDir())
			got, err := to.RebuildShard(context.Background(), ref(1, r), req, p.source)
			if err != nil {
				t.Fatalf("lost %v: rebuild rank %d: %v", lost, r, err)
			}
			b, err := os.ReadFile(to.path(ref(1, r)))
			if err != nil || !bytes.Equal(b, p.shards[r]) || !got.Copied || got.Shard.Checksum != p.data[r].Sum {
				t.Errorf("lost %v: rank %d rebuilt as %d bytes (%v), want its %d bytes; %+v", lost, r, len(b), err, len(p.shards[r]), got)
			}
		}
	}
}

// TestParityCorruptRowDetected damages a stored row: the index leaves it
// out, it is not served, and a rebuild that needs it fails naming the row.
func TestParityCorruptRowDetected(t *testing.T) {
	p := newParitySetup(t)
	p.encode(t, "n4:7947", 0)
	path := filepath.Join(p.stores["n4:7947"].jobDir("heat").EpochPath(1), jobdir.ParityName(0, 0))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, flip(b, len(b)/2), 0o644); err != nil {
		t.Fatal(err)
	}
	if idx, err := p.stores["n4:7947"].Index("heat"); err != nil || len(idx.Parity) != 0 {
		t.Errorf("index lists a corrupt row: %+v, %v", idx.Parity, err)
	}
	if _, _, err := p.stores["n4:7947"].OpenParity(shard.ParityRef{Job: "heat", Epoch: 1, Group: 0, Row: 0}); !errors.Is(err, errkind.Corrupt) {
		t.Errorf("corrupt row served: %v", err)
	}
	req := api.RebuildRequest{Group: 0, M: 2, Data: slices.Clone(p.data), Parity: []api.ParitySource{{Row: 0, From: "n4:7947"}}}
	req.Data[0].From = ""
	to := New(t.TempDir())
	_, err = to.RebuildShard(context.Background(), ref(1, 0), req, p.source)
	if !errors.Is(err, errkind.Corrupt) || !strings.Contains(err.Error(), "heat/1/parity/0/0") {
		t.Errorf("rebuild from a corrupt row: %v, want a corrupt error naming the row", err)
	}
	if _, err := to.Stat(ref(1, 0)); err == nil {
		t.Error("a shard was stored from a corrupt row")
	}
}

// TestParityEncodeRefusesAStaleShard asks for a row over a shard whose
// checksum is not the one the coordinator counts: nothing is stored.
func TestParityEncodeRefusesAStaleShard(t *testing.T) {
	p := newParitySetup(t)
	p.data[1].Sum++
	_, err := p.stores["n4:7947"].EncodeParity(context.Background(), "heat", 1, api.EncodeRequest{Group: 0, Row: 0, M: 2, Data: p.data}, p.source)
	if err == nil || !strings.Contains(err.Error(), "rank 1") {
		t.Errorf("encode over a stale shard: %v, want an error naming rank 1", err)
	}
	if idx, _ := p.stores["n4:7947"].Index("heat"); len(idx.Parity) != 0 || len(tmpFiles(t, p.stores["n4:7947"].Dir)) != 0 {
		t.Errorf("something was stored: %+v", idx)
	}
}

func TestParseParityName(t *testing.T) {
	for name, want := range map[string][2]int{"p000000-000.parity": {0, 0}, "p000012-001.parity": {12, 1}, "p1234567-255.parity": {1234567, 255}} {
		g, r, ok := jobdir.ParseParityName(name)
		if !ok || g != want[0] || r != want[1] {
			t.Errorf("%s: %d %d %v", name, g, r, ok)
		}
	}
	for _, name := range []string{"p0-0.parity", "p000000-000.parity.ab12.tmp", "r000000.shard", "p-00001-000.parity", "p000000_000.parity"} {
		if _, _, ok := jobdir.ParseParityName(name); ok {
			t.Errorf("%s parsed as a parity file", name)
		}
	}
}

// deadSource is a node that went away: "refused" answers as an agent that is
// not there, "silent" as one behind a cut link, never.
type deadSource struct {
	addr, how string
}

func (d deadSource) Addr() string { return d.addr }

func (d deadSource) gone(ctx context.Context) error {
	if d.how == "silent" {
		<-ctx.Done()
		return ctx.Err()
	}
	return fmt.Errorf("%w at %s: connect: connection refused", errkind.Unreachable, d.addr)
}

func (d deadSource) GetShard(ctx context.Context, ref shard.Ref) (io.ReadCloser, int64, error) {
	return nil, 0, d.gone(ctx)
}

func (d deadSource) GetParity(ctx context.Context, ref shard.ParityRef) (io.ReadCloser, int64, error) {
	return nil, 0, d.gone(ctx)
}

func (d deadSource) PutParity(ctx context.Context, ref shard.ParityRef, r io.ReadSeeker) (shard.ParityInfo, error) {
	return shard.ParityInfo{}, d.gone(ctx)
}

// TestParityRebuildPassesOverDeadNodes rebuilds rank 0 of a group of three
// with both rows offered, after nodes the coordinator still counted died: the
// holder of rank 1, read first, refuses, and the rebuild reads the rows in its
// place. With rank 2's holder silent as well, one piece is missing: the
// rebuild fails as a bad gateway naming both nodes as giving no answer, and
// stores nothing.
func TestParityRebuildPassesOverDeadNodes(t *testing.T) {
	p := newParitySetup(t)
	p.encode(t, "n4:7947", 0)
	p.encode(t, "n5:7947", 1)
	req := api.RebuildRequest{Group: 0, M: 2, Data: slices.Clone(p.data),
		Parity: []api.ParitySource{{Row: 0, From: "n4:7947"}, {Row: 1, From: "n5:7947"}}}
	req.Data[0].From = ""
	dead := map[string]string{"n2:7947": "refused"}
	source := func(addr string) PieceSource {
		if how, ok := dead[addr]; ok {
			return deadSource{addr, how}
		}
		return p.source(addr)
	}

	to := New(t.TempDir())
	to.StallTimeout = 200 * time.Millisecond
	got, err := to.RebuildShard(context.Background(), ref(1, 0), req, source)
	if err != nil {
		t.Fatalf("rebuild with rank 1's holder gone: %v", err)
	}
	if b, err := os.ReadFile(to.path(ref(1, 0))); err != nil || !bytes.Equal(b, p.shards[0]) || !got.Copied {
		t.Errorf("rank 0 rebuilt as %d bytes (%v), want its %d bytes; %+v", len(b), err, len(p.shards[0]), got)
	}

	dead["n3:7947"] = "silent"
	to = New(t.TempDir())
	to.StallTimeout = 200 * time.Millisecond
	_, err = to.RebuildShard(context.Background(), ref(1, 0), req, source)
	if !errors.Is(err, errkind.BadGateway) || !slices.Equal(errkind.NoAnswerFrom(err), []string{"n2:7947", "n3:7947"}) {
		t.Fatalf("rebuild with ranks 1 and 2's holders gone: %v (no answer from %v), want a bad gateway naming n2 and n3", err, errkind.NoAnswerFrom(err))
	}
	for _, want := range []string{"read 2 of the 3 pieces", "heat/1/1 from n2:7947", "heat/1/2 from n3:7947: no answer for 200ms"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := to.Stat(ref(1, 0)); err == nil {
		t.Error("a shard was stored from too few pieces")
	}
}
