# bash completion for tpmsec: subcommands and options, read from the CLI's own --help.
_tpmsec() {
  local cur=${COMP_WORDS[COMP_CWORD]} path=() w help
  for w in "${COMP_WORDS[@]:1:COMP_CWORD-1}"; do [[ $w == -* ]] || path+=("$w"); done
  help=$("${COMP_WORDS[0]}" "${path[@]}" --help 2>/dev/null) || return 0
  local words
  words=$(printf '%s\n' "$help" | awk '/^Subcommands:/{s=1;next} /^$/{s=0} s && /^  [a-z]/{print $1}
    /^ +-/{n=split($1,a,","); for(i=1;i<=n;i++) if (a[i] ~ /^-/) print a[i]}')
  mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
  [ ${#COMPREPLY[@]} -gt 0 ] || mapfile -t COMPREPLY < <(compgen -f -- "$cur")
}
complete -F _tpmsec tpmsec
