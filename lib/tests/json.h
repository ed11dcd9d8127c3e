/*
 * json.h - a small JSON reader for the tests (test vectors, SHOAL_STATS lines). Numbers
 * keep their text so that 64-bit integers are read exactly.
 */
#ifndef SHOAL_TEST_JSON_H
#define SHOAL_TEST_JSON_H

#include <stddef.h>
#include <stdint.h>

enum json_type { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

struct json {
    enum json_type type;
    int boolean;
    char *text;          /* JSON_STRING (unescaped) and JSON_NUMBER (as written) */
    int n;               /* JSON_ARRAY and JSON_OBJECT: number of items */
    char **keys;         /* JSON_OBJECT */
    struct json **items; /* JSON_ARRAY and JSON_OBJECT */
};

/* Parses one value at *p, advancing *p past it. NULL on error, with a message in err. */
struct json *json_parse(const char **p, char *err, size_t errlen);
void json_free(struct json *v);
/* Member of an object, or NULL. */
const struct json *json_get(const struct json *obj, const char *key);
/* Typed member lookups: 0 on success, -1 if missing or of another type. */
int json_get_i64(const struct json *obj, const char *key, int64_t *out);
int json_get_u64(const struct json *obj, const char *key, uint64_t *out);
const char *json_get_str(const struct json *obj, const char *key);
/* Reads a whole file into a NUL-terminated buffer; NULL on error. */
char *json_read_file(const char *path, size_t *len);

#endif
