/*
 * Writes the program as a position-independent ELF64 executable (ET_DYN)
 * with one R+X PT_LOAD, a .text section and a symbol table naming every
 * function.  The lowest PT_LOAD sits at @link; tracing it elsewhere is the
 * usual FILE@BASE relocation.
 */
#include "synth_int.h"

#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEXT_OFF 0x1000u

int synth_write_elf(FILE *fp, const struct prog *p, uint64_t link)
{
	static const char shstr[] = "\0.text\0.symtab\0.strtab\0.shstrtab";
	enum { SH_NULL, SH_TEXT, SH_SYMTAB, SH_STRTAB, SH_SHSTRTAB, SH_N };
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	Elf64_Shdr sh[SH_N];
	Elf64_Sym *sym = NULL;
	char *str = NULL;
	size_t strsz = 1, i, off;
	uint64_t symoff, stroff, shstroff, shoff;
	static const uint8_t zero[16];
	int rc = -1;
	size_t text_size = p->elf_text_size ? p->elf_text_size : p->text_size;
	unsigned nfuncs = p->elf_nfuncs ? p->elf_nfuncs : p->nfuncs;

	sym = calloc(nfuncs + 1, sizeof(*sym));
	for (i = 0; i < nfuncs; i++)
		strsz += strlen(p->funcs[i].name) + 1;
	str = calloc(1, strsz);
	if (!sym || !str)
		goto out;
	off = 1;
	for (i = 0; i < nfuncs; i++) {
		Elf64_Sym *s = &sym[i + 1];

		s->st_name = (Elf64_Word) off;
		s->st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
		s->st_shndx = SH_TEXT;
		s->st_value = link + TEXT_OFF + p->funcs[i].off;
		s->st_size = p->funcs[i].size;
		strcpy(str + off, p->funcs[i].name);
		off += strlen(p->funcs[i].name) + 1;
	}

	symoff = TEXT_OFF + text_size;
	symoff = (symoff + 7) & ~7ull;
	stroff = symoff + (nfuncs + 1) * sizeof(Elf64_Sym);
	shstroff = stroff + strsz;
	shoff = (shstroff + sizeof(shstr) + 7) & ~7ull;

	memset(&eh, 0, sizeof(eh));
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_ident[EI_OSABI] = ELFOSABI_SYSV;
	eh.e_type = ET_DYN;
	eh.e_machine = EM_X86_64;
	eh.e_version = EV_CURRENT;
	eh.e_entry = link + TEXT_OFF + p->funcs[0].off;
	eh.e_phoff = sizeof(eh);
	eh.e_shoff = shoff;
	eh.e_ehsize = sizeof(eh);
	eh.e_phentsize = sizeof(ph);
	eh.e_phnum = 1;
	eh.e_shentsize = sizeof(Elf64_Shdr);
	eh.e_shnum = SH_N;
	eh.e_shstrndx = SH_SHSTRTAB;

	memset(&ph, 0, sizeof(ph));
	ph.p_type = PT_LOAD;
	ph.p_flags = PF_R | PF_X;
	ph.p_offset = 0;
	ph.p_vaddr = ph.p_paddr = link;
	ph.p_filesz = ph.p_memsz = TEXT_OFF + text_size;
	ph.p_align = 0x1000;

	memset(sh, 0, sizeof(sh));
	sh[SH_TEXT].sh_name = 1;
	sh[SH_TEXT].sh_type = SHT_PROGBITS;
	sh[SH_TEXT].sh_flags = SHF_ALLOC | SHF_EXECINSTR;
	sh[SH_TEXT].sh_addr = link + TEXT_OFF;
	sh[SH_TEXT].sh_offset = TEXT_OFF;
	sh[SH_TEXT].sh_size = text_size;
	sh[SH_TEXT].sh_addralign = 16;
	sh[SH_SYMTAB].sh_name = 7;
	sh[SH_SYMTAB].sh_type = SHT_SYMTAB;
	sh[SH_SYMTAB].sh_offset = symoff;
	sh[SH_SYMTAB].sh_size = (nfuncs + 1) * sizeof(Elf64_Sym);
	sh[SH_SYMTAB].sh_link = SH_STRTAB;
	sh[SH_SYMTAB].sh_info = 1;      /* index of the first global symbol */
	sh[SH_SYMTAB].sh_addralign = 8;
	sh[SH_SYMTAB].sh_entsize = sizeof(Elf64_Sym);
	sh[SH_STRTAB].sh_name = 15;
	sh[SH_STRTAB].sh_type = SHT_STRTAB;
	sh[SH_STRTAB].sh_offset = stroff;
	sh[SH_STRTAB].sh_size = strsz;
	sh[SH_STRTAB].sh_addralign = 1;
	sh[SH_SHSTRTAB].sh_name = 23;
	sh[SH_SHSTRTAB].sh_type = SHT_STRTAB;
	sh[SH_SHSTRTAB].sh_offset = shstroff;
	sh[SH_SHSTRTAB].sh_size = sizeof(shstr);
	sh[SH_SHSTRTAB].sh_addralign = 1;

	if (fwrite(&eh, sizeof(eh), 1, fp) != 1 ||
	    fwrite(&ph, sizeof(ph), 1, fp) != 1)
		goto out;
	for (off = sizeof(eh) + sizeof(ph); off < TEXT_OFF; off++)
		if (fputc(0, fp) == EOF)
			goto out;
	if (fwrite(p->text, 1, text_size, fp) != text_size)
		goto out;
	off = TEXT_OFF + text_size;
	if (fwrite(zero, 1, symoff - off, fp) != symoff - off ||
	    fwrite(sym, sizeof(*sym), nfuncs + 1, fp) != nfuncs + 1 ||
	    fwrite(str, 1, strsz, fp) != strsz ||
	    fwrite(shstr, 1, sizeof(shstr), fp) != sizeof(shstr) ||
	    fwrite(zero, 1, shoff - shstroff - sizeof(shstr), fp) !=
		    shoff - shstroff - sizeof(shstr) ||
	    fwrite(sh, sizeof(sh), 1, fp) != 1)
		goto out;
	rc = 0;
out:
	free(sym);
	free(str);
	return rc;
}
