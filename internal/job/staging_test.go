package job

import (
	"encoding/json"
	"testing"
)

func TestDescribeStaging(t *testing.T) {
	prog := File{Name: "heat", Size: 1_234_567}
	in := File{Name: "in.txt", Size: 300}
	tests := []struct {
		copied map[string][]File
		want   string
	}{
		{map[string][]File{"n1": nil, "n2": {prog, in}, "n3": {prog, in}},
			"staged heat, in.txt (1.2 MB) to n2, n3; n1 had them"},
		{map[string][]File{"n1": nil, "n3": {prog, in}, "n2": {in}},
			"staged in.txt (300 B) to n2; heat, in.txt (1.2 MB) to n3; n1 had them"},
		{map[string][]File{"n2": {in}, "n1": {in}},
			"staged in.txt (300 B) to n1, n2"},
		{map[string][]File{"n3": nil, "n1": nil, "n2": nil},
			"job files already on every node (n1, n2, n3): nothing staged"},
	}
	for _, tt := range tests {
		if got := DescribeStaging(tt.copied); got != tt.want {
			t.Errorf("DescribeStaging(%v) = %q, want %q", tt.copied, got, tt.want)
		}
	}
}

func TestByteSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 999: "999 B", 17_300: "17.3 kB", 1_250_000: "1.2 MB", 3_000_000_000: "3.0 GB", 12_345_678_901: "12.3 GB", 5e15: "5000.0 TB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestStagedData(t *testing.T) {
	copied := map[string][]File{"n2": {{Name: "heat", Size: 1000}, {Name: "in.txt", Size: 24}}, "n3": {{Name: "heat", Size: 1000}}, "n1": nil}
	var got Staged
	if err := json.Unmarshal(StagedData(copied), &got); err != nil {
		t.Fatal(err)
	}
	if got.Bytes != 2024 {
		t.Errorf("staged: got %d bytes, want 2024", got.Bytes)
	}
}
