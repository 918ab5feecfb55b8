/*
 * The one size rule for every public struct that carries a size (libipt's
 * rule, see include/htr/common.h "Structs with a size"):
 *
 *   in   (options the caller fills): any size from the end of the struct's
 *        first version upward is accepted; the library reads
 *        min(size, sizeof) bytes and zero-fills the fields the caller did
 *        not pass, so every field added later must mean "as before" at 0.
 *   out  (facts the library fills): any size from the first version's end
 *        upward; the library writes min(size, sizeof) bytes and never
 *        touches the caller's bytes beyond its own struct.
 *
 * Smaller sizes are HTR_ERR_INVALID and nothing is read or written.  This
 * file is the only place the rule is implemented; every public function
 * taking such a struct goes through it.
 */
#ifndef HTR_LIB_ABI_H
#define HTR_LIB_ABI_H

#include <stddef.h>

/* The end of @type's first version: the byte after its field @last. */
#define HTR_ABI_SIZE0(type, last) \
	(offsetof(type, last) + sizeof(((type *) 0)->last))

/*
 * Copy the caller's struct @user (@size bytes, normally user->size) into
 * the library's @lib of @lib_size bytes, zero-filling the rest; the copy's
 * leading size_t is set to @lib_size.  NULL @user: all zero (the
 * defaults), size set.  Returns 0 or HTR_ERR_INVALID (@size below @size0;
 * @lib is then all zero).
 */
int htr_abi__in(void *lib, size_t lib_size, const void *user, size_t size,
		size_t size0);

/*
 * Copy the library's @lib (@lib_size bytes) to the caller's @user of
 * @size bytes: min(size, lib_size) bytes, with the copy's leading size_t
 * set to that count.  Returns 0 or HTR_ERR_INVALID (NULL @user, @size
 * below @size0; nothing written).
 */
int htr_abi__out(void *user, size_t size, const void *lib, size_t lib_size,
		 size_t size0);

/* The size an "in" struct claims (its leading size_t), 0 for NULL. */
size_t htr_abi__size_of(const void *user);

/*
 * Initialise the caller's options struct @user of @size bytes: zero (the
 * defaults of every options struct are all-zero) and its size field set
 * to @size.  Nothing happens when @user is NULL or @size cannot hold the
 * size field.
 */
void htr_abi__init(void *user, size_t size);

#endif
