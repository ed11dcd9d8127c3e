package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"shoal/internal/agent"
	"shoal/internal/api"
	"shoal/internal/errkind"
	"shoal/internal/job"
)

// localAgent returns a client of the agent `shoal run` submits to: $SHOAL_AGENT's when
// it is set, else this machine's, and the cluster secret it signs with (nil for a
// user who cannot read it, whose client talks through the agent's local socket). It
// returns no client when no agent runs here (no DATA-DIR/agent.addr, or one left by
// an agent that no longer answers, which note says); then `shoal run` runs the job
// on this machine itself. An agent that answers but
// refuses the request is an error: running the job elsewhere than asked would hide it.
func localAgent(note io.Writer) (*api.Client, []byte, error) {
	flags := localAgentFlags{dataDir: os.Getenv("SHOAL_DATA_DIR")}
	named := os.Getenv("SHOAL_AGENT") != ""
	c, secret, err := flags.clientSecret()
	if errors.Is(err, agent.ErrNoAgent) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// The health check is the cheap proof of life: GET /v1/nodes checks the
	// reach of every node the agent has not heard from within the second, a
	// round of dials that at 128 nodes held up each launch. An answer that
	// names no node came from an agent that did not take this client's
	// signature; the nodes' read then says why.
	h, err := c.Health(ctx)
	if err == nil && h.Node == "" {
		_, err = c.Nodes(ctx)
	}
	if errors.Is(err, errkind.Unreachable) && !named {
		fmt.Fprintf(note, "shoal: the local agent at %s does not answer; running on this machine only\n", c.Addr())
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("agent at %s: %s", c.Addr(), errorLine(err))
	}
	return c, secret, nil
}

// upload stores a local file in the agent's cache and describes it for a job spec.
func upload(ctx context.Context, c *api.Client, path, name string, mode uint32) (job.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return job.File{}, err
	}
	defer f.Close()
	h := sha256.New()
	size, err := io.Copy(h, f)
	if err != nil {
		return job.File{}, err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	file := job.File{Name: name, SHA256: sum, Size: size, Mode: mode}
	if has, err := c.HasFile(ctx, sum); err != nil || has {
		return file, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return job.File{}, err
	}
	return file, c.PutFile(ctx, sum, f, size)
}

// cancelOnInterrupt cancels job id through c once ctx, the command's
// interrupt context, ends, unless the returned stop is called first. Before it
// cancels it calls stopSignals, so that a second interrupt ends the command at
// once while the job is followed to its end.
func cancelOnInterrupt(ctx context.Context, stopSignals context.CancelFunc, c *api.Client, id string) (stop func()) {
	following := make(chan struct{})
	go func() {
		select {
		case <-following:
			return
		case <-ctx.Done():
		}
		stopSignals()
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer ccancel()
		c.Cancel(cctx, id)
	}()
	return func() { close(following) }
}

// addInputs adds the --env settings and the --file inputs of a command to
// spec, uploading the files to the agent; a file that cannot be uploaded is
// reported as cmd's usage error (exit code returned; -1 when all went well).
func addInputs(ctx context.Context, c *api.Client, spec *job.Spec, inputs []string, cmd string, stderr io.Writer) int {
	for _, in := range inputs {
		file, err := upload(ctx, c, in, filepath.Base(in), 0o644)
		if err != nil {
			fmt.Fprintf(stderr, "shoal %s: --file %s: %s\n", cmd, in, errorLine(err))
			return exitUsage
		}
		spec.Files = append(spec.Files, file)
	}
	return -1
}

// interpreter reports whether program is a Python interpreter (python,
// python3, python3.12, a virtualenv's), which a cluster job runs in place.
// jobArgv is the command line a job of program with args runs on the nodes, and the
// file staged to them for it ("" for none). A program runs by its file name, staged. A
// copy of an interpreter would leave its installation (a virtualenv's packages)
// behind: it runs by its path, and its script is staged and named by its file name.
func jobArgv(program string, args []string) (argv []string, staged string) {
	args = slices.Clone(args)
	if !interpreter(program) {
		return append([]string{filepath.Base(program)}, args...), program
	}
	if i := scriptArg(args); i >= 0 {
		staged, args[i] = args[i], filepath.Base(args[i])
	}
	return append([]string{program}, args...), staged
}

func interpreter(program string) bool {
	base := filepath.Base(program)
	return base == "python" || base == "python3" || strings.HasPrefix(base, "python3.")
}

// scriptArg is the index of an interpreter's script among its arguments: the
// first that is not an option, if it names a regular file; else -1 (python -c,
// python -m, or no script).
func scriptArg(args []string) int {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") {
			switch a {
			case "-c", "-m", "-":
				return -1
			case "-X", "-W": // an option with a value
				i++
			}
			continue
		}
		if st, err := os.Stat(a); err == nil && st.Mode().IsRegular() {
			return i
		}
		return -1
	}
	return -1
}

// runOnCluster submits the job to the local agent, which places it over the
// cluster, and follows its events until it ends; with --detach it returns once
// the job is submitted. dr, with --durable, keeps the job's newest epoch in the
// store and resumes it from there; ar, for a job with --durable over the agents
// shoal run started in a Slurm allocation, adds the hold on SIGTERM. Both are nil
// when not asked for.
func runOnCluster(c *api.Client, f runFlags, program string, args []string, stdout, stderr io.Writer, dr *durableRun, ar *allocRun) int {
	rawArgs := args // as given: the script's path, before jobArgv names it by its file name
	// In an allocation, SIGTERM is Slurm's warning: the job holds (ar.hold) rather
	// than being cancelled.
	interrupts := []os.Signal{os.Interrupt, syscall.SIGTERM}
	var term chan os.Signal
	if ar != nil {
		interrupts = interrupts[:1]
		term = make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		defer signal.Stop(term)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), interrupts...)
	defer cancel()
	if msg := noQuorum(ctx, c); msg != "" { // refused at once, before any upload
		fmt.Fprintf(stderr, "shoal run: %s\n", msg)
		return exitFailure
	}
	argv, staged := jobArgv(program, args)
	name, args := argv[0], argv[1:]
	if interpreter(program) {
		note := fmt.Sprintf("shoal: %s runs by its path on every node, which must have it (the same installation, or a shared file system)", program)
		if staged != "" {
			note += "; " + filepath.Base(staged) + " is staged"
			if f.jobID == "" {
				f.jobID = job.NewID(jobName(program, rawArgs))
			}
		}
		fmt.Fprintln(stderr, note)
	}
	// A program is staged to the nodes of the instruction set it is built for,
	// and each build --program-for gives to those of its own.
	arch := ""
	if staged == program {
		var err error
		if arch, err = programArch(program); err != nil && !errors.Is(err, errNotELF) {
			fmt.Fprintf(stderr, "shoal run: %s: %s\n", program, errorLine(err))
			return exitUsage
		}
	}
	builds, err := programBuilds(f.programFor, program, arch)
	if err != nil {
		fmt.Fprintf(stderr, "shoal run: %s\n", err)
		return exitUsage
	}
	if f.mixArch && arch != "" && len(builds) == 0 {
		fmt.Fprintf(stderr, "shoal run: --mix-arch: %s is built for %s only: give a build for each other instruction set with --program-for ARCH=PATH\n", program, arch)
		return exitUsage
	}
	var files []job.File
	if staged != "" {
		mode := uint32(0o755)
		if staged != program {
			mode = 0o644
		}
		file, err := upload(ctx, c, staged, filepath.Base(staged), mode)
		if err != nil {
			fmt.Fprintf(stderr, "shoal run: upload %s to the agent: %s\n", staged, errorLine(err))
			return exitFailure
		}
		file.Arch = arch
		files = append(files, file)
	}
	for _, other := range slices.Sorted(maps.Keys(builds)) {
		file, err := upload(ctx, c, builds[other], filepath.Base(staged), 0o755)
		if err != nil {
			fmt.Fprintf(stderr, "shoal run: upload %s to the agent: %s\n", builds[other], errorLine(err))
			return exitFailure
		}
		file.Arch = other
		files = append(files, file)
	}
	spec := f.jobSpec(append([]string{name}, args...), files)
	if code := addInputs(ctx, c, &spec, f.files, "run", stderr); code >= 0 {
		return code
	}
	if dr != nil {
		if code := dr.resume(ctx, c, &spec, stderr); code >= 0 {
			return code
		}
	}
	if dr != nil && ar == nil && f.durableLoc.Bucket != "" {
		// On a cluster of agents the job's coordinator keeps its epochs in an
		// object store, when its agent can (the answer's CoordKeeps).
		spec.Durable = &job.DurableTarget{Location: f.durable, Endpoint: f.durableEndpoint, Rate: f.durableRate}
	}
	job, err := c.Submit(ctx, spec)
	if errors.Is(err, errkind.NotAvailable) {
		if msg := noQuorum(ctx, c); msg != "" {
			err = errors.New(msg) // lost while the submission waited for a leader
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "shoal run: %s\n", errorLine(err))
		return exitFailure
	}
	warnRoot(ctx, c, job, f.quiet, stderr)
	if !f.quiet {
		what := filepath.Base(name)
		if staged != "" && staged != program {
			what += " " + filepath.Base(staged) // python heat.py
		}
		fmt.Fprintf(stdout, "shoal: job %s: %s of %s, coordinated by %s\n", job.ID, f.ranksWords(), what, job.Coordinator)
		if note := checkpointsNote(program, rawArgs); note != "" {
			fmt.Fprintf(stdout, "shoal: %s\n", note)
		}
	}
	if spec.Durable != nil && !job.CoordKeeps {
		if f.detach {
			fmt.Fprintf(stderr, "shoal run: warning: no epoch of job %s will be kept in %s: its coordinator, node %s, has no credentials for it, and only an attached shoal run copies them otherwise\n", job.ID, f.durable, job.Coordinator)
		} else if !f.quiet {
			fmt.Fprintf(stdout, "shoal: the coordinator, node %s, has no credentials for %s: shoal run has the epochs copied while it follows the job\n", job.Coordinator, f.durable)
		}
	}
	if f.detach {
		fmt.Fprintln(stdout, job.ID)
		return exitOK
	}
	// One copier a job: the coordinator, or this process.
	saving := dr != nil && !job.CoordKeeps
	var stopSaver context.CancelFunc
	if saving {
		var sctx context.Context
		sctx, stopSaver = context.WithCancel(context.Background())
		defer stopSaver()
		go dr.saver.run(sctx, job.ID)
		if ar != nil {
			ar.holding = make(chan struct{})
			go func() {
				select {
				case <-term:
					ar.hold(c, job.ID, stderr)
				case <-sctx.Done():
					close(ar.holding)
				}
			}()
			defer func() {
				stopSaver()
				<-ar.holding
			}()
		}
	}
	// Interrupted, the job is cancelled, and shoal run follows it to its end to say
	// so; a second interrupt ends shoal run at once.
	defer cancelOnInterrupt(ctx, cancel, c, job.ID)()
	code := awaitJob("run", c, job.ID, jobPrinter{stdout: stdout, stderr: stderr, v: runVerbosity(f)}, stderr)
	if dr != nil && code == exitOK {
		// The job is done: a later run of it starts afresh, not from its last
		// epoch. A coordinator's copy under way ended with the job.
		if saving {
			stopSaver()
			dr.saver.wait()
		}
		dr.clear(stderr)
	}
	return code
}
