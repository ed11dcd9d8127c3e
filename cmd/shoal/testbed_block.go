package main

import (
	"context"
	"fmt"

	"shoal/internal/testbed"
)

// tbBlock and tbUnblock drop, or let through again, the new TCP connections
// from one host, or site, to another (testbed.Bed.Block).
func tbBlock(c *tbCtx, args []string) int   { return tbSetBlock(c, args, true) }
func tbUnblock(c *tbCtx, args []string) int { return tbSetBlock(c, args, false) }

func tbSetBlock(c *tbCtx, args []string, block bool) int {
	fs := c.flags()
	from := fs.String("from", "", "the host whose new connections to NODE are dropped (or let through again)")
	both := fs.Bool("both-ways", false, "and NODE's new connections to PEER too: the pair connects in neither direction (the overlay relays it)")
	const usage = "[--instance I] NODE --from PEER [--both-ways]"
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
	if len(rest) != 1 || *from == "" {
		fmt.Fprintf(c.stderr, "shoal testbed %s: want one NODE and --from PEER (hosts n1, n2, …, or sites s1, s2, … on a testbed with sites)\n", c.sub)
		return exitUsage
	}
	b, code := c.open()
	if code >= 0 {
		return code
	}
	set := (*testbed.Bed).Unblock
	if block {
		set = (*testbed.Bed).Block
	}
	if err := set(b, context.Background(), rest[0], *from); err != nil {
		return c.fail(err)
	}
	if *both {
		if err := set(b, context.Background(), *from, rest[0]); err != nil {
			return c.fail(err)
		}
	}
	return exitOK
}
