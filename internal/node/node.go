// Package node holds the cluster member as every part of Shoal sees it: the
// [Node] that membership reports and GET /v1/nodes carries, its roles in the
// job store, and the quorum a node list shows ([Voters]). It imports nothing
// of Shoal's HTTP; docs/api.md specifies the JSON.
package node

import (
	"time"

	"shoal/internal/job"
)

// Node is one cluster member as GET /v1/nodes reports it.
type Node struct {
	Name  string `json:"name"`
	Addr  string `json:"addr"` // gossip address, host:port
	API   string `json:"api"`  // API address, host:port
	Cores int    `json:"cores"`
	// CPUs is the CPU time the node's ranks may use together, in cores, when a
	// quota gives them less than Cores whole cores; absent: Cores.
	CPUs   float64           `json:"cpus,omitempty"`
	Speed  uint64            `json:"speed"` // single-core loop iterations per second; compare between nodes
	Arch   string            `json:"arch"`
	OS     string            `json:"os"`
	Labels map[string]string `json:"labels,omitempty"`
	// State is alive, suspect, dead or left; Since is when it began, as seen
	// by the answering node.
	State   string       `json:"state"`
	Since   time.Time    `json:"since"`
	RTT     job.Duration `json:"rtt,omitzero"`     // last direct probe from the answering node
	Leaving bool         `json:"leaving,omitzero"` // announced it is about to leave
	Local   bool         `json:"local,omitzero"`   // the answering node itself
	// Role is the node's part in the job store as the answering node knows it:
	// "leader" (coordinates every job), "voter", "follower" (a standby: keeps a
	// replica without voting), "client" (a live node that keeps no replica and
	// follows the store from one that does), or "" (no part: a node gone).
	Role string `json:"role,omitempty"`
	// Ranks is how many ranks of running jobs the node hosts, whichever node
	// coordinates them: the node announces it with its metadata (the sum of
	// its launch grants' ranks), so every node's answer shows every node's.
	Ranks int `json:"ranks"`
	// Overlay is the node's address on the overlay its agent carries
	// (`shoal agent --overlay`), whose device is shoal0; absent: none.
	Overlay string `json:"overlay,omitempty"`
}

// List is the answer of GET /v1/nodes.
type List struct {
	Nodes []Node `json:"nodes"`
}
