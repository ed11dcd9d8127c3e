package testbed

import (
	"fmt"
	"slices"
)

// convergence is the rule of [Bed.waitCluster], kept apart from the commands that ask the
// agents: which hosts still have to be asked, whether a pass over their answers got
// closer, and what is still wrong.
//
// A host's view is complete when it lists as alive every other host it must see (every
// running host when focus is nil, else the focus hosts, and the focus hosts every running
// host). A view that was complete once stays counted: a pass asks only the hosts whose
// view was not, so that a pass over 128 hosts, each asked by starting `shoal nodes` in
// its namespaces, does not ask again the hundred that were done. The wait ends when every
// running host's view has been complete; it fails only when no pass has got closer for
// a while (see [Bed.waitCluster]), so that its bound does not grow with the hosts.
type convergence struct {
	focus  []string
	done   map[string]bool
	fewest int // fewest pairs missing after any pass; -1 before the first
}

func newConvergence(focus []string) *convergence {
	return &convergence{focus: focus, done: map[string]bool{}, fewest: -1}
}

func (c *convergence) inFocus(name string) bool {
	return c.focus == nil || slices.Contains(c.focus, name)
}

// toAsk returns the hosts of up whose view has not been complete yet, in up's order.
func (c *convergence) toAsk(up []string) []string {
	var ask []string
	for _, h := range up {
		if !c.done[h] && c.mustSee(h, up) > 0 {
			ask = append(ask, h)
		}
	}
	return ask
}

// mustSee is how many hosts of up h must list as alive.
func (c *convergence) mustSee(h string, up []string) int {
	n := 0
	for _, o := range up {
		if o != h && (c.inFocus(h) || c.inFocus(o)) {
			n++
		}
	}
	return n
}

// view is one host's answer: the state it lists for every node by name, or why it could
// not say.
type view struct {
	seen map[string]string
	err  error
}

// record takes the answers of one pass, by host, to the hosts toAsk(up) returned
// and returns what is still wrong, the first problem in up's order ("" when every host's
// view has been complete), and whether fewer pairs are missing than after any pass before.
// A host that could not answer misses every host it must see.
func (c *convergence) record(up []string, views map[string]view) (problem string, missing int, closer bool) {
	for _, h := range up {
		if c.done[h] {
			continue
		}
		v, asked := views[h]
		if !asked {
			continue // nothing to see: [convergence.toAsk] leaves out only such hosts
		}
		if v.err != nil {
			missing += c.mustSee(h, up)
			if problem == "" {
				problem = v.err.Error()
			}
			continue
		}
		lacks := 0
		for _, o := range up {
			if o == h || !(c.inFocus(h) || c.inFocus(o)) {
				continue
			}
			if state := v.seen[o]; state != "alive" {
				if state == "" {
					state = "nothing"
				}
				if problem == "" {
					problem = fmt.Sprintf("%s sees %s %s", h, o, state)
				}
				lacks++
			}
		}
		if lacks == 0 {
			c.done[h] = true
		}
		missing += lacks
	}
	closer = c.fewest < 0 || missing < c.fewest
	if closer {
		c.fewest = missing
	}
	return problem, missing, closer
}
