/* lib/perfetto.c with a four-name interning table, read back by
 * libprotobuf-c: names evicted and met again must come back under a fresh
 * iid, every event must name what it was given, and the track and the
 * sequence's reset must come first. */
#include "perfetto.h"
#include "perfetto_trace_min.pb-c.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static Perfetto__Protos__Trace *write_and_read(const char *const *names,
					       size_t n, FILE **fpp)
{
	struct pf_track_opts o = { 1, 42, 43, "worker", NULL };
	struct pf_writer *w;
	FILE *fp = tmpfile();
	struct pf_arg a = { PF_ARG_BLOCK, NULL, 0 };
	uint8_t *buf;
	long len;
	size_t i;
	Perfetto__Protos__Trace *t;

	cr_assert_not_null(fp);
	cr_assert_eq(pf_writer_open(&w, fp, &o), 0);
	for (i = 0; i < n; i++) {
		a.u = i;
		cr_assert_eq(pf_slice_begin(w, 10 * i, "call", names[i], &a,
					    1), 0);
		cr_assert_eq(pf_slice_end(w, 10 * i + 5), 0);
	}
	pf_writer_free(w);
	cr_assert_eq(fflush(fp), 0);
	len = ftell(fp);
	cr_assert_gt(len, 0);
	buf = malloc((size_t) len);
	rewind(fp);
	cr_assert_eq(fread(buf, 1, (size_t) len, fp), (size_t) len);
	t = perfetto__protos__trace__unpack(NULL, (size_t) len, buf);
	free(buf);
	cr_assert_not_null(t, "libprotobuf-c cannot read the trace");
	*fpp = fp;
	return t;
}

Test(perfetto, evicted_names_come_back_under_fresh_iids)
{
	/* a..f cycle through a 4-slot table: some must collide. */
	static const char *const names[] = {
		"a", "b", "c", "d", "e", "f", "a", "b", "c", "d", "e", "f",
		"a", "a", "f", "std::vector<int>::push_back", "a",
	};
	size_t n = sizeof(names) / sizeof(names[0]), i, k, ev = 0;
	const char *by_iid[64] = { 0 };
	uint64_t max_iid = 0;
	FILE *fp;
	Perfetto__Protos__Trace *t = write_and_read(names, n, &fp);

	cr_assert_geq(t->n_packet, 2 + 2 * n);
	cr_expect_eq(t->packet[0]->sequence_flags, 1u, "the reset first");
	cr_expect_eq(t->packet[0]->data_case,
		     PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR);
	cr_expect_eq(t->packet[1]->track_descriptor->thread->tid, 43);
	cr_expect_eq(t->packet[1]->track_descriptor->thread->pid, 42);
	cr_expect_str_eq(t->packet[1]->track_descriptor->thread->thread_name,
			 "worker");
	cr_expect_eq(t->packet[1]->track_descriptor->parent_uuid,
		     t->packet[0]->track_descriptor->uuid);
	for (i = 0; i < t->n_packet; i++) {
		Perfetto__Protos__TracePacket *p = t->packet[i];
		Perfetto__Protos__TrackEvent *e;

		if (p->interned_data)
			for (k = 0; k < p->interned_data->n_event_names; k++) {
				Perfetto__Protos__EventName *en =
				    p->interned_data->event_names[k];

				cr_assert_lt(en->iid, 64);
				/* Perfetto forbids redefining an iid. */
				cr_expect_null(by_iid[en->iid], "iid %lu twice",
					       (unsigned long) en->iid);
				cr_expect_eq(en->iid, max_iid + 1,
					     "iids are handed out in order");
				by_iid[en->iid] = en->name;
				max_iid = en->iid;
			}
		if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT)
			continue;
		e = p->track_event;
		cr_expect_eq(p->sequence_flags, 2u);
		if (e->type != PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN)
			continue;
		cr_assert_lt(ev, n);
		cr_assert_eq(e->name_field_case,
			     PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME_IID);
		cr_assert_lt(e->name_iid, 64);
		cr_assert_not_null(by_iid[e->name_iid], "event %zu: undefined "
				   "iid", ev);
		cr_expect_str_eq(by_iid[e->name_iid], names[ev], "event %zu",
				 ev);
		cr_expect_eq(e->debug_annotations[0]->uint_value, ev);
		cr_expect_eq(p->timestamp, 10 * ev);
		ev++;
	}
	cr_expect_eq(ev, n);
	/* Fewer iids than events (hits), more than names (evictions). */
	cr_expect_lt(max_iid, n);
	cr_expect_gt(max_iid, 7);
	perfetto__protos__trace__free_unpacked(t, NULL);
	fclose(fp);
}
