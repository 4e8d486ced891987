#!/usr/bin/zsh -f
# Prints, one per line, the matches zsh's completion system offers for a command line:
#   zsh -f zsh-complete.zsh FPATH_DIR 'rtctl irq pin '
# An interactive zsh under zpty (completion needs the line editor) loads compinit with FPATH_DIR
# first on $fpath, and a compadd wrapper records every match a completion function adds. Tab is
# pressed once at the end of the line, bound to a widget that completes and then says it is done;
# keys typed ahead would cut the completion short, so nothing else is sent until then. The caller
# bounds the wait.
emulate -L zsh
zmodload zsh/zpty || exit 2
zmodload zsh/datetime
local dir=$1 line=$2 out=${TMPDIR:-/tmp}/zsh-complete.$$ got
rm -f $out $out.done
: >| $out
zpty z zsh -f -i || exit 2
zpty -w z "PS1='' PROMPT_EOL_MARK=''"
zpty -w z "fpath=(${(q)dir} \$fpath); autoload -U compinit; compinit -u -D"
# Calls that ask for matches back (-O, -A, -D) add nothing; the others are recorded, then made.
zpty -w z "compadd() {
  if (( \${@[(I)-[OAD]]} )); then builtin compadd \"\$@\"; return; fi
  local -a m; builtin compadd -O m \"\$@\"; print -rl -- \$m >> ${(q)out}; builtin compadd \"\$@\"
}"
zpty -w z "complete-then-mark() { zle complete-word; : >| ${(q)out}.done }"
zpty -w z "zle -N complete-then-mark; bindkey '^I' complete-then-mark; zstyle ':completion:*' menu no; unsetopt auto_list"
zpty -w -n z "$line"$'\t'
until [[ -e $out.done ]]; do sleep 0.05; done
# Kill the line (the completion may have inserted a match), then a marker whose output differs from
# its echo, so only the shell's answer matches.
zpty -w -n z $'\x15'
zpty -w z 'print ZSH-COMPLETE-$((40 + 2))'
zpty -r z got '*ZSH-COMPLETE-42*' || exit 2
zpty -d z
sort -u $out
rm -f $out $out.done
