// Package metrics scrapes real agents on a testbed (instance 257): a job whose
// rank is killed, then every agent's GET /metrics over the API's TLS with a
// certificate from `shoal certs`, and over --metrics-listen.
package metrics

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/internal/pki"
	"shoal/internal/testbed"
	"shoal/test/poll"
	"shoal/test/testenv"
	"shoal/test/watch"
)

const instance = 257

// metricsListen is where every host's agent also serves its metrics, in the
// host's own network namespace.
const metricsListen = "127.0.0.1:9108"

var shared = testenv.Shared{Config: testbed.Config{Nodes: 2, Cores: []int{2}, Instance: instance,
	AgentArgs: []string{"--metrics-listen", metricsListen}}}

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

// heatArgs is a run of about 10 s at its pace.
var heatArgs = []string{"--size", "420", "--steps", "4000", "--pace", "2500"}

// TestMetrics runs heat on 4 ranks of 2 hosts, kills rank 1 once an epoch is
// complete, and checks what n2, which does not coordinate the job, says of it.
func TestMetrics(t *testing.T) {
	b := shared.Up(t)
	shoal := testenv.Built(t, "bin/shoal")
	heat := testenv.Built(t, "build/examples/heat")
	n1, err := b.Host("n1")
	if err != nil {
		t.Fatal(err)
	}
	certs := t.TempDir()
	if out, err := exec.Command(shoal, "certs", "--secret-file", filepath.Join(n1.DataDir, "secret"), certs).CombinedOutput(); err != nil {
		t.Fatalf("shoal certs: %v\n%s", err, out)
	}

	cmd, err := b.Command(context.Background(), "n1", append([]string{shoal, "run", "-n", "4", "--ckpt-interval", "500ms", "--", heat}, heatArgs...)...)
	if err != nil {
		t.Fatal(err)
	}
	j := watch.Start(t, cmd)
	id := j.WaitLine(`^shoal: job ([^:]+):`, time.Minute)[1]
	j.WaitLine(`epoch \d+ complete`, time.Minute)
	if err := syscall.Kill(rankPID(t, b, id, 1), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	j.WaitLine(`rank 1 killed by signal 9; restarting`, time.Minute)
	if code := j.Wait(2 * time.Minute); code != 0 {
		t.Fatalf("shoal run exited %d:\n%s", code, j.Output())
	}

	api := apiAddrs(t, b, shoal)
	client := tlsClient(t, certs)
	var text string
	// n2's replica has the job's end once it applied the entry.
	poll.Until(t, 10*time.Second, func() string {
		text, err = get(client, "https://"+api["n2"]+"/metrics")
		if err != nil {
			return err.Error()
		}
		if !strings.Contains(text, fmt.Sprintf(`shoal_job_state{job_id=%q,state="succeeded"} 1`, id)) {
			return "n2 does not report the job succeeded yet"
		}
		return ""
	})
	for _, want := range []string{
		fmt.Sprintf(`shoal_job_restarts_total{job_id=%q,reason="rank_killed"} 1`, id),
		fmt.Sprintf(`shoal_job_ranks{job_id=%q} 4`, id),
		`shoal_jobs{state="succeeded"} 1`,
		`shoal_job_recovery_seconds_count 1`,
		`shoal_raft_leader 0`, // n1 leads: it started first
	} {
		if !hasLine(text, want) {
			t.Errorf("n2's metrics lack %q", want)
		}
	}
	if got := sum(t, text, `shoal_nodes{role="[a-z]+",state="alive"}`); got != 2 {
		t.Errorf("nodes alive: got %v, want 2", got)
	}
	if got := sum(t, text, `shoal_nodes{role="leader",state="alive"}`); got != 1 {
		t.Errorf("leaders: got %v, want 1", got)
	}
	// Each epoch's 4 shards are copied once (copy:2 on 2 hosts), but for a
	// copy a node already held.
	written, copied := sum(t, text, `shoal_checkpoint_written_bytes_total`), sum(t, text, `shoal_checkpoint_copied_bytes_total`)
	if written <= 0 || copied <= 0 || copied > written {
		t.Errorf("checkpoint bytes: %v written, %v copied; want some of each, and no more copied than written", written, copied)
	}
	if staged := sum(t, text, `shoal_staged_file_bytes_total`); staged <= 0 {
		t.Errorf("job files staged: %v bytes, want heat's to n2", staged)
	}
	if n := sum(t, text, `shoal_epoch_completion_seconds_count`); n < 1 {
		t.Errorf("epochs completed: %v, want at least 1", n)
	}

	t.Run("refused without a certificate of the cluster", func(t *testing.T) {
		other, err := pki.NewCA([]byte("a secret of another cluster, 32 bytes long"))
		if err != nil {
			t.Fatal(err)
		}
		cert, err := other.Issue("prometheus", nil, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for name, certs := range map[string][]tls.Certificate{"none": nil, "another cluster's": {cert}} {
			c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
				TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: certs}}}
			if _, err := get(c, "https://"+api["n2"]+"/metrics"); err == nil {
				t.Errorf("a scrape with %s certificate was answered", name)
			}
		}
		plain := &http.Client{Timeout: 10 * time.Second}
		if _, err := get(plain, "http://"+api["n2"]+"/metrics"); err == nil {
			t.Errorf("a scrape in plain HTTP was answered")
		}
	})

	t.Run("metrics-listen serves the same", func(t *testing.T) {
		out, err := b.Exec(context.Background(), "n2", "python3", "-c",
			"import sys, urllib.request; sys.stdout.write(urllib.request.urlopen('http://"+metricsListen+"/metrics').read().decode())")
		if err != nil {
			t.Fatalf("scrape of n2's %s: %v\n%s", metricsListen, err, out)
		}
		local := string(out)
		want := fmt.Sprintf(`shoal_job_restarts_total{job_id=%q,reason="rank_killed"} 1`, id)
		if !hasLine(local, want) {
			t.Errorf("n2's %s lacks %q", metricsListen, want)
		}
		if got, want := families(local), families(text); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("families on %s:\n%v\nwant those of the API port:\n%v", metricsListen, got, want)
		}
	})

	t.Run("promtool", func(t *testing.T) {
		promtool, err := exec.LookPath("promtool")
		if err != nil {
			t.Skip("promtool not installed (make deps installs Debian's prometheus)")
		}
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(text)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	})
}

// rankPID returns the pid of rank of job, on whichever host runs it.
func rankPID(t *testing.T, b *testbed.Bed, job string, rank int) int {
	t.Helper()
	hosts, err := b.Hosts()
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	poll.Until(t, 10*time.Second, func() string {
		for _, h := range hosts {
			bs, _ := os.ReadFile(filepath.Join(h.DataDir, "jobs", job, "ranks", fmt.Sprintf("r%06d", rank)))
			if _, err := fmt.Sscanf(string(bs), "pid=%d state=running", &pid); err == nil && pid > 0 {
				return ""
			}
		}
		return fmt.Sprintf("no host reports rank %d of job %s running", rank, job)
	})
	return pid
}

// apiAddrs returns each node's API address, as n1 knows them.
func apiAddrs(t *testing.T, b *testbed.Bed, shoal string) map[string]string {
	t.Helper()
	out, err := b.Exec(context.Background(), "n1", shoal, "nodes", "--json")
	if err != nil {
		t.Fatalf("shoal nodes: %v\n%s", err, out)
	}
	var list struct {
		Nodes []struct{ Name, API string }
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("shoal nodes --json: %v\n%s", err, out)
	}
	addrs := map[string]string{}
	for _, n := range list.Nodes {
		addrs[n.Name] = n.API
	}
	return addrs
}

// tlsClient is a client with the certificate `shoal certs` wrote into dir, as
// docs/metrics.md's scrape config gives Prometheus.
func tlsClient(t *testing.T, dir string) *http.Client {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	// Node addresses change as nodes come and go: the CA is checked, not the
	// name (Prometheus: insecure_skip_verify false with server_name unset
	// checks the IP against the certificate, which names the node's IP).
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}
}

func get(c *http.Client, url string) (string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return string(b), err
}

func hasLine(text, line string) bool {
	return strings.Contains("\n"+text, "\n"+line+"\n")
}

// sum adds the values of the series matching the regular expression series.
func sum(t *testing.T, text, series string) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + series + ` (\S+)$`)
	var total float64
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatalf("%s: %v", m[0], err)
		}
		total += v
	}
	return total
}

// families lists the metric families a scrape names, in order, but the Go
// runtime's, whose series come and go with the garbage collector's work.
func families(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if name, ok := strings.CutPrefix(l, "# TYPE "); ok && !strings.HasPrefix(name, "go_") {
			out = append(out, strings.Fields(name)[0])
		}
	}
	return out
}
