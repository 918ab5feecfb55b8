// libhtr-lldb: the `htr` commands inside LLDB (plugin load libhtr-lldb.so).
//
// `htr build` saves the loaded trace (SBTrace::SaveToDisk) into a temporary
// bundle, reads its JSON (per-thread raw traces, CPU) with LLDB's own JSON
// parser (SBStructuredData), takes the code image from the target's modules
// and builds one .htr per thread with libhtr.  The result is remembered for
// the session (per process) and, through an identity key stored beside each
// .htr, reused by later sessions.  `htr dump` and `htr top` print what the
// CLI's `htr dump` / `htr top` print, with function names from LLDB
// (SBTarget::ResolveLoadAddress + SBSymbolContext) where it has them.
#include <lldb/API/LLDB.h>

#include "htr/htr.h"

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <elf.h>
#include <fcntl.h>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace lldb {
__attribute__((visibility("default"))) bool
PluginInitialize(lldb::SBDebugger debugger);
}

namespace {

// ---------------------------------------------------------------- helpers

std::string fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char *f, ...)
{
	char buf[4096];
	va_list ap;

	va_start(ap, f);
	vsnprintf(buf, sizeof(buf), f, ap);
	va_end(ap);
	return buf;
}

bool parse_u64(const char *s, uint64_t *v)
{
	char *end;

	if (!s || !*s || *s == '-')
		return false;
	errno = 0;
	*v = strtoull(s, &end, 0);
	return !errno && !*end;
}

bool mkdirs(const std::string &path)
{
	std::string cur;
	size_t i = 0;

	while (i <= path.size()) {
		size_t j = path.find('/', i);

		if (j == std::string::npos)
			j = path.size();
		cur = path.substr(0, j);
		if (!cur.empty() && mkdir(cur.c_str(), 0777) < 0 &&
		    errno != EEXIST)
			return false;
		i = j + 1;
	}
	struct stat st;
	return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// CPU @cpu's Intel PT at @path into @cw in 1 MiB pieces: the library
// spools it to a file, so a trace larger than memory builds.  Returns 0,
// HTR_ERR_IO (cannot read @path), or htr_cpuwide_add_trace()'s error.
int add_trace_file(struct htr_cpuwide *cw, uint32_t cpu,
		   const std::string &path)
{
	std::ifstream in(path, std::ios::binary);
	std::vector<char> buf(1u << 20);
	int rc = 0;

	if (!in)
		return HTR_ERR_IO;
	while (rc == 0 && in) {
		in.read(buf.data(), (std::streamsize) buf.size());
		if (in.gcount() > 0)
			rc = htr_cpuwide_add_trace(cw, cpu, buf.data(),
						   (size_t) in.gcount());
	}
	return rc == 0 && in.bad() ? HTR_ERR_IO : rc;
}

bool read_file(const std::string &path, std::string *out)
{
	std::ifstream in(path, std::ios::binary);
	std::ostringstream ss;

	if (!in)
		return false;
	ss << in.rdbuf();
	*out = ss.str();
	return true;
}

void rm_rf(const std::string &dir)
{
	// The bundle SaveToDisk wrote: trace.json, threads/*, cpus/*, ...
	std::string cmd = "rm -rf '" + dir + "'";
	if (dir.find('\'') == std::string::npos && !dir.empty())
		(void) !system(cmd.c_str());
}

// 64-bit FNV-1a over words: the identity key of a trace's bytes.
uint64_t hash_bytes(uint64_t h, const unsigned char *p, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t w;

		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	for (; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

bool hash_file(const std::string &path, uint64_t *h, uint64_t *size)
{
	int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
	struct stat st;

	if (fd < 0)
		return false;
	if (fstat(fd, &st) < 0) {
		close(fd);
		return false;
	}
	*size = (uint64_t) st.st_size;
	*h = 0xcbf29ce484222325ull;
	if (st.st_size > 0) {
		void *m = mmap(nullptr, (size_t) st.st_size, PROT_READ,
			       MAP_PRIVATE, fd, 0);
		if (m == MAP_FAILED) {
			close(fd);
			return false;
		}
		*h = hash_bytes(*h, (const unsigned char *) m,
				(size_t) st.st_size);
		munmap(m, (size_t) st.st_size);
	}
	close(fd);
	return true;
}

// Lowest PT_LOAD p_vaddr of an ELF64 file (libhtr's "@BASE" is where it
// lands).  false if not a readable ELF64.
bool elf_lowest_load(const std::string &path, uint64_t *vaddr)
{
	std::ifstream in(path, std::ios::binary);
	Elf64_Ehdr eh;
	bool found = false;

	if (!in || !in.read((char *) &eh, sizeof(eh)) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(Elf64_Phdr))
		return false;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;

		in.seekg((std::streamoff) (eh.e_phoff + i * sizeof(ph)));
		if (!in.read((char *) &ph, sizeof(ph)))
			return false;
		if (ph.p_type == PT_LOAD && (!found || ph.p_vaddr < *vaddr)) {
			*vaddr = ph.p_vaddr;
			found = true;
		}
	}
	return found;
}

std::string sd_string(lldb::SBStructuredData d)
{
	size_t n = d.GetStringValue(nullptr, 0);
	std::string s(n + 1, '\0');

	d.GetStringValue(&s[0], s.size());
	s.resize(n);
	return s;
}

// An integer of a bundle: a JSON number, or a string in decimal or hex
// (LLDB writes 64-bit values that way).  false if absent or malformed.
bool sd_u64(lldb::SBStructuredData d, uint64_t *v)
{
	if (!d.IsValid())
		return false;
	if (d.GetType() == lldb::eStructuredDataTypeString)
		return parse_u64(sd_string(d).c_str(), v);
	if (d.GetType() == lldb::eStructuredDataTypeSignedInteger) {
		int64_t i = d.GetSignedIntegerValue(-1);

		if (i < 0)
			return false;
		*v = (uint64_t) i;
		return true;
	}
	if (d.GetType() != lldb::eStructuredDataTypeInteger)
		return false;
	*v = d.GetUnsignedIntegerValue(0);
	return true;
}

// ------------------------------------------------------- session state

struct ThreadHtr {
	uint64_t tid;
	std::string path;
	bool per_cpu = false;      // built from per-CPU traces: no sync points
};

struct Built {
	std::string target_path;   // the executable, to notice a new target
	std::vector<ThreadHtr> threads;
};

// Per process (SBProcess::GetUniqueID), for the session.
std::map<uint32_t, Built> g_built;

struct Module {
	std::string path;
	uint64_t base;     // where the lowest PT_LOAD lands
	uint64_t size, mtime;
};

// The current target, process and trace, or an error in @result.
bool current(lldb::SBDebugger &dbg, lldb::SBCommandReturnObject &result,
	     lldb::SBTarget *target, lldb::SBProcess *process)
{
	*target = dbg.GetSelectedTarget();
	if (!target->IsValid()) {
		result.SetError("no target: load a trace first "
				"(trace load BUNDLE.json)");
		return false;
	}
	*process = target->GetProcess();
	if (!process->IsValid()) {
		result.SetError("no process: load a trace first "
				"(trace load BUNDLE.json)");
		return false;
	}
	return true;
}

// The target's loaded modules whose files can be read into @mods; false
// (the error set in @result) when there is none.
bool target_modules(lldb::SBTarget &target,
		    lldb::SBCommandReturnObject &result,
		    std::vector<Module> &mods)
{
	mods.clear();

	for (uint32_t i = 0; i < target.GetNumModules(); i++) {
		lldb::SBModule m = target.GetModuleAtIndex(i);
		char path[4096];
		lldb::SBAddress hdr = m.GetObjectFileHeaderAddress();
		uint64_t load, file, low;
		struct stat st;

		if (!m.GetFileSpec().GetPath(path, sizeof(path)))
			continue;
		if (!hdr.IsValid())
			continue;
		load = hdr.GetLoadAddress(target);
		file = hdr.GetFileAddress();
		if (load == LLDB_INVALID_ADDRESS || file == LLDB_INVALID_ADDRESS)
			continue;   // not loaded
		if (!elf_lowest_load(path, &low) || stat(path, &st) < 0)
			continue;
		mods.push_back({ path, low + (load - file), (uint64_t) st.st_size,
				 (uint64_t) st.st_mtime });
	}
	if (mods.empty())
		result.SetError("htr build: the target has no loaded module "
				"whose file can be read");
	return !mods.empty();
}

// ---------------------------------------------------------- htr build

const char build_help[] =
	"Build one .htr file per thread of the loaded Intel PT trace.";
const char build_syntax[] =
	"htr build [--thread TID] [-o DIR]\n"
	"htr build --perf FILE.data [--thread TID] [-o OUT]\n"
	"\n"
	"Save the loaded trace (trace load BUNDLE.json) to a temporary bundle,\n"
	"decode each thread's raw Intel PT trace with libhtr, with the code of\n"
	"the target's modules at their load addresses and the bundle's CPU, and\n"
	"write DIR/thread-TID.htr.  DIR defaults to\n"
	"$XDG_CACHE_HOME/htr-lldb/KEY (~/.cache/htr-lldb/KEY), KEY a hash of\n"
	"the traces and modules.  Beside each file, thread-TID.htr.key records\n"
	"the identity of its input (trace bytes, CPU, module paths, load\n"
	"addresses, sizes and times): a later `htr build` on the same input\n"
	"reuses the file instead of decoding again, and says so.  The result\n"
	"is remembered for the session: `htr dump` and `htr top` read it.\n"
	"\n"
	"  -t, --thread TID  build only this thread\n"
	"  -o, --output DIR  write the .htr files into DIR\n"
	"\n"
	"Per-CPU traces (process trace start --per-cpu-tracing; bundles with\n"
	"\"cpus\"): every CPU's trace is decoded once and cut where the CPU's\n"
	"context-switch trace says another thread ran; each thread of the\n"
	"process (the bundle's thread list) gets DIR/thread-TID.htr from its\n"
	"pieces, as the CLI's `htr build` does for a CPU-wide perf.data, with\n"
	"times converted by the bundle's tscPerfZeroConversion.  A thread with\n"
	"no traced instruction gets no file.  One key, DIR/cpus.key, covers\n"
	"the whole build.  These files have no sync points (their pieces come\n"
	"from several streams): `htr goto` cannot seek in them.\n"
	"\n"
	"With --perf FILE.data, no trace need be loaded: the perf.data (perf\n"
	"record -e intel_pt//u, htr record) is built by libhtr (htr/perf.h)\n"
	"exactly as the CLI's `htr build FILE.data` builds it: one .htr per\n"
	"thread with trace, the code from the recorded mappings, OUT as the\n"
	"CLI's -o (default: FILE.TID.htr beside it; DIR/, a pattern with %t\n"
	"for the tid, NAME.htr for one thread).  The files are listed; read\n"
	"them with the CLI (htr dump FILE.htr).\n";

// One CPU of a per-CPU bundle.
struct SavedCpu {
	uint32_t id;
	std::string ipt, switches;   // files
};

// The loaded trace saved to a temporary bundle (removed with this).
struct Saved {
	std::string tmp;
	int cpu_family = 0, cpu_model = 0, cpu_stepping = 0;
	std::vector<std::pair<uint64_t, std::string>> traces;   // tid, file
	// Per-CPU bundles: the process, its threads, the CPUs and perf's
	// TSC conversion.
	uint64_t pid = 0;
	std::vector<uint64_t> tids;
	std::vector<SavedCpu> cpus;
	uint64_t time_shift = 0, time_mult = 0, time_zero = 0;
	~Saved()
	{
		if (!tmp.empty())
			rm_rf(tmp);
	}
};

// Save @trace (SBTrace::SaveToDisk) and read its description: the CPU and
// each thread's raw trace file.  false with the error in @result.
bool save_trace(lldb::SBTrace &trace, const char *cmd,
		lldb::SBCommandReturnObject &result, Saved *s)
{
	char tmpl[] = "/tmp/htr-lldb-XXXXXX";
	if (!mkdtemp(tmpl)) {
		result.SetError(fmt("htr %s: cannot create a temporary "
				    "directory: %s", cmd,
				    strerror(errno)).c_str());
		return false;
	}
	s->tmp = tmpl;

	lldb::SBError err;
	lldb::SBFileSpec desc = trace.SaveToDisk(err,
						 lldb::SBFileSpec(tmpl), false);
	if (err.Fail()) {
		result.SetError(fmt("htr %s: saving the trace failed: %s", cmd,
				    err.GetCString()).c_str());
		return false;
	}
	char descpath[4096];
	desc.GetPath(descpath, sizeof(descpath));
	std::string json;
	if (!read_file(descpath, &json)) {
		result.SetError(fmt("htr %s: cannot read %s", cmd,
				    descpath).c_str());
		return false;
	}
	lldb::SBStructuredData root;
	err = root.SetFromJSON(json.c_str());
	if (err.Fail() || !root.IsValid()) {
		result.SetError(fmt("htr %s: bad trace description %s: %s", cmd,
				    descpath, err.GetCString()).c_str());
		return false;
	}
	if (sd_string(root.GetValueForKey("type")) != "intel-pt") {
		result.SetError(fmt("htr %s: not an Intel PT trace", cmd).c_str());
		return false;
	}
	lldb::SBStructuredData cpus = root.GetValueForKey("cpus");
	for (size_t i = 0; cpus.IsValid() && i < cpus.GetSize(); i++) {
		lldb::SBStructuredData c = cpus.GetItemAtIndex(i);
		SavedCpu sc;
		uint64_t id;

		sc.ipt = sd_string(c.GetValueForKey("iptTrace"));
		sc.switches = sd_string(c.GetValueForKey("contextSwitchTrace"));
		if (!sd_u64(c.GetValueForKey("id"), &id) || id > UINT32_MAX ||
		    sc.ipt.empty() || sc.switches.empty()) {
			result.SetError(fmt("htr %s: bad trace description %s: "
					    "cpus[%zu] lacks its id, iptTrace "
					    "or contextSwitchTrace", cmd,
					    descpath, i).c_str());
			return false;
		}
		sc.id = (uint32_t) id;
		if (sc.ipt[0] != '/')
			sc.ipt = s->tmp + "/" + sc.ipt;
		if (sc.switches[0] != '/')
			sc.switches = s->tmp + "/" + sc.switches;
		s->cpus.push_back(sc);
	}
	if (!s->cpus.empty()) {
		// LLDB writes timeZero as a string (it may not fit a double).
		lldb::SBStructuredData conv =
			root.GetValueForKey("tscPerfZeroConversion");
		if (!sd_u64(conv.GetValueForKey("timeShift"), &s->time_shift) ||
		    !sd_u64(conv.GetValueForKey("timeMult"), &s->time_mult) ||
		    !sd_u64(conv.GetValueForKey("timeZero"), &s->time_zero) ||
		    s->time_shift > 63 || !s->time_mult) {
			result.SetError(fmt("htr %s: bad trace description %s: "
					    "per-CPU traces need a valid "
					    "tscPerfZeroConversion", cmd,
					    descpath).c_str());
			return false;
		}
	}
	lldb::SBStructuredData cpu = root.GetValueForKey("cpuInfo");
	if (cpu.IsValid() && sd_string(cpu.GetValueForKey("vendor")) ==
	    "GenuineIntel") {
		s->cpu_family = (int) cpu.GetValueForKey("family")
					 .GetUnsignedIntegerValue(0);
		s->cpu_model = (int) cpu.GetValueForKey("model")
					.GetUnsignedIntegerValue(0);
		s->cpu_stepping = (int) cpu.GetValueForKey("stepping")
					   .GetUnsignedIntegerValue(0);
	}
	// This process's threads (the bundle is one process: the target's).
	lldb::SBStructuredData procs = root.GetValueForKey("processes");
	for (size_t p = 0; procs.IsValid() && p < procs.GetSize(); p++) {
		lldb::SBStructuredData th = procs.GetItemAtIndex(p)
						 .GetValueForKey("threads");
		if (p == 0)
			sd_u64(procs.GetItemAtIndex(p).GetValueForKey("pid"),
			       &s->pid);
		for (size_t t = 0; th.IsValid() && t < th.GetSize(); t++) {
			lldb::SBStructuredData e = th.GetItemAtIndex(t);
			uint64_t tid = e.GetValueForKey("tid")
					.GetUnsignedIntegerValue(0);
			std::string f = sd_string(e.GetValueForKey("iptTrace"));

			if (tid && p == 0)
				s->tids.push_back(tid);
			if (f.empty())
				continue;
			if (f[0] != '/')
				f = s->tmp + "/" + f;
			s->traces.emplace_back(tid, f);
		}
	}
	return true;
}

// DIR for `htr build`: @outdir, or the cache's directory for identity
// @all; created and made absolute.  false with the error in @result.
bool output_dir(std::string *outdir, uint64_t all,
		lldb::SBCommandReturnObject &result)
{
	if (outdir->empty()) {
		const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
		std::string cache = xdg && *xdg ? xdg :
				    std::string(home && *home ? home : "/tmp") +
				    "/.cache";
		*outdir = cache + fmt("/htr-lldb/%016" PRIx64, all);
	}
	if (!mkdirs(*outdir)) {
		result.SetError(fmt("htr build: cannot create %s: %s",
				    outdir->c_str(), strerror(errno)).c_str());
		return false;
	}
	char *abs = realpath(outdir->c_str(), nullptr);
	if (abs) {
		*outdir = abs;
		free(abs);
	}
	return true;
}

// The identity key common to every thread: the CPU and the modules.
std::string common_key(const struct htr_build_opts &opts,
		       const std::vector<Module> &mods)
{
	std::string common = fmt("htr-lldb 1\ncpu %d/%d/%d\n", opts.cpu_family,
				 opts.cpu_model, opts.cpu_stepping);
	for (const Module &m : mods)
		common += fmt("module %s 0x%" PRIx64 " %" PRIu64 " %" PRIu64 "\n",
			      m.path.c_str(), m.base, m.size, m.mtime);
	return common;
}

// Remember @built for @process; with --thread, keep what an earlier build
// remembered for the other threads.
void remember(lldb::SBProcess &process, Built &built, bool have_tid,
	      uint64_t only_tid)
{
	if (have_tid) {
		auto it = g_built.find(process.GetUniqueID());
		if (it != g_built.end() &&
		    it->second.target_path == built.target_path)
			for (const ThreadHtr &t : it->second.threads)
				if (t.tid != only_tid)
					built.threads.push_back(t);
	}
	g_built[process.GetUniqueID()] = built;
}

// PERF_RECORD_SWITCH_CPU_WIDE and its misc bit (<linux/perf_event.h>).
const uint32_t kPerfSwitchCpuWide = 15;
const uint16_t kPerfSwitchOut = 1 << 13;

// Feed CPU @cpu's context-switch trace @data (perf_event records, as LLDB
// saves them: sample_type TID|TIME with sample_id_all, so after the
// 8-byte header come next_prev_pid/tid, then the trailer's pid, tid and
// time) to @cw.  Other record types (lost, throttle) are skipped.  false
// with a one-line reason in @why on a record that does not fit.
bool add_switches(struct htr_cpuwide *cw, uint32_t cpu, const std::string &data,
		  std::string *why)
{
	const unsigned char *p = (const unsigned char *) data.data();
	size_t n = data.size(), at = 0;

	while (at < n) {
		uint32_t type, v[4];
		uint16_t misc, size;
		uint64_t time;

		if (n - at < 8) {
			*why = fmt("a record header cut short at offset %zu", at);
			return false;
		}
		memcpy(&type, p + at, 4);
		memcpy(&misc, p + at + 4, 2);
		memcpy(&size, p + at + 6, 2);
		if (size < 8 || size > n - at) {
			*why = fmt("a record of %u bytes at offset %zu (%zu "
				   "left)", size, at, n - at);
			return false;
		}
		if (type == kPerfSwitchCpuWide) {
			if (size < 32) {
				*why = fmt("a context-switch record of %u "
					   "bytes at offset %zu (32 at least)",
					   size, at);
				return false;
			}
			memcpy(v, p + at + 8, 16);
			memcpy(&time, p + at + 24, 8);

			struct htr_switch sw;
			memset(&sw, 0, sizeof(sw));
			sw.size = sizeof(sw);
			sw.cpu = cpu;
			sw.flags = misc & kPerfSwitchOut ? HTR_SWITCH_OUT : 0;
			sw.time = time;
			sw.next_pid = v[0];
			sw.next_tid = v[1];
			sw.pid = v[2];
			sw.tid = v[3];
			int rc = htr_cpuwide_add_switch(cw, &sw);
			if (rc < 0) {
				*why = htr_errstr(rc);
				return false;
			}
		}
		at += size;
	}
	return true;
}

// `htr build` of a per-CPU bundle (@saved has "cpus"): one decode of every
// CPU's trace through libhtr's CPU-wide builder, one .htr per thread.
bool build_cpus(lldb::SBTarget &target, lldb::SBProcess &process,
		const Saved &saved, const struct htr_build_opts &opts,
		std::string outdir, bool have_tid, uint64_t only_tid,
		lldb::SBCommandReturnObject &result)
{
	std::vector<uint64_t> tids;
	for (uint64_t t : saved.tids)
		if ((!have_tid || t == only_tid) && t <= UINT32_MAX &&
		    std::find(tids.begin(), tids.end(), t) == tids.end())
			tids.push_back(t);
	if (tids.empty()) {
		result.SetError(have_tid ?
				fmt("htr build: thread %" PRIu64 " is not a "
				    "thread of the traced process",
				    only_tid).c_str() :
				"htr build: the bundle lists no thread of the "
				"traced process");
		return false;
	}
	std::vector<Module> mods;
	if (!target_modules(target, result, mods))
		return false;

	// Identity: modules, CPU, conversion, every CPU's two traces and the
	// threads asked for; one key for the whole build (every thread's
	// tree depends on every CPU).
	std::string key = common_key(opts, mods);
	key += fmt("per-cpu pid %" PRIu64 " conversion %" PRIu64 "/%" PRIu64
		   "/%" PRIu64 "\n", saved.pid, saved.time_shift,
		   saved.time_mult, saved.time_zero);
	for (const SavedCpu &c : saved.cpus) {
		uint64_t h1, n1, h2, n2;

		if (!hash_file(c.ipt, &h1, &n1) ||
		    !hash_file(c.switches, &h2, &n2)) {
			result.SetError(fmt("htr build: cannot read the traces "
					    "of cpu %u", c.id).c_str());
			return false;
		}
		key += fmt("cpu %u trace %" PRIu64 " %016" PRIx64 " switches %"
			   PRIu64 " %016" PRIx64 "\n", c.id, n1, h1, n2, h2);
	}
	key += "threads";
	for (uint64_t t : tids)
		key += fmt(" %" PRIu64, t);
	key += "\n";
	if (!output_dir(&outdir, hash_bytes(0xcbf29ce484222325ull,
					    (const unsigned char *) key.data(),
					    key.size()), result))
		return false;

	Built built;
	char exe[4096] = "";
	target.GetExecutable().GetPath(exe, sizeof(exe));
	built.target_path = exe;
	std::string keyfile = outdir + "/cpus.key", old, out;

	// Reuse: the key matches and every file it lists opens.
	if (read_file(keyfile, &old) && old.compare(0, key.size(), key) == 0) {
		std::istringstream rest(old.substr(key.size()));
		std::string word;
		bool ok = (rest >> word) && word == "built";
		uint64_t tid;

		while (ok && rest >> tid) {
			std::string htr = outdir + fmt("/thread-%" PRIu64 ".htr",
						       tid);
			struct htr_file *f = nullptr;
			struct htr_file_info fi;

			if (htr_file_open(&f, htr.c_str(), nullptr) < 0) {
				ok = false;
			} else {
				fi.size = sizeof(fi);
				htr_file_info(f, &fi, sizeof(fi));
				out += fmt("thread %" PRIu64 ": reused %s "
					   "(identity matches: %" PRIu64
					   " instructions, %" PRIu64 " blocks)\n",
					   tid, htr.c_str(), fi.ninsns,
					   fi.nblocks);
				built.threads.push_back({ tid, htr, true });
			}
			htr_file_close(f);
		}
		if (ok) {
			remember(process, built, have_tid, only_tid);
			result.Printf("%s", out.c_str());
			result.SetStatus(lldb::eReturnStatusSuccessFinishResult);
			return true;
		}
		out.clear();
		built.threads.clear();
	}
	unlink(keyfile.c_str());

	struct htr_builder *b = nullptr;
	struct htr_cpuwide *cw = nullptr;
	std::string err;
	int rc = htr_builder_alloc(&b, &opts);
	if (rc == 0)
		rc = htr_cpuwide_alloc(&cw, b);
	for (size_t k = 0; rc == 0 && k < mods.size(); k++)
		rc = htr_builder_add_elf_at(b, mods[k].path.c_str(),
					    &mods[k].base);
	if (rc == 0)
		rc = htr_cpuwide_set_clock(cw, (uint32_t) saved.time_shift,
					   saved.time_mult, saved.time_zero);
	for (size_t i = 0; rc == 0 && i < saved.cpus.size(); i++) {
		const SavedCpu &c = saved.cpus[i];
		std::string sw, why;

		if (!read_file(c.switches, &sw)) {
			err = fmt("cannot read the traces of cpu %u", c.id);
			rc = HTR_ERR_IO;
		} else if (!add_switches(cw, c.id, sw, &why)) {
			err = fmt("cpu %u: corrupt context-switch trace: %s",
				  c.id, why.c_str());
			rc = HTR_ERR_CORRUPT;
		} else if ((rc = add_trace_file(cw, c.id, c.ipt)) ==
			   HTR_ERR_IO && !htr_builder_last_error(b)[0]) {
			err = fmt("cannot read the traces of cpu %u", c.id);
		}
	}
	std::vector<std::string> paths;
	for (size_t i = 0; rc == 0 && i < tids.size(); i++) {
		struct htr_thread_info ti;

		memset(&ti, 0, sizeof(ti));
		ti.size = sizeof(ti);
		ti.pid = (uint32_t) saved.pid;
		ti.tid = (uint32_t) tids[i];
		ti.flags = HTR_THREAD_NS;
		ti.time_shift = (uint32_t) saved.time_shift;
		ti.time_mult = saved.time_mult;
		ti.time_zero = saved.time_zero;
		paths.push_back(outdir + fmt("/thread-%" PRIu64 ".htr", tids[i]));
		rc = htr_cpuwide_add_thread(cw, &ti, paths.back().c_str());
	}
	if (rc == 0)
		rc = htr_cpuwide_run(cw);
	if (rc < 0) {
		if (err.empty())
			err = b && htr_builder_last_error(b)[0] ?
			      htr_builder_last_error(b) : htr_errstr(rc);
		htr_cpuwide_free(cw);
		htr_builder_free(b);
		result.SetError(fmt("htr build: %s", err.c_str()).c_str());
		return false;
	}

	std::string list = "built";
	for (size_t i = 0; i < tids.size(); i++) {
		struct htr_build_stats st;

		if (htr_cpuwide_thread_stats(cw, (uint32_t) tids[i], &st,
					     sizeof(st)) < 0) {
			out += fmt("thread %" PRIu64 ": no traced instruction "
				   "on any CPU: no file\n", tids[i]);
			continue;
		}
		out += fmt("thread %" PRIu64 ": built %s (%" PRIu64
			   " instructions, %" PRIu64 " blocks, %" PRIu64
			   " gaps; per-CPU)\n", tids[i], paths[i].c_str(),
			   st.insns, st.blocks, st.gaps);
		if (st.timing_unusable)
			out += fmt("thread %" PRIu64 ": note: the trace has "
				   "MTC/CYC packets but the bundle gives no "
				   "timing parameters: time moves only at each "
				   "PSB and switch\n", tids[i]);
		built.threads.push_back({ tids[i], paths[i], true });
		list += fmt(" %" PRIu64, tids[i]);
	}
	struct htr_cpuwide_info ci;
	if (htr_cpuwide_info(cw, &ci, sizeof(ci)) == 0 && ci.insns_unknown)
		out += fmt("note: %" PRIu64 " instructions ran when no "
			   "context switch says which thread was on the CPU: "
			   "left out\n", ci.insns_unknown);
	htr_cpuwide_free(cw);
	htr_builder_free(b);
	{
		std::ofstream k(keyfile, std::ios::binary | std::ios::trunc);
		k << key << list << "\n";
	}
	remember(process, built, have_tid, only_tid);
	result.Printf("%s", out.c_str());
	result.SetStatus(lldb::eReturnStatusSuccessFinishResult);
	return true;
}

// htr build --perf FILE: the library's perf.data build (htr/perf.h).
struct PerfRun {
	std::string out;   // what the command prints
};

void perf_warning(int kind, const char *text, void *payload)
{
	PerfRun *r = static_cast<PerfRun *>(payload);

	r->out += fmt("%s: %s\n", kind >= HTR_PERF_NOTE ? "note" : "warning",
		      text);
}

int perf_thread_done(const struct htr_perf_result *t, void *payload)
{
	PerfRun *r = static_cast<PerfRun *>(payload);

	if (t->error)
		r->out += fmt("thread %u: failed: %s\n", t->tid, t->message);
	else
		r->out += fmt("thread %u: built %s (%" PRIu64 " instructions, %"
			      PRIu64 " blocks, %" PRIu64 " gaps)\n", t->tid,
			      t->out, t->stats->insns, t->stats->blocks,
			      t->stats->gaps);
	return 0;
}

bool build_perf(const char *path, const char *output, bool have_tid,
		uint64_t tid, lldb::SBCommandReturnObject &result)
{
	struct htr_perf *pf = nullptr;
	struct htr_build_opts opts;
	struct htr_perf_build_opts po;
	PerfRun run;

	if (have_tid && tid > UINT32_MAX) {
		result.SetError(fmt("htr build: --thread: bad value '%" PRIu64
				    "'", tid).c_str());
		return false;
	}
	htr_build_opts_init(&opts);
	opts.no_fsync = 1;
	{
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		opts.threads = n > 1 ? (unsigned) (n > 64 ? 64 : n) : 1;
	}
	htr_perf_build_opts_init(&po);
	po.build = &opts;
	po.output = output;
	if (have_tid) {
		po.flags |= HTR_PERF_BUILD_TID;
		po.tid = (uint32_t) tid;
	}
	po.thread_done = perf_thread_done;
	po.warning = perf_warning;
	po.payload = &run;
	int rc = htr_perf_open(&pf, path);
	if (rc == 0)
		rc = htr_perf_build(pf, &po);
	if (rc < 0) {
		std::string msg = htr_perf_last_error(pf);
		if (msg.empty())
			msg = htr_errstr(rc);
		htr_perf_close(pf);
		result.Printf("%s", run.out.c_str());
		result.SetError(fmt("htr build: %s", msg.c_str()).c_str());
		return false;
	}
	htr_perf_close(pf);
	result.Printf("%s", run.out.c_str());
	result.SetStatus(lldb::eReturnStatusSuccessFinishResult);
	return true;
}

class BuildCmd : public lldb::SBCommandPluginInterface {
public:
	bool DoExecute(lldb::SBDebugger dbg, char **argv,
		       lldb::SBCommandReturnObject &result) override;
};

bool BuildCmd::DoExecute(lldb::SBDebugger dbg, char **argv,
			 lldb::SBCommandReturnObject &result)
{
	std::string outdir, perf;
	uint64_t only_tid = 0;
	bool have_tid = false, have_out = false;

	for (int i = 0; argv && argv[i]; i++) {
		std::string a = argv[i];

		if (a == "--perf" && argv[i + 1]) {
			perf = argv[++i];
		} else if ((a == "-o" || a == "--output") && argv[i + 1]) {
			outdir = argv[++i];
			have_out = true;
		} else if ((a == "-t" || a == "--thread") && argv[i + 1]) {
			if (!parse_u64(argv[++i], &only_tid)) {
				result.SetError(fmt("htr build: --thread: bad "
						    "value '%s'", argv[i]).c_str());
				return false;
			}
			have_tid = true;
		} else {
			result.SetError(fmt("htr build: unexpected argument "
					    "'%s' (see: help htr build)",
					    argv[i]).c_str());
			return false;
		}
	}

	if (!perf.empty())
		return build_perf(perf.c_str(), have_out ? outdir.c_str() :
				  nullptr, have_tid, only_tid, result);

	lldb::SBTarget target;
	lldb::SBProcess process;
	if (!current(dbg, result, &target, &process))
		return false;
	lldb::SBTrace trace = target.GetTrace();
	if (!trace.IsValid()) {
		result.SetError("no trace loaded: load one with "
				"'trace load BUNDLE.json' (live tracing with "
				"'process trace start' is saved the same way)");
		return false;
	}

	// The raw traces: save the bundle and read its description.
	Saved saved;
	if (!save_trace(trace, "build", result, &saved))
		return false;
	struct htr_build_opts opts;
	htr_build_opts_init(&opts);
	opts.no_fsync = 1;
	// Decode on every processor, as htr build does: the file is the
	// same as one thread's.
	{
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		opts.threads = n > 1 ? (unsigned) (n > 64 ? 64 : n) : 1;
	}
	opts.cpu_family = saved.cpu_family;
	opts.cpu_model = saved.cpu_model;
	opts.cpu_stepping = saved.cpu_stepping;
	if (!saved.cpus.empty())
		return build_cpus(target, process, saved, opts, outdir, have_tid,
				  only_tid, result);
	std::vector<std::pair<uint64_t, std::string>> traces;   // tid, file
	for (auto &tr : saved.traces)
		if (!have_tid || tr.first == only_tid)
			traces.push_back(tr);
	if (traces.empty()) {
		result.SetError(have_tid ?
				fmt("htr build: thread %" PRIu64 " has no trace",
				    only_tid).c_str() :
				"htr build: the trace holds no per-thread trace");
		return false;
	}

	std::vector<Module> mods;
	if (!target_modules(target, result, mods))
		return false;

	// Identity: modules and CPU, then each trace's bytes.
	std::string common = common_key(opts, mods);
	std::vector<std::string> keys;
	uint64_t all = hash_bytes(0xcbf29ce484222325ull,
				  (const unsigned char *) common.data(),
				  common.size());
	for (auto &tr : traces) {
		uint64_t h, size;

		if (!hash_file(tr.second, &h, &size)) {
			result.SetError(fmt("htr build: cannot read the trace of "
					    "thread %" PRIu64, tr.first).c_str());
			return false;
		}
		keys.push_back(common + fmt("thread %" PRIu64 " trace %" PRIu64
					    " %016" PRIx64 "\n", tr.first, size, h));
		all = hash_bytes(all, (const unsigned char *) keys.back().data(),
				 keys.back().size());
	}
	if (!output_dir(&outdir, all, result))
		return false;

	Built built;
	char exe[4096] = "";
	target.GetExecutable().GetPath(exe, sizeof(exe));
	built.target_path = exe;
	std::string out;
	for (size_t i = 0; i < traces.size(); i++) {
		uint64_t tid = traces[i].first;
		std::string htr = outdir + fmt("/thread-%" PRIu64 ".htr", tid);
		std::string keyfile = htr + ".key", old;
		struct htr_file *f = nullptr;

		// Reuse: same identity key, and the file opens.
		if (read_file(keyfile, &old) && old == keys[i] &&
		    htr_file_open(&f, htr.c_str(), nullptr) == 0) {
			struct htr_file_info fi;
			fi.size = sizeof(fi);
			htr_file_info(f, &fi, sizeof(fi));
			out += fmt("thread %" PRIu64 ": reused %s (identity "
				   "matches: %" PRIu64 " instructions, %" PRIu64
				   " blocks)\n", tid, htr.c_str(), fi.ninsns,
				   fi.nblocks);
			htr_file_close(f);
			built.threads.push_back({ tid, htr });
			continue;
		}
		htr_file_close(f);
		unlink(keyfile.c_str());

		struct htr_builder *b = nullptr;
		struct htr_build_stats st;
		int rc = htr_builder_alloc(&b, &opts);
		for (size_t k = 0; rc == 0 && k < mods.size(); k++)
			rc = htr_builder_add_elf_at(b, mods[k].path.c_str(),
						    &mods[k].base);
		if (rc == 0)
			rc = htr_builder_run(b, traces[i].second.c_str(),
					     htr.c_str(), &st, sizeof(st));
		if (rc < 0) {
			std::string msg = b ? htr_builder_last_error(b) : "";
			if (msg.empty())
				msg = htr_errstr(rc);
			htr_builder_free(b);
			result.SetError(fmt("htr build: thread %" PRIu64 ": %s",
					    tid, msg.c_str()).c_str());
			return false;
		}
		htr_builder_free(b);
		{
			std::ofstream k(keyfile, std::ios::binary | std::ios::trunc);
			k << keys[i];
		}
		out += fmt("thread %" PRIu64 ": built %s (%" PRIu64
			   " instructions, %" PRIu64 " blocks, %" PRIu64
			   " gaps)\n", tid, htr.c_str(), st.insns, st.blocks,
			   st.gaps);
		if (st.timing_unusable)
			out += fmt("thread %" PRIu64 ": note: the trace has "
				   "MTC/CYC packets but the bundle gives no "
				   "timing parameters: time moves only at each "
				   "PSB\n", tid);
		built.threads.push_back({ tid, htr });
	}
	remember(process, built, have_tid, only_tid);
	result.Printf("%s", out.c_str());
	result.SetStatus(lldb::eReturnStatusSuccessFinishResult);
	return true;
}

// ----------------------------------------------- reading a built .htr

// The .htr of @tid (or the selected thread) of the current process.
bool open_built(lldb::SBDebugger &dbg, lldb::SBCommandReturnObject &result,
		const char *cmd, bool have_tid, uint64_t tid,
		lldb::SBTarget *target, struct htr_file **f,
		uint64_t *tid_out = nullptr, bool *per_cpu = nullptr)
{
	lldb::SBProcess process;

	*f = nullptr;
	if (!current(dbg, result, target, &process))
		return false;
	if (!target->GetTrace().IsValid()) {
		result.SetError("no trace loaded: load one with "
				"'trace load BUNDLE.json', then 'htr build'");
		return false;
	}
	auto it = g_built.find(process.GetUniqueID());
	if (it == g_built.end()) {
		result.SetError(fmt("htr %s: no .htr for this trace yet: run "
				    "'htr build' first", cmd).c_str());
		return false;
	}
	if (!have_tid) {
		lldb::SBThread th = process.GetSelectedThread();
		tid = th.IsValid() ? th.GetThreadID() : it->second.threads[0].tid;
	}
	for (const ThreadHtr &t : it->second.threads) {
		if (t.tid != tid)
			continue;
		int rc = htr_file_open(f, t.path.c_str(), nullptr);
		if (tid_out)
			*tid_out = tid;
		if (per_cpu)
			*per_cpu = t.per_cpu;
		if (rc < 0) {
			result.SetError(fmt("htr %s: %s", cmd, *f ?
					    htr_file_last_error(*f) :
					    htr_errstr(rc)).c_str());
			htr_file_close(*f);
			*f = nullptr;
			return false;
		}
		return true;
	}
	result.SetError(fmt("htr %s: no .htr for thread %" PRIu64 " (built: "
			    "run 'htr build' for it)", cmd, tid).c_str());
	return false;
}

bool open_an(lldb::SBCommandReturnObject &result, const char *cmd,
	     struct htr_file *f, struct htr_analysis **an)
{
	int rc = htr_analysis_open(an, f, nullptr);

	if (rc < 0) {
		result.SetError(fmt("htr %s: %s", cmd, *an ?
				    htr_analysis_last_error(*an) :
				    htr_errstr(rc)).c_str());
		return false;
	}
	return true;
}

// Function names from LLDB, per entry address; libhtr's where LLDB has
// none.
class Namer {
public:
	Namer(lldb::SBTarget t, struct htr_analysis *an) : target_(t), an_(an) {}

	// Name of block @bi: its function's, or for a late block "~" and the
	// function containing the first address it ran (as the CLI names it).
	const std::string &name(const struct htr_block_info &bi)
	{
		static const std::string unknown = "?";
		uint32_t block = bi.index, func = bi.func;
		uint64_t entry = bi.entry;

		if (func == HTR_NONE && (bi.flags & HTR_BLOCK_LATE) &&
		    bi.anchor_func != HTR_NONE) {
			uint64_t key = (uint64_t) bi.anchor_func | 1ull << 32;
			auto it = cache_.find(key);
			if (it != cache_.end())
				return it->second;
			std::string n = lookup(bi.anchor, false);
			const char *lib = nullptr;
			if (n.empty() && an_ &&
			    htr_block_name(an_, block, &lib) == 0 && lib)
				n = lib;
			else
				n = "~" + (n.empty() ? fmt("0x%" PRIx64,
							  bi.anchor) : n);
			return cache_.emplace(key, n).first->second;
		}
		if (func == HTR_NONE)
			return unknown;
		auto it = cache_.find(func);
		if (it != cache_.end())
			return it->second;
		std::string n = lookup(entry, true);
		if (n.empty()) {
			const char *lib = nullptr;
			if (an_ && htr_block_name(an_, block, &lib) == 0 && lib)
				n = lib;
			else
				n = fmt("0x%" PRIx64, entry);
		}
		return cache_.emplace(func, n).first->second;
	}

	// The function at @entry ("name+0xOFF" inside one when @offset).
	std::string lookup(uint64_t entry, bool offset)
	{
		lldb::SBAddress a = target_.ResolveLoadAddress(entry);
		if (!a.IsValid())
			return "";
		lldb::SBSymbolContext sc = a.GetSymbolContext(
			lldb::eSymbolContextFunction | lldb::eSymbolContextSymbol);
		const char *n = nullptr;
		lldb::SBAddress start;
		lldb::SBFunction fn = sc.GetFunction();
		if (fn.IsValid()) {
			n = fn.GetDisplayName();
			if (!n)
				n = fn.GetName();
			start = fn.GetStartAddress();
		} else {
			lldb::SBSymbol sym = sc.GetSymbol();
			if (!sym.IsValid())
				return "";
			n = sym.GetDisplayName();
			if (!n)
				n = sym.GetName();
			start = sym.GetStartAddress();
		}
		if (!n || !*n)
			return "";
		uint64_t s = start.IsValid() ? start.GetLoadAddress(target_) :
			     LLDB_INVALID_ADDRESS;
		if (offset && s != LLDB_INVALID_ADDRESS && s != entry &&
		    s < entry)
			return fmt("%s+0x%" PRIx64, n, entry - s);
		return n;
	}

private:
	lldb::SBTarget target_;
	struct htr_analysis *an_;
	std::map<uint64_t, std::string> cache_;   // function index, or
						  // 1 << 32 | anchor index
};

// Source position of an address from LLDB's line table and DWARF blocks,
// as "at FILE:LINE", plus "[inlined: INNER <- OUTER at FILE:LINE ...]" when
// the address lies in inlined code: the frames innermost first, each after
// the first with the line it is at (the call site of the one before), the
// last the function itself; addr2line -i -f lists the same frames and lines.
// Files are base names.  "" when LLDB has no line entry and no inlined
// block there.  Cached per address: a dump asks for one entry per block,
// and most blocks share their function's entry.
class Locator {
public:
	explicit Locator(lldb::SBTarget t) : target_(t) {}

	const std::string &at(uint64_t addr)
	{
		auto it = cache_.find(addr);
		if (it != cache_.end())
			return it->second;
		return cache_.emplace(addr, resolve(addr)).first->second;
	}

private:
	static std::string file_line(lldb::SBFileSpec fs, uint32_t line)
	{
		const char *f = fs.IsValid() ? fs.GetFilename() : nullptr;

		return fmt("%s:%u", f && *f ? f : "?", line);
	}

	std::string resolve(uint64_t addr)
	{
		lldb::SBAddress a = target_.ResolveLoadAddress(addr);
		if (!a.IsValid())
			return "";
		lldb::SBSymbolContext sc =
			a.GetSymbolContext(lldb::eSymbolContextEverything);
		std::string s;
		lldb::SBLineEntry le = sc.GetLineEntry();
		if (le.IsValid())
			s = "at " + file_line(le.GetFileSpec(), le.GetLine());

		lldb::SBBlock inl = sc.GetBlock().GetContainingInlinedBlock();
		if (!inl.IsValid())
			return s;
		std::string chain;
		lldb::SBFileSpec site_file;
		uint32_t site_line = 0;
		for (bool first = true; inl.IsValid(); first = false) {
			const char *n = inl.GetInlinedName();
			if (!first)
				chain += " <- ";
			chain += n && *n ? n : "?";
			if (!first)
				chain += " at " + file_line(site_file, site_line);
			site_file = inl.GetInlinedCallSiteFile();
			site_line = inl.GetInlinedCallSiteLine();
			inl = inl.GetParent().GetContainingInlinedBlock();
		}
		lldb::SBFunction fn = sc.GetFunction();
		const char *outer = fn.IsValid() ? fn.GetDisplayName() : nullptr;
		if (fn.IsValid() && !outer)
			outer = fn.GetName();
		chain += " <- ";
		chain += outer && *outer ? outer : "?";
		chain += " at " + file_line(site_file, site_line);
		return s + (s.empty() ? "" : " ") + "[inlined: " + chain + "]";
	}

	lldb::SBTarget target_;
	std::map<uint64_t, std::string> cache_;
};

// "  LOCATION" for @bi, or "" (no --lines, or nothing known).
std::string where_field(Locator *loc, const struct htr_block_info &bi)
{
	uint64_t a = loc ? htr_block_where(&bi) : 0;
	if (!a)
		return "";
	const std::string &s = loc->at(a);
	return s.empty() ? "" : "  " + s;
}

// Emit text in chunks (SBCommandReturnObject::Printf formats into a fixed
// buffer per call).
void emit(lldb::SBCommandReturnObject &result, std::string &buf, bool last)
{
	if (buf.size() >= (1u << 16) || (last && !buf.empty())) {
		result.Printf("%s", buf.c_str());
		buf.clear();
	}
}

// Common options: --thread TID.
struct Args {
	bool have_tid = false;
	uint64_t tid = 0;
};

// Where a command starts, in the CLI's one vocabulary of places (its
// place_parse/place_block): --block N, a block index as htr find and htr
// top print it; --insn ID, an instruction ID as htr dump prints it (--from
// ID is --insn's older name).
struct Place {
	char kind = 0;   // 0 none, 'b' block, 'i' instruction
	uint64_t n = 0;
};

// If argv[*i] is a place option with its argument, take it into @p and
// return true (with the error in @result and p->kind set to 'x' when it
// is bad).  @also_id: goto's older --id is --insn too.
bool parse_place(char **argv, int *i, Place *p,
		 lldb::SBCommandReturnObject &result, const char *cmd,
		 bool also_id = false)
{
	std::string s = argv[*i];
	const char *opt;

	if (s == "-b" || s == "--block")
		opt = "block";
	else if (s == "-i" || s == "--insn")
		opt = "insn";
	else if (s == "-f" || s == "--from")
		opt = "from";
	else if (also_id && s == "--id")
		opt = "id";
	else
		return false;
	if (!argv[*i + 1])
		return false;
	bool block = !strcmp(opt, "block");
	if (p->kind) {
		result.SetError(fmt("htr %s: --%s: a place was given already "
				    "(one of --block or --insn)", cmd,
				    opt).c_str());
		p->kind = 'x';
		return true;
	}
	if (!parse_u64(argv[++*i], &p->n)) {
		result.SetError(fmt("htr %s: --%s: bad value '%s' (%s)", cmd,
				    opt, argv[*i], block ? "a block index, as "
				    "htr find and htr top print it" :
				    "an instruction ID").c_str());
		p->kind = 'x';
		return true;
	}
	p->kind = block ? 'b' : 'i';
	return true;
}

// The block @p names in @f (HTR_NONE for no place): for --insn the
// deepest block containing the instruction.  false with the error in
// @result.
bool place_block(const struct htr_file *f, const Place &p, const char *cmd,
		 uint32_t *block, lldb::SBCommandReturnObject &result)
{
	uint32_t n = htr_block_count(f);

	*block = HTR_NONE;
	if (p.kind == 'b') {
		if (p.n >= n) {
			result.SetError(fmt("htr %s: block %" PRIu64 ": no such "
					    "block (the file has %" PRIu32 ", 0 "
					    "to %" PRIu32 ")", cmd, p.n, n,
					    n ? n - 1 : 0).c_str());
			return false;
		}
		*block = (uint32_t) p.n;
	} else if (p.kind == 'i') {
		int rc = htr_block_for_insn(f, p.n, block);
		if (rc < 0) {
			result.SetError(fmt("htr %s: instruction %" PRIu64 ": "
					    "%s", cmd, p.n,
					    rc == HTR_ERR_NOTFOUND ?
					    "not inside any block" :
					    htr_errstr(rc)).c_str());
			return false;
		}
	}
	return true;
}

// ----------------------------------------------------------- htr dump

const char dump_help[] = "Print the call tree of the built .htr "
			 "(names from LLDB).";
const char dump_syntax[] =
	"htr dump [--tsc] [--lines] [--depth N] [--block N | --insn ID]\n"
	"         [--thread TID]\n"
	"\n"
	"Print the call tree, one line per block, indented by depth (two\n"
	"spaces a level; from level 64 on, 128 spaces and the level in\n"
	"brackets, '[70] '):\n"
	"  FIRST..LAST  ENTRY  FLAGS  NAME\n"
	"as the CLI's `htr dump FILE.htr`, plus NAME: the function LLDB finds\n"
	"at ENTRY (DWARF function, else symbol; libhtr's name where LLDB has\n"
	"none; for a late block '~' and LLDB's function containing the first\n"
	"address it ran; '?' where nothing is known).  FIRST and LAST are\n"
	"instruction IDs, FLAGS\n"
	"any of late, truncated, gap, implicit-return, unwound.\n"
	"With --tsc, each line is instead, under the CLI's header line\n"
	"(starting with '#'),\n"
	"  NAME  LOCAL  TOTAL  PCT%\n"
	"LOCAL and TOTAL the block's local and cumulative TSC ticks, PCT its\n"
	"total as a share of the outermost block printed above it (the CLI's\n"
	"`htr dump --tsc`, names from LLDB).  Figures come from the sidecar\n"
	"FILE.htr.lmdb/, computed on first use.\n"
	"With --lines, one more field ends each line (after two spaces):\n"
	"where the block's entry is in the source, from LLDB's line table and\n"
	"DWARF blocks (for a late block: the first address it ran):\n"
	"  at FILE:LINE [inlined: INNER <- ... <- FUNCTION at FILE:LINE]\n"
	"the bracket only when the entry lies in inlined code: the frames\n"
	"innermost first, each after the first with the line it is at (the call\n"
	"site of the one before), FILE:LINE being the innermost frame's\n"
	"(addr2line -i -f lists the same frames).  No field where LLDB has no\n"
	"line entry.  The other columns stay as they are.\n"
	"\n"
	"  -t, --tsc         print names and TSC ticks\n"
	"  -l, --lines       append the source position of each block's entry\n"
	"  -d, --depth N     print N levels at most (1: roots only)\n"
	"  -b, --block N     print the subtree of block N (an index as `htr\n"
	"                    find` and `htr top` print it)\n"
	"  -i, --insn ID     print the subtree of the deepest block containing\n"
	"                    instruction ID (an ID as FIRST..LAST above and\n"
	"                    `htr goto` print it; --from ID is the same)\n"
	"      --thread TID  the thread (default: the selected one)\n"
	"Run 'htr build' first.\n";

struct DumpState {
	struct htr_analysis *an = nullptr;
	Namer *namer = nullptr;
	Locator *loc = nullptr;   // --lines
	uint64_t max_level = UINT64_MAX, top_total = 0;
	std::string buf;
	lldb::SBCommandReturnObject *result = nullptr;
	int err = 0;
	bool an_error = false;
};

// Append the line @make writes (one of the library's htr_text_*(), the
// CLI's lines) to @s.
template <typename F> void put_text(std::string &s, F make)
{
	char small[512];
	size_t need = make(small, sizeof(small));

	if (need < sizeof(small)) {
		s.append(small, need);
		return;
	}
	size_t at = s.size();
	s.resize(at + need + 1);
	make(&s[at], need + 1);
	s.resize(at + need);
}

int dump_visit(const struct htr_file *f, uint32_t block, uint32_t parent,
	       uint32_t level, void *payload)
{
	DumpState *d = (DumpState *) payload;
	struct htr_block_info bi;

	(void) parent;
	if (level >= d->max_level)
		return HTR_VISIT_SKIP;
	bi.size = sizeof(bi);
	int rc = htr_block_get(f, block, &bi, sizeof(bi));
	if (rc < 0) {
		d->err = rc;
		return 1;
	}
	const std::string &name = d->namer->name(bi);
	if (d->an) {
		uint64_t total, children, local;

		if (htr_tsc_get(d->an, block, &total, &children, &local) < 0) {
			d->an_error = true;
			return 1;
		}
		if (level == 0)
			d->top_total = total;
		put_text(d->buf, [&](char *b, size_t n) {
			return htr_text_times(b, n, level, name.c_str(), local,
					      total, total, d->top_total);
		});
	} else {
		put_text(d->buf, [&](char *b, size_t n) {
			return htr_text_block(b, n, level, &bi);
		});
		d->buf += "  ";
		d->buf += name;
	}
	d->buf += where_field(d->loc, bi);
	d->buf += "\n";
	emit(*d->result, d->buf, false);
	return 0;
}

bool parse_thread(char **argv, int *i, Args *a,
		  lldb::SBCommandReturnObject &result, const char *cmd)
{
	if (strcmp(argv[*i], "--thread") != 0 || !argv[*i + 1])
		return false;
	if (!parse_u64(argv[++*i], &a->tid)) {
		result.SetError(fmt("htr %s: --thread: bad value '%s'", cmd,
				    argv[*i]).c_str());
		a->have_tid = false;
		return true;
	}
	a->have_tid = true;
	return true;
}

class DumpCmd : public lldb::SBCommandPluginInterface {
public:
	bool DoExecute(lldb::SBDebugger dbg, char **argv,
		       lldb::SBCommandReturnObject &result) override
	{
		Args a;
		DumpState d;
		bool tsc = false, lines = false;
		Place at;
		uint64_t v;

		for (int i = 0; argv && argv[i]; i++) {
			std::string s = argv[i];
			if (s == "-t" || s == "--tsc") {
				tsc = true;
			} else if (s == "-l" || s == "--lines") {
				lines = true;
			} else if ((s == "-d" || s == "--depth") && argv[i + 1]) {
				if (!parse_u64(argv[++i], &v) || !v) {
					result.SetError(fmt("htr dump: --depth: "
							    "bad value '%s'",
							    argv[i]).c_str());
					return false;
				}
				d.max_level = v;
			} else if (parse_place(argv, &i, &at, result, "dump")) {
				if (at.kind == 'x')
					return false;
			} else if (parse_thread(argv, &i, &a, result, "dump")) {
				if (!a.have_tid)
					return false;
			} else {
				result.SetError(fmt("htr dump: unexpected "
						    "argument '%s' (see: help htr "
						    "dump)", argv[i]).c_str());
				return false;
			}
		}
		lldb::SBTarget target;
		struct htr_file *f;
		if (!open_built(dbg, result, "dump", a.have_tid, a.tid, &target,
				&f))
			return false;
		uint32_t from = HTR_NONE;
		bool ok = false;
		int rc;
		// Names fall back to libhtr's, so open the analysis always.
		if (!open_an(result, "dump", f, &d.an))
			goto out;
		{
			Namer namer(target, d.an);
			Locator loc(target);
			d.namer = &namer;
			d.loc = lines ? &loc : nullptr;
			d.result = &result;
			if (!place_block(f, at, "dump", &from, result))
				goto out;
			struct htr_analysis *an = d.an;
			if (!tsc)
				d.an = nullptr;   // plain lines
			else
				d.buf += "# NAME  LOCAL  TOTAL  PCT  (LOCAL and "
					 "TOTAL in ticks, PCT of the outermost "
					 "block above)\n";
			rc = htr_tree_visit(f, from, HTR_PREORDER, dump_visit, &d);
			d.an = an;
			emit(result, d.buf, true);
			if (d.an_error) {
				result.SetError(fmt("htr dump: %s",
						    htr_analysis_last_error(d.an))
							.c_str());
				goto out;
			}
			if (d.err < 0 || rc < 0) {
				result.SetError(fmt("htr dump: %s", htr_errstr(
						    d.err < 0 ? d.err : rc)).c_str());
				goto out;
			}
		}
		ok = true;
		result.SetStatus(lldb::eReturnStatusSuccessFinishResult);
	out:
		htr_analysis_close(d.an);
		htr_file_close(f);
		return ok;
	}
};

// ------------------------------------------------------------ htr top

const char top_help[] = "Per-function calls and TSC ticks of the built "
			".htr (names from LLDB).";
const char top_syntax[] =
	"htr top [--sort local|inclusive|calls] [--limit N] [--lines] "
	"[--thread TID]\n"
	"\n"
	"Per function, one line, largest LOCAL first (as the CLI's):\n"
	"  INCLUSIVE  LOCAL  CALLS  SLOWEST  NAME\n"
	"INCLUSIVE: TSC ticks of its invocations, recursion counted once (an\n"
	"invocation inside another of the same function adds nothing); LOCAL:\n"
	"ticks spent in the function itself; CALLS: invocations; SLOWEST: the\n"
	"block index of its invocation with the largest total.  The figures are\n"
	"the CLI's `htr top FILE.htr`; NAME is the function LLDB finds at the\n"
	"entry of the slowest invocation (libhtr's name where LLDB has none).\n"
	"With --lines, each line ends in the source position of that entry, as\n"
	"`htr dump --lines` prints it.\n"
	"\n"
	"  -s, --sort KEY    local (default), inclusive or calls\n"
	"  -n, --limit N     print N functions at most (default 20; 0: all)\n"
	"  -l, --lines       append the source position of the slowest\n"
	"                    invocation's entry\n"
	"      --thread TID  the thread (default: the selected one)\n"
	"Run 'htr build' first.\n";

// Prints the rows htr_top_visit() gives, in its order, NAME from LLDB
// at the slowest invocation's entry.
struct TopOut {
	const struct htr_file *f;
	Namer *namer;
	Locator *loc;      // --lines
	std::string buf;
	lldb::SBCommandReturnObject *result;
	uint64_t n;
};

int top_row(const struct htr_func_stats *r, void *payload)
{
	auto *o = (TopOut *) payload;
	struct htr_block_info bi;
	std::string name = r->name, at;

	if (!o->n++)
		o->buf += fmt("%14s %14s %10s %10s  %s\n", "INCLUSIVE",
			      "LOCAL", "CALLS", "SLOWEST", "NAME");
	bi.size = sizeof(bi);
	if (name != "?" && htr_block_get(o->f, r->slowest, &bi,
					 sizeof(bi)) == 0) {
		name = o->namer->name(bi);
		at = where_field(o->loc, bi);
	}
	o->buf += fmt("%14" PRIu64 " %14" PRIu64 " %10" PRIu64 " %10u  %s%s\n",
		      r->inclusive, r->local, r->calls, r->slowest,
		      name.c_str(), at.c_str());
	emit(*o->result, o->buf, false);
	return 0;
}

class TopCmd : public lldb::SBCommandPluginInterface {
public:
	bool DoExecute(lldb::SBDebugger dbg, char **argv,
		       lldb::SBCommandReturnObject &result) override
	{
		Args a;
		uint64_t limit = 20, v;
		int key = HTR_TOP_LOCAL;
		bool lines = false;

		for (int i = 0; argv && argv[i]; i++) {
			std::string s = argv[i];
			if (s == "-l" || s == "--lines") {
				lines = true;
			} else if ((s == "-s" || s == "--sort") && argv[i + 1]) {
				std::string k = argv[++i];
				if (k == "inclusive")
					key = HTR_TOP_INCLUSIVE;
				else if (k == "local")
					key = HTR_TOP_LOCAL;
				else if (k == "calls")
					key = HTR_TOP_CALLS;
				else {
					result.SetError(fmt("htr top: --sort: "
							    "expected inclusive, "
							    "local or calls, not "
							    "'%s'", k.c_str()).c_str());
					return false;
				}
			} else if ((s == "-n" || s == "--limit") && argv[i + 1]) {
				if (!parse_u64(argv[++i], &v)) {
					result.SetError(fmt("htr top: --limit: bad "
							    "value '%s'",
							    argv[i]).c_str());
					return false;
				}
				limit = v;     // 0: all
			} else if (parse_thread(argv, &i, &a, result, "top")) {
				if (!a.have_tid)
					return false;
			} else {
				result.SetError(fmt("htr top: unexpected argument "
						    "'%s' (see: help htr top)",
						    argv[i]).c_str());
				return false;
			}
		}
		lldb::SBTarget target;
		struct htr_file *f;
		struct htr_analysis *an = nullptr;
		bool ok = false;
		if (!open_built(dbg, result, "top", a.have_tid, a.tid, &target, &f))
			return false;
		if (!open_an(result, "top", f, &an))
			goto out;
		{
			Namer namer(target, an);
			Locator loc(target);
			TopOut o = { f, &namer, lines ? &loc : nullptr, "",
				     &result, 0 };
			int got = htr_top_visit(an, nullptr, HTR_MATCH_GLOB, key,
						limit, top_row, &o);
			if (got < 0 && got != HTR_ERR_NOTFOUND) {
				result.SetError(fmt("htr top: %s",
						    htr_analysis_last_error(an))
							.c_str());
				goto out;
			}
			emit(result, o.buf, true);
		}
		ok = true;
		result.SetStatus(lldb::eReturnStatusSuccessFinishResult);
	out:
		htr_analysis_close(an);
		htr_file_close(f);
		return ok;
	}
};

// ------------------------------------------------------------- htr find

const char find_help[] = "The invocations of matching functions in the "
			 "built .htr (names from LLDB).";
const char find_syntax[] =
	"htr find [--sort time|cost] [--limit N] [--lines] [--thread TID] "
	"PATTERN\n"
	"\n"
	"List the invocations (blocks) of every function whose libhtr name is\n"
	"PATTERN, or matches it when PATTERN is a glob (contains *, ? or [),\n"
	"one per line, as the CLI's `htr find PATTERN FILE.htr`:\n"
	"  BLOCK  NAME  FIRST..LAST  TOTAL  LOCAL\n"
	"BLOCK is the block index, NAME the function LLDB finds at the block's\n"
	"entry (for a late block '~' and LLDB's function containing the first\n"
	"address it ran), FIRST..LAST its instruction IDs, TOTAL and LOCAL its\n"
	"cumulative and local TSC ticks.  With --lines, each line ends in the\n"
	"source position of the block's entry, as `htr dump --lines` prints it.\n"
	"\n"
	"  -s, --sort KEY    time: chronological (default); cost: largest total\n"
	"                    first\n"
	"  -n, --limit N     print the first N only (0: all, the default)\n"
	"  -l, --lines       append the source position of each block's entry\n"
	"      --thread TID  the thread (default: the selected one)\n"
	"Run 'htr build' first.\n";

// Prints the hits htr_find_visit() gives, in its order, with LLDB's
// names.
struct FindOut {
	const struct htr_file *f;
	Namer *namer;
	Locator *loc;      // --lines
	std::string buf;
	lldb::SBCommandReturnObject *result;
};

int find_hit(const struct htr_find_hit *h, void *payload)
{
	auto *o = (FindOut *) payload;
	struct htr_block_info bi;

	bi.size = sizeof(bi);
	if (htr_block_get(o->f, h->block, &bi, sizeof(bi)) < 0)
		return 0;
	o->buf += fmt("%u  %s  %" PRIu64 "..%" PRIu64 "  %" PRIu64 "  %" PRIu64
		      "%s\n", h->block, o->namer->name(bi).c_str(), h->first,
		      h->last, h->total, h->local,
		      where_field(o->loc, bi).c_str());
	emit(*o->result, o->buf, false);
	return 0;
}

class FindCmd : public lldb::SBCommandPluginInterface {
public:
	bool DoExecute(lldb::SBDebugger dbg, char **argv,
		       lldb::SBCommandReturnObject &result) override
	{
		Args a;
		uint64_t limit = 0, v;     // 0: all
		bool cost = false, lines = false;
		const char *pattern = nullptr;

		for (int i = 0; argv && argv[i]; i++) {
			std::string s = argv[i];
			if (s == "-l" || s == "--lines") {
				lines = true;
			} else if ((s == "-s" || s == "--sort") && argv[i + 1]) {
				std::string k = argv[++i];
				if (k != "time" && k != "cost") {
					result.SetError(fmt("htr find: --sort: "
							    "expected time or "
							    "cost, not '%s'",
							    k.c_str()).c_str());
					return false;
				}
				cost = k == "cost";
			} else if ((s == "-n" || s == "--limit") && argv[i + 1]) {
				if (!parse_u64(argv[++i], &v)) {
					result.SetError(fmt("htr find: --limit: "
							    "bad value '%s'",
							    argv[i]).c_str());
					return false;
				}
				limit = v;
			} else if (parse_thread(argv, &i, &a, result, "find")) {
				if (!a.have_tid)
					return false;
			} else if (!pattern && s[0] != '-') {
				pattern = argv[i];
			} else {
				result.SetError(fmt("htr find: unexpected "
						    "argument '%s' (see: help "
						    "htr find)", argv[i]).c_str());
				return false;
			}
		}
		if (!pattern || !*pattern) {
			result.SetError("htr find: expected a PATTERN (see: help "
					"htr find)");
			return false;
		}
		lldb::SBTarget target;
		struct htr_file *f;
		struct htr_analysis *an = nullptr;
		bool ok = false;
		if (!open_built(dbg, result, "find", a.have_tid, a.tid, &target, &f))
			return false;
		if (!open_an(result, "find", f, &an))
			goto out;
		{
			Namer namer(target, an);
			Locator loc(target);
			FindOut o = { f, &namer, lines ? &loc : nullptr, "",
				      &result };
			int mode = strpbrk(pattern, "*?[") ? HTR_MATCH_GLOB :
				   HTR_MATCH_EXACT;
			int got = htr_find_visit(f, an, pattern, mode,
						 cost ? HTR_FIND_COST :
						 HTR_FIND_TIME, limit,
						 find_hit, &o);
			if (got < 0 && got != HTR_ERR_NOTFOUND) {
				result.SetError(fmt("htr find: %s",
						    htr_analysis_last_error(an)[0] ?
						    htr_analysis_last_error(an) :
						    htr_errstr(got)).c_str());
				goto out;
			}
			if (got == HTR_ERR_NOTFOUND)
				o.buf += fmt("no function matches '%s'\n",
					     pattern);
			emit(result, o.buf, true);
		}
		ok = true;
		result.SetStatus(lldb::eReturnStatusSuccessFinishResult);
	out:
		htr_analysis_close(an);
		htr_file_close(f);
		return ok;
	}
};

// ------------------------------------------------------------- htr goto

const char goto_help[] = "The instructions of a block (or from an "
			 "instruction ID) and LLDB's trace item IDs.";
const char goto_syntax[] =
	"htr goto [--count N] [--lines] [--thread TID] BLOCK\n"
	"htr goto [--count N] [--lines] [--thread TID] --block N\n"
	"htr goto [--count N] [--lines] [--thread TID] --insn ID\n"
	"\n"
	"Re-decode the block's instructions (or those from instruction ID on)\n"
	"with libhtr's cursor and print them, one per line:\n"
	"  ID  ITEM  ADDRESS  NAME\n"
	"ID is libhtr's instruction ID, ITEM the ID of the same instruction in\n"
	"LLDB's trace, ADDRESS its address, NAME LLDB's function+offset.  LLDB\n"
	"counts errors and events as items too, and decodes a few instructions\n"
	"differently around overflows, so ITEM is found, not computed: near\n"
	"the ID-th instruction item, where LLDB's next instructions have the\n"
	"same addresses as libhtr's.  The first lines name the block (with the\n"
	"source position of its entry, as `htr dump --lines` prints it) and\n"
	"the command that goes on from there in LLDB\n"
	"(thread trace dump instructions --forwards --id ITEM).  An address on\n"
	"which LLDB's item disagrees is marked '!'; ITEM is '-' where LLDB's\n"
	"trace has no such instructions nearby.  With --lines, each line ends in\n"
	"the instruction's source position (inlined frames included).\n"
	"\n"
	"Not on threads of per-CPU traces: their .htr files have no sync\n"
	"points to re-decode from.\n"
	"\n"
	"  -c, --count N     print N instructions at most (default 20)\n"
	"  -l, --lines       append each instruction's source position\n"
	"  -b, --block N     block N's instructions (an index as `htr find`\n"
	"                    and `htr top` print it; BLOCK is the same)\n"
	"  -i, --insn ID     start at instruction ID (an ID as `htr dump`\n"
	"                    prints it; the deepest block containing it is\n"
	"                    named; --from ID and --id ID are the same)\n"
	"      --thread TID  the thread (default: the selected one)\n"
	"Run 'htr build' first.\n";

class GotoCmd : public lldb::SBCommandPluginInterface {
public:
	bool DoExecute(lldb::SBDebugger dbg, char **argv,
		       lldb::SBCommandReturnObject &result) override
	{
		Args a;
		Place at;
		uint64_t count = 20, v, start = 0, block = 0, tid = 0;
		bool lines = false;

		for (int i = 0; argv && argv[i]; i++) {
			std::string s = argv[i];
			if (s == "-l" || s == "--lines") {
				lines = true;
			} else if ((s == "-c" || s == "--count") && argv[i + 1]) {
				if (!parse_u64(argv[++i], &count) || !count) {
					result.SetError(fmt("htr goto: --count: "
							    "bad value '%s'",
							    argv[i]).c_str());
					return false;
				}
			} else if (parse_place(argv, &i, &at, result, "goto",
					       true)) {
				if (at.kind == 'x')
					return false;
			} else if (parse_thread(argv, &i, &a, result, "goto")) {
				if (!a.have_tid)
					return false;
			} else if (parse_u64(argv[i], &v)) {
				// BLOCK: --block N, in the older spelling.
				if (at.kind) {
					result.SetError(fmt("htr goto: %s: a "
							    "place was given "
							    "already (one of "
							    "BLOCK, --block or "
							    "--insn)",
							    argv[i]).c_str());
					return false;
				}
				at.kind = 'b';
				at.n = v;
			} else {
				result.SetError(fmt("htr goto: unexpected "
						    "argument '%s' (see: help "
						    "htr goto)", argv[i]).c_str());
				return false;
			}
		}
		if (!at.kind) {
			result.SetError("htr goto: expected a BLOCK, --block N or "
					"--insn ID (see: help htr goto)");
			return false;
		}
		bool have_id = at.kind == 'i';
		if (have_id)
			start = at.n;
		else
			block = at.n;
		lldb::SBTarget target;
		struct htr_file *f = nullptr;
		bool per_cpu = false;
		if (!open_built(dbg, result, "goto", a.have_tid, a.tid, &target,
				&f, &tid, &per_cpu))
			return false;
		// The cursor re-decodes from the sync point before the ID; a
		// tree cut from several CPUs' streams has none to go back to.
		if (per_cpu) {
			htr_file_close(f);
			result.SetError(fmt("htr goto: thread %" PRIu64 ": its "
					    ".htr was built from per-CPU traces "
					    "and has no sync points, so its "
					    "instructions cannot be decoded "
					    "again (htr dump, top and find "
					    "work)", tid).c_str());
			return false;
		}
		bool ok = run(target, f, tid, have_id, start, block, count,
			      lines, result);
		htr_file_close(f);
		return ok;
	}

private:
	bool run(lldb::SBTarget &target, struct htr_file *f, uint64_t tid,
		 bool have_id, uint64_t start, uint64_t block, uint64_t count,
		 bool lines, lldb::SBCommandReturnObject &result)
	{
		struct htr_block_info bi;
		uint32_t b32 = HTR_NONE;
		int rc;

		bi.size = sizeof(bi);
		if (have_id) {
			rc = htr_block_for_insn(f, start, &b32);
			if (rc < 0 && rc != HTR_ERR_NOTFOUND) {
				result.SetError(fmt("htr goto: instruction %"
						    PRIu64 ": %s", start,
						    htr_errstr(rc)).c_str());
				return false;
			}
		} else {
			Place p;
			p.kind = 'b';
			p.n = block;
			if (!place_block(f, p, "goto", &b32, result))
				return false;
		}
		if (b32 != HTR_NONE &&
		    (rc = htr_block_get(f, b32, &bi, sizeof(bi))) < 0) {
			result.SetError(fmt("htr goto: block %" PRIu64 ": %s",
					    have_id ? (uint64_t) b32 : block,
					    htr_errstr(rc)).c_str());
			return false;
		}
		if (!have_id) {
			start = bi.first;
			if (bi.last - bi.first + 1 < count)
				count = bi.last - bi.first + 1;
		}

		// libhtr's cursor over the thread's raw trace (saved again).
		lldb::SBTrace trace = target.GetTrace();
		Saved saved;
		if (!save_trace(trace, "goto", result, &saved))
			return false;
		std::string raw;
		for (auto &tr : saved.traces)
			if (tr.first == tid)
				raw = tr.second;
		if (raw.empty()) {
			result.SetError(fmt("htr goto: thread %" PRIu64 " has no "
					    "trace", tid).c_str());
			return false;
		}
		struct htr_cursor_opts co;
		struct htr_cursor *c = nullptr;
		htr_cursor_opts_init(&co);
		co.trace = raw.c_str();
		co.cpu_family = saved.cpu_family;
		co.cpu_model = saved.cpu_model;
		co.cpu_stepping = saved.cpu_stepping;
		rc = htr_cursor_alloc(&c, f, &co);
		if (rc == 0)
			rc = htr_cursor_seek(c, start);
		if (rc < 0) {
			result.SetError(fmt("htr goto: %s", c &&
					    htr_cursor_last_error(c)[0] ?
					    htr_cursor_last_error(c) :
					    htr_errstr(rc)).c_str());
			htr_cursor_free(c);
			return false;
		}

		// libhtr's instructions from @start (to print, and to find
		// them in LLDB's trace).
		std::vector<struct htr_insn> ins;
		for (uint64_t k = 0; k < count; k++) {
			struct htr_insn in;
			rc = htr_cursor_next(c, &in, sizeof(in));
			if (rc < 0)
				break;
			ins.push_back(in);
		}
		std::string stop = rc < 0 && rc != HTR_ERR_ITEROVER ?
				   htr_cursor_last_error(c) : "";
		htr_cursor_free(c);

		// LLDB's items for them: LLDB decodes the trace itself and may
		// count a few instructions differently around overflows and
		// errors, so the start-th instruction item is only where to
		// look; the match is where LLDB's instruction addresses are
		// libhtr's (nearest such place within WINDOW).
		lldb::SBProcess process = target.GetProcess();
		lldb::SBThread thread = process.GetThreadByID(tid);
		lldb::SBError err;
		lldb::SBTraceCursor lc = trace.CreateNewCursor(err, thread);
		bool have_lc = err.Success() && lc.IsValid() && !ins.empty();
		if (have_lc)
			have_lc = find_items(lc, start, ins);

		Namer namer(target, nullptr);
		Locator loc(target);
		std::string buf;
		// The header always says where the block starts: one lookup.
		std::string head_at = b32 != HTR_NONE ?
				      where_field(&loc, bi) : "";
		if (!head_at.empty())
			head_at[0] = ',';
		if (b32 != HTR_NONE)
			buf += fmt("block %u (%s%s): instructions %" PRIu64 "..%"
				   PRIu64 "\n", b32, namer.name(bi).c_str(),
				   head_at.c_str(), bi.first, bi.last);
		else
			buf += fmt("instruction %" PRIu64 " (top level, in no "
				   "block)\n", start);
		if (have_lc && lc.HasValue())
			buf += fmt("LLDB trace item %" PRIu64 ": continue with "
				   "'thread trace dump instructions --forwards "
				   "--id %" PRIu64 "'\n", lc.GetId(), lc.GetId());
		else
			buf += "LLDB's trace has no such instruction item\n";
		uint64_t bad = 0;
		for (const struct htr_insn &in : ins) {
			std::string item = "-";
			bool same = true;
			if (have_lc && lc.HasValue()) {
				item = fmt("%" PRIu64, lc.GetId());
				same = lc.GetLoadAddress() == in.ip;
				do
					lc.Next();
				while (lc.HasValue() && !lc.IsInstruction());
			}
			bad += !same;
			std::string nm = namer.lookup(in.ip, true);
			std::string at = lines ? loc.at(in.ip) : "";
			buf += fmt("%" PRIu64 "  %s  0x%" PRIx64 "%s  %s%s%s\n",
				   in.id, item.c_str(), in.ip, same ? "" : "!",
				   nm.empty() ? "?" : nm.c_str(),
				   at.empty() ? "" : "  ", at.c_str());
			emit(result, buf, false);
		}
		if (!stop.empty())
			buf += fmt("(stopped: %s)\n", stop.c_str());
		if (bad)
			buf += fmt("note: LLDB's item differs at %" PRIu64
				   " instruction(s) (marked '!')\n", bad);
		emit(result, buf, true);
		result.SetStatus(lldb::eReturnStatusSuccessFinishResult);
		return true;
	}

	static const uint64_t WINDOW = 4096;   // instructions either way
	static const size_t MATCH = 8;         // addresses that must agree

	// Leave @lc at the instruction item where LLDB's trace runs the
	// addresses of @ins (up to MATCH of them), the one nearest to the
	// @start-th instruction item.  false if there is none.
	static bool find_items(lldb::SBTraceCursor &lc, uint64_t start,
			       const std::vector<struct htr_insn> &ins)
	{
		size_t need = ins.size() < MATCH ? ins.size() : MATCH;
		uint64_t lo = start > WINDOW ? start - WINDOW : 0, n = 0;
		std::vector<std::pair<uint64_t, uint64_t>> win;  // item, addr
		uint64_t best = UINT64_MAX, best_item = 0;

		lc.SetForwards(true);
		lc.Seek(0, lldb::eTraceCursorSeekTypeBeginning);
		for (; lc.HasValue() && n < start + WINDOW + need; lc.Next()) {
			if (!lc.IsInstruction())
				continue;
			if (n++ >= lo)
				win.emplace_back(lc.GetId(), lc.GetLoadAddress());
		}
		for (size_t i = 0; i + need <= win.size(); i++) {
			size_t k = 0;
			while (k < need && win[i + k].second == ins[k].ip)
				k++;
			uint64_t pos = lo + i;
			uint64_t dist = pos > start ? pos - start : start - pos;
			if (k == need && (best == UINT64_MAX || dist < best)) {
				best = dist;
				best_item = win[i].first;
			}
		}
		return best != UINT64_MAX && lc.GoToId(best_item);
	}
};

} // namespace

bool lldb::PluginInitialize(lldb::SBDebugger debugger)
{
	lldb::SBCommandInterpreter ci = debugger.GetCommandInterpreter();
	lldb::SBCommand htr = ci.AddMultiwordCommand(
		"htr", "Hierarchical trace representation (libhtr) of the loaded "
		"Intel PT trace: build an .htr once, then dump the call tree "
		"and per-function figures from it.  Start with 'htr build'.");

	if (!htr.IsValid())
		return false;
	htr.AddCommand("build", new BuildCmd, build_help, build_syntax);
	htr.AddCommand("dump", new DumpCmd, dump_help, dump_syntax);
	htr.AddCommand("top", new TopCmd, top_help, top_syntax);
	htr.AddCommand("find", new FindCmd, find_help, find_syntax);
	htr.AddCommand("goto", new GotoCmd, goto_help, goto_syntax);
	return true;
}
