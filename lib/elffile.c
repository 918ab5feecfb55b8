/* ELF files for libelf (elffile.h). */
#include "elffile.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef HTR_HAVE_LIBDW
#include <elfutils/libdwelf.h>
#endif

static int open_beside(const char *path, const char *beside)
{
	const char *hs, *base;
	size_t dlen;
	char *alt;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

	if (fd >= 0 || errno != ENOENT || !beside)
		return fd;
	hs = strrchr(beside, '/');
	base = strrchr(path, '/');
	base = base ? base + 1 : path;
	dlen = hs ? (size_t) (hs - beside + 1) : 0;
	alt = malloc(dlen + strlen(base) + 1);
	if (!alt)
		return -1;
	memcpy(alt, beside, dlen);
	strcpy(alt + dlen, base);
	fd = open(alt, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	free(alt);
	if (fd < 0)
		errno = ENOENT;   /* the message names @path, not the guess */
	return fd;
}

/* The checks every caller wants of a file libelf has opened. */
static int check(struct htr_elf *e, const char *path, unsigned flags,
		 struct htr_err *err)
{
	const char *id = e->elf ? elf_getident(e->elf, NULL) : NULL;
	GElf_Ehdr eh;
	size_t n;

	if (!id || elf_kind(e->elf) != ELF_K_ELF)
		return htr_err__set(err, HTR_ERR_FORMAT, "%s: not an ELF file",
				    path);
	if (id[EI_CLASS] != ELFCLASS64 || id[EI_DATA] != ELFDATA2LSB)
		return htr_err__set(err, HTR_ERR_FORMAT, "%s: not a 64-bit "
				    "little-endian ELF file", path);
	if ((flags & HTR_ELF_X86_64) &&
	    (!gelf_getehdr(e->elf, &eh) || eh.e_machine != EM_X86_64))
		return htr_err__set(err, HTR_ERR_FORMAT, "%s: not an x86-64 "
				    "ELF64 file", path);
	if (elf_getphdrnum(e->elf, &n) != 0)
		return htr_err__set(err, HTR_ERR_FORMAT, "%s: bad program "
				    "header table: %s", path, elf_errmsg(-1));
	return 0;
}

int htr_elf__open(struct htr_elf *e, const char *path, const char *beside,
		  unsigned flags, struct htr_err *err)
{
	struct stat st;
	int rc;

	e->elf = NULL;
	e->fd = -1;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return htr_err__set(err, HTR_ERR_FORMAT, "%s: libelf is "
				    "unusable: %s", path, elf_errmsg(-1));
	e->fd = open_beside(path, beside);
	if (e->fd < 0)
		return htr_err__sys(err, "%s", path);
	if (fstat(e->fd, &st) < 0) {
		rc = htr_err__sys(err, "%s", path);
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = htr_err__set(err, HTR_ERR_IO, "%s: not a regular file",
				  path);
		goto fail;
	}
	e->elf = elf_begin(e->fd, ELF_C_READ, NULL);
	rc = check(e, path, flags, err);
	if (!rc)
		return 0;
fail:
	htr_elf__close(e);
	return rc;
}

int htr_elf__memory(struct htr_elf *e, void *image, size_t n,
		    struct htr_err *err)
{
	int rc;

	e->fd = -1;
	e->elf = NULL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return htr_err__set(err, HTR_ERR_FORMAT, "libelf is unusable: "
				    "%s", elf_errmsg(-1));
	e->elf = elf_memory(image, n);
	rc = check(e, "image in memory", 0, err);
	if (rc)
		htr_elf__close(e);
	return rc;
}

void htr_elf__close(struct htr_elf *e)
{
	if (e->elf)
		elf_end(e->elf);
	if (e->fd >= 0)
		close(e->fd);
	e->elf = NULL;
	e->fd = -1;
}

/* The GNU build-id among the notes of @d: its bytes copied, or 0. */
static size_t note_build_id(Elf_Data *d, uint8_t *id, size_t max)
{
	size_t off = 0, next, name, desc, n;
	GElf_Nhdr nh;

	while ((next = gelf_getnote(d, off, &nh, &name, &desc)) > 0) {
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
		    !memcmp((const char *) d->d_buf + name, "GNU", 4) &&
		    nh.n_descsz) {
			n = nh.n_descsz > max ? max : nh.n_descsz;
			memcpy(id, (const uint8_t *) d->d_buf + desc, n);
			return n;
		}
		off = next;
	}
	return 0;
}

size_t htr_elf__build_id(Elf *elf, uint8_t *id, size_t max)
{
	size_t n, i, got = 0;
	GElf_Phdr ph;
	Elf_Data *d;

	if (elf_getphdrnum(elf, &n) != 0)
		n = 0;
	for (i = 0; i < n && !got; i++) {
		if (!gelf_getphdr(elf, (int) i, &ph) || ph.p_type != PT_NOTE)
			continue;
		/* libelf checks the chunk lies inside the file. */
		d = elf_getdata_rawchunk(elf, (int64_t) ph.p_offset,
					 ph.p_filesz, ph.p_align == 8 ?
					 ELF_T_NHDR8 : ELF_T_NHDR);
		if (d)
			got = note_build_id(d, id, max);
	}
	return got;
}

#ifdef HTR_HAVE_LIBDW
#define DEBUG_BUILD_ID_DIR "/usr/lib/debug/.build-id/"

/* By libdw's reading of the build-id rather than the PT_NOTE segments:
 * a debug file's notes are sections whose program headers may describe
 * nothing. */
Elf *htr_elf__debug_file(Elf *elf, int *fd)
{
	char path[sizeof(DEBUG_BUILD_ID_DIR) + 2 * 64 + 8];
	const unsigned char *id;
	const void *id2;
	Elf *dbg;
	ssize_t n, i;
	size_t k;

	*fd = -1;
	n = dwelf_elf_gnu_build_id(elf, (const void **) &id);
	if (n < 2 || n > 64)
		return NULL;
	k = (size_t) snprintf(path, sizeof(path), "%s%02x/",
			      DEBUG_BUILD_ID_DIR, id[0]);
	for (i = 1; i < n; i++)
		k += (size_t) snprintf(path + k, sizeof(path) - k, "%02x",
				       id[i]);
	snprintf(path + k, sizeof(path) - k, ".debug");
	*fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (*fd < 0)
		return NULL;
	dbg = elf_begin(*fd, ELF_C_READ, NULL);
	if (dbg && elf_kind(dbg) == ELF_K_ELF &&
	    dwelf_elf_gnu_build_id(dbg, &id2) == n &&
	    !memcmp(id, id2, (size_t) n))
		return dbg;
	if (dbg)
		elf_end(dbg);
	close(*fd);
	*fd = -1;
	return NULL;
}
#endif
