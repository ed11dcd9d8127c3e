package membership

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"shoal/test/poll"
)

// ranks returns "name=ranks ..." for m's view of the cluster.
func ranks(m *Membership) string {
	var s []string
	for _, n := range m.Nodes() {
		s = append(s, fmt.Sprintf("%s=%d", n.Name, n.Meta.Ranks))
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}

// TestMetaUpdatesReachEveryNode: nodes whose alive messages have the same size
// change their metadata at the same moment, twice in quick succession, as a
// job's nodes do when it starts and ends; every node ends up seeing every
// node's last metadata. (memberlist v0.7.0 can drop a queued broadcast for
// another of the same size; see AdvertiseIP and Membership.announce.)
func TestMetaUpdatesReachEveryNode(t *testing.T) {
	n1 := start(t, "n1", testSecret, nil)
	nodes := []*Membership{n1, start(t, "n2", testSecret, nil), start(t, "n3", testSecret, nil)}
	for _, m := range nodes[1:] {
		if err := m.Join([]string{n1.Addr()}); err != nil {
			t.Fatal(err)
		}
	}
	want := func(w string) func() string {
		return func() string {
			for _, m := range nodes {
				if got := ranks(m); got != w {
					return fmt.Sprintf("%s sees %q, want %q", m.Name(), got, w)
				}
			}
			return ""
		}
	}
	poll.Until(t, 5*time.Second, want("n1=0 n2=0 n3=0"))
	for round, r := range []int{2, 3, 0} {
		var wg sync.WaitGroup
		for _, m := range nodes {
			wg.Add(1)
			go func(m *Membership) {
				defer wg.Done()
				if err := m.UpdateMeta(func(meta *Meta) { meta.Ranks = r }, 5*time.Second); err != nil {
					t.Errorf("round %d: %s: UpdateMeta: %v", round, m.Name(), err)
				}
			}(m)
		}
		wg.Wait()
	}
	poll.Until(t, 5*time.Second, want("n1=0 n2=0 n3=0"))
	// And a lone change is seen too.
	if err := nodes[1].UpdateMeta(func(meta *Meta) { meta.Ranks = 4 }, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, want("n1=0 n2=4 n3=0"))
}
