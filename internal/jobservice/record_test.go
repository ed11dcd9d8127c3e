package jobservice

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"strings"
	"testing"

	"shoal/internal/job"
)

// A job's first event says who its ranks run as: a job that names no owner runs
// as the agents' user, and says so when that is root.
func TestSubmittedMessage(t *testing.T) {
	tests := []struct {
		owner    *job.Owner
		agentUID int
		want     string
	}{
		{nil, 0, "submitted; runs as root, the agents' user, on every node; n1 coordinates"},
		{nil, 999, "submitted; runs as the agents' user (uid 999) on every node; n1 coordinates"},
		{&job.Owner{UID: 1001, GID: 1001, Name: "alice"}, 0, "submitted; runs as alice (uid 1001) on every node; n1 coordinates"},
		{&job.Owner{UID: 1002, GID: 1002}, 0, "submitted; runs as uid 1002 on every node; n1 coordinates"},
	}
	for _, tt := range tests {
		if got := submittedMessage(tt.owner, tt.agentUID, "n1"); got != tt.want {
			t.Errorf("submittedMessage(%v, %d) = %q, want %q", tt.owner, tt.agentUID, got, tt.want)
		}
	}
}

// TestStateWrittenOnlyByLifecycle: the one place in the package, and in the
// runtimes that keep a job's record up to date (internal/coord, internal/farmrun), that sets a
// job's state in its record is clusterJob.event, through job.Job.Apply, which
// a job.Lifecycle's events reach (an MPI job's run loop and a farm's each have
// one): no other code assigns to a State field, so every change of a job's
// state, MPI job or farm, is a transition of the lifecycle's table.
func TestStateWrittenOnlyByLifecycle(t *testing.T) {
	fset := token.NewFileSet()
	pkgs := map[string]*ast.Package{}
	for _, dir := range []string{".", "../coord", "../farmrun"} {
		found, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
		if err != nil {
			t.Fatal(err)
		}
		maps.Copy(pkgs, found)
	}
	writers := 0
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				recv := ""
				if fd.Recv != nil && len(fd.Recv.List) == 1 {
					if star, ok := fd.Recv.List[0].Type.(*ast.StarExpr); ok {
						recv = fmt.Sprint(star.X)
					}
				}
				ast.Inspect(fd.Body, func(n ast.Node) bool {
					if call, ok := n.(*ast.CallExpr); ok {
						if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Apply" && isInfo(sel.X) {
							if recv == "clusterJob" && fd.Name.Name == "event" {
								writers++
							} else {
								t.Errorf("%s: %s.%s applies an event to a job's record outside clusterJob.event", fset.Position(call.Pos()), recv, fd.Name.Name)
							}
						}
					}
					as, ok := n.(*ast.AssignStmt)
					if !ok {
						return true
					}
					for _, lhs := range as.Lhs {
						if sel, ok := lhs.(*ast.SelectorExpr); ok && sel.Sel.Name == "State" {
							t.Errorf("%s: %s.%s sets a State outside clusterJob.event", fset.Position(as.Pos()), recv, fd.Name.Name)
						}
					}
					return true
				})
			}
		}
	}
	if writers != 1 {
		t.Errorf("clusterJob.event applies events to the job's record %d times, want once: the test no longer finds the one writer", writers)
	}
}

// isInfo reports whether x is a clusterJob's job record: x.info.
func isInfo(x ast.Expr) bool {
	sel, ok := x.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "info"
}
