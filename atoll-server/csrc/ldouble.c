/*
 * long double helpers for INCRBYFLOAT and HINCRBYFLOAT.
 *
 * Why C: Redis computes these increments in C `long double` (80-bit extended precision on
 * x86-64) and prints the result with "%.17Lf" before trimming zeros. Rust has no long double
 * type, and an f64 computation prints differently (0.1 + 0.2 gives 0.30000000000000004 in
 * f64 but 0.3 in Redis), so the arithmetic, the parsing (strtold) and the formatting
 * (snprintf) are done here, by the same libc routines Redis uses.
 *
 * A long double crosses the FFI boundary as an opaque 16-byte, 16-aligned blob
 * (`atoll_ld`), which Rust never looks inside.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    _Alignas(16) unsigned char bytes[16];
} atoll_ld;

_Static_assert(sizeof(long double) <= sizeof(atoll_ld), "long double must fit in 16 bytes");

/* Redis's MAX_LONG_DOUBLE_CHARS: the longest text string2ld accepts and ld2string writes. */
#define MAX_LONG_DOUBLE_CHARS (5 * 1024)

static long double get(const atoll_ld *p) {
    long double v;
    memcpy(&v, p->bytes, sizeof(v));
    return v;
}

static void put(atoll_ld *p, long double v) {
    memset(p->bytes, 0, sizeof(p->bytes));
    memcpy(p->bytes, &v, sizeof(v));
}

size_t atoll_ld_max_chars(void) {
    return MAX_LONG_DOUBLE_CHARS;
}

/* Redis's string2ld(): the whole buffer must be a strtold number, with no leading space,
 * no NaN, and no overflow or underflow to zero. Returns 1 and stores the value on success. */
int atoll_ld_parse(const char *s, size_t slen, atoll_ld *out) {
    char buf[MAX_LONG_DOUBLE_CHARS];
    long double value;
    char *eptr;

    if (slen == 0 || slen >= sizeof(buf)) return 0;
    memcpy(buf, s, slen);
    buf[slen] = '\0';

    errno = 0;
    value = strtold(buf, &eptr);
    if (isspace((unsigned char)buf[0]) || eptr[0] != '\0' || (size_t)(eptr - buf) != slen ||
        (errno == ERANGE && (value == HUGE_VALL || value == -HUGE_VALL || fpclassify(value) == FP_ZERO)) ||
        errno == EINVAL || isnan(value))
        return 0;
    put(out, value);
    return 1;
}

void atoll_ld_from_i64(int64_t v, atoll_ld *out) {
    put(out, (long double)v);
}

void atoll_ld_add(const atoll_ld *a, const atoll_ld *b, atoll_ld *out) {
    put(out, get(a) + get(b));
}

/* 1 unless the value is NaN or infinite. */
int atoll_ld_is_finite(const atoll_ld *a) {
    long double v = get(a);
    return !(isnan(v) || isinf(v));
}

/* Redis's ld2string(..., LD_STR_HUMAN): "%.17Lf", trailing zeros after the point removed,
 * then a trailing point, and "-0" printed as "0". `buf` must hold MAX_LONG_DOUBLE_CHARS
 * bytes. Returns the length written (without terminator), or 0 when it does not fit (Redis
 * then stores an empty string; a finite long double never needs that much room). */
size_t atoll_ld_format_human(const atoll_ld *a, char *buf, size_t len) {
    long double value = get(a);
    size_t l;

    if (isinf(value)) {
        if (len < 5) return 0;
        if (value > 0) {
            memcpy(buf, "inf", 3);
            l = 3;
        } else {
            memcpy(buf, "-inf", 4);
            l = 4;
        }
    } else if (isnan(value)) {
        if (len < 4) return 0;
        memcpy(buf, "nan", 3);
        l = 3;
    } else {
        int n = snprintf(buf, len, "%.17Lf", value);
        if (n < 0 || (size_t)n + 1 > len) return 0;
        l = (size_t)n;
        if (memchr(buf, '.', l) != NULL) {
            char *p = buf + l - 1;
            while (*p == '0') {
                p--;
                l--;
            }
            if (*p == '.') l--;
        }
        if (l == 2 && buf[0] == '-' && buf[1] == '0') {
            buf[0] = '0';
            l = 1;
        }
    }
    buf[l] = '\0';
    return l;
}
