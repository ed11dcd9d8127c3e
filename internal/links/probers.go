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
		h := sha256.Sum256([]byte(joiner + "\x00" + n))
		rs = append(rs, ranked{n, binary.BigEndian.Uint64(h[:8])})
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
