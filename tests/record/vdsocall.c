/* Code mapped from a file and called: argv[1] is a copy of the host's
 * vDSO, argv[2] the offset of its getcpu, which only reads a segment limit
 * (no vvar page, which a copy does not have). */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long (*getcpu)(unsigned *, unsigned *, void *);
	unsigned cpu, node, i;
	struct stat st;
	void *p;
	int fd;

	if (argc < 3 || (fd = open(argv[1], O_RDONLY)) < 0 ||
	    fstat(fd, &st) < 0)
		return 2;
	p = mmap(NULL, (size_t) st.st_size, PROT_READ | PROT_EXEC, MAP_PRIVATE,
		 fd, 0);
	if (p == MAP_FAILED)
		return 3;
	getcpu = (long (*)(unsigned *, unsigned *, void *))
		 ((char *) p + strtoul(argv[2], NULL, 0));
	for (i = 0; i < 3; i++)
		getcpu(&cpu, i ? &node : NULL, NULL);
	return 0;
}
