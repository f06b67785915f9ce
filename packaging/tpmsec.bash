# bash completion for tpmsec: subcommands and options, read from the CLI's own
# --help; values for the options that take a profile (the names `tpmsec
# profiles --names` lists from the data directory), a strategy, or a TPM string.
_tpmsec_strategies="per-command saved-context resident plain checkpoint"

# Completes one item of a comma-separated list: the items before the last comma stay.
_tpmsec_list() {
  local cur=$1 words=$2 head=
  [[ $cur == *,* ]] && head=${cur%,*},
  mapfile -t COMPREPLY < <(compgen -P "$head" -W "$words" -- "${cur##*,}")
  compopt -o nospace 2>/dev/null
}

_tpmsec() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} path=() w help
  local tpmsec=${COMP_WORDS[0]}
  for w in "${COMP_WORDS[@]:1:COMP_CWORD-1}"; do [[ $w == -* ]] || path+=("$w"); done
  local profiles
  case $prev in
    --emulate)
      mapfile -t COMPREPLY < <(compgen -W "$("$tpmsec" profiles --names 2>/dev/null)" -- "$cur")
      [[ $cur == */* || $cur == .* ]] && mapfile -t COMPREPLY < <(compgen -f -- "$cur")
      return 0 ;;
    --profiles)
      profiles=$("$tpmsec" profiles --names 2>/dev/null)
      _tpmsec_list "$cur" "all ${profiles//$'\n'/ }"
      return 0 ;;
    --strategy)
      mapfile -t COMPREPLY < <(compgen -W "$_tpmsec_strategies" -- "$cur")
      return 0 ;;
    --strategies)
      _tpmsec_list "$cur" "all $_tpmsec_strategies"
      return 0 ;;
    --tpm)
      mapfile -t COMPREPLY < <(compgen -W "embedded embedded:state= device:/dev/tpmrm0 device:/dev/tpm0
        swtpm:host=localhost,port=2321 mssim:host=localhost,port=2321" -- "$cur")
      compopt -o nospace 2>/dev/null
      return 0 ;;
  esac
  # The profile a subcommand takes as its argument: `emulate PROFILE`, `profiles show NAME`.
  if [[ $cur != -* ]] && { [[ ${path[*]} == emulate ]] || [[ ${path[*]} == "profiles show" ]]; }; then
    mapfile -t COMPREPLY < <(compgen -W "$("$tpmsec" profiles --names 2>/dev/null)" -- "$cur")
    [ ${#COMPREPLY[@]} -gt 0 ] || mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    return 0
  fi
  help=$("$tpmsec" "${path[@]}" --help 2>/dev/null) || return 0
  local words
  words=$(printf '%s\n' "$help" | awk '/^Subcommands:/{s=1;next} /^$/{s=0} s && /^  [a-z]/{print $1}
    /^ +-/{n=split($1,a,","); for(i=1;i<=n;i++) if (a[i] ~ /^-/) print a[i]}')
  mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
  [ ${#COMPREPLY[@]} -gt 0 ] || mapfile -t COMPREPLY < <(compgen -f -- "$cur")
}
complete -F _tpmsec tpmsec
