package farm

import (
	"strconv"
	"strings"
)

// Placeholders of a farm's command line.
const (
	LineMark   = "{}"  // the task's line
	NumberMark = "{#}" // the task's number, from 0
)

// Expand returns the command line of task number n, whose line is line: every
// [LineMark] in argv is replaced by the line and every [NumberMark] by n, within
// words as well as whole words. If no word holds [LineMark], the line is added
// as the last argument, as xargs does. argv[0], the program, is left as it is.
func Expand(argv []string, line string, n int) []string {
	out := make([]string, len(argv), len(argv)+1)
	out[0] = argv[0]
	num := strconv.Itoa(n)
	for i, w := range argv[1:] {
		w = strings.ReplaceAll(w, NumberMark, num)
		out[i+1] = strings.ReplaceAll(w, LineMark, line)
	}
	if !HasLineMark(argv) {
		out = append(out, line)
	}
	return out
}

// HasLineMark reports whether an argument of argv (the program aside) holds
// [LineMark].
func HasLineMark(argv []string) bool {
	for _, w := range argv[1:] {
		if strings.Contains(strings.ReplaceAll(w, NumberMark, "0"), LineMark) {
			return true
		}
	}
	return false
}
