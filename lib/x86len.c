#include "x86len.h"

/* Legacy prefixes and REX; enough for every call form compilers emit
 * (including notrack 3E, bnd F2, and REX.W / REX.B on FF /2). */
static int is_prefix(uint8_t b)
{
	switch (b) {
	case 0x26: case 0x2e: case 0x36: case 0x3e: case 0x64: case 0x65:
	case 0x66: case 0x67: case 0xf0: case 0xf2: case 0xf3:
		return 1;
	}
	return 0;
}

int htr_x86__call_len(const uint8_t *p, size_t n)
{
	size_t i = 0;
	int addr32 = 0;
	uint8_t modrm, mod, rm, reg;

	while (i < n && i < 14 && is_prefix(p[i])) {
		if (p[i] == 0x67)
			addr32 = 1;
		i++;
	}
	if (i < n && (p[i] & 0xf0) == 0x40)
		i++;                    /* REX */
	if (i >= n)
		return -1;
	if (p[i] == 0xe8)
		return i + 5 <= n ? (int) (i + 5) : -1;
	if (p[i] != 0xff || i + 1 >= n)
		return -1;
	modrm = p[i + 1];
	reg = (modrm >> 3) & 7;
	if (reg != 2 && reg != 3)
		return -1;
	mod = modrm >> 6;
	rm = modrm & 7;
	i += 2;
	(void) addr32;              /* 67 changes the address size only */
	if (mod == 3)
		return (int) i;
	if (rm == 4) {                  /* SIB */
		if (i >= n)
			return -1;
		if (mod == 0 && (p[i] & 7) == 5)
			i += 4;         /* no base: disp32 */
		i++;
	} else if (mod == 0 && rm == 5) {
		i += 4;                 /* RIP-relative disp32 */
	}
	if (mod == 1)
		i += 1;
	else if (mod == 2)
		i += 4;
	return i <= n ? (int) i : -1;
}
