# bash completion for rtctl
_rtctl() {
    local cur prev words cword
    _init_completion || return
    local verbs="status profiles profile plan restore attach detach irq check verify"
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
        check)
            COMPREPLY=($(compgen -W "--local --json" -- "$cur")) ;;
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
