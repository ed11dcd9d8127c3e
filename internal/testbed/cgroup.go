package testbed

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupSetup is what the machine's cgroups offer the testbed, found by detectCgroups.
//
// Every process of a host joins the host's cgroup in each hierarchy listed here; that is
// how Kill finds them all. The CPU quota goes to the cgroup v2 cpu controller when the v2
// hierarchy has one, else to a v1 cpu hierarchy (hybrid systems such as this project's
// build machine mount v2 at /sys/fs/cgroup/unified with no cpu controller and cpu as v1),
// else it is not applied and Up warns.
type cgroupSetup struct {
	V2    string `json:"v2,omitempty"`     // cgroup2 mount point, "" when none is usable
	V2CPU bool   `json:"v2_cpu,omitempty"` // the v2 hierarchy has the cpu controller
	V1CPU string `json:"v1_cpu,omitempty"` // mount point of a v1 hierarchy with cpu, used when !V2CPU
	// V1Freezer is the mount point of the v1 freezer hierarchy, used when there is no
	// v2 (whose every group can freeze): what puts a host to sleep.
	V1Freezer string `json:"v1_freezer,omitempty"`
}

// cpuPeriodUs is the period of a host's CPU quota: 10 ms. A host over its quota
// stops until the next period begins, and the ranks of an MPI job on other hosts
// poll for its messages meanwhile, spending their own hosts' quotas on nothing.
// With the kernel's default of 100 ms, stops of tens of milliseconds made the
// same run of heat on two half-CPU hosts take 5 or 21 ms a step depending on how
// the hosts' periods fell against each other (throttled in 98 % of the periods
// in the slow case); a short period makes a quota a slower CPU, not one that
// stops and starts.
const cpuPeriodUs = 10000

// describe says in one line what the cgroups give, for status and warnings.
func (c cgroupSetup) describe() string {
	if c.V1Freezer != "" {
		return c.describeQuota() + "; v1 freezer at " + c.V1Freezer + " (sleep)"
	}
	return c.describeQuota()
}

func (c cgroupSetup) describeQuota() string {
	switch {
	case c.V2 != "" && c.V2CPU:
		return "cgroup v2 at " + c.V2 + " (processes and CPU quota)"
	case c.V2 != "" && c.V1CPU != "":
		return "cgroup v2 at " + c.V2 + " (processes), v1 cpu at " + c.V1CPU + " (CPU quota; no cpu controller in v2)"
	case c.V2 != "":
		return "cgroup v2 at " + c.V2 + " (processes); no cgroup cpu controller: no CPU quota"
	case c.V1CPU != "":
		return "cgroup v1 cpu at " + c.V1CPU + " (processes and CPU quota)"
	}
	return "no usable cgroups: processes found by namespace, no CPU quota"
}

func (c cgroupSetup) quotaOK() bool { return c.V2CPU || c.V1CPU != "" }

// cgroupMount is one line of /proc/self/mountinfo that mounts a cgroup hierarchy.
type cgroupMount struct {
	dir     string
	v2      bool
	options []string // super options: controllers of a v1 hierarchy
}

func cgroupMounts() []cgroupMount {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []cgroupMount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 {
			continue
		}
		switch qf[0] {
		case "cgroup2":
			out = append(out, cgroupMount{dir: unescapeMount(pf[4]), v2: true})
		case "cgroup":
			out = append(out, cgroupMount{dir: unescapeMount(pf[4]), options: strings.Split(qf[2], ",")})
		}
	}
	return out
}

func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// detectCgroups finds the hierarchies and checks that a group can be made in them.
func detectCgroups(n names) cgroupSetup {
	var c cgroupSetup
	for _, m := range cgroupMounts() {
		if m.v2 && c.V2 == "" && canMakeGroup(m.dir, n) {
			c.V2 = m.dir
			ctl, _ := os.ReadFile(filepath.Join(m.dir, "cgroup.controllers"))
			c.V2CPU = hasWord(string(ctl), "cpu")
		}
		if !m.v2 && c.V1CPU == "" && hasWord(strings.Join(m.options, " "), "cpu") && canMakeGroup(m.dir, n) {
			c.V1CPU = m.dir
		}
		if !m.v2 && c.V1Freezer == "" && hasWord(strings.Join(m.options, " "), "freezer") && canMakeGroup(m.dir, n) {
			c.V1Freezer = m.dir
		}
	}
	if c.V2CPU {
		c.V1CPU = ""
	}
	if c.V2 != "" {
		c.V1Freezer = ""
	}
	return c
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

func canMakeGroup(root string, n names) bool {
	dir := filepath.Join(root, n.cgroupGroup())
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return false
	}
	_, err := os.Stat(filepath.Join(dir, "cgroup.procs"))
	return err == nil
}

// makeHostCgroups creates the host's cgroups and sets its quota. It returns the
// directories its processes join and whether the quota could be applied.
func (c cgroupSetup) makeHostCgroups(n names, host string, quota float64) (dirs []string, quotaApplied bool, err error) {
	if c.V2 != "" {
		group := filepath.Join(c.V2, n.cgroupGroup())
		if c.V2CPU {
			// Controllers reach a child only through every ancestor's subtree_control.
			for _, d := range []string{c.V2, group} {
				if err := writeFile(filepath.Join(d, "cgroup.subtree_control"), "+cpu"); err != nil {
					return dirs, false, fmt.Errorf("testbed: enable cpu controller in %s: %w", d, err)
				}
			}
		}
		dir := filepath.Join(group, host)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return dirs, false, fmt.Errorf("testbed: make cgroup: %w", err)
		}
		dirs = append(dirs, dir)
		if c.V2CPU && quota > 0 {
			v := fmt.Sprintf("%d %d", quotaUs(quota), cpuPeriodUs)
			if err := writeFile(filepath.Join(dir, "cpu.max"), v); err != nil {
				return dirs, false, fmt.Errorf("testbed: set cpu.max of %s: %w", dir, err)
			}
			quotaApplied = true
		}
	}
	if c.V1CPU != "" {
		dir := filepath.Join(c.V1CPU, n.cgroupGroup(), host)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return dirs, false, fmt.Errorf("testbed: make cgroup: %w", err)
		}
		dirs = append(dirs, dir)
		if quota > 0 {
			if err := writeFile(filepath.Join(dir, "cpu.cfs_period_us"), strconv.Itoa(cpuPeriodUs)); err != nil {
				return dirs, false, fmt.Errorf("testbed: set cpu.cfs_period_us of %s: %w", dir, err)
			}
			if err := writeFile(filepath.Join(dir, "cpu.cfs_quota_us"), strconv.Itoa(quotaUs(quota))); err != nil {
				return dirs, false, fmt.Errorf("testbed: set cpu.cfs_quota_us of %s: %w", dir, err)
			}
			quotaApplied = true
		}
	}
	if c.V1Freezer != "" && c.V1Freezer != c.V1CPU {
		dir := filepath.Join(c.V1Freezer, n.cgroupGroup(), host)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return dirs, quotaApplied, fmt.Errorf("testbed: make cgroup: %w", err)
		}
		dirs = append(dirs, dir)
	}
	return dirs, quotaApplied, nil
}

func quotaUs(cpus float64) int { return int(math.Round(cpus * cpuPeriodUs)) }

func writeFile(path, v string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(v)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func cgroupPids(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// cgroupKill kills the whole group at once where the kernel can (cgroup v2, Linux ≥ 5.14),
// unless the caller is in it (`shoal testbed exec n1 -- shoal testbed kill n1`).
func cgroupKill(dir string) {
	for _, pid := range cgroupPids(dir) {
		if pid == os.Getpid() {
			return
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err == nil {
		writeFile(filepath.Join(dir, "cgroup.kill"), "1")
	}
}

// leftoverCgroups lists the instance's groups in every cgroup hierarchy: each host's
// directory by host index, and the group directories themselves.
func leftoverCgroups(n names) (hosts map[int][]string, groups []string) {
	hosts = map[int][]string{}
	for _, m := range cgroupMounts() {
		group := filepath.Join(m.dir, n.cgroupGroup())
		ents, err := os.ReadDir(group)
		if err != nil {
			continue
		}
		groups = append(groups, group)
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			if k := n.hostIndex(fmt.Sprintf("shoal%d-%s", n.inst, e.Name())); k > 0 {
				hosts[k] = append(hosts[k], filepath.Join(group, e.Name()))
			}
		}
	}
	return hosts, groups
}

// removeCgroup removes a cgroup directory. Processes still in it are killed: one may
// have joined after the host's processes were killed (a command started while the
// testbed went down joins its cgroups before it enters the namespaces).
func removeCgroup(dir string) error {
	var err error
	for i := 0; i < 200; i++ {
		err = os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		cgroupKill(dir)
		for _, pid := range cgroupPids(dir) {
			if pid != os.Getpid() {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("testbed: remove cgroup: %w (processes %v)", err, cgroupPids(dir))
}

// leaveGroup moves the caller out of the instance's cgroups into the root of each
// hierarchy, so that Down run inside a host can remove the host's cgroups.
func leaveGroup(n names) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return
	}
	inGroup := false
	for _, line := range strings.Split(string(b), "\n") {
		// hierarchy-id:controllers:path
		if f := strings.SplitN(line, ":", 3); len(f) == 3 && strings.HasPrefix(f[2], "/"+n.cgroupGroup()+"/") {
			inGroup = true
		}
	}
	if !inGroup {
		return
	}
	for _, m := range cgroupMounts() {
		if _, err := os.Stat(filepath.Join(m.dir, n.cgroupGroup())); err == nil {
			writeFile(filepath.Join(m.dir, "cgroup.procs"), strconv.Itoa(os.Getpid()))
		}
	}
}
