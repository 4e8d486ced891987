# fish completion for rtctl

# Profile names as rtctl lists them: rtctld's, or when it is not running the profile files rtctl reads
# itself (RTCTL_CONF_PATH applies). Silent when neither answers.
function __rtctl_profiles
    rtctl --json profiles 2>/dev/null | string replace -rf '.*"name": *"([^"]*)".*' '$1'
end

# IRQ numbers: the directories of /proc/irq (under RTCTL_SYSROOT, as rtctld reads it).
function __rtctl_irqs
    set -l dirs "$RTCTL_SYSROOT"/proc/irq/*/
    string replace -rf '.*/([0-9]+)/$' '$1' -- $dirs | sort -n
end

# The command line's words after "rtctl" that are not options: the verb, then its arguments.
function __rtctl_args
    set -l words (commandline -opc)
    string match -v -- '-*' $words[2..-1]
end

# True when the verb is one of $argv.
function __rtctl_verb
    set -l args (__rtctl_args)
    test (count $args) -gt 0; and contains -- $args[1] $argv
end

# __rtctl_nth VERB N [FIRST]: the verb is VERB and N arguments follow it (the first being FIRST if given).
function __rtctl_nth
    set -l args (__rtctl_args)
    test (count $args) -eq (math $argv[2] + 1); or return 1
    test "$args[1]" = $argv[1]; or return 1
    test (count $argv) -lt 3; or test "$args[2]" = $argv[3]
end

# run and hold: past the "--" comes a command line of its own.
function __rtctl_after_dashdash
    contains -- -- (commandline -opc)
end

function __rtctl_complete_command
    set -l words (commandline -opc)
    set -l i (contains -i -- -- $words)
    complete -C (string join ' ' -- $words[(math $i + 1)..-1] (commandline -ct))
end

complete -c rtctl -f

# Options every verb takes, before or after it.
complete -c rtctl -n 'not __rtctl_after_dashdash' -l json -d 'Machine-readable output'
complete -c rtctl -n 'not __rtctl_after_dashdash' -l no-legend -d 'Leave out table headers and summary lines'
complete -c rtctl -n 'not __rtctl_after_dashdash' -l pager -d 'Page long output'
complete -c rtctl -n 'not __rtctl_after_dashdash' -l no-pager -d 'Do not page output'
complete -c rtctl -n 'test (count (__rtctl_args)) -eq 0' -s h -l help -d 'Show help'
complete -c rtctl -n 'test (count (__rtctl_args)) -eq 0' -l version -d 'Show the version and features'

set -l noverb 'test (count (__rtctl_args)) -eq 0'
complete -c rtctl -n $noverb -a status -d 'Active profile, state, failures, last pass'
complete -c rtctl -n $noverb -a profiles -d 'The profiles there are'
complete -c rtctl -n $noverb -a profile -d 'Show the active profile, or switch to another'
complete -c rtctl -n $noverb -a plan -d 'What applying a profile would change'
complete -c rtctl -n $noverb -a restore -d 'Put every value rtctl changed back'
complete -c rtctl -n $noverb -a attach -d 'Run a process on the isolated CPUs'
complete -c rtctl -n $noverb -a detach -d 'Move a process back to the housekeeping CPUs'
complete -c rtctl -n $noverb -a run -d 'Run a command with a profile held, on the isolated CPUs'
complete -c rtctl -n $noverb -a hold -d 'Hold a profile while a command runs'
complete -c rtctl -n $noverb -a holds -d 'The profiles applications hold'
complete -c rtctl -n $noverb -a irq -d 'List IRQs, pin or unpin one'
complete -c rtctl -n $noverb -a check -d 'Audit the machine for audio work'
complete -c rtctl -n $noverb -a verify -d 'Whether everything the profile sets is in place'
complete -c rtctl -n $noverb -a bootargs -d 'Kernel arguments only a reboot applies'
complete -c rtctl -n $noverb -a latency -d 'Wake-up latency per CPU'
complete -c rtctl -n $noverb -a xruns -d 'Name the cause of each xrun'

complete -c rtctl -n '__rtctl_nth profile 0' -a '(__rtctl_profiles)'
complete -c rtctl -n '__rtctl_verb plan run check bootargs; and not __rtctl_after_dashdash' -l profile -x -a '(__rtctl_profiles)' -d 'Profile'
complete -c rtctl -n '__rtctl_nth attach 0; or __rtctl_nth detach 0' -a '(__fish_complete_pids)'

complete -c rtctl -n '__rtctl_nth hold 0' -a '(__rtctl_profiles)'
complete -c rtctl -n '__rtctl_verb run hold; and not __rtctl_after_dashdash' -l reason -x -d 'Why, for rtctl holds'
complete -c rtctl -n '__rtctl_verb run hold; and __rtctl_after_dashdash' -x -a '(__rtctl_complete_command)'

complete -c rtctl -n '__rtctl_nth irq 0' -a 'pin unpin'
complete -c rtctl -n '__rtctl_nth irq 1 pin; or __rtctl_nth irq 1 unpin' -a '(__rtctl_irqs)' -d IRQ
complete -c rtctl -n '__rtctl_nth irq 2 pin' -a 'housekeeping isolated all' -d CPUs
complete -c rtctl -n '__rtctl_verb irq' -l isolated -d 'Allow isolated CPUs'

complete -c rtctl -n '__rtctl_verb check' -l local -d 'Audit without rtctld'
complete -c rtctl -n '__rtctl_verb check' -l user -x -a '(__fish_complete_users)' -d 'The user to judge'

complete -c rtctl -n '__rtctl_nth bootargs 0' -a 'show apply revert'

complete -c rtctl -n '__rtctl_verb latency' -l cpus -x -a 'isolated housekeeping all' -d 'The CPUs to measure'
complete -c rtctl -n '__rtctl_verb latency' -l duration -x -a '10s 30s 1m' -d 'How long to measure'
complete -c rtctl -n '__rtctl_verb latency' -l method -x -a 'auto timerlat osnoise hwlat timer' -d 'How to measure'
complete -c rtctl -n '__rtctl_verb latency' -l compare -x -a '(__rtctl_profiles)' -d 'Alternate with this profile'
complete -c rtctl -n '__rtctl_verb latency' -l slice -x -a '10s 30s 1m' -d 'How long each turn of --compare lasts'
complete -c rtctl -n '__rtctl_verb latency' -l svg -r -F -d 'Write the histograms as an SVG picture'

complete -c rtctl -n '__rtctl_verb xruns; and not __rtctl_after_dashdash' -l server -x -a 'auto pipewire jack' -d 'The server to follow'
complete -c rtctl -n '__rtctl_verb xruns; and not __rtctl_after_dashdash' -l cpus -x -d 'The audio CPUs to record'
complete -c rtctl -n '__rtctl_verb xruns; and not __rtctl_after_dashdash' -l window -x -d 'How far back from an xrun to look (ms)'
complete -c rtctl -n '__rtctl_verb xruns; and __rtctl_after_dashdash' -x -a '(__rtctl_complete_command)'
