package launch

import (
	"path"
	"strings"
)

// DefaultDaemons are the programs a launch may start: Open MPI's and MPICH
// Hydra's per-node daemons.
var DefaultDaemons = []string{"orted", "hydra_pmi_proxy"}

// wrappers are words that run the word after them as the command.
var wrappers = map[string]bool{
	"exec": true, "env": true, "nohup": true, "command": true, "nice": true, "time": true,
	"if": true, "then": true, "else": true, "elif": true, "while": true, "until": true,
	"do": true, "!": true, "{": true,
}

// runsDaemon reports whether the shell command line runs one of daemons (by
// base name) as a command, as opposed to mentioning it as an argument. It
// understands what MPI launchers send (assignments, `export`, `;`, quotes),
// not the whole shell language: this is a guard against using the launch
// route as a general remote shell by mistake, not a sandbox. Anyone holding
// the cluster secret can already submit any program as a job.
func runsDaemon(line string, daemons []string) bool {
	for _, cmd := range commandWords(line) {
		for _, d := range daemons {
			if path.Base(cmd) == d {
				return true
			}
		}
	}
	return false
}

// commandWords returns the word in command position of each simple command
// of a shell command line: the first word that is not a variable assignment
// or a wrapper such as exec, env or nohup (whose options are skipped too).
func commandWords(line string) []string {
	var cmds []string
	atStart, wrapped := true, false
	for _, tok := range shellTokens(line) {
		if tok.op {
			atStart, wrapped = true, false
			continue
		}
		if !atStart {
			continue
		}
		switch {
		case isAssignment(tok.word):
		case wrapped && strings.HasPrefix(tok.word, "-"):
		case wrappers[tok.word]:
			wrapped = true
		default:
			cmds = append(cmds, tok.word)
			atStart = false
		}
	}
	return cmds
}

func isAssignment(w string) bool {
	i := strings.IndexByte(w, '=')
	if i <= 0 {
		return false
	}
	for j := 0; j < i; j++ {
		c := w[j]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || j > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

type token struct {
	word string
	op   bool // a command separator: ; & | ( ) or a newline
}

// shellTokens splits a command line into words (quotes and backslashes
// removed) and command separators.
func shellTokens(line string) []token {
	var (
		toks    []token
		cur     strings.Builder
		inWord  bool
		quote   byte // '\'' or '"' while inside quotes
		escaped bool
	)
	flush := func() {
		if inWord {
			toks = append(toks, token{word: cur.String()})
			cur.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case escaped:
			cur.WriteByte(c)
			escaped = false
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case quote == '"':
			switch c {
			case '"':
				quote = 0
			case '\\':
				escaped = true
			default:
				cur.WriteByte(c)
			}
		case c == '\\':
			escaped, inWord = true, true
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == ' ' || c == '\t':
			flush()
		case strings.IndexByte(";&|()\n", c) >= 0:
			flush()
			toks = append(toks, token{op: true})
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return toks
}
