package staging

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"shoal/internal/engine"
	"shoal/internal/node"
	"shoal/internal/place"
)

func TestOverlayLaunch(t *testing.T) {
	live := map[string]node.Node{
		"n1": {Name: "n1", Overlay: "100.64.0.1"},
		"n2": {Name: "n2", Overlay: "100.64.0.2"},
		"n3": {Name: "n3"},
	}
	tests := []struct {
		name, mpi, coord string
		flag             string // "": --mpi-overlay
		p                place.Placement
		mca              map[string]string
		env              []string
		localAddr        string
		err              error
		line             string // the error's line, when it is given
	}{
		{name: "openmpi", mpi: "openmpi", coord: "n1", p: place.Placement{"n1", "n2"},
			mca: map[string]string{"btl_tcp_if_include": "shoal0", "oob_tcp_if_include": "shoal0"}, localAddr: "10.0.0.1"},
		{name: "mpich", mpi: "mpich", coord: "n1", p: place.Placement{"n1", "n2"},
			env: []string{"UCX_NET_DEVICES=shoal0"}, localAddr: "100.64.0.1"},
		{name: "a node without", mpi: "openmpi", coord: "n1", p: place.Placement{"n1", "n3"}, err: ErrNoOverlay},
		{name: "a coordinator without", mpi: "openmpi", coord: "n3", p: place.Placement{"n1", "n2"}, err: ErrNoOverlay},
		{name: "encrypted", mpi: "openmpi", flag: "--mpi-encrypt", coord: "n1", p: place.Placement{"n1", "n2"},
			mca: map[string]string{"btl_tcp_if_include": "shoal0", "oob_tcp_if_include": "shoal0"}, localAddr: "10.0.0.1"},
		{name: "encrypted, a node without", mpi: "openmpi", flag: "--mpi-encrypt", coord: "n1", p: place.Placement{"n1", "n3"}, err: ErrNoOverlay,
			line: "staging: node without the overlay: the job runs with --mpi-encrypt and node n3 has no overlay (start its agent with --overlay auto)"},
	}
	for _, tt := range tests {
		l := engine.Launch{LocalAddr: "10.0.0.1"}
		flag := tt.flag
		if flag == "" {
			flag = "--mpi-overlay"
		}
		err := overlayLaunch(&l, tt.mpi, flag, tt.coord, tt.p, live)
		if !errors.Is(err, tt.err) {
			t.Errorf("%s: error %v, want %v", tt.name, err, tt.err)
			continue
		}
		if err != nil {
			if tt.line != "" && err.Error() != tt.line {
				t.Errorf("%s: error %q, want %q", tt.name, err, tt.line)
			}
			continue
		}
		if !maps.Equal(l.MCA, tt.mca) || !slices.Equal(l.Env, tt.env) || l.LocalAddr != tt.localAddr {
			t.Errorf("%s: MCA %v, env %v, local address %s; want %v, %v, %s", tt.name, l.MCA, l.Env, l.LocalAddr, tt.mca, tt.env, tt.localAddr)
		}
	}
}
