package traffic

// Report is what one rank reported of its traffic in its node's
// checkpoint store: cumulative since it started (libshoal's traffic file).
type Report struct {
	Rank         int          `json:"rank"`
	Epoch        uint64       `json:"epoch"` // the checkpoint at which it was written
	SecondsMPI   float64      `json:"seconds_mpi"`
	SecondsTotal float64      `json:"seconds_total"`
	Sent         []PeerReport `json:"sent,omitempty"`
}

// PeerReport is what a rank sent one peer, as [Report] carries it (a
// [Peer] of its file).
type PeerReport struct {
	Peer     int    `json:"peer"`
	Bytes    uint64 `json:"bytes"`
	Messages uint64 `json:"messages"`
}
