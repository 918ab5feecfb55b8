/* htr build: decode a trace into an .htr file. */
#include "cmd.h"
#include "summary.h"

#include "htr/htr.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage_text[] =
"usage: htr build TRACE --elf FILE[@BASE]... [--raw FILE[:OFF[:SIZE]]@VADDR]...\n"
"                 [--cpu FAMILY/MODEL[/STEPPING]|auto] [-o OUT] [options]\n"
"       htr build FILE.data [--tid N] [--symfs DIR] [--buildid-dir DIR]\n"
"                 [--kcore DIR|--vmlinux FILE] [-o OUT] [options]\n"
"\n"
"Decode the raw Intel PT trace TRACE with libipt and write its call tree to\n"
"OUT (default: TRACE with its extension replaced by .htr).\n"
"\n"
"A perf.data (perf record -e intel_pt//u, also with -z; htr record) is\n"
"recognized by its magic: each thread's trace becomes STEM.TID.htr\n"
"(STEM: FILE without its extension; or see -o), with the image from the\n"
"recorded mappings and the timing parameters, CPU and TSC conversion\n"
"from the file.  Per-CPU buffers (perf record without --per-thread, -a)\n"
"are split into threads with the context-switch records.  A module that\n"
"cannot be found, or whose build-id is not the recorded one, is a\n"
"warning; its code becomes decode gaps.\n"
"The vDSO ([vdso]) has no file: its code comes from the build-id cache,\n"
"where perf record copies it, or from this machine's own vDSO when its\n"
"build-id is the recorded one (names in it read [vdso]+0xOFFSET).\n"
"\n"
"  -e, --elf FILE[@BASE]   an ELF; at its link address, or with its lowest\n"
"                          PT_LOAD at BASE (position-independent code)\n"
"  -r, --raw FILE[:OFFSET[:SIZE]]@VADDR\n"
"                          raw code bytes loaded at VADDR\n"
"      --cpu F/M[/S]|auto  processor the trace was recorded on, for libipt's\n"
"                          errata workarounds (auto: none)\n"
"      --mtc-freq N        IA32_RTIT_CTL.MTCFreq of the recording\n"
"      --nom-freq N        nominal core:bus ratio (for CYC)\n"
"      --cpuid-0x15-eax N, --cpuid-0x15-ebx N\n"
"                          the TSC:CTC ratio CPUID leaf 0x15 reports\n"
"      --filter START-END, --trace-stop START-END\n"
"                          an IP filter range (END excluded) or TraceStop\n"
"                          region the trace was recorded with; up to 4\n"
"                          (perf.data: default from the file).  With a\n"
"                          --cpu that has erratum SKL014 (Skylake, Kaby\n"
"                          Lake, ...) the build needs them: a direct\n"
"                          jump or call out of the ranges may stop\n"
"                          tracing without saying where\n"
"  -o, --output OUT        where to write the .htr file.  perf.data:\n"
"                          NAME.htr is that file for one thread,\n"
"                          NAME.TID.htr for several; DIR/ or a directory\n"
"                          gives DIR/STEM.TID.htr (STEM: FILE's name\n"
"                          without its extension); a pattern expands %t\n"
"                          to the tid, %p to the pid, %% to % (several\n"
"                          threads need %t); another OUT is a prefix:\n"
"                          OUT.TID.htr\n"
"      --tid N             perf.data: only the thread N\n"
"      --symfs DIR         perf.data: look for the modules under DIR\n"
"      --buildid-dir DIR   perf.data: perf's build-id cache, for modules\n"
"                          whose file is missing or has another build-id\n"
"                          (default: ~/.debug)\n";

/* The rest of the help (one string would pass C11's 4095 characters). */
static const char usage_text2[] =
"      --kcore DIR         perf.data of user and kernel (intel_pt// without\n"
"                          u), per-thread: the kernel's code from perf\n"
"                          record --kcore's copy (DIR/kcore_dir/kcore;\n"
"                          default: that of a perf.data directory, which\n"
"                          perf record --kcore writes: DIR/data is read);\n"
"                          without it or --vmlinux the kernel's stretches\n"
"                          are gaps named [kernel]\n"
"      --vmlinux FILE      the same from the kernel's ELF image\n"
"  -j, --jobs N            threads (default: the number of processors):\n"
"                          one builds the tree, all decode; the .htr is\n"
"                          the same for any N\n"
"      --chunk-size BYTES  trace per parallel chunk, cut at a PSB (suffix\n"
"                          K, M or G; default: 64K to 256K, half of\n"
"                          what is left a thread, less where events\n"
"                          are dense)\n"
"      --decoder block|walk\n"
"                          block: libipt's block decoder follows every\n"
"                          instruction; walk (default, faster): libipt\n"
"                          reads the packets, htr walks the code; the .htr\n"
"                          is the same either way\n"
"  -q, --quiet             no progress, no summary\n"
"  -h, --help              show this help\n"
"\n"
"Progress goes to stderr: a live line on a terminal, a heartbeat line every\n"
"5 seconds otherwise.  Bad trace data does not stop a build: it becomes\n"
"gaps, counted in the summary.  A trace holding what the walk does not\n"
"follow itself (a decode error, 16-bit code, VMX, ptwrite, ...) is\n"
"decoded again with the block decoder, and a note says so.  OUT\n"
"is written under a temporary name and renamed when complete.\n"
"exit status: 0 ok, 1 failure, 2 usage error\n";

/* The output of a raw trace's build: TRACE with its extension replaced
 * by .htr. */
static char *default_output(const char *trace)
{
	const char *slash = strrchr(trace, '/');
	const char *dot = strrchr(trace, '.');
	size_t stem = dot && (!slash || dot > slash + 1) ? (size_t) (dot - trace)
							 : strlen(trace);
	char *out = malloc(stem + 5);

	if (out) {
		memcpy(out, trace, stem);
		strcpy(out + stem, ".htr");
	}
	return out;
}

/* Whether writing @out would replace @in (the same file, by any name). */
static int same_file(const char *in, const char *out)
{
	struct stat a, b;

	return stat(in, &a) == 0 && stat(out, &b) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Whether image spec @spec (FILE[:OFF[:SIZE]][@ADDR]) names @out. */
static int spec_is(const char *spec, const char *out)
{
	const char *at = strrchr(spec, '@');
	char *path = at ? strndup(spec, (size_t) (at - spec)) : strdup(spec);
	char *colon = path && at ? strchr(path, ':') : NULL;
	int r = path && same_file(path, out);

	if (!r && colon) {
		*colon = 0;
		r = same_file(path, out);
	}
	free(path);
	return r;
}

static int parse_cpu(const char *s, struct htr_build_opts *o)
{
	unsigned f, m, st = 0;
	char tail;
	int n;

	if (!strcmp(s, "auto") || !strcmp(s, "none"))
		return 0;
	n = sscanf(s, "%u/%u/%u%c", &f, &m, &st, &tail);
	if ((n != 2 && n != 3) || !f || f > 255 || m > 255 || st > 255)
		return -1;
	o->cpu_family = (int) f;
	o->cpu_model = (int) m;
	o->cpu_stepping = (int) st;
	return 0;
}

/* htr build TRACE --elf/--raw: one .htr. */
static int build_raw(const char *trace, const char *out,
		     const struct htr_build_opts *opts, const char **elfs,
		     size_t nelf, const char **raws, size_t nraw,
		     struct progress *pr)
{
	struct htr_build_stats st;
	struct htr_builder *b = NULL;
	char img[512];
	size_t i;
	int rc = HTR_EXIT_FAIL, err;

	err = htr_builder_alloc(&b, opts);
	for (i = 0; err == 0 && i < nelf + nraw; i++)
		err = i < nelf ? htr_builder_add_elf(b, elfs[i]) :
				 htr_builder_add_raw(b, raws[i - nelf]);
	memset(&st, 0, sizeof(st));
	if (err == 0)
		err = htr_builder_run(b, trace, out, &st, sizeof(st));
	progress_end(pr);
	if (err == HTR_ERR_CANCELED && stop_signal) {
		fprintf(stderr, "htr: build: %s: interrupted, nothing written\n",
			out);
		htr_builder_free(b);
		b = NULL;
		progress_die();     /* the caller sees why */
	} else if (err == HTR_ERR_DECODE) {
		/* Which image: the library's message names the trace. */
		htr_escape(img, sizeof(img), nelf ? elfs[0] : raws[0]);
		rc = fail("build", "%s (--%s %s%s)", htr_builder_last_error(b),
			  nelf ? "elf" : "raw", img,
			  nelf + nraw > 1 ? " and others" : "");
	} else if (err < 0) {
		rc = fail("build", "%s", b && htr_builder_last_error(b)[0] ?
			  htr_builder_last_error(b) : htr_errstr(err));
	} else {
		report_raw(trace, out, opts, &st, pr);
		rc = HTR_EXIT_OK;
	}
	htr_builder_free(b);
	return rc;
}

int cmd_build(int argc, char **argv)
{
	enum { O_CPU = 256, O_MTC, O_NOM, O_EAX, O_EBX, O_TID, O_SYMFS,
	       O_BUILDID, O_CHUNK, O_DECODER, O_FILTER, O_STOP, O_KCORE,
	       O_VMLINUX };
	static const struct option lopts[] = {
		{ "elf", required_argument, NULL, 'e' },
		{ "raw", required_argument, NULL, 'r' },
		{ "cpu", required_argument, NULL, O_CPU },
		{ "mtc-freq", required_argument, NULL, O_MTC },
		{ "nom-freq", required_argument, NULL, O_NOM },
		{ "cpuid-0x15-eax", required_argument, NULL, O_EAX },
		{ "cpuid-0x15-ebx", required_argument, NULL, O_EBX },
		{ "output", required_argument, NULL, 'o' },
		{ "tid", required_argument, NULL, O_TID },
		{ "symfs", required_argument, NULL, O_SYMFS },
		{ "buildid-dir", required_argument, NULL, O_BUILDID },
		{ "kcore", required_argument, NULL, O_KCORE },
		{ "vmlinux", required_argument, NULL, O_VMLINUX },
		{ "jobs", required_argument, NULL, 'j' },
		{ "chunk-size", required_argument, NULL, O_CHUNK },
		{ "decoder", required_argument, NULL, O_DECODER },
		{ "filter", required_argument, NULL, O_FILTER },
		{ "trace-stop", required_argument, NULL, O_STOP },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct htr_build_opts opts;
	struct htr_perf_build_opts po;
	struct progress pr;
	const char **elfs = NULL, **raws = NULL;
	char *out = NULL, *defout = NULL, why[1200];
	size_t nelf = 0, nraw = 0, i;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int c, quiet = 0, rc = HTR_EXIT_FAIL, kind;
	uint64_t v;

	htr_build_opts_init(&opts);
	htr_perf_build_opts_init(&po);
	opts.threads = ncpu > 1 ? (unsigned) (ncpu > 64 ? 64 : ncpu) : 1;
	elfs = calloc((size_t) argc, sizeof(*elfs));
	raws = calloc((size_t) argc, sizeof(*raws));
	if (!elfs || !raws) {
		rc = fail("build", "out of memory");
		goto done;
	}
	optind = 1;
	opterr = 0;     /* one error line, ours */
	while ((c = getopt_long(argc, argv, ":e:r:o:j:qh", lopts, NULL)) != -1) {
		const char *bad = NULL;

		switch (c) {
		case 'j':
			if (parse_u64(optarg, &v) < 0 || !v || v > 1024)
				bad = "--jobs: bad value '%s' (1 to 1024)";
			opts.threads = (unsigned) v;
			break;
		case O_CHUNK:
			if (parse_bytes(optarg, &v) < 0 || !v)
				bad = "--chunk-size: bad value '%s'";
			opts.chunk_size = v;
			break;
		case O_DECODER:
			opts.decoder = !strcmp(optarg, "block") ?
				       HTR_DECODER_BLOCK : HTR_DECODER_WALK;
			if (strcmp(optarg, "block") && strcmp(optarg, "walk"))
				bad = "--decoder: bad value '%s' (block or walk)";
			break;
		case O_FILTER: case O_STOP: {
			struct htr_addr_filter *f = &opts.filters[opts.nfilters];

			if (opts.nfilters == HTR_ADDR_FILTERS_MAX)
				bad = c == O_FILTER ? "--filter: more than 4 "
				      "ranges at '%s'" : "--trace-stop: more "
				      "than 4 ranges at '%s'";
			else if (parse_range(optarg, &f->start, &f->end) < 0 ||
				 f->end <= f->start)
				bad = c == O_FILTER ? "--filter: bad range '%s'"
				      : "--trace-stop: bad range '%s'";
			else
				f->kind = c == O_FILTER ? HTR_FILTER_TRACE :
							  HTR_FILTER_STOP;
			opts.nfilters += !bad;
			break;
		}
		case 'e': elfs[nelf++] = optarg; break;
		case 'r': raws[nraw++] = optarg; break;
		case 'o': out = optarg; break;
		case 'q': quiet = 1; break;
		case 'h':
			fputs(usage_text, stdout);
			fputs(usage_text2, stdout);
			rc = HTR_EXIT_OK;
			goto done;
		case O_CPU:
			if (parse_cpu(optarg, &opts) < 0)
				bad = "--cpu: bad value '%s'";
			break;
		case O_TID:
			if (parse_u64(optarg, &v) < 0 || v > UINT32_MAX)
				bad = "--tid: bad value '%s'";
			po.flags |= HTR_PERF_BUILD_TID;
			po.tid = (uint32_t) v;
			break;
		case O_SYMFS: po.symfs = optarg; break;
		case O_BUILDID: po.buildid_dir = optarg; break;
		case O_KCORE: po.kcore = optarg; break;
		case O_VMLINUX: po.vmlinux = optarg; break;
		case O_MTC: case O_NOM: case O_EAX: case O_EBX:
			if (parse_u64(optarg, &v) < 0 || v > UINT32_MAX ||
			    ((c == O_MTC || c == O_NOM) && v > 255))
				bad = c == O_MTC ? "--mtc-freq: bad value '%s'" :
				      c == O_NOM ? "--nom-freq: bad value '%s'" :
				      c == O_EAX ? "--cpuid-0x15-eax: bad value "
				      "'%s'" : "--cpuid-0x15-ebx: bad value '%s'";
			else if (c == O_MTC || c == O_NOM)
				*(c == O_MTC ? &opts.mtc_freq :
				  &opts.nom_freq) = (uint8_t) v;
			else
				*(c == O_EAX ? &opts.cpuid_0x15_eax :
				  &opts.cpuid_0x15_ebx) = (uint32_t) v;
			break;
		default:
			rc = option_error("build", c, argv);
			goto done;
		}
		if (bad) {
			rc = usage_error("build", bad, optarg);
			goto done;
		}
	}
	if (optind + 1 != argc) {
		rc = usage_error("build", optind == argc ? "no TRACE given"
				 : "more than one TRACE given");
		goto done;
	}
	kind = htr_perf_probe(argv[optind], nelf || nraw, why, sizeof(why));
	if (kind == 1) {
		po.build = &opts;
		po.output = out;
		po.elfs = elfs;
		po.nelfs = nelf;
		po.raws = raws;
		po.nraws = nraw;
		progress_start(&pr, quiet);
		opts.progress = progress_build;
		opts.payload = &pr;
		rc = build_perf(argv[optind], &po, &pr);
		goto done;
	}
	if (po.flags || po.symfs || po.buildid_dir) {
		rc = usage_error("build", "--tid, --symfs and --buildid-dir are "
				 "for perf.data input");
		goto done;
	}
	if (kind < 0) {
		rc = fail("build", "%s", why);
		goto done;
	}
	if (!nelf && !nraw) {
		rc = usage_error("build", "no image: give --elf or --raw");
		goto done;
	}
	if (!out && !(out = defout = default_output(argv[optind]))) {
		rc = fail("build", "out of memory");
		goto done;
	}
	if (same_file(argv[optind], out)) {
		rc = usage_error("build", "%s: the output would overwrite the "
				 "trace; give another -o", out);
		goto done;
	}
	for (i = 0; i < nelf + nraw; i++)
		if (spec_is(i < nelf ? elfs[i] : raws[i - nelf], out)) {
			rc = usage_error("build", "%s: the output would "
					 "overwrite an image file; give "
					 "another -o", out);
			goto done;
		}
	progress_start(&pr, quiet);
	opts.progress = progress_build;
	opts.payload = &pr;
	rc = build_raw(argv[optind], out, &opts, elfs, nelf, raws, nraw, &pr);
done:
	free(defout);
	free(elfs);
	free(raws);
	return rc;
}
