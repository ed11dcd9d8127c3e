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

	"shoal/internal/api"
)

// storeSource serves another node's store as a PieceSource, as its agent's
// API does (GET …/shards/…, GET …/parity/…), without the network.
type storeSource struct {
	addr string
	s    *Store
}

func (n storeSource) Addr() string { return n.addr }

func (n storeSource) GetShard(ctx context.Context, ref api.ShardRef) (io.ReadCloser, int64, error) {
	f, info, err := n.s.Open(ref)
	return f, info.Size, err
}

func (n storeSource) GetParity(ctx context.Context, ref api.ParityRef) (io.ReadCloser, int64, error) {
	return n.s.OpenParity(ref)
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
		b := shard(t, "heat", 1, r, 3, size)
		node := fmt.Sprintf("n%d:7947", r+1)
		place(t, p.stores[node], ref(1, r), b)
		p.shards = append(p.shards, b)
		p.data = append(p.data, api.Member{Rank: r, Bytes: int64(len(b)), Sum: ckptChecksum(b), From: node})
	}
	return p
}

func (p *paritySetup) source(addr string) PieceSource { return storeSource{addr, p.stores[addr]} }

func (p *paritySetup) encode(t *testing.T, node string, row int) api.ParityInfo {
	t.Helper()
	info, err := p.stores[node].EncodeParity(context.Background(), "heat", 1, api.EncodeRequest{Group: 0, Row: row, M: 2, Data: p.data}, p.source)
	if err != nil {
		t.Fatalf("encode row %d on %s: %v", row, node, err)
	}
	return info
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
	path := filepath.Join(p.stores["n4:7947"].jobDir("heat").EpochPath(1), parityName(0, 0))
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
	if _, _, err := p.stores["n4:7947"].OpenParity(api.ParityRef{Job: "heat", Epoch: 1, Group: 0, Row: 0}); !errors.Is(err, api.ErrCorrupt) {
		t.Errorf("corrupt row served: %v", err)
	}
	req := api.RebuildRequest{Group: 0, M: 2, Data: slices.Clone(p.data), Parity: []api.ParitySource{{Row: 0, From: "n4:7947"}}}
	req.Data[0].From = ""
	to := New(t.TempDir())
	_, err = to.RebuildShard(context.Background(), ref(1, 0), req, p.source)
	if !errors.Is(err, api.ErrCorrupt) || !strings.Contains(err.Error(), "heat/1/parity/0/0") {
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
		g, r, ok := parseParityName(name)
		if !ok || g != want[0] || r != want[1] {
			t.Errorf("%s: %d %d %v", name, g, r, ok)
		}
	}
	for _, name := range []string{"p0-0.parity", "p000000-000.parity.ab12.tmp", "r000000.shard", "p-00001-000.parity", "p000000_000.parity"} {
		if _, _, ok := parseParityName(name); ok {
			t.Errorf("%s parsed as a parity file", name)
		}
	}
}
