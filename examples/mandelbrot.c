/*
 * mandelbrot - the Mandelbrot set as a task farm: each process computes one tile.
 *
 *   mandelbrot --tile I --of N [size options]             compute tile I of N, to stdout
 *   mandelbrot --join DIR --of N [--first F] [--image FILE.pgm] [size options]
 *   mandelbrot --serial [--image FILE.pgm] [size options]
 *
 * Size options: --width W (default 1200), --height H (default 900) pixels, --iters K
 * (default 1000) iterations at most per pixel. The view is fixed: centre (-0.75, 0), 3.0
 * wide, with square pixels, so the whole set fits. A plain C program (no MPI, no libshoal):
 *
 *   seq 0 31 | shoal farm --out DIR -- mandelbrot --tile {} --of 32
 *   mandelbrot --join DIR --of 32 --image m.pgm
 *
 * Tiles are horizontal bands: tile I covers rows [I*H/N, (I+1)*H/N), row 0 at the top
 * (none when N > H). They cost very different amounts: the rows through the set's interior
 * iterate K times per pixel there, the top and bottom rows escape within a few iterations.
 *
 * A tile's output, on standard output, is a header line and then its pixels:
 *
 *   tile I of N rows A-B width W height H iters K\n
 *   (B-A)*W bytes: rows A..B-1, top to bottom, each W 8-bit grey pixels left to right
 *
 * A-B is half-open: rows A to B-1. A pixel is 0 inside the set (no escape within K
 * iterations) and 1 + n % 255 for a point that escapes at iteration n.
 *
 * --join reads tile I from the file DIR/(F+I), F being 0 unless --first says otherwise:
 * a farm numbers its tasks from 0, the task of line I writes DIR/I, and that is tile I
 * when the lines are 0..N-1. Each file must hold exactly the header that tile I has with
 * these size options and its pixel bytes; a missing, truncated or longer file, or one of
 * another tile or size, is an error naming the file (exit 1). --serial computes every
 * row in this process. Both print `checksum: X`, X the FNV-1a 64-bit hash of the image's
 * pixel bytes in row order as 16 hex digits, so a joined image and a serial one can be
 * compared; --image also writes the image: binary PPM (P6) when FILE ends in .ppm, else
 * binary PGM (P5), maxval 255.
 *
 * Every pixel is computed by the same function in double arithmetic, and -std=c99 keeps
 * the compiler from fusing multiplies and adds, so a tile's pixels are bit for bit those
 * of the same rows computed serially.
 *
 * Exit status: 0 done, 1 a tile file or the output could not be read or written, 2 bad
 * arguments (one line on stderr naming the problem).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { DEFAULT_WIDTH = 1200, DEFAULT_HEIGHT = 900, DEFAULT_ITERS = 1000 };
enum { MAX_SIDE = 100000, MAX_ITERS = 1000000000 };
enum { HEADER_MAX = 128 }; /* longer than any header this program writes */

static const double VIEW_CENTRE_X = -0.75, VIEW_CENTRE_Y = 0.0, VIEW_WIDTH = 3.0;

enum mode { MODE_NONE, MODE_TILE, MODE_JOIN, MODE_SERIAL };

typedef struct {
    enum mode mode;
    long tile;         /* --tile I */
    long of;           /* --of N, 0 when not given */
    long first;        /* --first F: the file name of tile 0 in --join */
    long width;        /* W, pixels per row */
    long height;       /* H, rows */
    long iters;        /* K, iterations at most per pixel */
    const char *dir;   /* --join DIR */
    const char *image; /* --image FILE, or NULL */
} options;

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: mandelbrot --tile I --of N [size options]\n"
        "       mandelbrot --join DIR --of N [--first F] [--image FILE.pgm] [size options]\n"
        "       mandelbrot --serial [--image FILE.pgm] [size options]\n"
        "\n"
        "  --tile I      write tile I (0 <= I < N) of N, a band of rows, to stdout:\n"
        "                a line \"tile I of N rows A-B width W height H iters K\", then\n"
        "                rows A..B-1 as W bytes each (8-bit grey)\n"
        "  --join DIR    read tile I from DIR/(F+I) for I = 0..N-1, check its header\n"
        "                and size, and print the image's checksum\n"
        "  --first F     the file name of tile 0 in DIR (default 0)\n"
        "  --serial      compute the whole image here and print its checksum\n"
        "  --image FILE  also write the image: PPM (P6) if FILE ends in .ppm, else PGM (P5)\n"
        "  --width W     pixels per row (default %d)\n"
        "  --height H    rows (default %d); tile I covers rows [I*H/N, (I+1)*H/N)\n"
        "  --iters K     iterations at most per pixel (default %d)\n"
        "\n"
        "The checksum line is \"checksum: X\", X the FNV-1a 64-bit hash of the pixels.\n"
        "Exit status: 0 done, 1 a file could not be read or written, 2 bad arguments.\n",
        DEFAULT_WIDTH, DEFAULT_HEIGHT, DEFAULT_ITERS);
}

static int bad_usage(const char *what, const char *detail)
{
    fprintf(stderr, "mandelbrot: %s%s (see --help)\n", what, detail);
    return 2;
}

/* Reads text, the value of option name, into *v, in [min, max]; returns 0 or says why not. */
static int parse_number(const char *name, const char *text, long min, long max, long *v)
{
    char *end;
    errno = 0;
    long n = strtol(text, &end, 10);
    if (text[0] == '\0' || *end != '\0') {
        fprintf(stderr, "mandelbrot: %s: \"%s\" is not a whole number (see --help)\n", name,
                text);
        return -1;
    }
    if (errno == ERANGE) {
        fprintf(stderr, "mandelbrot: %s: %s is out of range (see --help)\n", name, text);
        return -1;
    }
    if (n < min || n > max) {
        fprintf(stderr, "mandelbrot: %s %ld is out of range %ld..%ld (see --help)\n", name, n,
                min, max);
        return -1;
    }
    *v = n;
    return 0;
}

static int set_mode(options *opt, enum mode m)
{
    if (opt->mode != MODE_NONE && opt->mode != m)
        return bad_usage("give only one of --tile, --join and --serial", "");
    opt->mode = m;
    return 0;
}

/* Returns 0, 1 when --help was asked for, or 2 after printing what is wrong. */
static int parse_options(int argc, char **argv, options *opt)
{
    *opt = (options){.width = DEFAULT_WIDTH, .height = DEFAULT_HEIGHT, .iters = DEFAULT_ITERS};
    for (int i = 1; i < argc; i++) {
        const char *name = argv[i];
        if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0)
            return 1;
        if (strcmp(name, "--serial") == 0) {
            if (set_mode(opt, MODE_SERIAL) != 0)
                return 2;
            continue;
        }
        long *number = NULL, min = 0, max = LONG_MAX;
        if (strcmp(name, "--tile") == 0)
            number = &opt->tile, min = LONG_MIN; /* checked against --of below */
        else if (strcmp(name, "--of") == 0)
            number = &opt->of, min = 1, max = INT_MAX;
        else if (strcmp(name, "--first") == 0)
            number = &opt->first, max = INT_MAX;
        else if (strcmp(name, "--width") == 0)
            number = &opt->width, min = 1, max = MAX_SIDE;
        else if (strcmp(name, "--height") == 0)
            number = &opt->height, min = 1, max = MAX_SIDE;
        else if (strcmp(name, "--iters") == 0)
            number = &opt->iters, min = 1, max = MAX_ITERS;
        else if (strcmp(name, "--join") != 0 && strcmp(name, "--image") != 0)
            return bad_usage("unknown option ", name);
        if (i + 1 == argc) {
            fprintf(stderr, "mandelbrot: %s needs a value (see --help)\n", name);
            return 2;
        }
        const char *value = argv[++i];
        if (number != NULL) {
            if (parse_number(name, value, min, max, number) != 0)
                return 2;
            if (number == &opt->tile && set_mode(opt, MODE_TILE) != 0)
                return 2;
        } else if (strcmp(name, "--join") == 0) {
            if (set_mode(opt, MODE_JOIN) != 0)
                return 2;
            opt->dir = value;
        } else {
            opt->image = value;
        }
    }
    switch (opt->mode) {
    case MODE_NONE:
        return bad_usage("give one of --tile, --join and --serial", "");
    case MODE_TILE:
        if (opt->image != NULL)
            return bad_usage("--image goes with --join or --serial; a tile goes to stdout", "");
        /* fall through */
    case MODE_JOIN:
        if (opt->of == 0)
            return bad_usage(opt->mode == MODE_TILE ? "--tile" : "--join", " needs --of N");
        if (opt->mode == MODE_TILE && (opt->tile < 0 || opt->tile >= opt->of)) {
            fprintf(stderr,
                    "mandelbrot: --tile %ld is out of range for --of %ld (0 <= I < %ld)\n",
                    opt->tile, opt->of, opt->of);
            return 2;
        }
        break;
    case MODE_SERIAL:
        if (opt->of != 0)
            return bad_usage("--of goes with --tile or --join, not --serial", "");
        break;
    }
    if (opt->mode != MODE_JOIN && opt->first != 0)
        return bad_usage("--first goes with --join", "");
    return 0;
}

/* The first row of tile i of n; tile i covers rows [first_row(i), first_row(i + 1)). */
static long first_row(long i, long n, long height)
{
    return (long)((long long)i * height / n);
}

/* The pixel at (row, col): 0 inside the set, else 1 + (escape iteration) % 255. */
static unsigned char pixel(const options *opt, long row, long col)
{
    double step = VIEW_WIDTH / (double)opt->width;
    double cx = VIEW_CENTRE_X + ((double)col + 0.5 - 0.5 * (double)opt->width) * step;
    double cy = VIEW_CENTRE_Y - ((double)row + 0.5 - 0.5 * (double)opt->height) * step;
    double x = 0.0, y = 0.0;
    long n;
    for (n = 0; n < opt->iters; n++) {
        double xx = x * x, yy = y * y;
        if (xx + yy > 4.0)
            break;
        y = 2.0 * x * y + cy;
        x = xx - yy + cx;
    }
    return n == opt->iters ? 0 : (unsigned char)(1 + n % 255);
}

/* Computes rows [first, last) into out, width bytes each: the only place pixels are made. */
static void compute_rows(const options *opt, long first, long last, unsigned char *out)
{
    for (long row = first; row < last; row++)
        for (long col = 0; col < opt->width; col++)
            *out++ = pixel(opt, row, col);
}

static int format_header(char *buf, size_t size, const options *opt, long tile)
{
    return snprintf(buf, size, "tile %ld of %ld rows %ld-%ld width %ld height %ld iters %ld\n",
                    tile, opt->of, first_row(tile, opt->of, opt->height),
                    first_row(tile + 1, opt->of, opt->height), opt->width, opt->height,
                    opt->iters);
}

static unsigned char *alloc_rows(const options *opt, long rows)
{
    size_t bytes = (size_t)rows * (size_t)opt->width;
    unsigned char *p = malloc(bytes ? bytes : 1);
    if (p == NULL)
        fprintf(stderr, "mandelbrot: out of memory for %ld rows of %ld pixels\n", rows,
                opt->width);
    return p;
}

static int run_tile(const options *opt)
{
    long first = first_row(opt->tile, opt->of, opt->height);
    long last = first_row(opt->tile + 1, opt->of, opt->height);
    unsigned char *rows = alloc_rows(opt, last - first);
    if (rows == NULL)
        return 1;
    compute_rows(opt, first, last, rows);
    char header[HEADER_MAX];
    format_header(header, sizeof header, opt, opt->tile);
    size_t bytes = (size_t)(last - first) * (size_t)opt->width;
    int ok = fputs(header, stdout) >= 0 && fwrite(rows, 1, bytes, stdout) == bytes &&
             fflush(stdout) == 0;
    free(rows);
    if (!ok) {
        fprintf(stderr, "mandelbrot: writing tile %ld to stdout: %s\n", opt->tile,
                strerror(errno));
        return 1;
    }
    return 0;
}

/* Says whether the n bytes at s are printable ASCII, as every header is. */
static int printable(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < ' ' || s[i] > '~')
            return 0;
    return 1;
}

/* Reads the file of tile i into its rows of image; returns 0, or 1 after naming the file
 * and what is wrong with it. */
static int read_tile(const options *opt, long i, unsigned char *image)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%ld", opt->dir, opt->first + i) >= (int)sizeof path) {
        fprintf(stderr, "mandelbrot: %s/%ld: path too long\n", opt->dir, opt->first + i);
        return 1;
    }
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "mandelbrot: %s: tile %ld: %s\n", path, i, strerror(errno));
        return 1;
    }
    char want[HEADER_MAX], got[HEADER_MAX];
    format_header(want, sizeof want, opt, i);
    size_t len = 0;
    int c = 0;
    while (len + 1 < sizeof got && (c = getc(f)) != EOF && c != '\n')
        got[len++] = (char)c;
    got[len] = '\0';
    want[strlen(want) - 1] = '\0';

    long first = first_row(i, opt->of, opt->height);
    size_t bytes =
        (size_t)(first_row(i + 1, opt->of, opt->height) - first) * (size_t)opt->width;
    int status = 1;
    if (c != '\n' && len == 0) {
        fprintf(stderr, "mandelbrot: %s: tile %ld: empty file, want the header \"%s\"\n", path,
                i, want);
    } else if (!printable(got, len)) {
        fprintf(stderr,
                "mandelbrot: %s: tile %ld: not a tile's output (no header line), "
                "want the header \"%s\"\n",
                path, i, want);
    } else if (c != '\n' || strcmp(got, want) != 0) {
        fprintf(stderr, "mandelbrot: %s: tile %ld: header \"%s\"%s, want \"%s\"\n", path, i,
                got, c != '\n' ? " (cut short or too long)" : "", want);
    } else {
        size_t n = fread(image + (size_t)first * (size_t)opt->width, 1, bytes, f);
        if (ferror(f))
            fprintf(stderr, "mandelbrot: %s: tile %ld: %s\n", path, i, strerror(errno));
        else if (n < bytes)
            fprintf(stderr, "mandelbrot: %s: tile %ld: truncated, %zu of %zu pixel bytes\n",
                    path, i, n, bytes);
        else if (getc(f) != EOF)
            fprintf(stderr,
                    "mandelbrot: %s: tile %ld: more than the %zu pixel bytes its "
                    "header announces\n",
                    path, i, bytes);
        else
            status = 0;
    }
    fclose(f);
    return status;
}

/* Says so when dir is not a directory, rather than once for every tile file. */
static int is_directory(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0) {
        fprintf(stderr, "mandelbrot: %s: %s\n", dir, strerror(errno));
        return 0;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "mandelbrot: %s: not a directory\n", dir);
        return 0;
    }
    return 1;
}

static uint64_t fnv1a64(const unsigned char *p, size_t n)
{
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* ends_with reports whether s ends with suffix. */
static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Writes the image as binary PPM (P6, each grey value as red, green and blue) when the
 * file's name ends in .ppm, else as binary PGM (P5). */
static int write_image(const options *opt, const unsigned char *image)
{
    FILE *f = fopen(opt->image, "wb");
    if (f == NULL) {
        fprintf(stderr, "mandelbrot: %s: %s\n", opt->image, strerror(errno));
        return 1;
    }
    size_t bytes = (size_t)opt->width * (size_t)opt->height;
    int ppm = ends_with(opt->image, ".ppm");
    int ok = fprintf(f, "%s\n%ld %ld\n255\n", ppm ? "P6" : "P5", opt->width, opt->height) > 0;
    for (size_t i = 0; ok && ppm && i < bytes; i++)
        ok = putc(image[i], f) != EOF && putc(image[i], f) != EOF && putc(image[i], f) != EOF;
    if (ok && !ppm)
        ok = fwrite(image, 1, bytes, f) == bytes;
    int saved = errno;
    if (fclose(f) != 0 && ok)
        ok = 0, saved = errno;
    if (!ok) {
        fprintf(stderr, "mandelbrot: %s: %s\n", opt->image, strerror(saved));
        return 1;
    }
    return 0;
}

/* The end of --join and --serial: the image if asked for, then the checksum line. */
static int finish(const options *opt, const unsigned char *image)
{
    if (opt->image != NULL && write_image(opt, image) != 0)
        return 1;
    size_t bytes = (size_t)opt->width * (size_t)opt->height;
    printf("checksum: %016llx\n", (unsigned long long)fnv1a64(image, bytes));
    return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    options opt;
    switch (parse_options(argc, argv, &opt)) {
    case 0:
        break;
    case 1:
        usage(stdout);
        return 0;
    default:
        return 2;
    }
    if (opt.mode == MODE_TILE)
        return run_tile(&opt);

    unsigned char *image = alloc_rows(&opt, opt.height);
    if (image == NULL)
        return 1;
    int status = 0;
    if (opt.mode == MODE_SERIAL) {
        compute_rows(&opt, 0, opt.height, image);
    } else if (!is_directory(opt.dir)) {
        status = 1;
    } else {
        /* Every tile is checked, so one run names every file to compute again. */
        for (long i = 0; i < opt.of; i++)
            status |= read_tile(&opt, i, image);
    }
    if (status == 0)
        status = finish(&opt, image);
    free(image);
    return status;
}
