# bash completion for rtctl

# Profile names as rtctl lists them: rtctld's, or when it is not running the profile files rtctl reads
# itself (RTCTL_CONF_PATH applies). Silent when neither answers.
_rtctl_profiles() {
    rtctl --json profiles 2>/dev/null | sed -n 's/.*"name": *"\([^"]*\)".*/\1/p'
}

# IRQ numbers: the directories of /proc/irq (under RTCTL_SYSROOT, as rtctld reads it).
_rtctl_irqs() {
    local d
    for d in "${RTCTL_SYSROOT-}"/proc/irq/[0-9]*; do
        [[ -d $d ]] && printf '%s\n' "${d##*/}"
    done
}

_rtctl() {
    local cur prev words cword
    _init_completion || return
    local verbs="status profiles profile plan restore attach detach run hold holds irq check verify bootargs latency xruns"
    local globals="--json --no-legend --pager --no-pager"
    # The verb, how many arguments follow it, and the first of them.
    local verb="" first="" w i n=0
    for ((i = 1; i < cword; i++)); do
        w=${words[i]}
        case $w in
            -*) ;;
            *) if [[ -z $verb ]]; then verb=$w; else ((n++ == 0)) && first=$w; fi ;;
        esac
    done
    if [[ -z $verb ]]; then
        COMPREPLY=($(compgen -W "$verbs $globals --help --version" -- "$cur"))
        return
    fi
    if [[ $prev == --profile || $prev == --compare ]]; then
        COMPREPLY=($(compgen -W "$(_rtctl_profiles)" -- "$cur"))
        return
    fi
    case $verb in
        profile)
            if ((n == 0)) && [[ $cur != -* ]]; then
                COMPREPLY=($(compgen -W "$(_rtctl_profiles)" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "$globals" -- "$cur"))
            fi ;;
        plan)
            COMPREPLY=($(compgen -W "--profile $globals" -- "$cur")) ;;
        attach|detach)
            if ((n == 0)) && [[ $cur != -* ]]; then
                _pids
            else
                COMPREPLY=($(compgen -W "$globals" -- "$cur"))
            fi ;;
        run|hold)
            for ((i = 1; i < cword; i++)); do
                if [[ ${words[i]} == -- ]]; then
                    _command_offset $((i + 1))
                    return
                fi
            done
            if [[ $prev == --reason ]]; then
                return
            elif [[ $verb == hold ]] && ((n == 0)) && [[ $cur != -* ]]; then
                COMPREPLY=($(compgen -W "$(_rtctl_profiles)" -- "$cur"))
            elif [[ $verb == run ]]; then
                COMPREPLY=($(compgen -W "--profile --reason -- $globals" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "--reason -- $globals" -- "$cur"))
            fi ;;
        check)
            if [[ $prev == --user ]]; then
                COMPREPLY=($(compgen -u -- "$cur"))
            else
                COMPREPLY=($(compgen -W "--local --user --profile $globals" -- "$cur"))
            fi ;;
        bootargs)
            if ((n == 0)) && [[ $cur != -* ]]; then
                COMPREPLY=($(compgen -W "show apply revert --profile $globals" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "--profile $globals" -- "$cur"))
            fi ;;
        latency)
            case $prev in
                --cpus) COMPREPLY=($(compgen -W "isolated housekeeping all" -- "$cur")) ;;
                --method) COMPREPLY=($(compgen -W "auto timerlat osnoise hwlat timer" -- "$cur")) ;;
                --duration|--slice) COMPREPLY=($(compgen -W "10s 30s 1m" -- "$cur")) ;;
                --svg) _filedir svg ;;
                *) COMPREPLY=($(compgen -W "--cpus --duration --method --compare --slice --svg $globals" -- "$cur")) ;;
            esac ;;
        xruns)
            case $prev in
                --server) COMPREPLY=($(compgen -W "auto pipewire jack" -- "$cur")) ;;
                --cpus|--window) ;;
                *) COMPREPLY=($(compgen -W "--server --cpus --window $globals" -- "$cur")) ;;
            esac ;;
        irq)
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "--isolated $globals" -- "$cur"))
            elif ((n == 0)); then
                COMPREPLY=($(compgen -W "pin unpin" -- "$cur"))
            elif ((n == 1)) && [[ $first == pin || $first == unpin ]]; then
                COMPREPLY=($(compgen -W "$(_rtctl_irqs)" -- "$cur"))
            elif ((n == 2)) && [[ $first == pin ]]; then
                COMPREPLY=($(compgen -W "housekeeping isolated all" -- "$cur"))
            fi ;;
        *) COMPREPLY=($(compgen -W "$globals" -- "$cur")) ;;
    esac
}
complete -F _rtctl rtctl
