package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// metricName matches the names of metrics an expression may name.
var metricName = regexp.MustCompile(`\b(?:shoal|process|go)_[a-zA-Z0-9_]+\b`)

// known returns the names a scrape of an agent may carry: Shoal's families,
// with a histogram's series, and those the process and Go collectors gather.
func known(t *testing.T) map[string]bool {
	t.Helper()
	m, err := New(&fakeSource{})
	if err != nil {
		t.Fatal(err)
	}
	names, err := m.Names()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range Families() {
		names[f.Name] = true
		if f.Type == histogramType {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[f.Name+s] = true
			}
		}
	}
	return names
}

// TestDashboardNamesMetrics: deploy/grafana-shoal.json is valid JSON, and every
// metric its expressions name is one an agent exports.
func TestDashboardNamesMetrics(t *testing.T) {
	b, err := os.ReadFile("../../deploy/grafana-shoal.json")
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string
		Targets []struct{ Expr string }
		Panels  []json.RawMessage
	}
	var dash struct {
		Title  string
		Panels []panel
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("deploy/grafana-shoal.json: %v", err)
	}
	names := known(t)
	exprs := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs++
			for _, n := range metricName.FindAllString(tg.Expr, -1) {
				if !names[n] {
					t.Errorf("panel %q names %s, which no agent exports: %s", p.Title, n, tg.Expr)
				}
			}
		}
	}
	if exprs == 0 {
		t.Error("the dashboard has no expressions")
	}
}

// TestDocsListEveryFamily: docs/metrics.md names each metric with its type and
// labels, and no metric that does not exist.
func TestDocsListEveryFamily(t *testing.T) {
	b, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, f := range Families() {
		row := "| `" + f.Name + "` | " + f.Kind() + " | "
		if !strings.Contains(doc, row) {
			t.Errorf("docs/metrics.md lacks the row of %s as a %s (%q)", f.Name, f.Kind(), row)
		}
	}
	names := known(t)
	for _, n := range metricName.FindAllString(doc, -1) {
		if strings.HasPrefix(n, "shoal_") && !strings.HasSuffix(n, "_") && !names[n] { // shoal_job_* names a group
			t.Errorf("docs/metrics.md names %s, which no agent exports", n)
		}
	}
}
