#include "x86len.h"

/* Length of the near or far call FF /2, FF /3 whose ModRM byte is at @p[i]
 * (@n bytes readable), 0 if it runs past them. */
static int modrm_len(const uint8_t *p, size_t n, size_t i)
{
	uint8_t modrm = p[i], mod = modrm >> 6, rm = modrm & 7;

	i++;
	if (mod != 3 && rm == 4) {              /* SIB */
		if (i >= n)
			return 0;
		if (mod == 0 && (p[i] & 7) == 5)
			i += 4;                 /* no base: disp32 */
		i++;
	} else if (mod == 0 && rm == 5) {
		i += 4;                         /* RIP-relative disp32 */
	}
	if (mod == 1)
		i += 1;
	else if (mod == 2)
		i += 4;
	return i <= n ? (int) i : 0;
}

/* The offset of the opcode after the legacy and REX prefixes. */
static size_t skip_prefixes(const uint8_t *p, size_t n, int is64)
{
	size_t i = 0;

	while (i < n && (p[i] == 0x66 || p[i] == 0x67 || p[i] == 0xf0 ||
			 p[i] == 0xf2 || p[i] == 0xf3 || p[i] == 0x2e ||
			 p[i] == 0x36 || p[i] == 0x3e || p[i] == 0x26 ||
			 p[i] == 0x64 || p[i] == 0x65))
		i++;
	if (is64 && i < n && (p[i] & 0xf0) == 0x40)
		i++;
	return i;
}

enum htr_icls htr_x86__classify(const uint8_t *p, size_t n, int is64,
				 int *len)
{
	size_t i = skip_prefixes(p, n, is64);

	*len = 0;
	if (i >= n)
		return HTR_IC_OTHER;
	switch (p[i]) {
	case 0xe8:                                /* call rel32 */
		*len = i + 5 <= n ? (int) i + 5 : 0;
		return HTR_IC_CALL;
	case 0xc2: case 0xc3:
		return HTR_IC_RET;
	case 0xcc: case 0xce: case 0xf1:          /* int3, into, int1 */
		*len = (int) i + 1;
		return HTR_IC_FAR_CALL;
	case 0xcd:                                /* int n */
		*len = i + 2 <= n ? (int) i + 2 : 0;
		return HTR_IC_FAR_CALL;
	case 0x9a:                                /* call ptr16:16/32 */
		return HTR_IC_FAR_CALL;
	case 0xca: case 0xcb: case 0xcf:          /* lret, iret */
		return HTR_IC_FAR_RET;
	case 0xff:
		if (i + 1 >= n)
			return HTR_IC_OTHER;
		switch ((p[i + 1] >> 3) & 7) {
		case 2:
			*len = modrm_len(p, n, i + 1);
			return HTR_IC_CALL;
		case 3:
			*len = modrm_len(p, n, i + 1);
			return HTR_IC_FAR_CALL;
		case 4:
			return HTR_IC_JUMP;
		}
		return HTR_IC_OTHER;
	case 0x0f:
		if (i + 1 >= n)
			return HTR_IC_OTHER;
		switch (p[i + 1]) {
		case 0x05: case 0x34:                 /* syscall, sysenter */
			*len = (int) i + 2;
			return HTR_IC_FAR_CALL;
		case 0x07: case 0x35:                 /* sysret, sysexit */
			return HTR_IC_FAR_RET;
		}
		return HTR_IC_OTHER;
	}
	return HTR_IC_OTHER;
}

int htr_x86__jump_reads_trace(const uint8_t *p, size_t n, int is64)
{
	size_t i = skip_prefixes(p, n, is64);
	unsigned reg;

	if (i < n && p[i] == 0xea)                /* jmp ptr16:16/32 */
		return !is64;
	if (i + 1 >= n || p[i] != 0xff)
		return 0;
	reg = (p[i + 1] >> 3) & 7;
	return reg == 4 || reg == 5;
}
