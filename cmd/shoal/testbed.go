package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"

	"shoal/internal/testbed"
)

func init() {
	register("testbed", command{summary: "real hosts on this machine for tests and demos (root)", run: testbedCmd})
}

const testbedUsage = `Usage: shoal testbed [flags] SUBCOMMAND [flags] [ARGS]

Builds hosts n1, n2, … out of network namespaces on a bridge (shoalbr0,
10.77.0.0/24; host nK is 10.77.0.(10+K)), each with its own hostname, temp dir,
data dir, cgroup (optional CPU quota), optional bandwidth limit, and a Shoal
agent. Hosts may be grouped into sites: full speed inside a site, a
rate-limited link between sites. Needs root. See docs/testbed.md.

Subcommands:
  up [--nodes 3] [--cores 2,2,3] [--cpu-quota 0.5,0.5,1] [--rate 15mbit]
     [--sites 3,3 --site-rate 20mbit] [--arch amd64,arm64,arm64]
     [--profile wifi,none,wifi] [--agent-arg ARG]... [--no-agent] [--slurm]
     [--s3] [--overlay]
                    remove any previous testbed, bring up a new one; --sites
                    gives the hosts of each site in order (3,3: n1-n3 and
                    n4-n6), --site-rate each site's link to the others;
                    --arch each host's instruction set (arm64: in the root
                    of make arm64-root, under qemu, with bin/arm64/shoal);
                    --profile each host's device condition (wifi: delay,
                    jitter, loss and a rate cap on its link; android: no
                    SysV IPC, processes beyond 32 killed);
                    --slurm runs Slurm in the hosts instead of agents;
                    --s3 gives every process in the hosts the AWS_*
                    settings of the S3 server (shoal testbed s3 up);
                    --overlay starts every agent with --overlay auto;
                    --agent-arg gives every agent one more argument
  down              remove everything: processes, namespaces, links, cgroups, files
  status [--json]   hosts, addresses, state, processes, agents
  kill NODE         SIGKILL every process in NODE (the host stays)
  cut NODE          take NODE's link down (packets vanish, processes live on)
  heal NODE         bring NODE's link up again
  block NODE --from PEER [--both-ways]
                    drop PEER's new TCP connections to NODE (they time out),
                    as a NAT or firewall in front of NODE: NODE's own
                    connections to PEER, those made before, and UDP pass
                    (needs nft: Debian's nftables); with --both-ways, NODE's
                    to PEER too: the pair connects in neither direction, each
                    side's TCP from the other is reset (connects refused, the
                    connections made before ended); on a testbed with sites,
                    NODE and PEER may be sites (s1, s2, …): every pair of
                    their hosts
  unblock NODE --from PEER [--both-ways]
                    let PEER's new connections to NODE through again (and
                    NODE's to PEER)
  readdress NODE [--to ADDR]
                    give NODE a new address on its link, the old one removed,
                    as a phone changing networks (default 10.77.I.(100+K))
  sleep NODE SECONDS
                    freeze every process of NODE for SECONDS, as a phone
                    asleep; returns at once, NODE wakes by itself
  wake NODE         thaw NODE now
  add [--cores N] [--cpu-quota Q] [--rate R] [--site S] [--arch A]
      [--profile P] [--no-agent]
                    add a host n<K+1> (with an agent joining the others), in
                    site S (default: the last) when there are sites
  restart NODE      start NODE's agent again (after kill); with --slurm,
                    NODE's slurmd (and slurmctld in n1)
  s3 up|down|env     an S3-compatible server (SeaweedFS) on this machine, outside
                    every host, for --durable s3://shoal/PREFIX: up starts it
                    (make s3-server builds it) and writes its settings as
                    AWS_* exports to /tmp/shoal-testbed-s3/env; env prints
                    them for the hosts of --instance I; down removes it
  delay-line, phantom-killer, no-sysv-ipc
                    what hosts with a profile run (up and add start them;
                    down stops them)
  exec NODE [--] COMMAND [ARGS]
                    run COMMAND inside NODE with stdio passed through; exits
                    with its exit code
  rsh HOST COMMAND...
                    run COMMAND (words joined, run by /bin/sh) inside HOST
                    (a name or an address): Open MPI's --mca plm_rsh_agent
                    "shoal testbed rsh" for plain mpirun across hosts

Every subcommand takes --instance I (default $SHOAL_TESTBED_INSTANCE, else 0) to
work on another testbed (0 to 511): bridge shoalbr<I>, subnet 10.77.<I>.0/24
(from 256: 10.78.<I-256>.0/24), /tmp/shoal-testbed-<I>. Flags may come before
the subcommand or after it (shoal testbed --instance 7 status); the commands
the testbed suggests carry --instance I for any instance but 0.
`

// testbedSubs are the subcommands of shoal testbed.
var testbedSubs = map[string]func(*tbCtx, []string) int{
	"up": tbUp, "down": tbDown, "status": tbStatus, "kill": tbKill, "cut": tbCut,
	"heal": tbHeal, "block": tbBlock, "unblock": tbUnblock, "readdress": tbReaddress, "sleep": tbSleep, "wake": tbWake, "add": tbAdd, "restart": tbRestart, "exec": tbExec, "rsh": tbRsh,
	"s3": tbS3, "delay-line": tbDelayLine, "no-sysv-ipc": tbNoSysVIPC, "phantom-killer": tbPhantomKiller,
}

func testbedCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, testbedUsage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	sub, rest := subcommandFirst(args)
	if sub == "" {
		fmt.Fprintf(stderr, "shoal testbed: no subcommand after the flags %q (see 'shoal testbed --help')\n", args)
		return exitUsage
	}
	f, ok := testbedSubs[sub]
	if !ok {
		fmt.Fprintf(stderr, "shoal testbed: unknown subcommand %q%s (see 'shoal testbed --help')\n", sub, didYouMean(sub, testbedSubcommands()))
		return exitUsage
	}
	c := &tbCtx{sub: sub, stdout: stdout, stderr: stderr}
	return f(c, rest)
}

// tbBoolFlags are the testbed flags that take no value.
var tbBoolFlags = map[string]bool{"json": true, "no-agent": true, "slurm": true, "s3": true, "overlay": true}

// subcommandFirst finds the subcommand in args, which may follow flags
// (shoal testbed --instance 7 status), and returns it with the flags before it
// moved after it, where the subcommand parses them; "" if there is none.
func subcommandFirst(args []string) (string, []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return "", nil
		}
		if !strings.HasPrefix(a, "-") {
			return a, append(append([]string{}, args[:i]...), args[i+1:]...)
		}
		name := strings.TrimLeft(a, "-")
		if !strings.Contains(name, "=") && !tbBoolFlags[name] {
			i++ // its value
		}
	}
	return "", nil
}

// tbHint is a testbed command line to paste: shoal testbed SUB ARGS, with
// --instance when the testbed is not instance 0, so that it acts on this one.
func tbHint(instance int, sub string, args ...string) string {
	words := []string{"shoal", "testbed", sub}
	if instance != 0 {
		words = append(words, "--instance", strconv.Itoa(instance))
	}
	return strings.Join(append(words, args...), " ")
}

// tbCtx is what every testbed subcommand shares: its flag set with --instance, output,
// and the root check.
type tbCtx struct {
	sub            string
	stdout, stderr io.Writer
	fs             *flag.FlagSet
	instance       int
}

func (c *tbCtx) flags() *flag.FlagSet {
	c.fs = flag.NewFlagSet("testbed "+c.sub, flag.ContinueOnError)
	c.fs.SetOutput(io.Discard)
	def, err := testbed.InstanceFromEnv(os.Getenv, 0)
	if err != nil {
		def = 0
	}
	c.fs.IntVar(&c.instance, "instance", def, fmt.Sprintf("testbed instance (0 to %d)", testbed.MaxInstance))
	return c.fs
}

// parse parses flags and checks root; code < 0 means go on.
func (c *tbCtx) parse(args []string, usage string) (rest []string, code int) {
	err := c.fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(c.stdout, "Usage: shoal testbed %s %s\n\nFlags:\n", c.sub, usage)
		c.fs.SetOutput(c.stdout)
		c.fs.PrintDefaults()
		return nil, exitOK
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "shoal testbed %s: %v (see 'shoal testbed %s --help')\n", c.sub, err, c.sub)
		return nil, exitUsage
	}
	if c.instance < 0 || c.instance > testbed.MaxInstance {
		fmt.Fprintf(c.stderr, "shoal testbed %s: --instance %d: want 0 to %d\n", c.sub, c.instance, testbed.MaxInstance)
		return nil, exitUsage
	}
	if !testbed.IsRoot() {
		fmt.Fprintln(c.stderr, "shoal testbed: needs root (network namespaces)")
		return nil, exitFailure
	}
	return c.fs.Args(), -1
}

func (c *tbCtx) logf(format string, args ...any) {
	fmt.Fprintf(c.stderr, "shoal testbed: "+format+"\n", args...)
}

func (c *tbCtx) fail(err error) int {
	fmt.Fprintf(c.stderr, "shoal testbed %s: %v\n", c.sub, err)
	return exitFailure
}

func (c *tbCtx) open() (*testbed.Bed, int) {
	b, err := testbed.Open(c.instance, c.logf)
	if errors.Is(err, testbed.ErrNotUp) {
		fmt.Fprintf(c.stderr, "shoal testbed %s: no testbed is up (instance %d; run '%s')\n", c.sub, c.instance, tbHint(c.instance, "up"))
		return nil, exitFailure
	}
	if err != nil {
		return nil, c.fail(err)
	}
	return b, -1
}

// oneNode parses "SUBCOMMAND [flags] NODE".
func (c *tbCtx) oneNode(args []string) (*testbed.Bed, string, int) {
	c.flags()
	rest, code := c.parse(args, "[--instance I] NODE")
	if code >= 0 {
		return nil, "", code
	}
	if len(rest) != 1 {
		fmt.Fprintf(c.stderr, "shoal testbed %s: want one NODE (n1, n2, …), got %d arguments\n", c.sub, len(rest))
		return nil, "", exitUsage
	}
	b, code := c.open()
	return b, rest[0], code
}

func tbUp(c *tbCtx, args []string) int {
	fs := c.flags()
	nodes := fs.Int("nodes", 3, "number of hosts")
	cores := fs.String("cores", "", "cores of each host: one value for all or one per host (default: this machine's)")
	quota := fs.String("cpu-quota", "", "CPU quota of each host in CPUs (0.5 = half a CPU): one value or one per host")
	rate := fs.String("rate", "", "bandwidth of each host in tc syntax (15mbit): one value or one per host")
	sites := fs.String("sites", "", "hosts of each site, in host order (3,3: n1-n3 and n4-n6); they add up to --nodes")
	siteRate := fs.String("site-rate", "", "bandwidth of each site's link to the other sites, each direction, in tc syntax (20mbit)")
	arch := fs.String("arch", "", "instruction set of each host, amd64 or arm64: one value for all or one per host (default amd64; arm64 needs make arm64-root and make arm64-agent)")
	profile := fs.String("profile", "", "device condition of each host, wifi, android or none: one value for all or one per host (docs/testbed.md, \"Profiles\")")
	noAgent := fs.Bool("no-agent", false, "start no agents")
	overlay := fs.Bool("overlay", false, "start every agent with --overlay auto: the overlay shoal run --mpi-overlay runs MPI over (docs/overlay.md)")
	slurm := fs.Bool("slurm", false, "run a Slurm cluster instead of agents: munged, slurmctld in n1, a slurmd in every host (Debian's slurmctld, slurmd, slurm-client, munge; docs/slurm.md)")
	s3 := fs.Bool("s3", false, "give every process in the hosts (agents, exec) the AWS_* settings of the testbed's S3 server (shoal testbed s3 up), its endpoint at this instance's bridge address")
	var agentArgs []string
	fs.Func("agent-arg", "one more argument for every host's agent, after those the testbed gives (repeat it: --agent-arg=--store-lease --agent-arg=5s)", func(v string) error {
		agentArgs = append(agentArgs, v)
		return nil
	})
	rest, code := c.parse(args, "[--nodes N] [--cores LIST] [--cpu-quota LIST] [--rate LIST] [--sites LIST --site-rate R] [--arch LIST] [--profile LIST] [--agent-arg ARG]... [--no-agent] [--slurm] [--s3] [--overlay]")
	if code >= 0 {
		return code
	}
	if len(rest) > 0 {
		fmt.Fprintf(c.stderr, "shoal testbed up: unexpected argument %q\n", rest[0])
		return exitUsage
	}
	cfg := testbed.Config{Nodes: *nodes, Instance: c.instance, Logf: c.logf}
	var err error
	if cfg.Cores, err = parseList(*cores, strconv.Atoi); err != nil {
		fmt.Fprintf(c.stderr, "shoal testbed up: --cores %q: %v\n", *cores, err)
		return exitUsage
	}
	parseFloat := func(s string) (float64, error) { return strconv.ParseFloat(s, 64) }
	if cfg.CPUQuota, err = parseList(*quota, parseFloat); err != nil {
		fmt.Fprintf(c.stderr, "shoal testbed up: --cpu-quota %q: %v\n", *quota, err)
		return exitUsage
	}
	cfg.Rate, _ = parseList(*rate, func(s string) (string, error) { return s, nil })
	cfg.Arch, _ = parseList(*arch, func(s string) (string, error) { return s, nil })
	cfg.Profile, _ = parseList(*profile, func(s string) (string, error) { return s, nil })
	if cfg.Sites, err = parseList(*sites, strconv.Atoi); err != nil {
		fmt.Fprintf(c.stderr, "shoal testbed up: --sites %q: %v\n", *sites, err)
		return exitUsage
	}
	cfg.SiteRate = *siteRate
	cfg.Slurm, cfg.S3 = *slurm, *s3
	if (len(agentArgs) > 0 || *overlay) && (*noAgent || *slurm) {
		without := "--slurm"
		if *noAgent {
			without = "--no-agent"
		}
		fmt.Fprintf(c.stderr, "shoal testbed up: --agent-arg or --overlay with %s: no host runs an agent\n", without)
		return exitUsage
	}
	cfg.AgentArgs = agentArgs
	if *overlay {
		cfg.AgentArgs = append([]string{"--overlay", "auto"}, cfg.AgentArgs...)
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(c.stderr, "shoal testbed up: %v\n", err)
		return exitUsage
	}
	if cfg.LinkBinary, err = os.Executable(); err != nil {
		return c.fail(err)
	}
	if !*noAgent && !*slurm {
		cfg.AgentBinary = cfg.LinkBinary
	}
	if *s3 {
		if _, err := testbed.OpenS3(); errors.Is(err, testbed.ErrS3NotUp) {
			fmt.Fprintf(c.stderr, "shoal testbed up: --s3: the S3 server is not up (no %s): run 'shoal testbed s3 up' first\n", filepath.Join(testbed.TestbedS3Dir, "env"))
			return exitFailure
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b, err := testbed.Up(ctx, cfg)
	if err != nil {
		return c.fail(err)
	}
	printStatus(c, b, false)
	if *slurm {
		fmt.Fprintf(c.stdout, "\nSubmit jobs from a host: '%s' (docs/slurm.md).", tbHint(c.instance, "exec", "n1", "--", "sbatch", "-N", "4", "job.sh"))
	}
	fmt.Fprintf(c.stdout, "\nRun commands in a host with '%s'; remove it all with '%s'.\n",
		tbHint(c.instance, "exec", "n1", "--", "COMMAND"), tbHint(c.instance, "down"))
	return exitOK
}

func parseList[T any](s string, parse func(string) (T, error)) ([]T, error) {
	if s == "" {
		return nil, nil
	}
	var out []T
	for _, f := range strings.Split(s, ",") {
		v, err := parse(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not a valid value", f)
		}
		out = append(out, v)
	}
	return out, nil
}

func tbDown(c *tbCtx, args []string) int {
	c.flags()
	rest, code := c.parse(args, "[--instance I]")
	if code >= 0 {
		return code
	}
	if len(rest) > 0 {
		fmt.Fprintf(c.stderr, "shoal testbed down: unexpected argument %q\n", rest[0])
		return exitUsage
	}
	if err := testbed.Clean(context.Background(), c.instance); err != nil {
		return c.fail(err)
	}
	return exitOK
}

func tbStatus(c *tbCtx, args []string) int {
	fs := c.flags()
	asJSON := fs.Bool("json", false, "print JSON: one object per host")
	rest, code := c.parse(args, "[--instance I] [--json]")
	if code >= 0 {
		return code
	}
	if len(rest) > 0 {
		fmt.Fprintf(c.stderr, "shoal testbed status: unexpected argument %q\n", rest[0])
		return exitUsage
	}
	b, code := c.open()
	if code >= 0 {
		return code
	}
	return printStatus(c, b, *asJSON)
}

func printStatus(c *tbCtx, b *testbed.Bed, asJSON bool) int {
	hosts, cg, err := b.Status()
	if err != nil {
		return c.fail(err)
	}
	agents, _, _ := b.Agents()
	if asJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(hosts); err != nil {
			return c.fail(err)
		}
		return exitOK
	}
	fmt.Fprintf(c.stdout, "testbed %d: bridge shoalbr%d on %s, %s\n", b.Instance(), b.Instance(), b.Subnet(), b.Dir())
	sites, siteRate, _ := b.Sites()
	if sites > 0 {
		fmt.Fprintf(c.stdout, "%d sites, each linked to the others at %s\n", sites, siteRate)
	}
	fmt.Fprintf(c.stdout, "%s\n", cg)
	if !agents {
		fmt.Fprintln(c.stdout, "hosts run no agent")
	}
	if slurm, conf, _ := b.Slurm(); slurm {
		fmt.Fprintf(c.stdout, "Slurm: slurmctld in n1, a slurmd in every host; SLURM_CONF=%s in every host\n", conf)
	}
	fmt.Fprintln(c.stdout)
	w := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	siteCol := func(h testbed.HostStatus) string {
		if sites == 0 {
			return ""
		}
		return fmt.Sprintf("%d\t", h.Site)
	}
	head := "NODE\tADDRESS\tSTATE\tCORES\tCPU QUOTA\tRATE\tPROCS\tAGENT"
	if sites > 0 {
		head = "NODE\tADDRESS\tSITE\tSTATE\tCORES\tCPU QUOTA\tRATE\tPROCS\tAGENT"
	}
	fmt.Fprintln(w, head)
	for _, h := range hosts {
		quota := "-"
		if h.CPUQuota > 0 {
			quota = strconv.FormatFloat(h.CPUQuota, 'g', -1, 64)
			if h.CPUQuotaOff {
				quota += " (not applied)"
			}
		}
		rate := h.Rate
		if rate == "" {
			rate = "-"
		}
		if h.Profile != "" {
			rate += " (" + h.Profile + ")"
		}
		agent := "-"
		switch {
		case agents && h.AgentAlive:
			agent = fmt.Sprintf("pid %d alive", h.AgentPID)
		case agents && h.AgentPID > 0:
			agent = fmt.Sprintf("pid %d dead (%s)", h.AgentPID, h.AgentLog)
		case agents:
			agent = "not started"
		}
		fmt.Fprintf(w, "%s\t%s\t%s%s\t%d\t%s\t%s\t%d\t%s\n", h.Name, h.IP, siteCol(h), h.State, h.Cores, quota, rate, h.Procs, agent)
	}
	w.Flush()
	printBlocks(c.stdout, b.Instance(), hosts)
	return exitOK
}

// printBlocks says, after the table, which hosts drop which peers' new connections
// (shoal testbed block), one line a blocked pair with the command that lifts it.
func printBlocks(out io.Writer, instance int, hosts []testbed.HostStatus) {
	first := true
	for _, h := range hosts {
		for _, peer := range h.BlockedFrom {
			if first {
				fmt.Fprintln(out)
				first = false
			}
			fmt.Fprintf(out, "%s drops new TCP connections from %s ('shoal testbed unblock --instance %d %s --from %s')\n", h.Name, peer, instance, h.Name, peer)
		}
	}
}

func tbKill(c *tbCtx, args []string) int {
	b, node, code := c.oneNode(args)
	if code >= 0 {
		return code
	}
	n, err := b.Kill(context.Background(), node)
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.stdout, "killed %d processes in %s\n", n, node)
	return exitOK
}

func tbCut(c *tbCtx, args []string) int {
	b, node, code := c.oneNode(args)
	if code >= 0 {
		return code
	}
	if err := b.Cut(context.Background(), node); err != nil {
		return c.fail(err)
	}
	return exitOK
}

func tbHeal(c *tbCtx, args []string) int {
	b, node, code := c.oneNode(args)
	if code >= 0 {
		return code
	}
	if err := b.Heal(context.Background(), node); err != nil {
		return c.fail(err)
	}
	return exitOK
}

// tbSleep returns as soon as the host is frozen, not when it wakes: the caller
// usually has something to do or watch while it sleeps (as after cut), and a
// waker of the testbed's own ends the sleep even when this command is gone.
func tbSleep(c *tbCtx, args []string) int {
	c.flags()
	rest, code := c.parse(args, "[--instance I] NODE SECONDS")
	if code >= 0 {
		return code
	}
	if len(rest) != 2 {
		fmt.Fprintf(c.stderr, "shoal testbed sleep: want NODE and SECONDS (shoal testbed sleep n2 15), got %d arguments\n", len(rest))
		return exitUsage
	}
	d, err := testbed.ParseSleep(rest[1])
	if err != nil {
		fmt.Fprintf(c.stderr, "shoal testbed sleep: %v\n", err)
		return exitUsage
	}
	b, code := c.open()
	if code >= 0 {
		return code
	}
	at, err := b.Sleep(context.Background(), rest[0], d)
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.stdout, "%s asleep for %v, until %s; it wakes by itself ('%s' wakes it sooner)\n",
		rest[0], d, at.Format("15:04:05.000"), tbHint(c.instance, "wake", rest[0]))
	return exitOK
}

func tbWake(c *tbCtx, args []string) int {
	b, node, code := c.oneNode(args)
	if code >= 0 {
		return code
	}
	if err := b.Wake(context.Background(), node); err != nil {
		return c.fail(err)
	}
	return exitOK
}

func tbRestart(c *tbCtx, args []string) int {
	b, node, code := c.oneNode(args)
	if code >= 0 {
		return code
	}
	if err := b.StartAgent(context.Background(), node); err != nil {
		return c.fail(err)
	}
	return exitOK
}

func tbAdd(c *tbCtx, args []string) int {
	fs := c.flags()
	var hc testbed.HostConfig
	fs.IntVar(&hc.Cores, "cores", 0, "cores of the new host (default: this machine's)")
	fs.Float64Var(&hc.CPUQuota, "cpu-quota", 0, "CPU quota of the new host in CPUs (0: none)")
	fs.StringVar(&hc.Rate, "rate", "", "bandwidth of the new host in tc syntax (15mbit)")
	fs.IntVar(&hc.Site, "site", 0, "site of the new host, on a testbed with sites (default: the last)")
	fs.StringVar(&hc.Arch, "arch", "", "instruction set of the new host, amd64 or arm64 (default amd64)")
	fs.StringVar(&hc.Profile, "profile", "", "device condition of the new host, wifi, android or none (default none)")
	fs.BoolVar(&hc.NoAgent, "no-agent", false, "start no agent in the new host")
	rest, code := c.parse(args, "[--cores N] [--cpu-quota Q] [--rate R] [--site S] [--arch A] [--profile P] [--no-agent]")
	if code >= 0 {
		return code
	}
	if len(rest) > 0 {
		fmt.Fprintf(c.stderr, "shoal testbed add: unexpected argument %q\n", rest[0])
		return exitUsage
	}
	if err := hc.Validate(); err != nil {
		fmt.Fprintf(c.stderr, "shoal testbed add: %v\n", err)
		return exitUsage
	}
	b, code := c.open()
	if code >= 0 {
		return code
	}
	h, err := b.Add(context.Background(), hc)
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.stdout, "added %s at %s\n", h.Name, h.IP)
	return exitOK
}

func tbExec(c *tbCtx, args []string) int {
	c.flags()
	rest, code := c.parse(args, "[--instance I] NODE [--] COMMAND [ARGS]")
	if code >= 0 {
		return code
	}
	if len(rest) > 1 && rest[1] == "--" {
		rest = append(rest[:1:1], rest[2:]...)
	}
	if len(rest) < 2 {
		fmt.Fprintln(c.stderr, "shoal testbed exec: want NODE and a COMMAND: shoal testbed exec n1 -- hostname")
		return exitUsage
	}
	b, code := c.open()
	if code >= 0 {
		return code
	}
	return runInHost(c, b, rest[0], rest[1:])
}

// tbRsh is what Open MPI runs instead of ssh: "AGENT HOST word…", the words forming one
// shell command line, as ssh would hand them to the remote shell.
func tbRsh(c *tbCtx, args []string) int {
	c.flags()
	rest, code := c.parse(args, "[--instance I] HOST COMMAND...")
	if code >= 0 {
		return code
	}
	if len(rest) < 2 {
		fmt.Fprintln(c.stderr, "shoal testbed rsh: want HOST and a COMMAND")
		return exitUsage
	}
	b, code := c.open()
	if code >= 0 {
		return code
	}
	return runInHost(c, b, rest[0], []string{"/bin/sh", "-c", strings.Join(rest[1:], " ")})
}

// runInHost runs argv in node with this process's stdio and returns its exit code
// (128+N when signal N ended it). SIGTERM and SIGHUP sent to this process are passed on;
// SIGINT and SIGQUIT from a terminal reach the command directly (same process group).
func runInHost(c *tbCtx, b *testbed.Bed, node string, argv []string) int {
	cmd, err := b.Command(context.Background(), node, argv...)
	if err != nil {
		return c.fail(err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, c.stdout, c.stderr
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return c.fail(err)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				if s == syscall.SIGTERM || s == syscall.SIGHUP {
					cmd.Process.Signal(s)
				}
			case <-done:
				return
			}
		}
	}()
	err = cmd.Wait()
	close(done)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		return c.fail(err)
	}
	return exitOK
}
