/*
 * Baseline for the build benchmark: the least a block-decoder client can
 * do over a trace (sync, drain events, pt_blk_next until the end, resync
 * after errors) with the same configuration htr build uses.
 * usage: bare_blk TRACE ELF BASE [cpuid_eax cpuid_ebx mtc_freq nom_freq]
 * Prints "bare: N insns, T s, R M insns/s".
 */
#include <fcntl.h>
#include <intel-pt.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct pt_config cfg;
	struct pt_block_decoder *d;
	struct pt_image_section_cache *isc;
	struct timespec a, b;
	struct stat st;
	uint64_t insns = 0;
	uint8_t *buf;
	int fd, status, isid;

	if (argc != 4 && argc != 8) {
		fprintf(stderr, "usage: bare_blk TRACE ELF BASE [eax ebx mtc nom]\n");
		return 2;
	}
	fd = open(argv[1], O_RDONLY);
	if (fd < 0 || fstat(fd, &st) < 0) {
		perror(argv[1]);
		return 1;
	}
	buf = mmap(NULL, (size_t) st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (buf == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	pt_config_init(&cfg);
	cfg.begin = buf;
	cfg.end = buf + st.st_size;
	cfg.flags.variant.block.end_on_call = 1;
	if (argc == 8) {
		cfg.cpuid_0x15_eax = (uint32_t) strtoul(argv[4], NULL, 0);
		cfg.cpuid_0x15_ebx = (uint32_t) strtoul(argv[5], NULL, 0);
		cfg.mtc_freq = (uint8_t) strtoul(argv[6], NULL, 0);
		cfg.nom_freq = (uint8_t) strtoul(argv[7], NULL, 0);
	}
	d = pt_blk_alloc_decoder(&cfg);
	isc = pt_iscache_alloc(NULL);
	if (stat(argv[2], &st) < 0 || !d || !isc) {
		fprintf(stderr, "bare_blk: setup failed\n");
		return 1;
	}
	/* The synthesizer's ELF is one PT_LOAD from file offset 0. */
	isid = pt_iscache_add_file(isc, argv[2], 0, (uint64_t) st.st_size,
				   strtoull(argv[3], NULL, 0));
	if (isid < 0 || pt_image_add_cached(pt_blk_get_image(d), isc, isid,
					    NULL) < 0) {
		fprintf(stderr, "bare_blk: %s: cannot add\n", argv[2]);
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
	clock_gettime(CLOCK_MONOTONIC, &b);
	{
		double t = (double) (b.tv_sec - a.tv_sec) +
			   (double) (b.tv_nsec - a.tv_nsec) / 1e9;

		printf("bare: %llu insns, %.2f s, %.1f M insns/s\n",
		       (unsigned long long) insns, t, (double) insns / t / 1e6);
	}
	pt_blk_free_decoder(d);
	pt_iscache_free(isc);
	return 0;
}
