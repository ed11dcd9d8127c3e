package links

import (
	"time"

	"shoal/internal/job"
)

// Link is what a node measured of its link to another: the round trip (the
// kernel's, of the probe's TCP connection; else that of a small request) and
// the bandwidth of a larger transfer. Estimated links were
// not measured but inferred through a third node. Reach is From's last
// connect to To's API address (nil from a node that does not check, or when
// it has not yet): a pair that cannot connect has a Reach and no round trip
// or bandwidth ([Link.Unmeasured]) until it is measured, or until it is
// estimated through the relay that carries it (Via).
type Link struct {
	From      string       `json:"from"`
	To        string       `json:"to"`
	RTT       job.Duration `json:"rtt"`
	Bandwidth float64      `json:"bandwidth"` // bytes per second, from To to From
	Measured  time.Time    `json:"measured,omitzero"`
	Estimated bool         `json:"estimated,omitzero"`
	Reach     *Reach       `json:"reach,omitempty"`
	// Via is the relay of a pair that connects in neither direction: the
	// link is the path through it ([Complete], [Relay]).
	Via string `json:"via,omitempty"`
}

// Unmeasured reports whether l carries no measure, only its Reach.
func (l Link) Unmeasured() bool { return l.RTT == 0 && l.Bandwidth == 0 }

// List is the answer of GET /v1/links.
type List struct {
	Links []Link `json:"links"`
	// Skipped names the nodes whose links could not be read (all=true), and why.
	Skipped map[string]string `json:"skipped,omitempty"`
}
