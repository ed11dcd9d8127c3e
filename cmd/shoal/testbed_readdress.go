package main

import (
	"context"
	"fmt"
)

// tbReaddress gives a host a new address, as a phone that changes networks: the
// flags may follow NODE (readdress n2 --to 10.77.0.50).
func tbReaddress(c *tbCtx, args []string) int {
	fs := c.flags()
	to := fs.String("to", "", "the new address (default: 10.77.I.(100+K), or the next free one)")
	const usage = "[--instance I] NODE [--to ADDR]"
	rest, code := c.parse(args, usage)
	if code >= 0 {
		return code
	}
	if len(rest) > 1 {
		node := rest[0]
		if rest, code = c.parse(rest[1:], usage); code >= 0 {
			return code
		}
		rest = append([]string{node}, rest...)
	}
	if len(rest) != 1 {
		fmt.Fprintf(c.stderr, "shoal testbed readdress: want one NODE (n1, n2, …), got %d arguments\n", len(rest))
		return exitUsage
	}
	b, code := c.open()
	if code >= 0 {
		return code
	}
	old, err := b.Host(rest[0])
	if err != nil {
		return c.fail(err)
	}
	h, err := b.Readdress(context.Background(), rest[0], *to)
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.stdout, "%s moved from %s to %s\n", h.Name, old.IP, h.IP)
	return exitOK
}
