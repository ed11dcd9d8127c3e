package job

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// StagedData is the data of the stage event of copied ([Staged]): the bytes
// staged. copied is by node, for every node of the launch.
func StagedData(copied map[string][]File) json.RawMessage {
	var s Staged
	for _, files := range copied {
		for _, f := range files {
			s.Bytes += f.Size
		}
	}
	b, _ := json.Marshal(s)
	return b
}

// DescribeStaging says which files went to which nodes, and which nodes had them
// all: "staged heat, in.txt (1.2 MB) to n2, n3; n1 had them", or "job files
// already on every node (n1, n2, n3): nothing staged". copied is by node, for
// every node of the launch.
func DescribeStaging(copied map[string][]File) string {
	groups := map[string][]string{} // "names (size)" → nodes
	var had []string
	for node, files := range copied {
		if len(files) == 0 {
			had = append(had, node)
			continue
		}
		names := make([]string, len(files))
		var size int64
		for i, f := range files {
			names[i], size = f.Name, size+f.Size
		}
		key := fmt.Sprintf("%s (%s)", strings.Join(names, ", "), Bytes(size))
		groups[key] = append(groups[key], node)
	}
	sort.Strings(had)
	if len(groups) == 0 {
		return fmt.Sprintf("job files already on every node (%s): nothing staged", strings.Join(had, ", "))
	}
	var parts []string
	for key, nodes := range groups {
		sort.Strings(nodes)
		parts = append(parts, key+" to "+strings.Join(nodes, ", "))
	}
	sort.Slice(parts, func(i, j int) bool {
		return parts[i][strings.LastIndex(parts[i], " to "):] < parts[j][strings.LastIndex(parts[j], " to "):]
	})
	msg := "staged " + strings.Join(parts, "; ")
	if len(had) > 0 {
		msg += "; " + strings.Join(had, ", ") + " had them"
	}
	return msg
}

// Bytes writes n bytes for people, in powers of 1000: "512 B", "17.3 kB",
// "1.2 MB", "2.0 GB", "5000.0 TB".
func Bytes(n int64) string {
	if n < 1000 {
		return fmt.Sprintf("%d B", n)
	}
	f := float64(n)
	for _, unit := range []string{"kB", "MB", "GB"} {
		if f /= 1000; f < 1000 {
			return fmt.Sprintf("%.1f %s", f, unit)
		}
	}
	return fmt.Sprintf("%.1f TB", f/1000)
}
