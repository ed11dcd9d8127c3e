package place

import "shoal/internal/job"

// FlowsOf is p's flows for the planner: nil without a profile, and empty, not
// nil, for a profile of ranks that sent each other nothing.
func FlowsOf(p *job.TrafficProfile) []Flow {
	if p == nil {
		return nil
	}
	out := make([]Flow, 0, len(p.Flows))
	for _, f := range p.Flows {
		out = append(out, Flow{From: f.From, To: f.To, Bytes: f.Bytes, Messages: f.Messages})
	}
	return out
}
