/*
 * Baseline for the build benchmark: the least a block-decoder client can
 * do over a trace (sync, drain events, pt_blk_next until the end, resync
 * after errors) with the same configuration htr build uses.  The image is
 * loaded the way htr build loads it (libhtr's image module); only the
 * decoding loop is timed.
 * usage: bare_blk [--timing EAX EBX MTC NOM] TRACE ELF[@BASE]...
 * Prints "bare: N insns, T s, R M insns/s".
 *
 * With --query (no ELF needed), the floor of any decoder built on
 * libipt's query decoder, as the walk is: every conditional and indirect
 * branch the trace holds asked for in the order the trace holds them,
 * and the events fetched (the decoder keeps its time as it reads the
 * packets, asked or not), without following any code.
 * Prints "query: N queries, T s".
 *
 * With --packets, the floor of any decoder built on libipt at all: its
 * packet decoder alone, every packet of the trace decoded and nothing
 * made of it (no time kept, no TNT bits taken apart).
 * Prints "packets: N packets, B TNT bits, T s".
 */
#include "err.h"
#include "image.h"

#include <fcntl.h>
#include <intel-pt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double since(const struct timespec *a)
{
	struct timespec b;

	clock_gettime(CLOCK_MONOTONIC, &b);
	return (double) (b.tv_sec - a->tv_sec) +
	       (double) (b.tv_nsec - a->tv_nsec) / 1e9;
}

/* --query: the query decoder alone, over the whole trace. */
static int query_loop(const struct pt_config *cfg)
{
	struct pt_query_decoder *q = pt_qry_alloc_decoder(cfg);
	struct timespec a;
	uint64_t queries = 0, ip;
	int status, taken;

	if (!q) {
		fprintf(stderr, "bare_blk: setup failed\n");
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (;;) {
		status = pt_qry_sync_forward(q, &ip);
		if (status < 0)
			break;
		for (;;) {
			while (status & pts_event_pending) {
				struct pt_event ev;

				status = pt_qry_event(q, &ev, sizeof(ev));
				if (status < 0)
					break;
				queries++;
			}
			if (status < 0 || (status & pts_eos))
				break;
			/* Whichever the next packet answers. */
			status = pt_qry_cond_branch(q, &taken);
			if (status == -pte_bad_query)
				status = pt_qry_indirect_branch(q, &ip);
			if (status < 0)
				break;
			queries++;
		}
		if (status == -pte_eos || (status >= 0 && (status & pts_eos)))
			break;
	}
	printf("query: %llu queries, %.2f s\n", (unsigned long long) queries,
	       since(&a));
	pt_qry_free_decoder(q);
	return 0;
}

/* --packets: the packet decoder alone, over the whole trace. */
static int packet_loop(const struct pt_config *cfg)
{
	struct pt_packet_decoder *d = pt_pkt_alloc_decoder(cfg);
	struct pt_packet pkt;
	struct timespec a;
	uint64_t packets = 0, bits = 0;
	int status;

	if (!d) {
		fprintf(stderr, "bare_blk: setup failed\n");
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	status = pt_pkt_sync_forward(d);
	while (status >= 0) {
		status = pt_pkt_next(d, &pkt, sizeof(pkt));
		if (status < 0) {
			/* A packet it cannot decode: on at the next PSB. */
			if (status != -pte_eos)
				status = pt_pkt_sync_forward(d);
			continue;
		}
		packets++;
		if (pkt.type == ppt_tnt_8 || pkt.type == ppt_tnt_64)
			bits += pkt.payload.tnt.bit_size;
	}
	printf("packets: %llu packets, %llu TNT bits, %.2f s\n",
	       (unsigned long long) packets, (unsigned long long) bits,
	       since(&a));
	pt_pkt_free_decoder(d);
	return 0;
}

int main(int argc, char **argv)
{
	struct pt_config cfg;
	struct pt_block_decoder *d;
	struct htr_image *img = NULL;
	struct htr_err err;
	struct timespec a;
	struct stat st;
	uint64_t insns = 0;
	uint8_t *buf;
	/* --query or --packets: a loop of libipt's alone, no image */
	int (*floor_loop)(const struct pt_config *cfg) = NULL;
	int fd, status, i = 1;

	pt_config_init(&cfg);
	if (argc > 1 && !strcmp(argv[1], "--query"))
		floor_loop = query_loop;
	else if (argc > 1 && !strcmp(argv[1], "--packets"))
		floor_loop = packet_loop;
	if (floor_loop)
		i++;
	if (argc > i + 4 && !strcmp(argv[i], "--timing")) {
		cfg.cpuid_0x15_eax = (uint32_t) strtoul(argv[i + 1], NULL, 0);
		cfg.cpuid_0x15_ebx = (uint32_t) strtoul(argv[i + 2], NULL, 0);
		cfg.mtc_freq = (uint8_t) strtoul(argv[i + 3], NULL, 0);
		cfg.nom_freq = (uint8_t) strtoul(argv[i + 4], NULL, 0);
		i += 5;
	}
	if (argc - i < (floor_loop ? 1 : 2)) {
		fprintf(stderr, "usage: bare_blk [--query | --packets] "
			"[--timing EAX EBX MTC NOM] TRACE ELF[@BASE]...\n");
		return 2;
	}
	fd = open(argv[i], O_RDONLY);
	if (fd < 0 || fstat(fd, &st) < 0) {
		perror(argv[i]);
		return 1;
	}
	buf = mmap(NULL, (size_t) st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (buf == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	cfg.begin = buf;
	cfg.end = buf + st.st_size;
	if (floor_loop)
		return floor_loop(&cfg);
	cfg.flags.variant.block.end_on_call = 1;
	d = pt_blk_alloc_decoder(&cfg);
	if (!d || htr_image__alloc(&img) < 0) {
		fprintf(stderr, "bare_blk: setup failed\n");
		return 1;
	}
	memset(&err, 0, sizeof(err));
	for (i++; i < argc; i++)
		if (htr_image__add_elf_spec(img, argv[i], &err) < 0) {
			fprintf(stderr, "bare_blk: %s\n", err.msg);
			return 1;
		}
	if (pt_image_copy(pt_blk_get_image(d), htr_image__pt(img)) < 0) {
		fprintf(stderr, "bare_blk: cannot set the image\n");
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (;;) {
		status = pt_blk_sync_forward(d);
		if (status < 0)
			break;
		for (;;) {
			struct pt_block blk;

			while (status & pts_event_pending) {
				struct pt_event ev;

				status = pt_blk_event(d, &ev, sizeof(ev));
				if (status < 0)
					break;
			}
			if (status < 0)
				break;
			status = pt_blk_next(d, &blk, sizeof(blk));
			insns += blk.ninsn;
			if (status < 0)
				break;
		}
		if (status == -pte_eos)
			break;
	}
	{
		double t = since(&a);

		printf("bare: %llu insns, %.2f s, %.1f M insns/s\n",
		       (unsigned long long) insns, t, (double) insns / t / 1e6);
	}
	pt_blk_free_decoder(d);
	htr_image__free(img);
	return 0;
}
