package testbed

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The kernel keeps one IPv4 neighbour (ARP) table for every network namespace of the
// machine, and its limits exist only in the machine's own namespace: past gc_thresh3
// entries in all namespaces together, a new neighbour cannot be resolved ("neighbour:
// arp_cache: neighbor table overflow!" in the kernel log) and a send to it fails with
// ENOBUFS. A testbed of n hosts on one bridge holds up to n·(n+1) entries (each host one
// for every other host and the bridge, the bridge one for every host): 16,512 at 128
// hosts, against the default gc_thresh3 of 1,024. At 128 hosts the agents' gossip then
// reached only some of the others, and memberlist declared dozens of live nodes dead
// every minute.
const neighDir = "/proc/sys/net/ipv4/neigh/default"

// neighLimits are the neighbour table's garbage-collection thresholds: below Min entries
// the kernel collects none, above Soft it collects those unused for 5 s, and it never
// holds more than Hard.
type neighLimits struct{ Min, Soft, Hard int }

// neighNeed returns the limits a testbed of hosts hosts needs, given the machine's:
// Soft at least the n·(n+1) entries of the testbed, so that the kernel does not drop
// entries of live hosts that are all in use, and Hard twice that, room for the other
// testbeds on the machine. It never lowers a limit, and reports whether any must rise.
func neighNeed(hosts int, cur neighLimits) (neighLimits, bool) {
	entries := hosts * (hosts + 1)
	want := cur
	want.Soft = max(cur.Soft, entries)
	want.Hard = max(cur.Hard, 2*entries, want.Soft)
	return want, want != cur
}

// raiseNeighLimits raises the machine's neighbour table limits to what a testbed of
// hosts hosts needs ([neighNeed]); limits already as high stay. The limits are the
// machine's, shared by every testbed instance: they are not lowered again at down.
func (b *Bed) raiseNeighLimits(hosts int) error {
	var cur neighLimits
	for _, f := range []struct {
		name string
		v    *int
	}{{"gc_thresh1", &cur.Min}, {"gc_thresh2", &cur.Soft}, {"gc_thresh3", &cur.Hard}} {
		raw, err := os.ReadFile(neighDir + "/" + f.name)
		if err != nil {
			return fmt.Errorf("testbed: neighbour table limits: %w", err)
		}
		if *f.v, err = strconv.Atoi(strings.TrimSpace(string(raw))); err != nil {
			return fmt.Errorf("testbed: neighbour table limits: %s: %w", f.name, err)
		}
	}
	want, raise := neighNeed(hosts, cur)
	if !raise {
		return nil
	}
	// gc_thresh3 first: the kernel holds Soft ≤ Hard at every step.
	for _, f := range []struct {
		name     string
		old, new int
	}{{"gc_thresh3", cur.Hard, want.Hard}, {"gc_thresh2", cur.Soft, want.Soft}} {
		if f.new == f.old {
			continue
		}
		if err := os.WriteFile(neighDir+"/"+f.name, []byte(strconv.Itoa(f.new)), 0o644); err != nil {
			return fmt.Errorf("testbed: raise the neighbour table's %s from %d to %d for %d hosts: %w", f.name, f.old, f.new, hosts, err)
		}
		b.logf("raised the machine's neighbour table limit %s from %d to %d for %d hosts", f.name, f.old, f.new, hosts)
	}
	return nil
}
