package node

import (
	"sort"
	"strings"
)

// Live reports whether n is alive and not leaving: a node jobs may use.
func (n Node) Live() bool { return n.State == "alive" && !n.Leaving }

// LiveKey names the nodes that are alive and not leaving, in name order: two
// lists of nodes with the same key have the same live nodes.
func LiveKey(nodes []Node) string {
	var live []string
	for _, n := range nodes {
		if n.Live() {
			live = append(live, n.Name)
		}
	}
	sort.Strings(live)
	return strings.Join(live, " ")
}

// GoneWord says how membership saw a node go, from its state: "left", or
// "lost" for dead.
func GoneWord(state string) string {
	if state == "left" {
		return "left"
	}
	return "lost"
}
