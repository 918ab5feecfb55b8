#!/bin/sh
# htr's command-line contract: --help everywhere, one-line errors naming
# the file and the problem, exit 0 ok / 1 failure / 2 usage, and a build
# that is killed or fails leaves nothing that opens.
# usage: test_cli.sh HTR HTR_SYNTH
set -u
htr=$1 synth=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
. "$(dirname "$0")/same_htr.sh"
. "$(dirname "$0")/expect.sh"

"$synth" -q -S mixed -s 5 -n 2e4 "$dir/t" || exit 1
expect 2 "bad value '1.5'" "$synth" -q -n 1.5 "$dir/frac"
T="$dir/t.pt" E="$dir/t.elf"
timing="--cpuid-0x15-eax 1 --cpuid-0x15-ebx 2 --mtc-freq 6 --nom-freq 16"

for c in build dump info gaps find top export insns; do
	expect 0 '' "$htr" "$c" --help
done
expect 0 '' "$htr" --help
expect 2 'not a command' "$htr" frobnicate
expect 2 'no TRACE given' "$htr" build --elf "$E"
expect 2 'no image' "$htr" build "$T"
expect 2 'cpu' "$htr" build "$T" --elf "$E" --cpu 6/x
expect 2 'unknown option' "$htr" dump --bogus "$dir/t.htr"
expect 1 "$dir/missing.pt: No such file" "$htr" build "$dir/missing.pt" --elf "$E"
expect 1 "$dir/missing.elf" "$htr" build "$T" --elf "$dir/missing.elf"
expect 1 "not an ELF" "$htr" build "$T" --elf "$T"
expect 1 "bad address" "$htr" build "$T" --raw "$E@zz"
expect 1 "empty trace" sh -c ": > '$dir/empty.pt'; '$htr' build '$dir/empty.pt' --elf '$E'"
expect 1 "$dir/nodir/x.htr" "$htr" build "$T" --elf "$E" -o "$dir/nodir/x.htr"
[ -e "$dir/nodir" ] && { echo "FAIL: output directory appeared"; fails=$((fails + 1)); }

expect 0 '' "$htr" build -q $timing "$T" --elf "$E" -o "$dir/t.htr"
# The synthesizer writes MTC and CYC: without the options that describe
# them, or without those for MTC or for CYC, the build warns that time is
# coarse; with them, or on a trace without those packets, it does not.
nomtc="--cpuid-0x15-eax 1 --cpuid-0x15-ebx 2 --mtc-freq 6"
"$synth" -q --no-mtc --no-cyc -S mixed -s 5 -n 2e4 "$dir/notime" || exit 1
for c in "1 $T" "1 $T $nomtc" "1 $T --nom-freq 16" "0 $T $timing" \
	"0 $dir/notime.pt"; do
	# shellcheck disable=SC2086
	set -- $c
	want=$1
	shift
	"$htr" build "$@" --elf "$E" -o "$dir/w.htr" 2>"$dir/err" >/dev/null
	got=$(grep -c 'timing packets but' "$dir/err")
	if [ "$got" = "$want" ]; then
		echo "ok: timing warning $want: $*"
	else
		echo "FAIL: timing warning $got (want $want): $*"
		fails=$((fails + 1))
	fi
done
expect 0 '' "$htr" info "$dir/t.htr"
# Inputs of another kind given where an .htr is wanted: say what they are.
printf 'PERFILE2\020\0\0\0\0\0\0\0' >"$dir/fake.data"
expect 1 "fake.data: a perf.data, not an htr file: 'htr build" "$htr" dump "$dir/fake.data"
expect 1 "t.pt: an Intel PT trace, not an htr file" "$htr" top "$T"
expect 1 "t.elf: an ELF file, not an htr file: 'htr build TRACE --elf" "$htr" info "$E"
expect 1 "not an htr file (bad magic)" "$htr" gaps "$dir/t.truth"
# Durations: bare in the output's unit, or with a unit where it is ns.
expect 0 '' "$htr" export --format folded --min-duration 5 "$dir/t.htr"
expect 2 "bad value '1xs'" "$htr" export --format folded --min-duration 1xs "$dir/t.htr"
expect 2 "bad value 'us'" "$htr" export --format folded --min-duration us "$dir/t.htr"
expect 2 "$dir/t.htr are TSC ticks" "$htr" export --format folded --min-duration 1us "$dir/t.htr"
expect 0 '' "$htr" info --verify "$dir/t.htr"
expect 0 '' "$htr" dump --depth 2 "$dir/t.htr"
expect 0 '' "$htr" dump --from 1000 "$dir/t.htr"
expect 1 'out of range' "$htr" dump --from 99999999 "$dir/t.htr"
# getopt's own line never comes first; the option is named as typed.
expect 2 "unknown option '-x'" "$htr" top -x "$dir/t.htr"
expect 2 "unknown option '-x'" "$htr" dump "-x y.htr"
expect 2 "unknown option '-q'" "$htr" gaps -jq "$dir/t.htr"
expect 2 "--limit needs a value" "$htr" find --limit
expect 2 "unknown option '--bogus'" "$htr" export --bogus=3 "$dir/t.htr"
# One vocabulary of places: a block index as find and top print it goes
# to --block, an instruction ID to --insn; one place at a time.
expect 1 'block 99999999: no such block (the file has' "$htr" dump --block 99999999 "$dir/t.htr"
expect 1 'instruction 99999999: out of range' "$htr" export --format folded --insn 99999999 "$dir/t.htr"
expect 2 "a place was given already" "$htr" dump --block 1 --insn 5 "$dir/t.htr"
expect 2 "bad value 'x' (a block index" "$htr" insns --trace "$T" --block x "$dir/t.htr"
"$htr" find --sort cost --limit 4 '*' "$dir/t.htr" >"$dir/find.out"
while read -r blk name span rest; do
	got=$("$htr" dump --block "$blk" --depth 1 "$dir/t.htr" | awk '{print $1}')
	top=$("$htr" top --limit 0 "$dir/t.htr" | awk -v n="$name" '$5 == n {print $4}')
	slow=$("$htr" dump --block "$top" --depth 1 "$dir/t.htr" | awk '{print $1}')
	if [ "$got" = "$span" ] && [ -n "$slow" ]; then
		echo "ok: find's block $blk ($name) -> dump --block: $got; top's SLOWEST $top -> $slow"
	else
		echo "FAIL: find's block $blk ($name, $span) -> dump --block: '$got'; top's SLOWEST '$top' -> '$slow'"
		fails=$((fails + 1))
	fi
done <"$dir/find.out"
# --insn FIRST of a block of the synthesizer's truth is that block (the
# deepest containing its first instruction), in dump and export alike.
awk '$1 == "block" && $6 > $5 + 2 { print $5, $6 }' "$dir/t.truth" | sed -n '1p;40p;200p' |
while read -r first last; do
	got=$("$htr" dump --insn "$first" --depth 1 "$dir/t.htr" | awk '{print $1}')
	root=$("$htr" export --format chrome --insn "$first" --depth 1 "$dir/t.htr" |
		python3 -c 'import json,sys; e=json.load(sys.stdin)["traceEvents"]; print(sum(1 for x in e if x.get("ph") == "B"))')
	if [ "$got" = "$first..$last" ] && [ "$root" = 1 ]; then
		echo "ok: --insn $first: the truth's block $first..$last"
	else
		echo "FAIL: --insn $first: dump '$got', export $root roots (truth $first..$last)"
		echo x >>"$dir/insn.fail"
	fi
done
[ -f "$dir/insn.fail" ] && fails=$((fails + $(wc -l <"$dir/insn.fail")))
if command -v python3 >/dev/null; then
	"$htr" dump --json "$dir/t.htr" | python3 -c 'import json,sys; json.load(sys.stdin)' &&
		echo "ok: dump --json parses" ||
		{ echo "FAIL: dump --json is not JSON"; fails=$((fails + 1)); }
fi
expect 0 '' "$htr" dump --tsc --depth 3 "$dir/t.htr"
expect 0 '' "$htr" top --limit 5 "$dir/t.htr"
# top's default order: where the time went in the functions themselves
# (largest LOCAL first), not the chain of callers that only pass it on.
"$htr" top --limit 0 "$dir/t.htr" | awk 'NR > 1 { if (NR > 2 && $2 > last) bad = 1; last = $2 }
	END { exit bad || NR < 10 }' && echo "ok: top: largest local first" ||
	{ echo "FAIL: top's default order is not by local time"; fails=$((fails + 1)); }
expect 0 '' "$htr" find --sort cost --limit 3 '*' "$dir/t.htr"
expect 2 'sort' "$htr" find --sort sideways '*' "$dir/t.htr"
expect 2 '' "$htr" find "$dir/t.htr"
if command -v python3 >/dev/null; then
	set -f      # the find pattern below is for htr, not the shell
	for c in "dump --tsc --json" "top --json" "find --json *"; do
		# shellcheck disable=SC2086
		"$htr" $c "$dir/t.htr" | python3 -c 'import json,sys; json.load(sys.stdin)' &&
			echo "ok: $c parses" ||
			{ echo "FAIL: $c is not JSON"; fails=$((fails + 1)); }
	done
	set +f
fi
# -j and --decoder: any number of decoding threads and chunk boundaries,
# either decoder, writes the same file as one thread with the default.
expect 2 "jobs: bad value '0'" "$htr" build -j0 "$T" --elf "$E"
expect 2 "chunk-size: bad value 'x'" "$htr" build --chunk-size x "$T" --elf "$E"
expect 2 "decoder: bad value 'foo'" "$htr" build --decoder foo "$T" --elf "$E"
expect 2 "filter: bad range '0x2000-0x1000'" "$htr" build --filter 0x2000-0x1000 "$T" --elf "$E"
expect 2 "trace-stop: more than 4 ranges at '9-10'" "$htr" build \
	--filter 1-2 --filter 3-4 --filter 5-6 --trace-stop 7-8 \
	--trace-stop 9-10 "$T" --elf "$E"
expect 0 '' "$htr" build -q -j1 $timing "$T" --elf "$E" -o "$dir/j1.htr"
for j in "-j2" "-j3 --chunk-size 1" "-j2 --chunk-size 2K" \
	"-j1 --decoder block" "-j1 --decoder walk" \
	"-j3 --chunk-size 1 --decoder block" "-j3 --chunk-size 1 --decoder walk"; do
	# shellcheck disable=SC2086
	"$htr" build -q $j $timing "$T" --elf "$E" -o "$dir/jn.htr"
	if same_htr "$dir/j1.htr" "$dir/jn.htr"; then
		echo "ok: build $j writes the file -j1 writes"
	else
		echo "FAIL: build $j wrote another file than -j1"
		fails=$((fails + 1))
	fi
done
# Chunks holding more events than a chunk's queue (48 batches of 4096;
# here about 300,000 a half): the calling thread, which decodes a chunk
# when it has no events to take, must take its own as it goes, whether
# its chunk is the first (one chunk, or -j2) or a later one.
"$synth" -q --no-truth --no-bundle -S nocomp -s 3 -n 6e6 "$dir/big" || exit 1
"$htr" build -q -j1 $timing "$dir/big.pt" --elf "$dir/big.elf" \
	-o "$dir/big1.htr" || fails=$((fails + 1))
# Its 9 MB of blocks are hashed piece by piece on a thread beside the link
# pass: the checksum must hold.
expect 0 '' "$htr" info --verify "$dir/big1.htr"
half=$(( $(wc -c < "$dir/big.pt") / 2 ))
for j in "-j2 --chunk-size 1G" "-j2 --chunk-size $half" \
	"-j3 --chunk-size $half"; do
	# shellcheck disable=SC2086
	"$htr" build -q $j $timing "$dir/big.pt" --elf "$dir/big.elf" \
		-o "$dir/bign.htr"
	if same_htr "$dir/big1.htr" "$dir/bign.htr"; then
		echo "ok: build $j writes the file -j1 writes (6e6 insns)"
	else
		echo "FAIL: build $j wrote another file than -j1 (6e6 insns)"
		fails=$((fails + 1))
	fi
done
# Wrong inputs that used to pass silently.
expect 2 'overwrite the trace' "$htr" build "$T" --elf "$E" -o "$T"
cp "$T" "$dir/x.htr"
expect 2 'overwrite the trace' "$htr" build "$dir/x.htr" --elf "$E"
expect 2 'overwrite an image' "$htr" build "$T" --elf "$E" -o "$E"
# An image that is not the traced code decodes nothing: a failure, and
# a file of the same name from before stays as it was.
echo before >"$dir/wrong.htr"
expect 1 'nothing decoded: 0 instructions, [0-9]* decode errors*, the first at trace offset 0x[0-9a-f]*: no memory mapped.*(--elf ' "$htr" build -q $timing "$T" --elf "$E@0x10000000" -o "$dir/wrong.htr"
[ "$(cat "$dir/wrong.htr")" = before ] && ! ls "$dir" | grep -q 'wrong.htr.tmp' &&
	echo "ok: nothing decoded: the old file stays, no temporary left" ||
	{ echo "FAIL: nothing decoded: the old file was replaced or a temporary left"; fails=$((fails + 1)); }
# A quarter of the code (the end of the ELF's first segment) decodes
# in part: decode errors where the trace runs in the rest.
phoff=$(od -A n -t u8 -j 32 -N 8 "$E" | tr -d ' ')
vaddr=$(od -A n -t u8 -j $((phoff + 16)) -N 8 "$E" | tr -d ' ')
filesz=$(od -A n -t u8 -j $((phoff + 32)) -N 8 "$E" | tr -d ' ')
q=$((filesz * 3 / 4))
part="$E:$q:$((filesz - q))@$((vaddr + q))"
expect 0 'no memory mapped' "$htr" build -q $timing "$T" --raw "$part" -o "$dir/wrong.htr"
expect 0 'timing packets' "$htr" build -q "$T" --elf "$E" -o "$dir/notime.htr"
expect 0 '' "$htr" gaps "$dir/wrong.htr"
grep -q '^[0-9]*  error  0x[0-9a-f]*  .*  no memory mapped' "$dir/out" &&
	echo "ok: gaps names the error" ||
	{ echo "FAIL: gaps does not name the error"; fails=$((fails + 1)); }
if command -v python3 >/dev/null; then
	"$htr" gaps --json "$dir/t.htr" | python3 -c 'import json,sys; json.load(sys.stdin)' &&
		echo "ok: gaps --json parses" ||
		{ echo "FAIL: gaps --json is not JSON"; fails=$((fails + 1)); }
fi
# The build's decode-error warning agrees with the file's gap list: its
# count and the first error's offset (the build no longer reads it back).
"$htr" build -q $timing "$T" --raw "$part" -o "$dir/wrong.htr" 2>"$dir/err"
"$htr" gaps "$dir/wrong.htr" >"$dir/out"
n=$(grep -c '^[0-9]*  error  ' "$dir/out")
off=$(awk '$2 == "error" { print $3; exit }' "$dir/out")
grep -q "warning: $n decode errors*, the first at trace offset $off:" \
	"$dir/err" && [ "$n" -gt 0 ] &&
	echo "ok: the warning counts the file's $n error gaps" ||
	{ echo "FAIL: the warning does not match 'htr gaps' ($n, $off):"
	  cat "$dir/err"; fails=$((fails + 1)); }
# Each gap's WHERE is the function the synthesizer's truth ran the
# instruction before it in (and after it, when another).
if command -v python3 >/dev/null; then
	"$htr" gaps --json "$dir/t.htr" >"$dir/gaps.json"
	if python3 - "$dir/t.truth" "$dir/gaps.json" <<'PY'
import json, subprocess, sys
names, blocks = {}, []
for line in open(sys.argv[1]):
    w = line.split()
    if w[:1] == ["func"]:
        names[w[1]] = w[4] if len(w) > 4 else "?"
    elif w[:1] == ["block"]:
        blocks.append((int(w[4]), int(w[5]), w[3]))
def at(i):
    inside = [b for b in blocks if b[0] <= i <= b[1]]
    return min(inside, key=lambda b: b[1] - b[0])[2] if inside else None
# The truth's names are mangled; htr prints them as c++filt does.
keys = sorted(names)
out = subprocess.run(["c++filt"], input="\n".join(names[k] for k in keys),
                     capture_output=True, text=True).stdout.split("\n")
names.update(zip(keys, out))
blocks = [(a, b, names[f]) for a, b, f in blocks]
gaps = json.load(open(sys.argv[2]))
bad = [g for g in gaps if (g["before"], g["after"]) != (at(g["id"] - 1), at(g["id"]))]
print("gaps: %d, WHERE unlike the truth: %s" % (len(gaps), bad[:2]))
sys.exit(1 if bad or not gaps else 0)
PY
	then echo "ok: gaps name the truth's functions"
	else echo "FAIL: gaps' functions are not the truth's"; fails=$((fails + 1))
	fi
fi
"$htr" gaps "$dir/t.htr" | grep -q '^# ID  KIND  OFFSET  LASTED  WHERE  REASON  (LASTED in ticks)$' &&
	echo "ok: gaps has a header" ||
	{ echo "FAIL: gaps has no header"; fails=$((fails + 1)); }
# Code that jumps to itself where the traced code should be: the decoder
# runs away and says so, with either decoder, and the files agree.  libipt
# 2.0.5 follows such a jump by recursing and overflowed the stack.
printf '\353\376' >"$dir/spin.bin"                  # jmp .
i=0
while [ $i -lt 13 ]; do
	cat "$dir/spin.bin" "$dir/spin.bin" >"$dir/spin2.bin"
	mv "$dir/spin2.bin" "$dir/spin.bin"
	i=$((i + 1))
done
# Over the ELF's code: its first program header's p_vaddr.
phoff=$(od -A n -t u8 -j 32 -N 8 "$E" | tr -d ' ')
base=$(od -A n -t x8 -j $((phoff + 16)) -N 8 "$E" | tr -d ' ')
for d in walk block; do
	expect 0 'the decoder ran away' "$htr" build -q $timing --decoder $d \
		"$T" --raw "$dir/spin.bin@0x$base" -o "$dir/spin-$d.htr"
	"$htr" gaps "$dir/spin-$d.htr" | grep -q '  error  .*runaway' &&
		echo "ok: $d: a runaway gap" ||
		{ echo "FAIL: $d: no runaway gap"; fails=$((fails + 1)); }
done
same_htr "$dir/spin-walk.htr" "$dir/spin-block.htr" &&
	echo "ok: the runaway builds agree" ||
	{ echo "FAIL: the runaway builds differ"; fails=$((fails + 1)); }
# Code that is all calls to the next instruction: a chain of blocks
# thousands deep.  The dump stops indenting at level 64 and writes the level
# out instead, so that it stays linear (it was 46 MB for this 150 KB file);
# line N is at level N - 1 either way.
awk 'BEGIN { for (i = 0; i < 3300; i++) printf "\350%c%c%c%c", 0, 0, 0, 0 }' \
	</dev/null >"$dir/calls.bin"
"$htr" build -q $timing "$T" --raw "$dir/calls.bin@0x$base" \
	-o "$dir/calls.htr" 2>/dev/null
for o in '' --tsc; do
	# shellcheck disable=SC2086
	"$htr" dump $o "$dir/calls.htr" >"$dir/out"
	awk '/^#/ { next } match($0, /^ *\[[0-9]+\] /) {
		lv = substr($0, RSTART, RLENGTH); gsub(/[] []/, "", lv)
		if (RLENGTH - length(lv) != 131) bad++
	} !/^ *\[/ { match($0, /^ */); lv = RLENGTH / 2 }
	{ if (lv != n++) bad++; if (length($0) > 200) bad++ }
	END { exit !(n > 3000 && !bad) }' "$dir/out" &&
		echo "ok: dump $o: a chain $(wc -l <"$dir/out") deep, lines short" ||
		{ echo "FAIL: dump $o: the chain's levels or lengths are wrong";
		  fails=$((fails + 1)); }
done
# What fuzz_walk found (tests/data/fuzz/): tracing re-enabled in 64-bit
# mode after 32-bit code.  The walk must give the file libipt's block
# decoder gives (it now leaves such a switch to it).
fz="$(dirname "$0")/data/fuzz" sample="$(dirname "$0")/data/sample.elf"
for d in walk block; do
	"$htr" build -q -j1 $timing --decoder $d "$fz/walk-mode-switch.pt" \
		--elf "$sample" -o "$dir/mode-$d.htr" 2>/dev/null
done
same_htr "$dir/mode-walk.htr" "$dir/mode-block.htr" &&
	echo "ok: a mode switch at an enable: the walk and libipt agree" ||
	{ echo "FAIL: a mode switch at an enable: the walk and libipt differ"
	  fails=$((fails + 1)); }
# Several modules: names carry their module (MODULE!name).
if cp "$E" "$dir/second.elf" && "$htr" build -q $timing "$T" --elf "$E" \
	--elf "$dir/second.elf@0x7f0000000000" -o "$dir/two.htr" &&
   "$htr" top --limit 3 "$dir/two.htr" 2>/dev/null | grep -q ' t\.elf!'; then
	echo "ok: names carry their module when there are several"
else
	echo "FAIL: no MODULE!name in a two-module top"; fails=$((fails + 1))
fi
# An ELF without symbols: names fall back to MODULE+0xOFFSET, and the
# results reload instead of "vanishing".
if command -v strip >/dev/null; then
	strip -o "$dir/stripped.elf" "$E"
	expect 0 '' "$htr" build -q $timing "$T" --elf "$dir/stripped.elf" -o "$dir/s.htr"
	expect 0 'no function symbols' "$htr" top --limit 3 "$dir/s.htr"
	expect 0 '' "$htr" top --limit 3 "$dir/s.htr"
	expect 0 '' "$htr" dump --tsc --depth 2 "$dir/s.htr"
fi

# find: a bad glob or an empty pattern is a usage error; no match is said.
expect 2 'without its ]' "$htr" find '[' "$dir/t.htr"
expect 2 'PATTERN is empty' "$htr" find '' "$dir/t.htr"
expect 0 'no function matches' "$htr" find no_such_function "$dir/t.htr"
[ -s "$dir/out" ] && { echo "FAIL: find printed for no match"; fails=$((fails + 1)); }

# A damaged body: every message names the file; a full dump prints
# nothing before it fails.
cp "$dir/t.htr" "$dir/bad.htr"
size=$(wc -c <"$dir/bad.htr")
printf '\377\377\377\377\377\377\377\377' |
	dd of="$dir/bad.htr" bs=1 seek=$((size / 3)) conv=notrunc 2>/dev/null
expect 1 "$dir/bad.htr" "$htr" dump "$dir/bad.htr"
[ -s "$dir/out" ] && { echo "FAIL: dump printed a damaged file"; fails=$((fails + 1)); }
expect 1 "$dir/bad.htr" "$htr" top "$dir/bad.htr"
[ -e "$dir/bad.htr.lmdb" ] && { echo "FAIL: a failed top left its sidecar"; fails=$((fails + 1)); }
expect 1 "$dir/bad.htr" "$htr" dump --tsc "$dir/bad.htr"

# insns: the cursor from the command line.
# Without --trace: t.pt, next to t.htr (tests/test_insns.sh has more).
expect 0 '' "$htr" insns "$dir/t.htr"
expect 1 'not the trace' "$htr" insns --trace "$E" "$dir/t.htr"
expect 0 '' "$htr" insns --trace "$T" --block 3 --count 0 "$dir/t.htr"
want=$("$htr" dump --json "$dir/t.htr" | python3 -c 'import json,sys
b=[x for x in json.load(sys.stdin) if x["block"] == 3][0]
print(b["last"] - b["first"] + 1)')
got=$(grep -c '^[0-9]' "$dir/out")
[ "$want" = "$got" ] && echo "ok: insns --block prints the block's span" ||
	{ echo "FAIL: insns --block 3: $got lines, span $want"; fails=$((fails + 1)); }

expect 1 'not an htr file' "$htr" info "$T"
head -c 1000 "$dir/t.htr" >"$dir/cut.htr"
expect 1 'cut.htr' "$htr" dump "$dir/cut.htr"
expect 1 'missing.htr' "$htr" info "$dir/missing.htr"

# A build killed midway leaves no file that opens.
"$synth" -q --no-truth --no-bundle -n 200M "$dir/big" || exit 1
# (Killed as soon as its temporary appears: a quiet machine builds the
# whole trace in well under a second.)
until_tmp() {
	n=0
	while ! ls "$dir" | grep -q "^$1.tmp" && [ $n -lt 1000 ]; do
		sleep 0.01
		n=$((n + 1))
	done
}
"$htr" build -q $timing "$dir/big.pt" --elf "$dir/big.elf" -o "$dir/big.htr" &
pid=$!
until_tmp big.htr
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
if [ -e "$dir/big.htr" ]; then
	echo "FAIL: a killed build left $dir/big.htr"
	fails=$((fails + 1))
else
	echo "ok: a killed build left no output"
fi
if ! ls "$dir" | grep -q 'big.htr.tmp'; then
	echo "FAIL: the killed build left no temporary (was it killed too late?)"
	fails=$((fails + 1))
fi
"$htr" build -q $timing "$T" --elf "$E" -o "$dir/big.htr" >/dev/null 2>&1
if ls "$dir" | grep -q 'big.htr.tmp'; then
	echo "FAIL: the next build did not remove the killed build's temporary"
	fails=$((fails + 1))
else
	echo "ok: the next build removed the killed build's temporary"
fi

# SIGTERM (or SIGINT) stops a build cleanly: no output, no temporary, and
# the exit status says which signal.
"$htr" build -q $timing "$dir/big.pt" --elf "$dir/big.elf" -o "$dir/term.htr" 2>"$dir/err" &
pid=$!
until_tmp term.htr
kill -TERM "$pid" 2>/dev/null
wait "$pid"
st=$?
if [ "$st" != 143 ] || ls "$dir" | grep -q '^term.htr' ||
   ! grep -q 'interrupted, nothing written' "$dir/err"; then
	echo "FAIL: SIGTERM: exit $st, left: $(ls "$dir" | grep '^term.htr')"
	fails=$((fails + 1))
else
	echo "ok: SIGTERM left nothing behind"
fi

[ "$fails" = 0 ] && echo "cli: all checks passed" || echo "cli: $fails failed"
[ "$fails" = 0 ]
