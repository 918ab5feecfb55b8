/* Perfetto's TrackEvent protobuf format, one packet at a time. */
#include "perfetto.h"

#include "perfetto_trace_min.pb-c.h"

#include <stdlib.h>
#include <string.h>

/* Direct-mapped: a name whose slot another name took gets a new iid when
 * it comes back.  Perfetto forbids giving an iid a second value, never a
 * value a second iid, so re-emitting under a fresh iid is always valid and
 * the table never grows past PF_NAMES names. */
#ifndef PF_NAMES            /* tests/test_perfetto.c shrinks it */
#define PF_NAMES 4096u
#endif

/* Any non-zero id: the file holds one sequence, and its interned names
 * are valid only on it. */
#define PF_SEQ 1u

static const char *const pf_arg_names[PF_ARG_COUNT] = {
	"block", "parent", "first", "last", "flags", "local", "total", "id",
	"reason",
};

struct pf_name {
	uint64_t hash, iid;
	char *s;
};

struct pf_writer {
	FILE *fp;
	uint64_t track;                 /* the events' track uuid */
	uint64_t next_iid;
	struct pf_name names[PF_NAMES];
	uint8_t *buf;
	size_t cap;
};

static uint64_t pf_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	while (*s)
		h = (h ^ (uint8_t) *s++) * 0x100000001b3ull;
	return h;
}

/* The iid of @name, and in *@fresh whether this packet must define it. */
static int pf_intern(struct pf_writer *w, const char *name, uint64_t *iid,
		     int *fresh)
{
	uint64_t h = pf_hash(name);
	struct pf_name *n = &w->names[h & (PF_NAMES - 1)];
	char *s;

	if (n->s && n->hash == h && !strcmp(n->s, name)) {
		*iid = n->iid;
		*fresh = 0;
		return 0;
	}
	s = strdup(name);
	if (!s)
		return -1;
	free(n->s);
	n->s = s;
	n->hash = h;
	n->iid = ++w->next_iid;
	*iid = n->iid;
	*fresh = 1;
	return 0;
}

/* One packet as field 1 of Trace: the framing a whole-trace message would
 * have, without ever holding more than this packet. */
static int pf_emit(struct pf_writer *w, const Perfetto__Protos__TracePacket *p)
{
	size_t n = perfetto__protos__trace_packet__get_packed_size(p), k = 0;
	uint8_t hdr[11];
	uint64_t v = n;

	if (n > w->cap) {
		size_t cap = n < 4096 ? 4096 : n * 2;
		uint8_t *b = realloc(w->buf, cap);

		if (!b)
			return -1;
		w->buf = b;
		w->cap = cap;
	}
	perfetto__protos__trace_packet__pack(p, w->buf);
	hdr[k++] = 0x0a;                /* field 1, length-delimited */
	do {
		hdr[k++] = (uint8_t) ((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	/* Short writes show in ferror(), which the caller checks once. */
	if (fwrite(hdr, 1, k, w->fp) == k)
		(void) fwrite(w->buf, 1, n, w->fp);
	return 0;
}

static int pf_track(struct pf_writer *w, Perfetto__Protos__TrackDescriptor *td,
		    int first)
{
	Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	Perfetto__Protos__InternedData in = PERFETTO__PROTOS__INTERNED_DATA__INIT;
	Perfetto__Protos__DebugAnnotationName an[PF_ARG_COUNT];
	Perfetto__Protos__DebugAnnotationName *anp[PF_ARG_COUNT];
	size_t i;

	p.has_trusted_packet_sequence_id = 1;
	p.trusted_packet_sequence_id = PF_SEQ;
	p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR;
	p.track_descriptor = td;
	if (first) {
		/* The reset comes first so that every later packet may use
		 * interned data; the annotation names go with it, once. */
		p.has_sequence_flags = 1;
		p.sequence_flags =
		    PERFETTO__PROTOS__TRACE_PACKET__SEQUENCE_FLAGS__SEQ_INCREMENTAL_STATE_CLEARED;
		for (i = 0; i < PF_ARG_COUNT; i++) {
			perfetto__protos__debug_annotation_name__init(&an[i]);
			an[i].has_iid = 1;
			an[i].iid = i + 1;
			an[i].name = (char *) pf_arg_names[i];
			anp[i] = &an[i];
		}
		in.n_debug_annotation_names = PF_ARG_COUNT;
		in.debug_annotation_names = anp;
		p.interned_data = &in;
	}
	return pf_emit(w, &p);
}

int pf_writer_open(struct pf_writer **out, FILE *fp,
		   const struct pf_track_opts *o)
{
	Perfetto__Protos__TrackDescriptor proc =
	    PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
	Perfetto__Protos__TrackDescriptor thr =
	    PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
	Perfetto__Protos__ProcessDescriptor pd =
	    PERFETTO__PROTOS__PROCESS_DESCRIPTOR__INIT;
	Perfetto__Protos__ThreadDescriptor tdd =
	    PERFETTO__PROTOS__THREAD_DESCRIPTOR__INIT;
	struct pf_writer *w;
	int rc;

	*out = NULL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -1;
	w->fp = fp;
	if (o->have_thread) {
		/* uuids from the pid and tid: the tracks of exports of other
		 * threads differ, whatever one combines them with. */
		proc.has_uuid = 1;
		proc.uuid = (UINT64_C(1) << 32) | o->pid;
		pd.has_pid = 1;
		pd.pid = (int32_t) o->pid;
		proc.process = &pd;
		thr.has_uuid = 1;
		thr.uuid = (UINT64_C(2) << 32) | o->tid;
		thr.has_parent_uuid = 1;
		thr.parent_uuid = proc.uuid;
		tdd.has_pid = tdd.has_tid = 1;
		tdd.pid = (int32_t) o->pid;
		tdd.tid = (int32_t) o->tid;
		if (o->comm && o->comm[0])
			tdd.thread_name = (char *) o->comm;
		thr.thread = &tdd;
		thr.name = (char *) o->name;
		w->track = thr.uuid;
		rc = pf_track(w, &proc, 1);
		if (rc == 0)
			rc = pf_track(w, &thr, 0);
	} else {
		/* No pid or tid to tell: one track of its own rather than a
		 * made-up thread. */
		thr.has_uuid = 1;
		thr.uuid = UINT64_C(3) << 32;
		thr.name = (char *) (o->name ? o->name : "htr call tree");
		w->track = thr.uuid;
		rc = pf_track(w, &thr, 1);
	}
	if (rc < 0) {
		pf_writer_free(w);
		return -1;
	}
	*out = w;
	return 0;
}

static int pf_event(struct pf_writer *w, uint64_t ts,
		    Perfetto__Protos__TrackEvent__Type type, const char *cat,
		    const char *name, const struct pf_arg *args, size_t nargs)
{
	Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	Perfetto__Protos__TrackEvent ev = PERFETTO__PROTOS__TRACK_EVENT__INIT;
	Perfetto__Protos__InternedData in = PERFETTO__PROTOS__INTERNED_DATA__INIT;
	Perfetto__Protos__EventName en = PERFETTO__PROTOS__EVENT_NAME__INIT;
	Perfetto__Protos__EventName *enp = &en;
	Perfetto__Protos__DebugAnnotation da[PF_ARG_COUNT];
	Perfetto__Protos__DebugAnnotation *dap[PF_ARG_COUNT];
	char *catp = (char *) cat;
	uint64_t iid;
	int fresh;
	size_t i;

	p.has_timestamp = 1;
	p.timestamp = ts;
	p.has_trusted_packet_sequence_id = 1;
	p.trusted_packet_sequence_id = PF_SEQ;
	p.has_sequence_flags = 1;
	p.sequence_flags =
	    PERFETTO__PROTOS__TRACE_PACKET__SEQUENCE_FLAGS__SEQ_NEEDS_INCREMENTAL_STATE;
	p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT;
	p.track_event = &ev;
	ev.has_type = 1;
	ev.type = type;
	ev.has_track_uuid = 1;
	ev.track_uuid = w->track;
	if (name) {
		if (pf_intern(w, name, &iid, &fresh) < 0)
			return -1;
		ev.name_field_case =
		    PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME_IID;
		ev.name_iid = iid;
		if (fresh) {
			en.has_iid = 1;
			en.iid = iid;
			en.name = (char *) name;
			in.n_event_names = 1;
			in.event_names = &enp;
			p.interned_data = &in;
		}
	}
	if (cat) {
		ev.n_categories = 1;
		ev.categories = &catp;
	}
	if (nargs > PF_ARG_COUNT)
		nargs = PF_ARG_COUNT;
	for (i = 0; i < nargs; i++) {
		perfetto__protos__debug_annotation__init(&da[i]);
		da[i].name_field_case =
		    PERFETTO__PROTOS__DEBUG_ANNOTATION__NAME_FIELD_NAME_IID;
		da[i].name_iid = (uint64_t) args[i].name + 1;
		if (args[i].str) {
			da[i].value_case =
			    PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_STRING_VALUE;
			da[i].string_value = (char *) args[i].str;
		} else {
			da[i].value_case =
			    PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_UINT_VALUE;
			da[i].uint_value = args[i].u;
		}
		dap[i] = &da[i];
	}
	ev.n_debug_annotations = nargs;
	ev.debug_annotations = nargs ? dap : NULL;
	return pf_emit(w, &p);
}

int pf_slice_begin(struct pf_writer *w, uint64_t ts, const char *cat,
		   const char *name, const struct pf_arg *args, size_t nargs)
{
	return pf_event(w, ts, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN,
			cat, name, args, nargs);
}

int pf_slice_end(struct pf_writer *w, uint64_t ts)
{
	/* The END needs nothing but its track: Perfetto pairs it with the
	 * innermost open BEGIN there. */
	return pf_event(w, ts, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END,
			NULL, NULL, NULL, 0);
}

int pf_instant(struct pf_writer *w, uint64_t ts, const char *cat,
	       const char *name, const struct pf_arg *args, size_t nargs)
{
	return pf_event(w, ts, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT,
			cat, name, args, nargs);
}

void pf_writer_free(struct pf_writer *w)
{
	size_t i;

	if (!w)
		return;
	for (i = 0; i < PF_NAMES; i++)
		free(w->names[i].s);
	free(w->buf);
	free(w);
}
