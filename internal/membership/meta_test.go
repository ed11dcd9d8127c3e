package membership

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestMetaRoundTrip(t *testing.T) {
	tests := []Meta{
		{},
		{API: "10.0.0.1:7947", Cores: 8, Speed: 912345678, Arch: "arm64", OS: "android"},
		{API: "[fe80::1]:7947", Cores: 2, Speed: 1, Arch: "amd64", OS: "linux",
			Labels: map[string]string{"room": "lab-2", "gpu": "", "site/a.b_c-d": "ü"}, Leaving: true},
		{API: "h:1", Cores: 2, Ranks: 300},
		{API: "h:1", Cores: 2, Ranks: 3, Raft: "10.0.0.1:7948"},
		{API: "h:1", Cores: 2, Raft: "10.0.0.1:7948", CPUMilli: 500},
		{API: "h:1", Cores: 2, Raft: "10.0.0.1:7948", Overlay: "100.64.3.4"},
	}
	for _, m := range tests {
		b, err := m.Encode()
		if err != nil {
			t.Fatalf("Encode(%+v): %v", m, err)
		}
		got, err := DecodeMeta(b)
		if err != nil {
			t.Fatalf("DecodeMeta(Encode(%+v)): %v", m, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("round trip: got %+v, want %+v", got, m)
		}
	}
}

func TestMetaEncoding(t *testing.T) {
	m := Meta{API: "a:1", Cores: 4, Speed: 300, Arch: "x", OS: "y",
		Labels: map[string]string{"b": "2", "a": "1"}}
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	// version, flags, cores, speed (uvarint 300 = ac 02), "a:1", "x", "y", 2 labels
	// sorted, ranks 0, no Raft address, no CPU limit, no overlay address.
	want := []byte{1, 0, 4, 0xac, 0x02, 3, 'a', ':', '1', 1, 'x', 1, 'y', 2, 1, 'a', 1, '1', 1, 'b', 1, '2', 0, 0, 0, 0}
	if !reflect.DeepEqual(b, want) {
		t.Errorf("Encode = % x, want % x", b, want)
	}
	// Later versions may append fields: trailing bytes are ignored.
	if got, err := DecodeMeta(append(b, 9, 9)); err != nil || got.Cores != 4 || got.Ranks != 0 {
		t.Errorf("DecodeMeta with trailing bytes = %+v, %v; want cores 4, ranks 0, no error", got, err)
	}
	// Metadata of a node from before ranks were announced: no ranks.
	if got, err := DecodeMeta(want[:len(want)-4]); err != nil || got.Cores != 4 || got.Ranks != 0 || len(got.Labels) != 2 {
		t.Errorf("DecodeMeta without ranks = %+v, %v; want cores 4, 2 labels, ranks 0", got, err)
	}
	// Metadata of a node from before the job store: ranks, no Raft address.
	if got, err := DecodeMeta(append(want[:len(want)-4:len(want)-4], 5)); err != nil || got.Ranks != 5 || got.Raft != "" {
		t.Errorf("DecodeMeta without Raft = %+v, %v; want ranks 5, no Raft address", got, err)
	}
	// Metadata of a node from before CPU limits were announced: none.
	if got, err := DecodeMeta(want[:len(want)-2]); err != nil || got.CPUMilli != 0 || len(got.Labels) != 2 {
		t.Errorf("DecodeMeta without a CPU limit = %+v, %v; want none, 2 labels", got, err)
	}
	// Metadata of a node from before the overlay: no address.
	if got, err := DecodeMeta(want[:len(want)-1]); err != nil || got.Overlay != "" || len(got.Labels) != 2 {
		t.Errorf("DecodeMeta without an overlay address = %+v, %v; want none, 2 labels", got, err)
	}
}

func TestMetaErrors(t *testing.T) {
	good, _ := Meta{API: "h:1", Cores: 1, Labels: map[string]string{"k": "v"}}.Encode()
	decode := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"version", append([]byte{2}, good[1:]...)},
		{"truncated header", good[:1]},
		{"truncated string", good[:len(good)-5]},
		{"truncated labels", good[:len(good)-6]},
		{"huge cores", []byte{1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}},
	}
	for _, tt := range decode {
		if _, err := DecodeMeta(tt.b); !errors.Is(err, ErrBadMeta) {
			t.Errorf("DecodeMeta(%s) error = %v, want ErrBadMeta", tt.name, err)
		}
	}
	encode := []struct {
		name string
		m    Meta
		want error
	}{
		{"too large", Meta{Labels: map[string]string{"a": strings.Repeat("x", 255), "b": strings.Repeat("y", 255)}}, ErrMetaTooLarge},
		{"empty key", Meta{Labels: map[string]string{"": "v"}}, ErrBadMeta},
		{"bad key", Meta{Labels: map[string]string{"a=b": "v"}}, ErrBadMeta},
		{"long value", Meta{Labels: map[string]string{"a": strings.Repeat("x", 256)}}, ErrBadMeta},
		{"negative cores", Meta{Cores: -1}, ErrBadMeta},
		{"negative ranks", Meta{Ranks: -1}, ErrBadMeta},
	}
	for _, tt := range encode {
		if _, err := tt.m.Encode(); !errors.Is(err, tt.want) {
			t.Errorf("Encode(%s) error = %v, want %v", tt.name, err, tt.want)
		}
	}
}

func TestMeasureSpeed(t *testing.T) {
	if got := MeasureSpeed(0); got != 0 {
		t.Errorf("MeasureSpeed(0) = %d, want 0", got)
	}
	if got := MeasureSpeed(20e6); got < 1e6 {
		t.Errorf("MeasureSpeed(20ms) = %d iterations/s, want at least 1e6", got)
	}
}
