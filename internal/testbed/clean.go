package testbed

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// Clean removes everything testbed instance inst may have left: its processes, network
// namespaces, links (and with them their tc qdiscs), bridges (the instance's and its
// sites'), namespace mounts, cgroups and directory. It reads the state file if there is one and also scans for the
// instance's names, so it works after a crashed or half-finished [Up]. Cleaning what is
// not there is not an error.
func Clean(ctx context.Context, inst int) error {
	if inst < 0 || inst > MaxInstance {
		return fmt.Errorf("%w: Instance = %d: want 0 to %d", ErrInvalidConfig, inst, MaxInstance)
	}
	if !IsRoot() {
		return ErrNotRoot
	}
	n := names{inst}
	unlock, err := lock(n)
	if err != nil {
		return err
	}
	defer unlock()
	return clean(ctx, n)
}

func clean(ctx context.Context, n names) error {
	var errs []error
	leaveGroup(n)
	hosts := map[int]bool{}
	cgroups := map[int][]string{}
	mungedPID := 0
	if st, err := loadState(n); err == nil {
		if st.Slurm != nil {
			mungedPID = st.Slurm.MungedPID
		}
		for _, h := range st.Hosts {
			hosts[h.Index] = true
			cgroups[h.Index] = append(cgroups[h.Index], h.Cgroups...)
		}
	}
	netns, links, sites, bridge := leftoverNet(ctx, n)
	cgHosts, groups := leftoverCgroups(n)
	for k, dirs := range cgHosts {
		hosts[k] = true
		cgroups[k] = append(cgroups[k], dirs...)
	}
	for k := range netns {
		hosts[k] = true
	}
	for k := range links {
		hosts[k] = true
	}
	if ents, err := os.ReadDir(n.dir()); err == nil {
		for _, e := range ents {
			if k := n.hostIndex(fmt.Sprintf("shoal%d-%s", n.inst, e.Name())); k > 0 {
				hosts[k] = true
			}
		}
	}

	// The helpers outside the hosts first (wakers, delay lines, process killers: their
	// argv carries a marker), then thaw: a v1 freezer holds even SIGKILL until thawed.
	killMarked(fmt.Sprintf("shoal-testbed-%d-n", n.inst))
	for k := range hosts {
		setFrozen(cgroups[k], false)
	}
	// Processes first: a namespace lives on while a process is in it.
	for k := range hosts {
		if _, err := matchFor(n, k, cgroups[k]).kill(ctx); err != nil {
			errs = append(errs, fmt.Errorf("kill processes of n%d: %w", k, err))
		}
	}
	// The one process of a testbed with Slurm that runs outside the hosts.
	if err := stopMunged(n, mungedPID); err != nil {
		errs = append(errs, err)
	}
	for k := range links {
		// Deleting one end of a veth pair deletes the other: a link may be gone already.
		if err := n.sh(ctx, "ip", "link", "del", n.netns(k)); err != nil && n.linkExists(ctx, n.netns(k)) {
			errs = append(errs, err)
		}
	}
	for s := range sites {
		// Either end of a site's link deletes both; then its bridge.
		for _, name := range []string{n.siteOut(s), n.siteIn(s), n.siteBridge(s)} {
			if err := n.sh(ctx, "ip", "link", "del", name); err != nil && n.linkExists(ctx, name) {
				errs = append(errs, err)
			}
		}
	}
	if bridge {
		if err := n.sh(ctx, "ip", "link", "del", n.bridge()); err != nil {
			errs = append(errs, err)
		}
	}
	for k := range netns {
		if err := n.sh(ctx, "ip", "netns", "del", n.netns(k)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := unmountUnder(n.dir()); err != nil {
		errs = append(errs, err)
	}
	for _, dirs := range cgroups {
		for _, d := range dirs {
			if err := removeCgroup(d); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, g := range groups {
		if err := removeCgroup(g); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(n.dir()); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
