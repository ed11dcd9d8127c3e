package links

import (
	"crypto/sha256"
	"encoding/binary"
	"sort"
)

// Probers are the nodes that probe a node soon after it joins, beside its own
// first round: the k of live (the joiner left out) that rank highest by
// rendezvous hashing of the pair's names. Every node computes the same set
// from the same membership, and the work a join makes is k probes however
// large the cluster. When every node probed every joiner, a cluster of n
// nodes coming up made n·(n−1) probes of up to 4 MiB, which at 128 testbed
// hosts kept the machine's load in the hundreds for minutes.
func Probers(joiner string, live []string, k int) []string {
	type ranked struct {
		name string
		w    uint64
	}
	var rs []ranked
	seen := map[string]bool{joiner: true}
	for _, n := range live {
		if seen[n] {
			continue
		}
		seen[n] = true
		rs = append(rs, ranked{n, weight(joiner, n)})
	}
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].w != rs[j].w {
			return rs[i].w > rs[j].w
		}
		return rs[i].name < rs[j].name
	})
	out := make([]string, 0, min(k, len(rs)))
	for _, r := range rs[:min(k, len(rs))] {
		out = append(out, r.name)
	}
	sort.Strings(out)
	return out
}

// weight is the rendezvous weight of candidate for key: every node computes
// the same, and a candidate's weight does not depend on the others, so that
// one joining or leaving moves only the keys it wins or held (Probers, the
// relay of a pair among equals in Relay).
func weight(key, candidate string) uint64 {
	h := sha256.Sum256([]byte(key + "\x00" + candidate))
	return binary.BigEndian.Uint64(h[:8])
}
