/* UTF-8 decoding shared by the rules matcher (config) and the DICOM writer
 * (scp): one definition of a well-formed character. Thread-safe. */
#ifndef LDCT_COMMON_UTF8_H
#define LDCT_COMMON_UTF8_H

#include <stdint.h>

/* The code point of the UTF-8 character at *s, advancing *s past it; a
 * byte that starts no well-formed sequence stands for itself (one byte).
 * Overlong forms, surrogates and code points past U+10FFFF are not
 * characters: a value kept as received may hold them, and an overlong NUL
 * or letter must not pass for a terminator or that letter. Reads at most
 * up to the first byte that continues no sequence, so a NUL-terminated
 * string is never read past its end. */
uint32_t utf8_step(const char **s);

/* 1 when the NUL-terminated s is well-formed UTF-8: utf8_step takes no
 * byte of it as a stray one (a byte of 0x80 or more stepped over alone). */
int utf8_valid(const char *s);

#endif
