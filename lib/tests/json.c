/* json.c - see json.h. Enough of RFC 8259 for the project's own files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

static void skip_ws(const char **p)
{
    while (**p == ' ' || **p == '\t' || **p == '\n' || **p == '\r')
        (*p)++;
}

static struct json *new_value(enum json_type type)
{
    struct json *v = calloc(1, sizeof *v);
    if (v != NULL)
        v->type = type;
    return v;
}

static int add_item(struct json *v, char *key, struct json *item)
{
    struct json **items = realloc(v->items, sizeof *items * (size_t)(v->n + 1));
    if (items == NULL)
        return -1;
    v->items = items;
    if (v->type == JSON_OBJECT) {
        char **keys = realloc(v->keys, sizeof *keys * (size_t)(v->n + 1));
        if (keys == NULL)
            return -1;
        v->keys = keys;
        keys[v->n] = key;
    }
    items[v->n++] = item;
    return 0;
}

static void put_utf8(char *out, size_t *len, unsigned cp)
{
    if (cp < 0x80) {
        out[(*len)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*len)++] = (char)(0xC0 | (cp >> 6));
        out[(*len)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        out[(*len)++] = (char)(0xE0 | (cp >> 12));
        out[(*len)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*len)++] = (char)(0x80 | (cp & 0x3F));
    }
}

static char *parse_string(const char **p, char *err, size_t errlen)
{
    const char *s = *p + 1; /* past the quote */
    char *out = malloc(strlen(s) + 1);
    size_t len = 0;
    if (out == NULL)
        return NULL;
    for (;;) {
        char ch = *s++;
        if (ch == '"')
            break;
        if (ch == 0 || (unsigned char)ch < 0x20) {
            snprintf(err, errlen, "unterminated string");
            free(out);
            return NULL;
        }
        if (ch != '\\') {
            out[len++] = ch;
            continue;
        }
        ch = *s++;
        switch (ch) {
        case '"':
        case '\\':
        case '/':
            out[len++] = ch;
            break;
        case 'b':
            out[len++] = '\b';
            break;
        case 'f':
            out[len++] = '\f';
            break;
        case 'n':
            out[len++] = '\n';
            break;
        case 'r':
            out[len++] = '\r';
            break;
        case 't':
            out[len++] = '\t';
            break;
        case 'u': {
            unsigned cp = 0;
            for (int i = 0; i < 4; i++) {
                char h = *s++;
                cp <<= 4;
                if (h >= '0' && h <= '9')
                    cp |= (unsigned)(h - '0');
                else if (h >= 'a' && h <= 'f')
                    cp |= (unsigned)(h - 'a' + 10);
                else if (h >= 'A' && h <= 'F')
                    cp |= (unsigned)(h - 'A' + 10);
                else {
                    snprintf(err, errlen, "bad \\u escape");
                    free(out);
                    return NULL;
                }
            }
            put_utf8(out, &len, cp); /* surrogate pairs are not needed here */
            break;
        }
        default:
            snprintf(err, errlen, "bad escape \\%c", ch);
            free(out);
            return NULL;
        }
    }
    out[len] = 0;
    *p = s;
    return out;
}

struct json *json_parse(const char **p, char *err, size_t errlen)
{
    skip_ws(p);
    const char *s = *p;
    struct json *v = NULL;
    if (*s == '{' || *s == '[') {
        int object = *s == '{';
        char close = object ? '}' : ']';
        v = new_value(object ? JSON_OBJECT : JSON_ARRAY);
        if (v == NULL)
            return NULL;
        *p = s + 1;
        skip_ws(p);
        if (**p == close) {
            (*p)++;
            return v;
        }
        for (;;) {
            char *key = NULL;
            skip_ws(p);
            if (object) {
                if (**p != '"' || (key = parse_string(p, err, errlen)) == NULL) {
                    if (**p != '"')
                        snprintf(err, errlen, "want a key at \"%.20s\"", *p);
                    json_free(v);
                    return NULL;
                }
                skip_ws(p);
                if (**p != ':') {
                    snprintf(err, errlen, "want ':' at \"%.20s\"", *p);
                    free(key);
                    json_free(v);
                    return NULL;
                }
                (*p)++;
            }
            struct json *item = json_parse(p, err, errlen);
            if (item == NULL || add_item(v, key, item) != 0) {
                free(key);
                json_free(item);
                json_free(v);
                return NULL;
            }
            skip_ws(p);
            if (**p == ',') {
                (*p)++;
                continue;
            }
            if (**p == close) {
                (*p)++;
                return v;
            }
            snprintf(err, errlen, "want ',' or '%c' at \"%.20s\"", close, *p);
            json_free(v);
            return NULL;
        }
    }
    if (*s == '"') {
        v = new_value(JSON_STRING);
        if (v != NULL && (v->text = parse_string(p, err, errlen)) == NULL) {
            free(v);
            return NULL;
        }
        return v;
    }
    if (strncmp(s, "true", 4) == 0 || strncmp(s, "false", 5) == 0) {
        v = new_value(JSON_BOOL);
        if (v != NULL)
            v->boolean = s[0] == 't';
        *p = s + (s[0] == 't' ? 4 : 5);
        return v;
    }
    if (strncmp(s, "null", 4) == 0) {
        *p = s + 4;
        return new_value(JSON_NULL);
    }
    size_t len = strspn(s, "-+0123456789.eE");
    if (len == 0) {
        snprintf(err, errlen, "unexpected \"%.20s\"", s);
        return NULL;
    }
    v = new_value(JSON_NUMBER);
    if (v == NULL || (v->text = malloc(len + 1)) == NULL) {
        free(v);
        return NULL;
    }
    memcpy(v->text, s, len);
    v->text[len] = 0;
    *p = s + len;
    return v;
}

void json_free(struct json *v)
{
    if (v == NULL)
        return;
    for (int i = 0; i < v->n; i++) {
        json_free(v->items[i]);
        if (v->keys != NULL)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->text);
    free(v);
}

const struct json *json_get(const struct json *obj, const char *key)
{
    if (obj == NULL || obj->type != JSON_OBJECT)
        return NULL;
    for (int i = 0; i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0)
            return obj->items[i];
    return NULL;
}

int json_get_i64(const struct json *obj, const char *key, int64_t *out)
{
    const struct json *v = json_get(obj, key);
    if (v == NULL || v->type != JSON_NUMBER)
        return -1;
    char *end;
    errno = 0;
    long long x = strtoll(v->text, &end, 10);
    if (errno != 0 || *end != 0)
        return -1;
    *out = x;
    return 0;
}

int json_get_u64(const struct json *obj, const char *key, uint64_t *out)
{
    const struct json *v = json_get(obj, key);
    if (v == NULL || v->type != JSON_NUMBER || v->text[0] == '-')
        return -1;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v->text, &end, 10);
    if (errno != 0 || *end != 0)
        return -1;
    *out = x;
    return 0;
}

const char *json_get_str(const struct json *obj, const char *key)
{
    const struct json *v = json_get(obj, key);
    return (v != NULL && v->type == JSON_STRING) ? v->text : NULL;
}

char *json_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 4096, used = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        if (used + 1 >= cap) {
            char *grown = realloc(buf, cap *= 2);
            if (grown == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = grown;
        }
        size_t n = fread(buf + used, 1, cap - used - 1, f);
        used += n;
        if (n == 0)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (buf == NULL || bad) {
        free(buf);
        return NULL;
    }
    buf[used] = 0;
    if (len != NULL)
        *len = used;
    return buf;
}
