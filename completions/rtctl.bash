# bash completion for rtctl
_rtctl() {
    local cur prev words cword
    _init_completion || return
    local verbs="status profiles profile plan restore attach detach run hold holds irq check verify bootargs latency"
    local verb="" w
    for w in "${words[@]:1:cword-1}"; do
        case $w in -*) ;; *) verb=$w; break ;; esac
    done
    if [[ -z $verb ]]; then
        COMPREPLY=($(compgen -W "$verbs --json --help --version" -- "$cur"))
        return
    fi
    case $verb in
        profile)
            COMPREPLY=($(compgen -W "$(rtctl --json profiles 2>/dev/null | sed -n 's/.*"name":"\([^"]*\)".*/\1/p')" -- "$cur")) ;;
        plan)
            if [[ $prev == --profile ]]; then
                COMPREPLY=($(compgen -W "$(rtctl --json profiles 2>/dev/null | sed -n 's/.*"name":"\([^"]*\)".*/\1/p')" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "--profile --json" -- "$cur"))
            fi ;;
        run|hold)
            local i
            for ((i = 1; i < cword; i++)); do
                if [[ ${words[i]} == -- ]]; then
                    _command_offset $((i + 1))
                    return
                fi
            done
            if [[ $prev == --profile || ($verb == hold && $prev == hold) ]]; then
                COMPREPLY=($(compgen -W "$(rtctl --json profiles 2>/dev/null | sed -n 's/.*"name": *"\([^"]*\)".*/\1/p')" -- "$cur"))
            elif [[ $verb == run ]]; then
                COMPREPLY=($(compgen -W "--profile --reason --" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "--reason --" -- "$cur"))
            fi ;;
        check)
            if [[ $prev == --user ]]; then
                COMPREPLY=($(compgen -u -- "$cur"))
            elif [[ $prev == --profile ]]; then
                COMPREPLY=($(compgen -W "$(rtctl --json profiles 2>/dev/null | sed -n 's/.*"name": *"\([^"]*\)".*/\1/p')" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "--local --user --profile --json" -- "$cur"))
            fi ;;
        bootargs)
            if [[ $prev == --profile ]]; then
                COMPREPLY=($(compgen -W "$(rtctl --json profiles 2>/dev/null | sed -n 's/.*"name": *"\([^"]*\)".*/\1/p')" -- "$cur"))
            elif [[ $prev == bootargs ]]; then
                COMPREPLY=($(compgen -W "show apply revert --profile --json" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "--profile --json" -- "$cur"))
            fi ;;
        latency)
            case $prev in
                --cpus) COMPREPLY=($(compgen -W "isolated housekeeping all" -- "$cur")) ;;
                --method) COMPREPLY=($(compgen -W "auto timerlat timer" -- "$cur")) ;;
                --duration|--slice) COMPREPLY=($(compgen -W "10s 30s 1m" -- "$cur")) ;;
                --compare)
                    COMPREPLY=($(compgen -W "$(rtctl --json profiles 2>/dev/null | sed -n 's/.*"name": *"\([^"]*\)".*/\1/p')" -- "$cur")) ;;
                --svg) _filedir svg ;;
                *) COMPREPLY=($(compgen -W "--cpus --duration --method --compare --slice --svg --json" -- "$cur")) ;;
            esac ;;
        irq)
            if [[ $prev == irq ]]; then
                COMPREPLY=($(compgen -W "pin unpin --json" -- "$cur"))
            elif [[ $prev == pin || $prev == unpin ]]; then
                COMPREPLY=($(compgen -W "$(sed -n 's/^ *\([0-9][0-9]*\):.*/\1/p' /proc/interrupts)" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "housekeeping isolated all --isolated" -- "$cur"))
            fi ;;
        *) COMPREPLY=($(compgen -W "--json" -- "$cur")) ;;
    esac
}
complete -F _rtctl rtctl
