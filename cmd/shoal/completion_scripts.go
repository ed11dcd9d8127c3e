package main

import (
	"fmt"
	"strings"
)

// bashCompletion is the bash script of shoal completion bash for specs.
func bashCompletion(specs []compSpec) string {
	var b strings.Builder
	b.WriteString(`# bash completion for shoal, as 'shoal completion bash' printed it:
#   source <(shoal completion bash)

`)
	compTables(&b, specs, "_shoal", "echo")
	var names []string
	for _, s := range specs {
		names = append(names, s.name)
	}
	fmt.Fprintf(&b, "_shoal_commands='%s'\n_shoal_states='%s'\n\n", strings.Join(names, " "), stateWords())
	b.WriteString(`# _shoal_jobs prints the ids of the local agent's jobs, or nothing.
_shoal_jobs() {
    "${COMP_WORDS[0]}" completion job-ids 2>/dev/null
}

# _shoal_value KIND: completes a flag's value of that kind.
_shoal_value() {
    case $1 in
    file) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")) ;;
    job) COMPREPLY=($(compgen -W "$(_shoal_jobs)" -- "$cur")) ;;
    state)
        local pre=
        [[ $cur == *,* ]] && pre=${cur%,*},
        COMPREPLY=($(compgen -P "$pre" -W "$_shoal_states" -- "${cur##*,}")) ;;
    esac
}

_shoal() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local cmd= i w n words=
    COMPREPLY=()
    # --flag=value: bash splits it at the =.
    if [[ $cur == = ]]; then
        cur=
    elif [[ $prev == = ]] && ((COMP_CWORD > 1)); then
        prev=${COMP_WORDS[COMP_CWORD-2]}
    fi
    # The command is the first word that is not a flag; a subcommand of it
    # (shoal testbed up) the first after it that names one.
    for ((i = 1; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        [[ $w == -* ]] && continue
        if [[ -z $cmd ]]; then
            cmd=$w
        elif [[ " $(_shoal_subs "$cmd") " == *" $w "* ]]; then
            cmd="$cmd $w"
        fi
    done
    if [[ -z $cmd || $cmd == help ]]; then
        [[ -z $cmd ]] && words='help --help --version'
        COMPREPLY=($(compgen -W "$_shoal_commands $words" -- "$cur"))
        return
    fi
    if [[ $prev == -* ]]; then
        n=${prev#-}
        n=${n#-}
        for w in $(_shoal_flags "$cmd"); do
            if [[ $w == "$n="* ]]; then
                _shoal_value "${w#*=}"
                return
            fi
        done
    fi
    if [[ $cur == -* ]]; then
        for w in $(_shoal_flags "$cmd"); do
            w=${w%%=*}
            if ((${#w} == 1)); then words+=" -$w"; else words+=" --$w"; fi
        done
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
        return
    fi
    w=$(_shoal_subs "$cmd")
    if [[ -n $w ]]; then
        COMPREPLY=($(compgen -W "$w" -- "$cur"))
        return
    fi
    _shoal_value "$(_shoal_operand "$cmd")"
}

complete -F _shoal shoal
`)
	return b.String()
}

// zshQuote quotes s for zsh inside single quotes, with the colons of a
// _describe entry escaped.
func zshQuote(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, ":", `\:`), "'", `'\''`)
}

// zshCompletion is the zsh script of shoal completion zsh for specs.
func zshCompletion(specs []compSpec) string {
	var b strings.Builder
	b.WriteString(`#compdef shoal
# zsh completion for shoal, as 'shoal completion zsh' printed it:
#   source <(shoal completion zsh)        (after compinit)
#   shoal completion zsh > "${fpath[1]}/_shoal"

`)
	compTables(&b, specs, "_shoal", "print -r --")
	b.WriteString("_shoal_commands=(\n")
	for _, s := range specs {
		fmt.Fprintf(&b, "    '%s:%s'\n", s.name, zshQuote(s.summary))
	}
	fmt.Fprintf(&b, ")\n_shoal_states=(%s)\n\n", stateWords())
	b.WriteString(`# _shoal_value KIND: completes a flag's value of that kind.
_shoal_value() {
    case $1 in
    file) _files ;;
    job) compadd -- ${(f)"$(${words[1]} completion job-ids 2>/dev/null)"} ;;
    state) _sequence compadd - $_shoal_states ;;
    esac
}

_shoal() {
    local cmd= i w n cur=${words[CURRENT]} prev=${words[CURRENT-1]}
    local -a flags
    for ((i = 2; i < CURRENT; i++)); do
        w=${words[i]}
        [[ $w == -* ]] && continue
        if [[ -z $cmd ]]; then
            cmd=$w
        elif [[ " $(_shoal_subs "$cmd") " == *" $w "* ]]; then
            cmd="$cmd $w"
        fi
    done
    if [[ -z $cmd || $cmd == help ]]; then
        _describe command _shoal_commands
        return
    fi
    if [[ $prev == -* ]]; then
        n=${prev#-}
        n=${n#-}
        for w in ${=$(_shoal_flags "$cmd")}; do
            if [[ $w == "$n="* ]]; then
                _shoal_value "${w#*=}"
                return
            fi
        done
    fi
    if [[ $cur == -* ]]; then
        for w in ${=$(_shoal_flags "$cmd")}; do
            w=${w%%=*}
            if ((${#w} == 1)); then flags+=(-$w); else flags+=(--$w); fi
        done
        compadd -- $flags
        return
    fi
    w=$(_shoal_subs "$cmd")
    if [[ -n $w ]]; then
        compadd -- ${=w}
        return
    fi
    _shoal_value "$(_shoal_operand "$cmd")"
}

if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
    _shoal "$@"
else
    compdef _shoal shoal
fi
`)
	return b.String()
}
