#!/bin/sh
# The independent oracle of the --lines tests (test_lines.sh for the CLI,
# test_lldb.sh for the LLDB plugin): for each address on stdin, binutils'
# addr2line's answer in the form `--lines` prints, one line each:
#   0xADDR<TAB>at FILE:LINE [inlined: INNER <- ... <- FUNC at FILE:LINE]
# (empty after the tab when addr2line knows nothing).
# usage: addr2line_locs.sh ELF <ADDRS
set -eu
# addr2line -a -i -f -s prints ADDR, then FUNC and FILE:LINE per frame
# (innermost first; "FILE:LINE (discriminator N)" keeps FILE:LINE).
. "$(dirname "$0")/awk_hex.sh"
addr2line -a -i -f -s -e "$1" | awk "$hex"'
	function flush() {
		if (addr == "") return
		loc = ""
		# "??:0" nothing; "FILE:?" a compile unit but no line
		if (n && fl[0] !~ /^\?\?:/ && fl[0] !~ /:\?$/)
			loc = "at " fl[0]
		if (n > 1) {
			loc = loc (loc == "" ? "" : " ") "[inlined: " fn[0]
			for (i = 1; i < n; i++) loc = loc " <- " fn[i] " at " fl[i]
			loc = loc "]"
		}
		print addr "\t" loc
	}
	/^0x/ { flush(); addr = sprintf("0x%x", h($0)); n = 0; odd = 1; next }
	odd { f = $0; odd = 0; next }
	{ fn[n] = f; fl[n++] = $1; odd = 1 }
	END { flush() }'
