/* UTF-8 decoding shared by the rules matcher and the DICOM writer; see utf8.h. */
#include "common/utf8.h"

uint32_t utf8_step(const char **s)
{
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    const unsigned char *u = (const unsigned char *)*s;
    const int n = u[0] < 0xC2 ? 1 : u[0] < 0xE0 ? 2 : u[0] < 0xF0 ? 3 : u[0] < 0xF5 ? 4 : 1;
    uint32_t cp = n == 1 ? u[0] : u[0] & (0x7Fu >> n);
    for (int k = 1; k < n; k++) {
        if ((u[k] & 0xC0) != 0x80) {
            (*s)++;
            return u[0];
        }
        cp = cp << 6 | (u[k] & 0x3Fu);
    }
    if (n > 1 && (cp < min_cp[n] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)) {
        (*s)++;
        return u[0];
    }
    *s += n;
    return cp;
}

int utf8_valid(const char *s)
{
    while (*s) {
        const char *at = s;
        utf8_step(&s);
        if (s == at + 1 && (unsigned char)*at >= 0x80)
            return 0;
    }
    return 1;
}
