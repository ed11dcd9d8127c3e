package engine

import (
	"bufio"
	"io"
	"sort"
	"strconv"
	"strings"
)

// ParseTagged splits one line of `mpirun --tag-output` ("[1,3]<stdout>:text") into the
// rank, the stream name and the text. ok is false for the launcher's own lines.
func ParseTagged(line string) (rank int, stream, text string, ok bool) {
	if !strings.HasPrefix(line, "[") {
		return 0, "", "", false
	}
	end := strings.Index(line, "]<")
	if end < 0 {
		return 0, "", "", false
	}
	_, r, found := strings.Cut(line[1:end], ",")
	if !found {
		return 0, "", "", false
	}
	rank, err := strconv.Atoi(r)
	if err != nil {
		return 0, "", "", false
	}
	rest := line[end+2:]
	close := strings.Index(rest, ">:")
	if close < 0 {
		return 0, "", "", false
	}
	return rank, rest[:close], rest[close+2:], true
}

// CopyTagged reads tagged launcher output from r and writes each rank's line as
// "[rank] text" to out; the launcher's untagged lines go to launcher. It returns when
// r ends.
func CopyTagged(r io.Reader, out, launcher io.Writer) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if rank, _, text, ok := ParseTagged(line); ok {
			io.WriteString(out, "["+strconv.Itoa(rank)+"] "+text+"\n")
		} else {
			io.WriteString(launcher, line+"\n")
		}
	}
	return sc.Err()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
