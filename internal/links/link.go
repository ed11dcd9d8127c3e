package links

import (
	"time"

	"shoal/internal/job"
)

// Link is what a node measured of its link to another: the round trip (the
// kernel's, of the probe's TCP connection; else that of a small request) and
// the bandwidth of a larger transfer. Estimated links were
// not measured but inferred through a third node.
type Link struct {
	From      string       `json:"from"`
	To        string       `json:"to"`
	RTT       job.Duration `json:"rtt"`
	Bandwidth float64      `json:"bandwidth"` // bytes per second, from To to From
	Measured  time.Time    `json:"measured,omitzero"`
	Estimated bool         `json:"estimated,omitzero"`
}

// List is the answer of GET /v1/links.
type List struct {
	Links []Link `json:"links"`
	// Skipped names the nodes whose links could not be read (all=true), and why.
	Skipped map[string]string `json:"skipped,omitempty"`
}
