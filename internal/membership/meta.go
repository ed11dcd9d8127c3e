package membership

import (
	"encoding/binary"
	"fmt"
	"sort"
	"unicode/utf8"

	"github.com/hashicorp/memberlist"
)

// MaxMetaSize is the largest encoded [Meta] memberlist carries, in bytes.
const MaxMetaSize = memberlist.MetaMaxSize

// metaVersion is the first byte of encoded metadata. Decoders ignore bytes after
// the fields they know, so a later version may append fields without breaking
// older nodes; it bumps the version only for incompatible changes.
const metaVersion = 1

const flagLeaving = 1 << 0

// Meta is what a node announces about itself with every alive message. The node's
// name is memberlist's node name and is not repeated here.
type Meta struct {
	// API is the host:port of the node's HTTP API, reachable by the other nodes.
	API string
	// Cores is the number of CPU cores the node offers to ranks.
	Cores int
	// Speed is the node's single-core speed from [MeasureSpeed], in loop
	// iterations per second. Only ratios between nodes mean anything.
	Speed uint64
	// Arch and OS are Go's GOARCH and GOOS of the agent (amd64, arm64; linux, android).
	Arch string
	OS   string
	// Labels are free-form key=value pairs given with `shoal agent --labels`.
	// Keys: 1 to 63 bytes of [A-Za-z0-9._/-]; values: up to 255 bytes of UTF-8.
	Labels map[string]string
	// Leaving is set just before the node leaves on purpose, so that the others
	// record it as left and not as dead (memberlist does not tell them apart).
	Leaving bool
	// Ranks is how many ranks of running jobs the node hosts: the sum over the
	// launch grants its jobs' coordinators gave it (see [Membership.UpdateMeta]).
	Ranks int
	// Raft is the host:port of the node's job-store replication (Raft) transport;
	// empty for a node that takes no part in it.
	Raft string
	// CPUMilli is how much CPU time the node's ranks may use together, in
	// thousandths of a core, when a limit (a container's or cgroup's quota) gives
	// them less than Cores whole cores; 0 means Cores whole cores.
	CPUMilli uint64
	// Overlay is the node's address on the overlay the agents carry
	// (internal/overlay), as text; empty for a node without one.
	Overlay string
}

// Encode returns the compact binary form of m:
//
//	version(1) flags(1) uvarint(cores) uvarint(speed) str(api) str(arch) str(os)
//	uvarint(nlabels) {str(key) str(value)}…   (labels sorted by key)
//	uvarint(ranks) str(raft) uvarint(cpu_milli) str(overlay)
//
// where str is a uvarint length followed by the bytes. Ranks, Raft, CPUMilli
// and then Overlay came last, after the first release: a decoder that stops
// earlier reads the rest the same, and metadata that ends there decodes with
// Ranks 0, no Raft address, no CPU limit and no overlay address. It fails with
// [ErrMetaTooLarge] beyond [MaxMetaSize] bytes, or [ErrBadMeta] for a bad label.
func (m Meta) Encode() ([]byte, error) {
	if m.Cores < 0 {
		return nil, fmt.Errorf("%w: cores %d", ErrBadMeta, m.Cores)
	}
	if m.Ranks < 0 {
		return nil, fmt.Errorf("%w: ranks %d", ErrBadMeta, m.Ranks)
	}
	b := make([]byte, 0, 64)
	b = append(b, metaVersion, 0)
	if m.Leaving {
		b[1] |= flagLeaving
	}
	b = binary.AppendUvarint(b, uint64(m.Cores))
	b = binary.AppendUvarint(b, m.Speed)
	for _, s := range []string{m.API, m.Arch, m.OS} {
		b = appendString(b, s)
	}
	keys := make([]string, 0, len(m.Labels))
	for k, v := range m.Labels {
		if err := CheckLabel(k, v); err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendString(appendString(b, k), m.Labels[k])
	}
	b = binary.AppendUvarint(b, uint64(m.Ranks))
	b = appendString(b, m.Raft)
	b = binary.AppendUvarint(b, m.CPUMilli)
	b = appendString(b, m.Overlay)
	if len(b) > MaxMetaSize {
		return nil, fmt.Errorf("%w: %d bytes encoded, limit %d (fewer or shorter labels?)", ErrMetaTooLarge, len(b), MaxMetaSize)
	}
	return b, nil
}

// DecodeMeta parses what [Meta.Encode] produced. Errors wrap [ErrBadMeta].
func DecodeMeta(b []byte) (Meta, error) {
	d := decoder{b: b}
	var m Meta
	if len(b) < 2 {
		return m, fmt.Errorf("%w: %d bytes", ErrBadMeta, len(b))
	}
	if b[0] != metaVersion {
		return m, fmt.Errorf("%w: version %d, want %d", ErrBadMeta, b[0], metaVersion)
	}
	m.Leaving = b[1]&flagLeaving != 0
	d.b = b[2:]
	m.Cores = int(d.uvarint(1 << 20))
	m.Speed = d.uvarint(1 << 62)
	m.API, m.Arch, m.OS = d.str(), d.str(), d.str()
	if n := d.uvarint(MaxMetaSize); n > 0 && d.err == nil {
		m.Labels = make(map[string]string, n)
		for i := uint64(0); i < n && d.err == nil; i++ {
			k, v := d.str(), d.str()
			m.Labels[k] = v
		}
	}
	if len(d.b) > 0 {
		m.Ranks = int(d.uvarint(1 << 30))
	}
	if len(d.b) > 0 {
		m.Raft = d.str()
	}
	if len(d.b) > 0 {
		m.CPUMilli = d.uvarint(1 << 40)
	}
	if len(d.b) > 0 {
		m.Overlay = d.str()
	}
	if d.err != nil {
		return Meta{}, d.err
	}
	return m, nil
}

// CheckLabel reports whether key=value can be a node label; the error is a
// [*LabelError].
func CheckLabel(key, value string) error {
	if len(key) == 0 || len(key) > 63 {
		return &LabelError{Key: key, Reason: "want 1 to 63 bytes"}
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '/') {
			return &LabelError{Key: key, Reason: fmt.Sprintf("byte %q not in [A-Za-z0-9._/-]", c)}
		}
	}
	if len(value) > 255 || !utf8.ValidString(value) {
		return &LabelError{Key: key, Reason: "value must be up to 255 bytes of UTF-8"}
	}
	return nil
}

// LabelError says why a label is refused; it unwraps to [ErrBadMeta].
type LabelError struct {
	Key    string
	Reason string
}

func (e *LabelError) Error() string { return fmt.Sprintf("label key %q: %s", e.Key, e.Reason) }
func (e *LabelError) Unwrap() error { return ErrBadMeta }

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// decoder reads uvarints and strings, remembering the first error.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint(limit uint64) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = fmt.Errorf("%w: truncated", ErrBadMeta)
		return 0
	}
	if v > limit {
		d.err = fmt.Errorf("%w: value %d out of range", ErrBadMeta, v)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string {
	n := d.uvarint(MaxMetaSize)
	if d.err != nil {
		return ""
	}
	if uint64(len(d.b)) < n {
		d.err = fmt.Errorf("%w: truncated string", ErrBadMeta)
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
