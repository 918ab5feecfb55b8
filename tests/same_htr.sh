# Sourced by the shell suites.  same_htr A B: whether the .htr files A and
# B are the same but for the time they were built (header bytes 121-128)
# and the header hash that covers it (bytes 249-256); see tests/same_htr.c.
same_htr() {
	[ -f "$1" ] && [ -f "$2" ] &&
		[ "$(wc -c <"$1")" = "$(wc -c <"$2")" ] &&
		cmp -l "$1" "$2" | awk '
			!(($1 >= 121 && $1 <= 128) || ($1 >= 249 && $1 <= 256)) {
				bad = 1 }
			END { exit bad }'
}
