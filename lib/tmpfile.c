#include "tmpfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int htr_tmp__open(const char *what, struct htr_err *err)
{
	const char *dir = getenv("TMPDIR");
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/htr-%s-XXXXXX",
		 dir && dir[0] ? dir : "/tmp", what);
	fd = mkstemp(path);
	if (fd < 0) {
		htr_err__sys(err, "%s", path);
		return -1;
	}
	unlink(path);
	return fd;
}

int htr_tmp__write(int fd, const void *p, uint64_t n)
{
	const uint8_t *s = p;

	while (n) {
		/* write() takes at most about 2 GiB at once on Linux. */
		ssize_t k = write(fd, s, n > (1u << 30) ? (1u << 30) :
				  (size_t) n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			if (k == 0)
				errno = EIO;
			return -1;
		}
		s += k;
		n -= (uint64_t) k;
	}
	return 0;
}

int htr_tmp__io_at(int fd, void *p, size_t n, uint64_t off, bool wr)
{
	uint8_t *d = p;

	while (n) {
		ssize_t k = wr ? pwrite(fd, d, n, (off_t) off) :
				 pread(fd, d, n, (off_t) off);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return errno;
		if (k == 0)
			return wr ? EIO : -1;
		d += k;
		n -= (size_t) k;
		off += (uint64_t) k;
	}
	return 0;
}
