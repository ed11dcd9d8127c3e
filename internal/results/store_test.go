package results

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func TestPutOpenList(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	for task, body := range map[int]string{0: "tile 0\n", 12: "", 3: "three"} {
		if err := s.Put("job-1", task, sum([]byte(body)), bytes.NewBufferString(body)); err != nil {
			t.Fatalf("Put task %d: %v", task, err)
		}
	}
	rc, size, got, err := s.Open("job-1", 3)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "three" || size != 5 || got != sum([]byte("three")) {
		t.Errorf("Open = %q, %d, %s; want three, 5, its hash", b, size, got)
	}
	tasks, err := s.List("job-1")
	if err != nil || !reflect.DeepEqual(tasks, []int{0, 3, 12}) {
		t.Errorf("List = %v, %v; want [0 3 12]", tasks, err)
	}
	if tasks, err := s.List("other"); err != nil || tasks != nil {
		t.Errorf("List(other) = %v, %v; want nothing", tasks, err)
	}
}

func TestPutRefusesWrongHash(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	err := s.Put("j", 1, sum([]byte("a")), bytes.NewBufferString("b"))
	if !errors.Is(err, ErrMismatch) {
		t.Fatalf("Put with a wrong hash: err = %v, want ErrMismatch", err)
	}
	if _, _, _, err := s.Open("j", 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("after a refused Put: Open err = %v, want ErrNotFound", err)
	}
	if tasks, _ := s.List("j"); len(tasks) != 0 {
		t.Errorf("after a refused Put: List = %v, want none", tasks)
	}
}

func TestOpenDetectsCorruption(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	if err := s.Put("j", 4, sum([]byte("good")), bytes.NewBufferString("good")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "j", "4"), []byte("evil"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.Open("j", 4); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Open of a changed result: err = %v, want ErrCorrupt", err)
	}
}

func TestRemove(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	s.Put("j", 0, sum(nil), bytes.NewReader(nil))
	if err := s.Remove("j"); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.Open("j", 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("after Remove: Open err = %v, want ErrNotFound", err)
	}
}
