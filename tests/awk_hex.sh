# Sourced by the shell suites: $hex holds the awk function h(S), the value
# of the hex string S (with or without 0x), to put in front of an awk
# program (mawk has no strtonum).
hex='function h(s,  v, i) {
	s = tolower(s); sub(/^0x/, "", s); v = 0
	for (i = 1; i <= length(s); i++)
		v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
	return v
}'
